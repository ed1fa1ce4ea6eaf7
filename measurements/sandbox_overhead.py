"""What one program costs the sandbox before its own work: a trivial function judged on one test,
many times over, one at a time, under each engine (children forked by a zygote, and children
exec'd in a fresh bubblewrap); next to a bare ``python -c pass`` and a bare bubblewrap start.

    .venv/bin/python measurements/sandbox_overhead.py [--programs 100]

Prints the median and 90th percentile, in milliseconds, of the time from handing the job to the
sandbox to the first test's report ("job to first test"), and of the whole judged program
(start to verdict, the child's exit and clean-up included); and the CPU each program costs the
machine (every process and the kernel, from /proc/stat, over the whole loop), of which the
harness's own.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import time

from versus_evalplus import machine_busy_s  # this folder's: the machine's busy CPU seconds

from corebench.harness import FunctionalSuite
from corebench.harness.sandbox import Executor
from corebench.harness.sandbox.executor import _budgets

SUITE = FunctionalSuite(
    entry_point="add",
    reference_code="def add(a, b):\n    return a + b\n",
    inputs={"base": [[1, 2]]},
    fingerprint="sandbox-overhead",
)


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return f"median {1e3 * statistics.median(ordered):6.1f} ms, 90th percentile {1e3 * p90:6.1f} ms"


def timed_command(argv: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        out.append(time.perf_counter() - started)
    return out


async def judged(programs: int, engine: str) -> tuple[list[float], list[float], float, float]:
    """(job to first test, whole judged program) per program, and the machine's and the
    harness's CPU seconds per program."""
    executor = Executor(workers=1, engine=engine)
    await executor.reference("overhead/add", SUITE)
    first, whole = [], []
    busy, own = machine_busy_s(), time.process_time()
    for _ in range(programs):
        started = time.perf_counter()
        reported: list[float] = []

        def keep_going(index: int, event: dict, reported=reported) -> bool:
            reported.append(time.perf_counter())
            return True

        job = executor.job(SUITE, SUITE.reference_code, [1.0])
        judged = await executor.run_judging(job, _budgets([1.0], SUITE.mode), keep_going)
        whole.append(time.perf_counter() - started)
        assert judged.tests and judged.tests[0]["status"] == "ok", judged
        first.append(reported[0] - started)
    return (
        first,
        whole,
        (machine_busy_s() - busy) / programs,
        (time.process_time() - own) / programs,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=100)
    args = parser.parse_args()
    python = [sys.executable, "-I", "-S", "-c", "pass"]
    print(f"python -I -S -c pass:         {percentiles(timed_command(python, args.programs))}")
    bwrap = shutil.which("bwrap")
    if bwrap:
        argv = [bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", *python]
        print(f"bwrap + python -c pass:       {percentiles(timed_command(argv, args.programs))}")
    for engine in ("fork", "exec"):
        first, whole, machine, harness = asyncio.run(judged(args.programs, engine))
        print(f"{engine}: job to first test:     {percentiles(first)}")
        print(f"{engine}: whole judged program:  {percentiles(whole)}")
        print(
            f"{engine}: CPU per program:       {1e3 * machine:6.1f} ms of the machine's, "
            f"{1e3 * harness:.1f} ms of them the harness's"
        )


if __name__ == "__main__":
    main()
