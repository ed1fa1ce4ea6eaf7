"""How stable are the efficiency numbers? Measures the same solutions several times, each time in
a fresh executor (fresh reference measurement too), and prints the coefficient of variation of
runtime and peak memory per solution.

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python benchmarks/efficiency_stability.py \
        [TASKS] [EVALUATIONS] [MIN_SAMPLE_S]

MIN_SAMPLE_S overrides how long one timed sample of a test lasts at least (fast tests are repeated
within a sample); 0 times single calls. Also prints the CPU-time CV.
"""

from __future__ import annotations

import asyncio
import statistics
import sys

from corebench.harness.config import DEFAULT_REPEATS, data_dir_setting
from corebench.harness.registry import default_plugins
from corebench.harness.sandbox import Executor
from corebench.harness.sandbox import executor as executor_module


def cv(values: list[float]) -> float:
    mean = statistics.mean(values)
    return statistics.pstdev(values) / mean if mean else 0.0


async def main(tasks: int, evaluations: int) -> None:
    benchmark = default_plugins().benchmarks.get("mbpp").component(data_dir_setting())
    chosen = [t.task_id for t in benchmark.tasks()[:tasks]]
    runtimes: dict[str, list[float]] = {t: [] for t in chosen}
    cpus: dict[str, list[float]] = {t: [] for t in chosen}
    peaks: dict[str, list[float]] = {t: [] for t in chosen}
    for _ in range(evaluations):
        executor = Executor()
        for task_id in chosen:
            suite = benchmark.test_suite(task_id)
            e = await executor.measure(task_id, suite.reference_code, suite, DEFAULT_REPEATS)
            runtimes[task_id].append(e.runtime_s)
            cpus[task_id].append(e.cpu_s)
            peaks[task_id].append(e.peak_memory_bytes)
    runtime_cv = sorted(cv(v) for v in runtimes.values())
    cpu_cv = sorted(cv(v) for v in cpus.values())
    memory_cv = sorted(cv(v) for v in peaks.values())
    print(
        f"{tasks} MBPP+ reference solutions x {evaluations} evaluations, {DEFAULT_REPEATS} repeats "
        f"each, timed samples of at least {executor_module.EFFICIENCY_MIN_SAMPLE_S * 1e3:g} ms"
    )
    for name, values in (("runtime", runtime_cv), ("CPU time", cpu_cv), ("peak memory", memory_cv)):
        print(
            f"  {name:<12} CV median {100 * statistics.median(values):.2f}%, "
            f"90th percentile {100 * values[int(0.9 * (len(values) - 1))]:.2f}%, max {100 * values[-1]:.2f}%"
        )
    worst = sorted(chosen, key=lambda t: -cv(runtimes[t]))[:3]
    for task_id in worst:
        ms = ", ".join(f"{1e3 * r:.3f}" for r in runtimes[task_id])
        print(f"  most variable runtime: {task_id}: {ms} ms")


if __name__ == "__main__":
    if len(sys.argv) > 3:
        executor_module.EFFICIENCY_MIN_SAMPLE_S = float(sys.argv[3])
    asyncio.run(
        main(
            int(sys.argv[1]) if len(sys.argv) > 1 else 30,
            int(sys.argv[2]) if len(sys.argv) > 2 else 5,
        )
    )
