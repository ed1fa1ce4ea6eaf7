"""Rewards computed by running programs in the evaluation sandbox (many at once).

- ``execution_reward`` (single-agent GRPO, as in the MAGRPO class study): +0.5 if the program runs,
  +0.1 per passed test, up to ``cap`` tests.
- ``authors_pair_reward`` (MAGRPO pairs, the default): the MAGRPO authors' reward, which also
  scores the pair's structure (``aux`` defined and used, main not a thin wrapper), so the pair
  cannot collapse into one agent; ``pair_reward`` (``pair_reward = "simple"``): the class
  study's +0.2 if the combined program parses, +0.3 if it runs, +0.1 per passed test.
- ``pass_rate``: the share of tests passed (CoRe-Code's coder and, through the coder, planner).
- ``measure_passing``: for programs that pass every test, CPU time and peak memory against the task's
  reference solution, measured one program at a time as the evaluation's measurement phase does;
  ``speed_score`` and ``memory_score`` map them to [0, 1] (CoRe-Code's efficiency terms).
"""

from __future__ import annotations

import ast
import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from corebench.harness.config import MEASUREMENT_REPEATS_TRAINING
from corebench.harness.context import ExampleCheck
from corebench.harness.errors import CorebenchError
from corebench.harness.examples import parse_example
from corebench.harness.records import Measurement, Task, TestOutcome, Verdict
from corebench.harness.sandbox import SandboxExecutor, executor_for

from .data import TrainTask

RAN = {Verdict.passed, Verdict.wrong_answer}
T = TypeVar("T")


@dataclass(frozen=True)
class TestRun:
    __test__ = False  # not a pytest class

    outcomes: list[TestOutcome]  # one per test that ran (none when the program did not load)
    total: int  # tests in the suite

    @property
    def runs(self) -> bool:
        """The program loaded and gave an answer on at least one test."""
        return any(o.verdict in RAN for o in self.outcomes)

    @property
    def passed(self) -> int:
        return sum(o.verdict is Verdict.passed for o in self.outcomes)

    @property
    def pass_rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


def sandbox() -> SandboxExecutor:
    """Where rewards run programs: ``$COREBENCH_EXECUTOR`` (training setting ``executor``: a Ray
    cluster, a judging service), else the judging service at ``$COREBENCH_JUDGE_URL`` (setting
    ``judge_url``), else a local executor."""
    return executor_for()


def _in_own_loop(work: Callable[[SandboxExecutor], Awaitable[T]]) -> T:
    """Run ``work`` with a fresh executor (local or the service's); trainers may call rewards
    from inside a running event loop, so ours runs in its own thread."""
    box: dict[str, T] = {}
    thread = threading.Thread(target=lambda: box.setdefault("out", asyncio.run(work(sandbox()))))
    thread.start()
    thread.join()
    if "out" not in box:
        raise CorebenchError("sandbox runs for the rewards failed (see the traceback above)")
    return box["out"]


def run_tests(programs: list[tuple[str, TrainTask]]) -> list[TestRun]:
    """Run each program on every test of its task's suite, in parallel, judged exactly as in
    evaluation (a test after a failing one still runs); empty code runs nothing."""

    async def all_runs(executor: SandboxExecutor) -> list[TestRun]:
        async def one(code: str, task: TrainTask) -> TestRun:
            result = await executor.judge(
                task.task.task_id, 0, code, task.suite, stop_on_failure=False
            )
            return TestRun(result.tests, task.suite.size)

        return list(await asyncio.gather(*(one(c, t) for c, t in programs)))

    return _in_own_loop(all_runs)


def example_feedback(programs: list[tuple[str, Task]]) -> list[tuple[bool, str]]:
    """Each program on its task's visible examples (never hidden tests): whether all pass, and
    the results as a debugging prompt shows them (what multi-turn MAGRPO feeds back)."""

    async def all_checks(executor: SandboxExecutor) -> list[tuple[bool, str]]:
        async def one(code: str, task: Task) -> tuple[bool, str]:
            examples = [parse_example(e) for e in task.examples]
            if not examples:
                return False, "(the task shows no examples)"
            check = ExampleCheck(await executor.run_examples(code, examples), examples)
            return check.passed, check.feedback

        return list(await asyncio.gather(*(one(c, t) for c, t in programs)))

    return _in_own_loop(all_checks)


