"""What one program costs the sandbox before its own work: a trivial function judged on one test,
many times over, one at a time; next to a bare ``python -c pass`` and a bare bubblewrap start.

    .venv/bin/python measurements/sandbox_overhead.py [--programs 100]

Prints the median and 90th percentile, in milliseconds, of the wall time per judged program.
Works on any corebench version (it uses only ``Executor.evaluate``), so two checkouts can be
compared on the same machine with PYTHONPATH.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import time

from corebench.harness import FunctionalSuite
from corebench.harness.sandbox import Executor

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


async def judged(programs: int) -> list[float]:
    executor = Executor(workers=1)
    await executor.reference("overhead/add", SUITE)
    out = []
    for _ in range(programs):
        started = time.perf_counter()
        result = await executor.evaluate("overhead/add", 0, SUITE.reference_code, SUITE)
        out.append(time.perf_counter() - started)
        assert result.passed, result.first_failure
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=100)
    args = parser.parse_args()
    python = [sys.executable, "-I", "-S", "-c", "pass"]
    print(f"python -I -S -c pass:      {percentiles(timed_command(python, args.programs))}")
    bwrap = shutil.which("bwrap")
    if bwrap:
        argv = [bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", *python]
        print(f"bwrap + python -c pass:    {percentiles(timed_command(argv, args.programs))}")
    print(f"judged program (1 test):   {percentiles(asyncio.run(judged(args.programs)))}")


if __name__ == "__main__":
    main()
