"""What a judge request with measurement costs wherever the project lives: a folder of 75,000
files (the size of a checkout with its virtual environment) on the harness's import path, under
/tmp and elsewhere, and the same request (a 20-40 ms loop on three inputs, its own code as the
reference, ``repeats: 3``) through a judging service on loopback, a few times each. Inside the
sandbox, a folder on the import path is bound read-only at its own path: under /tmp, it lies
inside a folder a timed run may write.

    .venv/bin/python measurements/timing_placement.py [--files 75000] [--times 3]

Prints, per placement, the wall seconds of each request and their median.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PLAIN = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i * i\n    return s\n"
ONE = """
import sys, threading, time
from corebench.harness.sandbox import Executor
from corebench.harness.service import JudgeClient, JudgeServer, JudgeService
service = JudgeService(Executor(workers=1))
server = JudgeServer(service, "127.0.0.1", 0, None)
threading.Thread(target=server.serve_forever, daemon=True).start()
client = JudgeClient(server.url)
tests = {"entry_point": "f", "inputs": {"base": [[200000], [300000], [400000]]},
         "reference_code": sys.argv[1]}
for _ in range(int(sys.argv[2])):
    started = time.perf_counter()
    answer = client.judge({"code": sys.argv[1], "tests": tests, "repeats": 3})
    assert answer["measurement_error"] is None, answer
    print(f"{time.perf_counter() - started:.3f}", flush=True)
server.stop()
"""


def filled(parent: str, files: int) -> str:
    folder = tempfile.mkdtemp(prefix="corebench-placement-", dir=parent)
    for i in range(files):
        sub = os.path.join(folder, f"pkg{i // 1000}")
        if i % 1000 == 0:
            os.mkdir(sub)
        with open(os.path.join(sub, f"m{i}.py"), "w") as f:
            f.write("x = 1\n")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=75_000)
    parser.add_argument("--times", type=int, default=3)
    args = parser.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name, parent in (("elsewhere", here), ("under /tmp", "/tmp")):
        folder = filled(parent, args.files)
        try:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                p for p in (os.environ.get("PYTHONPATH"), folder) if p
            )}  # fmt: skip
            started = time.perf_counter()
            ran = subprocess.run(
                [sys.executable, "-c", ONE, PLAIN, str(args.times)],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            walls = [float(line) for line in ran.stdout.split()]
            print(
                f"{name:<11} {args.files} files at {folder}: requests "
                + ", ".join(f"{w:.2f}" for w in walls)
                + f" s; median {statistics.median(walls):.2f} s"
                + f" (all, with start: {time.perf_counter() - started:.1f} s)",
                flush=True,
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
