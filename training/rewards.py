"""Rewards computed by running programs in the evaluation sandbox (many at once).

Every method's correctness term is one of two rewards (training setting ``reward``):

- ``"tests"`` (the default), ``pass_reward``: the share of the suite's tests passed, plus
  ``ALL_PASS_BONUS`` (1.0) for passing every one. A program that fails any test earns less than
  half of what a correct one does, so a stub that happens to match many expected outputs
  (HumanEval/13's ``return 1`` passes 559 of 991 tests) ranks well below the reference. Suites
  larger than ``REWARDED_TESTS`` are scored on a fixed subset (``rewarded_suite``): every base
  test, then plus tests drawn with a generator seeded by the task id, the same at every step.
- ``"class"``, ``class_reward`` / ``class_pair_reward``: the MAGRPO class study's rewards
  (single agent: +0.5 if the program runs, +0.1 per passed test up to ``tests_rewarded``; pair:
  +0.2 parses, +0.3 runs, +0.1 per passed test), on the base tests only (HumanEval's original
  tests, as the class study used). Kept to reproduce that study: a stub that passes a few base
  tests scores close to the reference under it.

MAGRPO's default pair reward (``authors_pair_reward``) is ``pass_reward`` with the MAGRPO
authors' structure and collaboration terms added only for a program that passes every test.

``measure_passing``: for programs that pass every test, CPU time and peak memory against the
task's reference solution, measured one program at a time as the evaluation's measurement phase
does; ``speed_score`` and ``memory_score`` map them to [0, 1] (CoRe-Code's efficiency terms).
"""

from __future__ import annotations

import ast
import asyncio
import random
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from corebench.harness.config import MEASUREMENT_REPEATS_TRAINING
from corebench.harness.context import ExampleCheck
from corebench.harness.errors import CorebenchError
from corebench.harness.examples import parse_example
from corebench.harness.records import Measurement, Task, TestOutcome, Verdict
from corebench.harness.sandbox import SandboxExecutor, executor_for
from corebench.harness.testsuite import FunctionalSuite

from .distributed import gather_rewards, is_main_process

if TYPE_CHECKING:  # data.py builds its tasks' suites with rewarded_suite
    from .data import TrainTask

RAN = {Verdict.passed, Verdict.wrong_answer}
T = TypeVar("T")
ALL_PASS_BONUS = 1.0  # added to the share of tests passed when every test passes
REWARDED_TESTS = 200  # tests per suite a reward runs, at most (see ``rewarded_suite``)
BASE_SUITE = "base"


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

    @property
    def all_passed(self) -> bool:
        return bool(self.total) and self.passed == self.total


def rewarded_suite(suite: FunctionalSuite, task_id: str, reward: str = "tests") -> FunctionalSuite:
    """The tests a reward runs. ``"class"``: the base suite alone where there is one (the class
    study's original tests). ``"tests"``: the whole suite up to ``REWARDED_TESTS`` tests;
    beyond, every base test (all of them, even past the limit), then tests of the other suites
    up to the limit, drawn without replacement by a generator seeded with the task id (the same
    subset at every step and on every machine), each suite keeping its tests' order."""
    if reward == "class":
        if BASE_SUITE not in suite.inputs:
            return suite
        return _keep(suite, {BASE_SUITE: range(len(suite.inputs[BASE_SUITE]))})
    if suite.size <= REWARDED_TESTS:
        return suite
    base = suite.inputs.get(BASE_SUITE, [])
    others = [(name, i) for name, tests in suite.inputs.items() if name != BASE_SUITE
              for i in range(len(tests))]  # fmt: skip
    drawn = random.Random(task_id).sample(others, max(0, REWARDED_TESTS - len(base)))
    keep: dict[str, list[int]] = {BASE_SUITE: list(range(len(base)))} if base else {}
    for name, i in drawn:
        keep.setdefault(name, []).append(i)
    return _keep(suite, {name: sorted(indices) for name, indices in keep.items()})


def _keep(suite: FunctionalSuite, keep: dict[str, Any]) -> FunctionalSuite:
    """``suite`` with only the tests ``keep`` names (suite name -> indices), in suite order."""
    names = [name for name in suite.inputs if name in keep]
    inputs = {name: [suite.inputs[name][i] for i in keep[name]] for name in names}
    expected = (
        {name: [suite.expected[name][i] for i in keep[name]] for name in names}
        if suite.expected is not None
        else None
    )
    return replace(suite, inputs=inputs, expected=expected)


