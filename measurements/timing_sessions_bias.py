"""Does timing two solutions at once (a CPU each) move their runtime ratios? The same samples are
evaluated with `--repeats 5` under one timing session and under two (`COREBENCH_TIMING_SESSIONS`),
in ABBA order (two, one, one, two, ...), each in a fresh run directory, and each passing
sample's runtime ratio (CPU time against its reference's, their runs alternating) is compared.

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python measurements/timing_sessions_bias.py \\
        [--samples SAMPLES.jsonl | --study docs/studies/grpo-from-sft ...] [--rounds 2]

A reference measured against itself cannot show a bias (whatever the neighbour does reaches both
alike): the samples must be other programs than their references. By default they are the
passing solutions of the committed MBPP+ studies (every row and seed, each distinct program
once). Prints each evaluation's wall time, then per sample the mean log ratio
under each setting and the paired difference (two minus one): its median as a percentage, the
Wilcoxon signed-rank test (scipy) of it against zero, and the same for the two one-session
evaluations against each other, which is what the machine's noise alone gives, and the
smallest mean shift the comparison could have detected (``stats.minimum_detectable``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scipy.stats import wilcoxon

from corebench.harness.store import Store
from corebench.leaderboards.stats import minimum_detectable, paired_se

CLI = [sys.executable, "-m", "corebench.harness.cli"]
ROOT = Path(__file__).resolve().parent.parent
STUDIES = [ROOT / "docs/studies/grpo-from-sft", ROOT / "docs/studies/magrpo-from-sft"]


def study_samples(folders: list[Path]) -> list[dict]:
    """The distinct passing solutions of the studies' rows (each ``ROW.jsonl`` or
    ``ROW/seed-S.jsonl`` beside its ``.results.jsonl``), as EvalPlus samples."""
    found: dict[tuple[str, str], dict] = {}
    for folder in folders:
        for results in sorted(folder.rglob("*.results.jsonl")):
            samples = results.with_name(results.name.replace(".results.jsonl", ".jsonl"))
            rows = [json.loads(line) for line in samples.read_text().splitlines()]
            verdicts = [json.loads(line) for line in results.read_text().splitlines()]
            for row, verdict in zip(rows, verdicts, strict=True):
                if verdict["verdict"] == "passed":
                    found.setdefault((row["task_id"], row["solution"]), row)
    return list(found.values())


def evaluate(samples: Path, bench: str, out: Path, sessions: int) -> dict[tuple[str, int], float]:
    """Each measured sample's runtime ratio, evaluated with ``sessions`` timing sessions."""
    env = {**os.environ, "COREBENCH_TIMING_SESSIONS": str(sessions)}
    command = [*CLI, "evaluate", "--bench", bench, "--samples", str(samples), "--out", str(out)]
    started = time.perf_counter()
    subprocess.run([*command, "--repeats", "5"], env=env, check=True, capture_output=True)
    print(f"  {sessions} session(s): {time.perf_counter() - started:.1f} s", flush=True)
    store = Store(out, create=False)
    ratios = {
        (s.task_id, s.sample_index): r.measurement.runtime_ratio
        for s, r in store.samples()
        if r.measurement is not None and r.measurement.runtime_ratio > 0
    }
    store.close()
    return ratios


def compare(name: str, a: list[dict], b: list[dict]) -> None:
    """The paired difference of mean log ratios, ``a`` minus ``b``, over samples in both."""
    shared = sorted(set.intersection(*(set(r) for r in a + b)))
    diffs = [
        statistics.fmean(math.log(r[k]) for r in a) - statistics.fmean(math.log(r[k]) for r in b)
        for k in shared
    ]
    test = wilcoxon(diffs)
    spread = statistics.quantiles(diffs, n=4)
    mde = minimum_detectable(*paired_se(diffs), family=1)

    def percent(log: float) -> str:
        return f"{100 * math.expm1(log):+.2f} %"

    print(
        f"{name}: {len(shared)} samples, median {percent(statistics.median(diffs))} (quartiles "
        f"{percent(spread[0])}, {percent(spread[2])}), mean {percent(statistics.fmean(diffs))}, "
        f"Wilcoxon signed-rank p {test.pvalue:.3g}; a mean shift of {100 * math.expm1(mde):.2f} %"
        " would be detected with 80 % power (paired t, alpha 0.05)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=Path, help="an EvalPlus samples file")
    parser.add_argument("--study", type=Path, action="append", default=[], help="a study folder")
    parser.add_argument("--bench", default="mbpp")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA blocks (2: four evaluations)")
    args = parser.parse_args()
    order = [2, 1, 1, 2] * args.rounds
    found: dict[int, list[dict]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as folder:
        samples = args.samples
        if samples is None:
            rows = study_samples(args.study or STUDIES)
            samples = Path(folder) / "samples.jsonl"
            samples.write_text("".join(json.dumps(row) + "\n" for row in rows))
            print(f"{len(rows)} passing solutions of {len({r['task_id'] for r in rows})} tasks")
        for i, sessions in enumerate(order):
            ratios = evaluate(samples, args.bench, Path(folder) / f"run-{i}", sessions)
            found[sessions].append(ratios)
    compare("two sessions against one", found[2], found[1])
    ones = found[1]
    compare("one session against one (noise)", ones[0::2], ones[1::2])


if __name__ == "__main__":
    main()