def measure_passing(
    programs: list[tuple[str, TrainTask]], runs: list[TestRun]
) -> list[Measurement | None]:
    """Runtime and memory, against the task's reference, of each program that passed every
    test; one program at a time after the parallel correctness runs, so the timings do not share
    the machine with other sandbox work. None for the others and for tasks without a reference."""

    async def measure_all(executor: SandboxExecutor) -> list[Measurement | None]:
        out: list[Measurement | None] = []
        for (code, task), run in zip(programs, runs, strict=True):
            measured = None
            if task.reference and run.total and run.passed == run.total:
                try:
                    measured = await executor.measure(
                        task.task.task_id, code, task.suite, MEASUREMENT_REPEATS_TRAINING
                    )
                except CorebenchError:  # it failed when timed (a test that depends on luck)
                    measured = None
            out.append(measured)
        return out

    return _in_own_loop(measure_all)


def speed_score(measured: Measurement | None) -> float:
    """1 when at least as fast as the reference (CPU time), falling as 1/ratio when slower."""
    ratio = measured.runtime_ratio if measured else float("nan")
    return min(1.0, 1.0 / ratio) if ratio == ratio and ratio > 0 else 0.0


def memory_score(measured: Measurement | None) -> float:
    """1 when its peak memory is at most the reference's, falling as 1/ratio when above."""
    ratio = measured.memory_ratio if measured else float("nan")
    return min(1.0, 1.0 / ratio) if ratio == ratio and ratio > 0 else 0.0


def parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return bool(code.strip())


def execution_reward(run: TestRun, cap: int = 5) -> float:
    return (0.5 if run.runs else 0.0) + 0.1 * min(run.passed, cap)


def pair_reward(code: str, run: TestRun, cap: int = 5) -> float:
    """The class study's joint reward: +0.2 parses, +0.3 runs, +0.1 per passed test (to ``cap``)."""
    return (0.2 if parses(code) else 0.0) + (0.3 if run.runs else 0.0) + 0.1 * min(run.passed, cap)


@dataclass(frozen=True)
class PairShape:
    """How a helper/main pair is put together, read from their code's syntax trees."""

    aux_defined: bool  # the helper defines `aux`, with a return statement
    main_defined: bool  # the main agent defines the entry point, with a return statement
    main_uses_aux: bool  # the entry point calls `aux`
    thin_wrapper: bool  # the entry point is only `return aux(...)`
    aux_result_ignored: bool  # some call of `aux` is a statement of its own (its value dropped)
    main_defines_aux: bool  # the main agent wrote its own `aux` instead of using the helper's


def _function(code: str, name: str) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    return next(
        (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None
    )


def _returns(function: ast.FunctionDef | None) -> bool:
    return function is not None and any(
        isinstance(n, ast.Return) and n.value is not None for n in ast.walk(function)
    )


def _calls(node: ast.AST, name: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
    ]


def pair_shape(
    helper_code: str, main_code: str, entry_point: str, helper: str = "aux"
) -> PairShape:
    aux, main = _function(helper_code, helper), _function(main_code, entry_point)
    calls = _calls(main, helper) if main is not None else []
    body = main.body if main is not None else []
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    thin = (
        len(body) == 1
        and isinstance(body[0], ast.Return)
        and isinstance(body[0].value, ast.Call)
        and body[0].value in calls
    )
    statements = {id(n.value) for n in ast.walk(main) if isinstance(n, ast.Expr)} if main else set()
    return PairShape(
        aux_defined=_returns(aux),
        main_defined=_returns(main),
        main_uses_aux=bool(calls),
        thin_wrapper=thin,
        aux_result_ignored=any(id(c) in statements for c in calls),
        main_defines_aux=_function(main_code, helper) is not None,
    )


def authors_pair_reward(shape: PairShape, code: str, run: TestRun) -> float:
    """The MAGRPO authors' helper/main reward (at most 4): +0.4 `aux` defined, +0.6 main
    defined; then (main defined) +0.5 the combined program parses; then +1 x the share of tests
    passed and, once a test passes and main calls `aux`: +0.5, +1 unless main only returns
    `aux(...)`, -0.5 if a call's value is dropped. A main agent that defines its own `aux` (the
    pair collapsed into one agent) gets 0, as the authors' collaboration check does."""
    if shape.main_defines_aux:
        return 0.0
    reward = 0.4 * shape.aux_defined + 0.6 * shape.main_defined
    if not shape.main_defined or not parses(code):
        return reward
    reward += 0.5 + run.pass_rate
    if run.passed and shape.aux_defined and shape.main_uses_aux:
        reward += 0.5 + (0.0 if shape.thin_wrapper else 1.0)
        reward -= 0.5 if shape.aux_result_ignored else 0.0
    return reward


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