def sandbox() -> SandboxExecutor:
    """Where rewards run programs: ``$COREBENCH_EXECUTOR`` (training setting ``executor``: a Ray
    cluster, a judging service), else the judging service at ``$COREBENCH_JUDGE_URL`` (setting
    ``judge_url``), else a local executor."""
    return executor_for()


def in_own_loop(
    work: Callable[[SandboxExecutor], Awaitable[T]], executor: SandboxExecutor | None = None
) -> T:
    """Run ``work`` with ``executor`` (default: a fresh one, local or the service's, see
    ``sandbox``); trainers may call rewards from inside a running event loop, so ours runs in its
    own thread."""
    box: dict[str, T] = {}

    def target() -> None:
        box["out"] = asyncio.run(work(executor if executor is not None else sandbox()))

    thread = threading.Thread(target=target)
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

    return in_own_loop(all_runs)


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

    return in_own_loop(all_checks)


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

    return in_own_loop(measure_all)


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


def pass_reward(run: TestRun) -> float:
    """The share of the suite's tests passed, plus ``ALL_PASS_BONUS`` when all pass (max 2)."""
    return run.pass_rate + (ALL_PASS_BONUS if run.all_passed else 0.0)


def class_reward(run: TestRun, cap: int = 5) -> float:
    """The class study's single-agent reward: +0.5 if the program runs, +0.1 per passed test (up
    to ``cap``); computed on the base tests (``rewarded_suite(..., "class")``)."""
    return (0.5 if run.runs else 0.0) + 0.1 * min(run.passed, cap)


def class_pair_reward(code: str, run: TestRun, cap: int = 5) -> float:
    """The class study's joint reward: +0.2 parses, +0.3 runs, +0.1 per passed test (to ``cap``);
    computed on the base tests."""
    return (0.2 if parses(code) else 0.0) + (0.3 if run.runs else 0.0) + 0.1 * min(run.passed, cap)


def correctness(run: TestRun, reward: str, cap: int = 5) -> float:
    """A single program's correctness term under the training setting ``reward``."""
    return class_reward(run, cap) if reward == "class" else pass_reward(run)


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
    """corebench's correctness term (``pass_reward``: the share of tests passed, +1 for passing
    all; at most 2) and, once every test passes, the MAGRPO authors' structure and collaboration
    terms: +0.4 `aux` defined, +0.6 main defined, +0.5 the program parses, and where main calls
    `aux` +0.5, +1 unless main only returns `aux(...)`, -0.5 if a call's value is dropped (at
    most 5 in all). The authors give the structure terms to any pair and the collaboration terms
    once one test passes: a pair that never passes then still earns 1.5 for its shape, and the
    training-effect study's MAGRPO reward rose on shape alone. A main agent that defines its own
    `aux` (the pair collapsed into one agent) gets 0, as the authors' collaboration check does."""
    if shape.main_defines_aux:
        return 0.0
    if not shape.main_defined or not parses(code):
        return 0.0
    reward = pass_reward(run)
    if run.all_passed:
        reward += 0.4 * shape.aux_defined + 0.6 * shape.main_defined + 0.5
        if shape.aux_defined and shape.main_uses_aux:
            reward += 0.5 + (0.0 if shape.thin_wrapper else 1.0)
            reward -= 0.5 if shape.aux_result_ignored else 0.0
    return reward


class RewardLog:
    """Every reward given, in order, appended to a file: a reward curve for any trainer that
    survives an interruption (a resumed run keeps adding to it). Under a multi-process launch
    each process scores its own completions: ``add`` gathers them all and the main process
    alone writes."""

    def __init__(self, path: Path, group: int):
        self.path, self.group = Path(path), group  # group: rewards per optimisation step
        self.rewards: list[float] = []
        if self.path.exists():
            self.rewards = [float(x) for x in self.path.read_text().split()]

    def keep(self, count: int) -> None:
        """Only the first ``count`` rewards (a run resumed from a checkpoint gives the later
        ones again); nothing, when starting over."""
        self.rewards = self.rewards[:count]
        if is_main_process():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("".join(f"{v:.6g}\n" for v in self.rewards))

    def add(self, values: list[float]) -> None:
        values = gather_rewards(values)
        self.rewards.extend(values)
        if is_main_process():
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
