"""The efficiency phase: after correctness, each passing solution is timed on its own (never
beside other sandbox work), median over repeats after a warm-up, next to its reference."""

from __future__ import annotations

import warnings

from .benchmark import Benchmark
from .errors import CorebenchError
from .sandbox import Executor
from .store import Store


async def measure_passing(
    store: Store, benchmark: Benchmark, executor: Executor, repeats: int
) -> int:
    """Measure every passing sample that has no measurement yet; returns how many were measured."""
    measured = 0
    for solution, result in list(store.samples()):
        if not result.passed or result.efficiency is not None:
            continue
        suite = benchmark.test_suite(solution.task_id)
        if not suite.reference_code:  # nothing to normalise against (e.g. LiveCodeBench)
            continue
        try:
            result.efficiency = await executor.measure(
                solution.task_id, solution.code, suite, repeats
            )
        except CorebenchError as exc:  # e.g. a flaky program: keep its verdict, skip its timing
            warnings.warn(
                f"{solution.task_id}#{solution.sample_index}: not measured: {exc}", stacklevel=2
            )
            continue
        store.save_result(result)
        measured += 1
    return measured
