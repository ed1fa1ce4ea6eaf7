"""Rewards computed by running programs in the evaluation sandbox (many at once).

- ``execution_reward`` (single-agent GRPO, as in the MAGRPO class study): +0.5 if the program runs,
  +0.1 per passed test, up to ``cap`` tests.
- ``pair_reward`` (MAGRPO pairs): +0.2 if the combined program parses, +0.3 if it runs, +0.1 per
  passed test.
- ``pass_rate``: the share of tests passed (CoRe-Code's coder and, through the coder, planner).
"""

from __future__ import annotations

import ast
import asyncio
import threading
from dataclasses import dataclass
from pathlib import Path

from corebench.harness.records import TestOutcome, Verdict
from corebench.harness.sandbox import Executor
from corebench.harness.testsuite import parse_example

RAN = {Verdict.passed, Verdict.wrong_answer}


@dataclass(frozen=True)
class TestRun:
    __test__ = False  # not a pytest class

    outcomes: list[TestOutcome]

    @property
    def runs(self) -> bool:
        """The program loaded and the function returned on at least one test."""
        return any(o.verdict in RAN for o in self.outcomes)

    @property
    def passed(self) -> int:
        return sum(o.verdict is Verdict.passed for o in self.outcomes)

    @property
    def pass_rate(self) -> float:
        return self.passed / len(self.outcomes) if self.outcomes else 0.0


def run_tests(programs: list[tuple[str, list[str]]]) -> list[TestRun]:
    """Run each (code, asserts) pair in the sandbox, in parallel; empty code runs nothing."""

    async def all_runs() -> list[TestRun]:
        executor = Executor()

        async def one(code: str, tests: list[str]) -> TestRun:
            examples = [parse_example(t) for t in tests]
            if not code.strip():
                return TestRun([])
            return TestRun(await executor.run_examples(code, examples))

        return list(await asyncio.gather(*(one(c, t) for c, t in programs)))

    # Trainers may call rewards from inside a running event loop: run ours in its own thread.
    box: dict[str, list[TestRun]] = {}
    thread = threading.Thread(target=lambda: box.setdefault("runs", asyncio.run(all_runs())))
    thread.start()
    thread.join()
    return box["runs"]


def parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return bool(code.strip())


def execution_reward(run: TestRun, cap: int = 5) -> float:
    return (0.5 if run.runs else 0.0) + 0.1 * min(run.passed, cap)


def pair_reward(code: str, run: TestRun) -> float:
    return (0.2 if parses(code) else 0.0) + (0.3 if run.runs else 0.0) + 0.1 * run.passed


class RewardLog:
    """Every reward given, in order, appended to a file: a reward curve for any trainer that
    survives an interruption (a resumed run keeps adding to it)."""

    def __init__(self, path: Path, group: int):
        self.path, self.group = Path(path), group  # group: rewards per optimisation step
        self.rewards: list[float] = []
        if self.path.exists():
            self.rewards = [float(x) for x in self.path.read_text().split()]

    def add(self, values: list[float]) -> None:
        self.rewards.extend(values)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write("".join(f"{v:.6g}\n" for v in values))

    def curve(self) -> list[dict[str, float]]:
        """Mean reward per step."""
        out = []
        for start in range(0, len(self.rewards), self.group):
            chunk = self.rewards[start : start + self.group]
            out.append({"step": start // self.group + 1, "reward": sum(chunk) / len(chunk)})
        return out
