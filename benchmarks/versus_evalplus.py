"""corebench's executor against `evalplus.evaluate` on the same samples file, on this machine.

Prints wall time of both (EvalPlus warm: its ground truth cached; corebench warm: reference
outputs cached), the speed-up, and per-sample agreement of the base and base+extra verdicts,
listing every disagreement. Without --samples, the benchmark's reference solutions are used.

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python benchmarks/versus_evalplus.py --bench mbpp
    .venv/bin/python benchmarks/versus_evalplus.py --bench mbpp --samples samples.jsonl
    .venv/bin/python benchmarks/versus_evalplus.py --bench mbpp --from-run runs/mbpp-direct-embedded
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from corebench.harness.config import data_dir_setting
from corebench.harness.registry import default_plugins
from corebench.harness.store import Store

OVERRIDE = {"mbpp": "MBPP_OVERRIDE_PATH", "humaneval": "HUMANEVAL_OVERRIDE_PATH"}


def reference_samples(benchmark) -> list[dict]:
    return [
        {"task_id": t, "solution": p["prompt"] + p["canonical_solution"]}
        for t, p in benchmark.problems.items()
    ]


def run_samples(run_dir: Path) -> list[dict]:
    return [
        {"task_id": s.task_id, "solution": s.code}
        for s, _ in Store(run_dir, create=False).samples()
    ]


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{argv[:4]} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", default="mbpp", choices=sorted(OVERRIDE))
    parser.add_argument("--samples", type=Path)
    parser.add_argument("--from-run", type=Path)
    args = parser.parse_args()
    benchmark = default_plugins().benchmarks.get(args.bench).component(data_dir_setting())
    work = Path(tempfile.mkdtemp(prefix="versus-evalplus-"))
    samples = args.samples or work / "samples.jsonl"
    if not args.samples:
        rows = run_samples(args.from_run) if args.from_run else reference_samples(benchmark)
        samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, OVERRIDE[args.bench]: str(benchmark.path)}

    evalplus = [sys.executable, "-m", "evalplus.evaluate", "--dataset", args.bench]
    for attempt in ("cold", "warm"):  # the first run may compute EvalPlus's ground truth
        copy = work / f"evalplus-{attempt}" / "samples.jsonl"
        copy.parent.mkdir()
        copy.write_text(samples.read_text())
        evalplus_s = timed([*evalplus, "--samples", str(copy)], env)
        print(f"evalplus.evaluate ({attempt}): {evalplus_s:.1f} s")
    ours = [
        sys.executable,
        "-m",
        "corebench.harness.cli",
        "evaluate",
        "--bench",
        args.bench,
        "--samples",
        str(samples),
        "--repeats",
        "0",  # correctness only, as EvalPlus does
    ]
    timed([*ours, "--out", str(work / "corebench-cold")], env)  # fills the reference-output cache
    corebench_s = timed([*ours, "--out", str(work / "corebench-warm")], env)
    print(
        f"corebench evaluate (warm): {corebench_s:.1f} s; speed-up {evalplus_s / corebench_s:.2f}x"
    )

    theirs = json.loads((copy.parent / "samples_eval_results.json").read_text())["eval"]
    mine = {}
    for line in (work / "corebench-warm" / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        mine[(r["task_id"], r["sample_index"])] = r
    agree = {"base": 0, "plus": 0}
    total = 0
    for task_id, results in theirs.items():
        for index, r in enumerate(results):
            total += 1
            m = mine[(task_id, index)]
            their_base = r["base_status"] == "pass"
            their_plus = their_base and r["plus_status"] == "pass"
            our_base, our_plus = m["base_status"] == "passed", m["verdict"] == "passed"
            agree["base"] += their_base == our_base
            agree["plus"] += their_plus == our_plus
            if (their_base, their_plus) != (our_base, our_plus):
                print(
                    f"  {task_id}#{index}: evalplus base={r['base_status']} plus={r['plus_status']}; "
                    f"corebench {m['verdict']} ({m['first_failure']})"
                )
    for key in ("base", "plus"):
        print(f"agreement ({key}): {agree[key]}/{total} = {100 * agree[key] / total:.2f}%")
    print(f"work dir: {work}")


if __name__ == "__main__":
    main()
