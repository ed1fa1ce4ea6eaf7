"""Hyperparameter tuning on validation tasks, never on the benchmark a study reports: train one
method under each of several settings and print each run's validation reward (the mean reward of
greedy completions on held-out training tasks, `validation_tasks`) before training and after.

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python measurements/tune_validation.py \\
        grpo --base studies/tuning/grpo.toml --model hf:checkpoints/sft/model --out runs/tuning \\
        --try learning_rate=2e-6 --try learning_rate=1e-5 [--try 'learning_rate=5e-6 steps=20']

`--base` is a training settings file (`corebench train --config`); each `--try` is one run, a
space-separated list of `KEY=VALUE` overrides on top of it. Runs already finished in `--out` are
not trained again (each keeps its checkpoint folder), so the table can be printed again, or a
run added, at no cost. Prints, per run: its overrides, steps, the validation reward at the start
and at the end with the change, the training reward's first and last quarter and trend, and the
seconds per step.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shlex
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from corebench.harness.config import MANIFEST_NAME
from corebench.studies.execute import end_with_parent

CLI = [sys.executable, "-m", "corebench.harness.cli"]


def run_folder(out: Path, overrides: list[str]) -> Path:
    key = hashlib.sha256(json.dumps(overrides).encode()).hexdigest()[:8]
    return out / f"try-{key}"


def manifest_of(folder: Path) -> dict | None:
    found = sorted(folder.glob(f"*/{MANIFEST_NAME}"))
    return json.loads(found[0].read_text()) if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("method")
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", help="the start checkpoint (a model spec), for every run")
    parser.add_argument("--try", dest="tries", action="append", default=[], required=True)
    args = parser.parse_args()
    rows = []
    for tried in args.tries:
        overrides = shlex.split(tried)
        folder = run_folder(args.out, overrides)
        started = time.monotonic()
        if manifest_of(folder) is None:
            command = [*CLI, "train", args.method, "--config", str(args.base), "--out", str(folder)]
            start = [f"model={args.model}"] if args.model else []
            if args.method == "corecode" and args.model:
                start = [f"planner_model={args.model}", f"coder_model={args.model}"]
            for item in start + overrides:
                command += ["--set", item]
            print(f"training {tried} -> {folder}", file=sys.stderr, flush=True)
            # a killed tuning script does not leave its training run going
            subprocess.run(command, check=True, preexec_fn=partial(end_with_parent, os.getpid()))
        manifest = manifest_of(folder)
        d = manifest.get("diagnostics") or {}
        # CoRe-Code: phases in turn; the first phase's first validation is the start
        phases = [p.get("diagnostics") or {} for p in manifest.get("phases") or []]
        first = (phases[0] if phases else d).get("validation_curve") or []
        curve = first[:1] + (d.get("validation_curve") or [])[-1:]
        timing = d.get("timing") or {}
        rows.append(
            {
                "try": tried,
                "steps": manifest.get("steps"),
                "start": curve[0]["reward"] if curve else math.nan,
                "end": curve[-1]["reward"] if curve else math.nan,
                "reward": (d.get("reward_first_quarter"), d.get("reward_last_quarter")),
                "tau": d.get("trend_tau"),
                "step_s": timing.get("total_s", math.nan),
                "wall_s": time.monotonic() - started,
            }
        )
    print(f"{args.method} from {args.base}, validation reward of greedy completions")
    print("| try | steps | validation: start → end (change) | reward: first → last quarter "
          "| trend τ | s/step |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for r in rows:
        first, last = r["reward"]
        print(f"| `{r['try']}` | {r['steps']} | {r['start']:.3f} → {r['end']:.3f} "
              f"({r['end'] - r['start']:+.3f}) | {first:.3f} → {last:.3f} | "
              f"{(r['tau'] if r['tau'] is not None else math.nan):.2f} | {r['step_s']:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
