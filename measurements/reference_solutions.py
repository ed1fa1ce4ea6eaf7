"""Evaluate every reference solution of the offline benchmarks through the sandbox.

Prints, per benchmark: how many reference solutions pass their own hidden tests, the failures,
and the wall time of the evaluation (reference outputs computed first, cold, then the references
judged against them). Usage:

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python measurements/reference_solutions.py \
        [mbpp humaneval mbpp-original mbpp-original:train ...]

``NAME:SPLIT`` picks a split other than ``test``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time

from corebench.harness.config import data_dir_setting
from corebench.harness.errors import CorebenchError
from corebench.harness.registry import default_plugins
from corebench.harness.sandbox import Executor


async def evaluate_references(spec: str) -> None:
    name, _, split = spec.partition(":")
    benchmark = default_plugins().benchmarks.get(name).component(data_dir_setting())
    tasks = benchmark.tasks(split or "test")
    executor = Executor()
    started = time.perf_counter()
    suites = {t.task_id: benchmark.test_suite(t.task_id) for t in tasks}
    broken = {}

    async def reference(tid: str) -> None:
        try:
            await executor.reference(tid, suites[tid])
        except CorebenchError as exc:
            broken[tid] = str(exc)

    await asyncio.gather(*(reference(tid) for tid in suites))
    reference_s = time.perf_counter() - started
    started = time.perf_counter()
    results = await asyncio.gather(
        *(
            executor.evaluate(tid, 0, s.reference_code, s)
            for tid, s in suites.items()
            if tid not in broken
        )
    )
    judge_s = time.perf_counter() - started
    for tid, why in broken.items():
        print(f"  {tid}: reference outputs could not be computed: {why}")
    failed = [r for r in results if not r.passed]
    tests = sum(len(r.tests) for r in results)
    print(
        f"{spec}: {len(results) - len(failed)}/{len(suites)} reference solutions pass "
        f"({tests} tests); reference outputs {reference_s:.1f} s, judging {judge_s:.1f} s "
        f"[isolation {executor.mode}, {executor.workers} workers]"
    )
    for r in failed:
        print(f"  {r.task_id}: {r.verdict.value}: {r.first_failure}")


def main() -> None:
    names = sys.argv[1:] or ["mbpp", "humaneval"]
    with tempfile.TemporaryDirectory() as cache:  # cold: no cached reference outputs
        os.environ["COREBENCH_CACHE_DIR"] = cache
        for name in names:
            asyncio.run(evaluate_references(name))


if __name__ == "__main__":
    main()
