"""Does timing two solutions at once (a CPU each) move their runtime ratios? The same samples are
evaluated with `--repeats 5` under one timing session and under two (`COREBENCH_TIMING_SESSIONS`),
in ABBA order (two, one, one, two, ...), each in a fresh run directory, and each passing
sample's runtime ratio (CPU time against its reference's, their runs alternating) is compared.

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python measurements/timing_sessions_bias.py \\
        [--samples SAMPLES.jsonl | --study docs/studies/grpo-from-sft ...] [--rounds 2]

A reference measured against itself cannot show a bias (whatever the neighbour does reaches both
alike): the samples must be other programs than their references. By default they are the
passing solutions of the committed MBPP+ studies (every row and seed, each distinct program
once). Prints each evaluation's wall time and geometric mean ratio over the samples all
evaluations measured; then, with the evaluation as the unit (an evaluation's drift reaches all
its samples alike, so they are not independent), the differences between neighbouring
evaluations (two minus one) with a paired t-test and the smallest shift it would have detected
(``stats.minimum_detectable``); and, as a description only, the per-sample differences' spread.
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

from scipy.stats import ttest_1samp

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
    done = subprocess.run([*command, "--repeats", "5"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"corebench evaluate failed:\n{done.stderr[-3000:]}")
    print(f"  {sessions} session(s): {time.perf_counter() - started:.1f} s", flush=True)
    store = Store(out, create=False)
    ratios = {
        (s.task_id, s.sample_index): r.measurement.runtime_ratio
        for s, r in store.samples()
        if r.measurement is not None and r.measurement.runtime_ratio > 0
    }
    store.close()
    return ratios


def geometric_means(runs: list[dict]) -> list[float]:
    """Each evaluation's mean log runtime ratio over the samples every evaluation measured."""
    shared = sorted(set.intersection(*(set(r) for r in runs)))
    return [statistics.fmean(math.log(r[k]) for k in shared) for r in runs]


def percent(log: float) -> str:
    return f"{100 * math.expm1(log):+.2f} %"


def compare(order: list[int], runs: list[dict]) -> None:
    """Two sessions against one, with the evaluation as the unit: every sample of an evaluation
    shares that evaluation's drift, so samples are not independent. Each ABBA block gives two
    pairs of neighbouring evaluations (two, one | one, two); the pairs' differences of mean log
    ratio are tested with a paired t-test (scipy), and the smallest shift it would detect with
    80 % power is ``stats.minimum_detectable``."""
    means = geometric_means(runs)
    for sessions, mean in zip(order, means, strict=True):
        print(f"  {sessions} session(s): geometric mean ratio {percent(mean)} from 1")
    pairs = [(b + 0, b + 1) for b in range(0, len(order), 4)]
    pairs += [(b + 3, b + 2) for b in range(0, len(order), 4)]
    differences = [means[two] - means[one] for two, one in pairs]
    test = ttest_1samp(differences, 0.0)
    se, df = paired_se(differences)
    mde = minimum_detectable(se, df, family=1)
    print(
        f"two sessions against one: {len(pairs)} pairs of neighbouring evaluations, mean "
        f"difference {percent(statistics.fmean(differences))} (pairs: "
        f"{', '.join(percent(d) for d in differences)}), paired t-test p {test.pvalue:.3g}; a "
        f"shift of {100 * math.expm1(mde):.2f} % would be detected with 80 % power"
    )
    shared = sorted(set.intersection(*(set(r) for r in runs)))
    per_sample = [
        statistics.fmean(math.log(r[k]) for r, n in zip(runs, order, strict=True) if n == 2)
        - statistics.fmean(math.log(r[k]) for r, n in zip(runs, order, strict=True) if n == 1)
        for k in shared
    ]
    q1, middle, q3 = statistics.quantiles(per_sample, n=4)
    print(
        f"  per sample ({len(shared)}; description only): median {percent(middle)}, quartiles "
        f"{percent(q1)}, {percent(q3)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=Path, help="an EvalPlus samples file")
    parser.add_argument("--study", type=Path, action="append", default=[], help="a study folder")
    parser.add_argument("--bench", default="mbpp")
    parser.add_argument(
        "--rounds", type=int, default=2, help="ABBA blocks of four evaluations (two each way)"
    )
    args = parser.parse_args()
    order = [2, 1, 1, 2] * args.rounds
    runs: list[dict] = []
    with tempfile.TemporaryDirectory() as folder:
        samples = args.samples
        if samples is None:
            rows = study_samples(args.study or STUDIES)
            samples = Path(folder) / "samples.jsonl"
            samples.write_text("".join(json.dumps(row) + "\n" for row in rows))
            print(f"{len(rows)} passing solutions of {len({r['task_id'] for r in rows})} tasks")
        for i, sessions in enumerate(order):
            runs.append(evaluate(samples, args.bench, Path(folder) / f"run-{i}", sessions))
    compare(order, runs)


if __name__ == "__main__":
    main()
