"""Re-judge a committed study folder's samples with EvalPlus itself, and recompute its pass@1
comparisons from EvalPlus's verdicts: a reader's check that the study's conclusions do not
depend on corebench's judge.

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python measurements/rejudge_study.py \\
        docs/studies/grpo-from-sft [--parallel 2]

Every row's (and seed's) EvalPlus samples file is copied to a scratch folder and judged by
`python -m evalplus.evaluate --dataset mbpp` (the data file from the data folder, through
EvalPlus's `MBPP_OVERRIDE_PATH`); a sample passes when EvalPlus passes it on the base and the
plus inputs; `--parallel` is EvalPlus's own worker count (its default: half the CPUs). Prints
per row: pass@1 by corebench and by EvalPlus and the samples they disagree on; then the study's
pass@1 comparisons (planned, Collaboration Gain) with their differences, tests, p, Holm p and
whether every seed agrees, computed by the study report's own code on EvalPlus's verdicts.

`--results-from DIR` takes EvalPlus's results instead of running it: each row's
`samples_eval_results.json`, gzipped, as `DIR/ROW.json.gz` or `DIR/ROW-seed-S.json.gz`, as
`measurements/evalplus_results.sh` writes them on a machine with more CPUs; results judged on
another data file (EvalPlus's hash of it) or on other solutions than the row's are refused.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from corebench.harness import config as C
from corebench.harness.registry import default_plugins
from corebench.studies import evidence
from corebench.studies.report import family, row_from_evidence
from corebench.studies.spec import load_study

OVERRIDE = {"mbpp": "MBPP_OVERRIDE_PATH", "humaneval": "HUMANEVAL_OVERRIDE_PATH"}


def evalplus_results(
    samples: Path, bench: str, data_file: Path, work: Path, parallel: int | None = None
) -> dict:
    """EvalPlus's results file for a samples file, judged here."""
    work.mkdir(parents=True)
    copy = work / "samples.jsonl"
    copy.write_bytes(samples.read_bytes())
    env = {**os.environ, OVERRIDE[bench]: str(data_file)}
    command = [
        sys.executable,
        "-m",
        "evalplus.evaluate",
        "--dataset",
        bench,
        "--samples",
        str(copy),
    ]
    if parallel:
        command += ["--parallel", str(parallel)]
    subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return json.loads((work / "samples_eval_results.json").read_text())


def verdicts_of(samples: Path, results: dict, data_file: Path) -> list[bool]:
    """EvalPlus's base-and-plus verdict of each line of a samples file, in order (EvalPlus keeps
    a task's samples in the file's order). Refuses results judged on another data file or on
    other solutions than the file's."""
    if results["hash"] != hashlib.md5(data_file.read_bytes()).hexdigest():
        raise SystemExit(f"{samples}: EvalPlus's results were judged on another data file")
    seen: dict[str, int] = {}
    verdicts = []
    for number, line in enumerate(samples.read_text().splitlines(), 1):
        sample = json.loads(line)
        task_id = sample["task_id"]
        r = results["eval"][task_id][seen.get(task_id, 0)]
        seen[task_id] = seen.get(task_id, 0) + 1
        if r["solution"] != sample["solution"]:
            raise SystemExit(f"{samples}:{number}: EvalPlus's results judged another solution")
        verdicts.append(r["base_status"] == "pass" and r["plus_status"] == "pass")
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--parallel", type=int, help="EvalPlus's worker processes")
    parser.add_argument(
        "--results-from",
        type=Path,
        help="judged elsewhere: EvalPlus's results file of each row as ROW[-seed-S].json.gz here",
    )
    args = parser.parse_args()
    root = args.folder
    scale = json.loads((root / evidence.REGISTRATION).read_text())["scale"]
    study = load_study(root / evidence.STUDY_FILE, scale, default_plugins(), C.data_dir_setting())
    study = study.model_copy(
        update={"header": study.header.model_copy(update={"primary": "pass@1", "secondary": []})}
    )
    bench = default_plugins().benchmarks.get(study.header.benchmark).component(C.data_dir_setting())
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for run in study.runs:
            for seed in study.seeds_of(run):
                data = evidence.read_row(root, run.name, seed)
                stem = evidence.row_stem(root, run.name, seed)
                samples = stem.with_name(stem.name + ".jsonl")
                label = f"{run.name}" + ("" if seed is None else f" seed {seed}")
                name = label.replace(" ", "-")
                if args.results_from:
                    with gzip.open(args.results_from / f"{name}.json.gz", "rt") as f:
                        results = json.load(f)
                else:
                    results = evalplus_results(
                        samples, study.header.benchmark, bench.path, Path(scratch) / name,
                        args.parallel,
                    )  # fmt: skip
                theirs = verdicts_of(samples, results, bench.path)
                ours = [r["verdict"] == "passed" for r in data["results"]]
                differ = [
                    f"{r['task_id']}#{r['sample_index']}"
                    for r, a, b in zip(data["results"], ours, theirs, strict=True)
                    if a != b
                ]
                print(
                    f"{label:<24} pass@1 corebench {100 * sum(ours) / len(ours):5.1f} %, EvalPlus "
                    f"{100 * sum(theirs) / len(theirs):5.1f} %; verdicts differ on {len(differ)} "
                    f"of {len(ours)}{': ' + ', '.join(differ) if differ else ''}"
                )
                rejudged = [
                    {**r, "verdict": "passed" if passed else "wrong_answer", "tests": ""}
                    for r, passed in zip(data["results"], theirs, strict=True)
                ]
                rows.append(row_from_evidence(study, run.name, seed, {**data, "results": rejudged}))
    labels = {r.name: r.label or r.name for r in study.runs}
    print("\npass@1 comparisons on EvalPlus's verdicts (percentage points):")
    for c in family(study, rows):
        d = c.result
        agree = {None: "–", True: "yes", False: "no"}[c.seeds_agree]
        print(
            f"  {labels[c.row]} − {labels[c.against]}: {100 * d.difference:+.1f} "
            f"[{100 * d.low:+.1f}, {100 * d.high:+.1f}], {d.test}, p {d.p:.3g}, Holm p "
            f"{d.p_holm:.3g}, seeds agree: {agree}"
        )


if __name__ == "__main__":
    main()
