"""Judging and recording: the one path from a solution to a stored, judged sample, shared by
`corebench run` (solutions from a system), `corebench evaluate` (solutions from a samples file)
and studies.

A ``Recorder`` opens a run directory (or continues the run already there, refusing other data or
weights), judges each solution in the sandbox and stores solution and result as soon as each
exists, then runs the measurement phase: each passing solution timed on its own, never beside
other sandbox work, next to its reference.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from .benchmark import Benchmark
from .config import JUDGING_AHEAD_PER_WORKER
from .errors import CorebenchError, MeasurementRefused
from .metadata import environment_metadata, provenance_changes
from .records import ExecutionResult, RunConfig, Solution
from .sandbox import executor_for
from .store import Store
from .testsuite import FunctionalSuite

T = TypeVar("T")

OnSample = Callable[[Solution, ExecutionResult], None]


def refuse_changed(store: Store, changes: list[str]) -> None:
    """A run continues only with the data and weights it started with: samples made with other
    ones would be silently mixed into it."""
    if changes:
        raise CorebenchError(
            f"{store.run_dir} was made with other inputs: {'; '.join(changes)}; "
            "choose another --out (nothing was changed there)"
        )


class Recorder:
    """One run directory's store, its benchmark and a sandbox executor.

    The executor is made first: without bubblewrap (and no explicit ``unsafe``) nothing is
    written. ``metadata`` adds to what every run records (environment, dataset, isolation).
    """

    def __init__(
        self,
        run_dir: Path,
        benchmark: Benchmark,
        config: RunConfig,
        metadata: dict[str, Any] | None = None,
        *,
        isolation: str | None = None,
        on_sample: OnSample | None = None,
        all_tests: bool = False,
    ):
        self.executor = executor_for(isolation=isolation)  # --executor: here, Ray, a service
        self.all_tests = all_tests  # judge every test, past the first failure (test pass rates)
        self.benchmark = benchmark
        self.on_sample = on_sample
        self._suites: dict[str, FunctionalSuite] = {}
        self.store = Store(run_dir)
        try:
            dataset = benchmark.dataset_info()
            self.store.open_run(
                config, {**environment_metadata(), "dataset": dataset, **(metadata or {})}
            )
            refuse_changed(self.store, provenance_changes(self.store.metadata(), dataset))
            self.store.update_metadata(
                isolation=self.executor.mode,
                executor=self.executor.where,
                memory_limit_bytes=self.executor.memory_bytes,
                memory_accounting=self.executor.memory_accounting,
                all_tests=all_tests or self.store.metadata().get("all_tests", False),
            )
        except BaseException:
            self.store.close()
            raise

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def suite(self, task_id: str) -> FunctionalSuite:
        """A task's hidden tests, built once per recorder (the oracle keys its cache by them)."""
        if task_id not in self._suites:
            self._suites[task_id] = self.benchmark.test_suite(task_id)
        return self._suites[task_id]

    def pending(self, keys: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        """The (task, sample) keys without a stored result, in the given order."""
        done = self.store.finished()
        return [key for key in keys if key not in done]

    async def judge(self, solution: Solution) -> ExecutionResult:
        """Store ``solution``, judge it on its task's hidden tests, store the result."""
        self.store.save_solution(solution)
        result = await self.executor.judge(
            solution.task_id,
            solution.sample_index,
            solution.code,
            self.suite(solution.task_id),
            stop_on_failure=not self.all_tests,
            error=solution.error,
        )
        self.store.save_result(result)
        if self.on_sample:
            self.on_sample(solution, result)
        return result

    async def judge_all(self, solutions: list[Solution]) -> None:
        """Judge solutions that exist up front, slowest reference first: a slow task started last
        would run alone at the end while the other workers idle (MBPP+'s Mbpp/599 takes 40 s of
        a 90 s evaluation)."""
        ordered = await self._slowest_first(solutions, lambda s: s.task_id)
        # Each solution is prepared (stored, its inputs encoded, its reference read) just ahead
        # of a free slot, in this order: preparing them all first kept the machine idle for a
        # second at the start of an MBPP+ evaluation.
        ahead = asyncio.Semaphore(JUDGING_AHEAD_PER_WORKER * self.executor.workers)

        async def judge(solution: Solution) -> None:
            async with ahead:
                await self.judge(solution)

        await asyncio.gather(*(judge(s) for s in ordered))

    async def _slowest_first(self, items: list[T], task_of: Callable[[T], str]) -> list[T]:
        """``items``, those of the task whose reference takes the most CPU first."""
        tasks = list(dict.fromkeys(task_of(item) for item in items))
        costs = await asyncio.gather(
            *(self.executor.reference_cost(t, self.suite(t)) for t in tasks)
        )
        cost = dict(zip(tasks, costs, strict=True))
        return sorted(items, key=lambda item: cost[task_of(item)], reverse=True)

    async def measure(self, repeats: int) -> int:
        """The measurement phase, after every sample has its verdict: each passing sample without
        a measurement is timed ``repeats`` times per test (resumable like the rest); returns how
        many were measured. ``repeats`` 0: no measurement phase."""
        if repeats <= 0:
            return 0
        self.store.update_metadata(measurement_repeats=repeats)
        waiting = [
            (solution, result)
            for solution, result in self.store.samples()
            if result.passed
            and result.measurement is None
            and result.measurement_refused is None
            and self.suite(solution.task_id).reference_code  # else nothing to normalise against
        ]
        # as many at once as the executor has timing sessions (a CPU each; a Ray cluster's on
        # every node), slowest first, so that none runs alone at the end
        waiting = await self._slowest_first(waiting, lambda pair: pair[0].task_id)
        if waiting:  # how many were timed at once: every count this run's measurements had
            earlier = self.store.metadata().get("timing_sessions") or []
            used = sorted({*earlier, self.executor.timing_sessions})
            self.store.update_metadata(timing_sessions=used)
        sessions = asyncio.Semaphore(self.executor.timing_sessions)

        async def measure_one(solution: Solution, result: ExecutionResult) -> bool:
            async with sessions:
                try:
                    result.measurement = await self.executor.measure(
                        solution.task_id, solution.code, self.suite(solution.task_id), repeats
                    )
                except CorebenchError as exc:  # keep its verdict, no timing
                    warnings.warn(
                        f"{solution.task_id}#{solution.sample_index}: not measured: {exc}",
                        stacklevel=2,
                    )
                    if isinstance(exc, MeasurementRefused):  # the program's doing: kept
                        result.measurement_refused = str(exc)
                        self.store.save_result(result)
                    return False  # else the machine's or the reference's: tried again on resume
            self.store.save_result(result)
            return True

        return sum(await asyncio.gather(*(measure_one(s, r) for s, r in waiting)))
