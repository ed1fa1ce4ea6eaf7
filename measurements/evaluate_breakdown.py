"""Where the default `corebench evaluate` spends its time: the correctness phase and each part of
the measurement phase, on the first --tasks reference solutions of a benchmark.

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python measurements/evaluate_breakdown.py \
        [--bench mbpp] [--tasks 20] [--repeats 5]

Runs the same code path as `corebench evaluate` (a `Recorder`: judge every sample, then measure
each passing one), with the measurement phase's steps wrapped in wall-clock timers from this
script: starting the timing child (once per executor), decoding each measured test's input, the
timed runs themselves (each a fresh process, its answer checked), and the calibration around
each test.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from corebench.harness.config import data_dir_setting
from corebench.harness.recording import Recorder
from corebench.harness.records import RunConfig, Solution
from corebench.harness.registry import default_plugins
from corebench.harness.sandbox import timing

SPENT: dict[str, float] = defaultdict(float)


def timed(name: str, function):
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            SPENT[name] += time.perf_counter() - started

    return wrapper


def instrument() -> None:
    """Wall time per step of the measurement phase (nested steps are subtracted below)."""
    timer = timing.Timer
    timer.time = timed("measurement: whole timing sessions", timer.time)
    timer._started = timed("starting the timing child", timer._started)
    timing.calibration_sample = timed("calibration around each test", timing.calibration_sample)
    session = timing.Session
    session.prepare = timed("decoding a test's input", session.prepare)
    session.run = timed("timed runs (fork, run, answer checked)", session.run)


async def evaluate(bench: str, tasks: int, repeats: int, out: Path) -> None:
    benchmark = default_plugins().benchmarks.get(bench).component(data_dir_setting())
    chosen = list(benchmark.problems.items())[:tasks]
    solutions = [
        Solution(task_id=task_id, sample_index=0, code=p["prompt"] + p["canonical_solution"])
        for task_id, p in chosen
    ]
    config = RunConfig(benchmark=bench, system="references", model="reference solutions")
    with Recorder(out, benchmark, config) as recorder:
        started = time.perf_counter()
        await recorder.judge_all(solutions)
        SPENT["correctness phase (references and judging)"] = time.perf_counter() - started
        started = time.perf_counter()
        measured = await recorder.measure(repeats)
        SPENT["measurement phase"] = time.perf_counter() - started
    print(f"{len(solutions)} {bench} references judged, {measured} measured ({repeats} repeats)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default="mbpp")
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    instrument()
    out = Path(tempfile.mkdtemp(prefix="evaluate-breakdown-")) / "run"
    asyncio.run(evaluate(args.bench, args.tasks, args.repeats, out))
    whole = SPENT["measurement phase"]
    parts = [
        "starting the timing child",
        "decoding a test's input",
        "timed runs (fork, run, answer checked)",
        "calibration around each test",
    ]
    steps = {name: SPENT[name] for name in parts}
    steps["the rest (loading programs, choosing tests, the store)"] = whole - sum(steps.values())
    print(f"correctness phase: {SPENT['correctness phase (references and judging)']:7.1f} s")
    print(f"measurement phase: {whole:7.1f} s (solution and reference timed alike)")
    for name, seconds in steps.items():
        print(f"  {name:<48} {seconds:7.1f} s  {100 * seconds / whole:5.1f} %")


if __name__ == "__main__":
    main()
