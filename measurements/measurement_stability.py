"""How stable are the efficiency numbers? Measures the same solutions several times, each time in
a fresh executor (fresh reference measurement too), and prints the coefficient of variation (CV)
per solution of: wall time, CPU time, calibrated CPU time (scaled by the calibration work the
harness times around each test), the runtime ratio against the reference (NET for one task), and
peak memory.

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python measurements/measurement_stability.py \
        [--bench mbpp] [--tasks 30] [--evaluations 5] [--randomized-layout]

Each solution is measured on its task's heaviest tests (``MEASUREMENT_INPUTS``), every timed run
a fresh process, as many at once as the executor has timing sessions (one per CPU;
``COREBENCH_TIMING_SESSIONS=1`` for one at a time). --randomized-layout keeps address-space randomization on in the timed children
(the harness turns it off), to show what that costs. The issue's target: runtime-ratio CV median
at most 3 % on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from corebench.harness.config import (
    DEFAULT_REPEATS,
    MEASUREMENT_INPUTS,
    MEMORY_FLOOR_BYTES,
    data_dir_setting,
)
from corebench.harness.records import Measurement
from corebench.harness.registry import default_plugins
from corebench.harness.sandbox import Executor
from corebench.harness.sandbox import timing as timing_module

FIGURES = {
    "wall time": lambda e: e.runtime_s,
    "CPU time": lambda e: e.cpu_s,
    "calibrated CPU": lambda e: e.calibrated_cpu_s,
    "runtime ratio": lambda e: e.runtime_ratio,
    # as the memory ratio sees it: peaks under the floor (a few pages) are noise and count as it
    "peak memory": lambda e: float(max(e.peak_memory_bytes, MEMORY_FLOOR_BYTES)),
}


def cv(values: list[float]) -> float:
    mean = statistics.mean(values)
    return statistics.pstdev(values) / mean if mean else 0.0


async def measured_once(executor: Executor, benchmark, chosen: list[str]) -> list[Measurement]:
    """Each task's reference measured against itself, as many at once as the executor has timing
    sessions (as `evaluate`'s measurement phase runs them)."""
    at_once = asyncio.Semaphore(executor.timing_sessions)

    async def measure(task_id: str) -> Measurement:
        suite = benchmark.test_suite(task_id)
        async with at_once:
            return await executor.measure(task_id, suite.reference_code, suite, DEFAULT_REPEATS)

    return await asyncio.gather(*map(measure, chosen))


async def main(bench: str, tasks: int, evaluations: int) -> None:
    benchmark = default_plugins().benchmarks.get(bench).component(data_dir_setting())
    chosen = [t.task_id for t in benchmark.tasks()[:tasks]]
    measured: dict[str, list[Measurement]] = {t: [] for t in chosen}
    started = time.perf_counter()
    sessions = 1
    for _ in range(evaluations):
        executor = Executor()
        sessions = executor.timing_sessions
        for task_id, e in zip(
            chosen, await measured_once(executor, benchmark, chosen), strict=True
        ):
            measured[task_id].append(e)
        executor.close()
    print(
        f"{tasks} {bench} reference solutions x {evaluations} evaluations, {sessions} timing "
        f"session(s) at once ($COREBENCH_TIMING_SESSIONS), at least "
        f"{DEFAULT_REPEATS} timed runs on each of a task's {MEASUREMENT_INPUTS} heaviest tests, "
        f"address-space randomization {'off' if timing_module.MEASUREMENT_FIXED_LAYOUT else 'on'}"
        f" ({time.perf_counter() - started:.0f} s)"
    )
    for name, figure in FIGURES.items():
        values = sorted(cv([figure(e) for e in runs]) for runs in measured.values())
        print(
            f"  {name:<15} CV median {100 * statistics.median(values):5.2f}%, "
            f"90th percentile {100 * values[int(0.9 * (len(values) - 1))]:5.2f}%, "
            f"max {100 * values[-1]:5.2f}%"
        )
    spreads = sorted(
        (max(e.peak_memory_bytes for e in runs) - min(e.peak_memory_bytes for e in runs)) / 1024
        for runs in measured.values()
    )
    print(
        f"  peak memory spread (max - min, KiB): median {statistics.median(spreads):.0f}, "
        f"max {spreads[-1]:.0f}; memory floor {MEMORY_FLOOR_BYTES // 1024} KiB"
    )
    calibrations = [e.calibration_s or 0.0 for runs in measured.values() for e in runs]
    print(
        f"  calibration work: {1e6 * min(calibrations):.1f} to {1e6 * max(calibrations):.1f} µs "
        "per call across children (the machine's speed drifting)"
    )
    for task_id in sorted(chosen, key=lambda t: -cv([e.calibrated_cpu_s for e in measured[t]]))[:3]:
        cpu = ", ".join(f"{1e3 * e.cpu_s:.3f}" for e in measured[task_id])
        cal = ", ".join(f"{1e3 * e.calibrated_cpu_s:.3f}" for e in measured[task_id])
        print(f"  most variable: {task_id}: CPU {cpu} ms; calibrated {cal} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default="mbpp")
    parser.add_argument("--tasks", type=int, default=30)
    parser.add_argument("--evaluations", type=int, default=5)
    parser.add_argument("--randomized-layout", action="store_true")
    args = parser.parse_args()
    if args.randomized_layout:
        timing_module.MEASUREMENT_FIXED_LAYOUT = False
    asyncio.run(main(args.bench, args.tasks, args.evaluations))
