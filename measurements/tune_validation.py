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
seconds per step; for corecode a row per phase (a planner phase's reward and a coder phase's differ).

`--sampled N` also evaluates the start checkpoint and each run's final one on the validation
tasks as a sampled study row is evaluated: N samples per task at temperature 0.6 (top-p 0.95)
with the same seed for every checkpoint (common random numbers), in float32
(`hf:PATH?dtype=float32`: bfloat16 buries a short run's update in rounding noise), judged in the
sandbox; it prints each checkpoint's pass@1 and its paired difference from the start (per task,
the share of samples passed; `leaderboards/stats.py`'s sign-flip test, or exact McNemar's for
one sample). From an `hf:` start only: a pair's checkpoints (magrpo's helper and main,
corecode's planner and coder) are evaluated together by the system they were trained for,
against the start in the same roles: one checkpoint playing both (as `magrpo-from-sft`'s start
row), or, for corecode, a checkpoint per role (`--model planner=hf:P,coder=hf:C`, as CoRe-Code's
studies start the planner from its own SFT on plans and the coder from the direct SFT). With
`--on-training-tasks` it does the same on the tasks each run drew its training prompts from (its
manifest's `training_tasks`: where the prompt filter runs, the tasks the start solves sometimes):
a run that gains on neither did not learn; one that gains there learned its training prompts,
whether or not the validation tasks (fewer, and mostly never solved by the start) can detect it
carrying over. Runs trained with the same settings but their seeds are also pooled, in a row
of their own under each table, tested as the studies pool seeds (crossed random effects).
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
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import NamedTuple

import numpy as np

from corebench.harness.config import MANIFEST_NAME
from corebench.harness.errors import CorebenchError
from corebench.harness.modelspec import DEFAULT_ROLE, format_model_spec, parse_model_spec
from corebench.harness.store import Store
from corebench.harness.summary import samples_rows
from corebench.leaderboards.stats import Paired, Pooled, crossed, paired
from corebench.studies.execute import end_with_parent
from corebench.training.dispatch import finished_checkpoints, model_spec
from corebench.training.settings import load_settings

CLI = [sys.executable, "-m", "corebench.harness.cli"]
SAMPLED = {"temperature": 0.6, "top_p": 0.95}  # the sampled studies' evaluation


def in_float32(spec: str) -> str:
    """A model spec of ``hf:`` checkpoints (one, or one per role) with float32 weights (any
    other dtype option replaced)."""
    try:
        roles = parse_model_spec(spec)
    except CorebenchError:
        roles = {}
    if not roles or any(ref.backend != "hf" for ref in roles.values()):
        raise SystemExit(f"--sampled evaluates hf: checkpoints in float32, not {spec!r}")
    return format_model_spec(
        {
            role: replace(ref, options=(*(o for o in ref.options if o[0] != "dtype"),
                                        ("dtype", "float32")))
            for role, ref in roles.items()
        }
    )  # fmt: skip


def sampled_shares(
    folder: Path, spec: str, manifest: dict, n: int, tokens: int, tasks: list[str] | None = None
) -> dict[str, float]:
    """Per task (the manifest's validation tasks unless ``tasks`` are given), the share of ``n``
    samples of ``spec`` (float32) that pass. The run is kept in ``folder``: `corebench run`
    resumes an unfinished one, does nothing for a finished one, and refuses one made with other
    settings."""
    settings = manifest["settings"]
    tasks = tasks if tasks is not None else manifest["data"]["validation_tasks"]
    if not tasks:
        raise SystemExit("--sampled needs validation tasks (the setting validation_tasks)")
    command = [
        *CLI, "run", "--system", manifest["evaluate_with"], "--bench", settings["benchmark"],
        "--split", "train", "--tasks", ",".join(tasks), "--model", in_float32(spec),
        "--n", str(n), "--temperature", str(SAMPLED["temperature"]),
        "--top-p", str(SAMPLED["top_p"]), "--seed", "0", "--max-new-tokens", str(tokens),
        "--repeats", "0", "--no-progress", "--out", str(folder),
    ]  # fmt: skip
    for key, value in settings["benchmark_options"].items():
        command += ["-B", f"{key}={json.dumps(value)}"]
    for key, value in evaluation_of(manifest)[1].items():
        command += ["-O", f"{key}={json.dumps(value)}"]
    print(f"evaluating {spec} on {len(tasks)} tasks", file=sys.stderr, flush=True)
    subprocess.run(command, check=True, preexec_fn=partial(end_with_parent, os.getpid()))
    store = Store(folder, create=False)
    try:
        rows = samples_rows(store)
    finally:
        store.close()
    passed: dict[str, list[bool]] = {task: [] for task in tasks}
    for row in rows:
        passed[row["task_id"]].append(bool(row["passed"]))
    short = [task for task, v in passed.items() if len(v) != n]
    if short:
        raise SystemExit(f"{folder}: not {n} judged samples for {', '.join(short[:5])}")
    return {task: sum(v) / n for task, v in passed.items()}


def evaluation_of(manifest: dict) -> list:
    """The system a run's checkpoints are evaluated by, and its options (MAGRPO's turns)."""
    return [manifest["evaluate_with"], manifest.get("system_options", {})]


def key_of(decides: object) -> str:
    """A short hash naming a folder by what decides its contents."""
    return hashlib.sha256(json.dumps(decides).encode()).hexdigest()[:8]


def run_folder(out: Path, overrides: list[str]) -> Path:
    return out / f"try-{key_of(overrides)}"


def checkpoints_of(folder: Path) -> dict[str, Path]:
    """Role -> the checkpoint a finished training run in ``folder`` saved for it (the folders
    with a manifest, named by role: ``model``, or a pair's two)."""
    return {p.parent.name: p.parent for p in sorted(folder.glob(f"*/{MANIFEST_NAME}"))}


def checkpoint_of(folder: Path) -> Path | None:
    """A checkpoint a finished training run in ``folder`` saved (a pair's first by role)."""
    return next(iter(checkpoints_of(folder).values()), None)


def trained_spec(folder: Path) -> str:
    """The model spec that evaluates a finished run's checkpoints, every role's."""
    return model_spec(checkpoints_of(folder))


def finished(
    folder: Path, method: str, base: Path | None = None, overrides: list[str] | None = None
) -> bool:
    """Whether the training run in ``folder`` (trained with ``base`` and ``overrides``)
    finished: every role it trains has its manifest (a pair killed between its two manifests
    did not)."""
    items = [*(overrides or []), f"out={json.dumps(str(folder))}"]
    try:
        settings = load_settings(method, base, items)
    except CorebenchError as error:
        raise SystemExit(str(error)) from None
    return finished_checkpoints(settings) is not None


def manifest_of(folder: Path) -> dict | None:
    checkpoint = checkpoint_of(folder)
    return json.loads((checkpoint / MANIFEST_NAME).read_text()) if checkpoint else None


# methods whose roles may start from checkpoints of their own (``--model ROLE=SPEC,...``): the
# setting each role's start goes to
START_SETTINGS = {"corecode": {"planner": "planner_model", "coder": "coder_model"}}


def start_settings(method: str, spec: str | None) -> dict[str, str]:
    """The settings that start a run from ``spec`` (setting -> model spec): one checkpoint for
    every role, or, for CoRe-Code (whose studies start the planner from its own SFT on plans),
    one per role, every role named."""
    if not spec:
        return {}
    try:
        roles = parse_model_spec(spec)
    except CorebenchError as error:
        raise SystemExit(f"--model: {error}") from None
    settings = START_SETTINGS.get(method)
    if set(roles) == {DEFAULT_ROLE}:
        spec = str(roles[DEFAULT_ROLE])  # without a '*=' role
        return {name: spec for name in (settings.values() if settings else ["model"])}
    if settings is None or set(roles) != set(settings):
        wanted = f"or one per role ({', '.join(settings)})" if settings else "every role's start"
        raise SystemExit(f"--model is one checkpoint, {wanted}, not {spec!r}")
    return {settings[role]: str(ref) for role, ref in roles.items()}


START_RECORD = "tune-start.json"  # in a run's folder, before it trains: the start it was given


def check_start(folder: Path, start: dict[str, str]) -> None:
    """Refuse to reuse or resume a run in ``folder`` begun from another start than ``start``
    (``start_settings``) asks: a run's folder is named by its overrides, not its start. The
    start is the one recorded before training (``START_RECORD``) or, for a finished run from
    before the record, its manifest's settings."""
    record = folder / START_RECORD
    if record.exists():
        trained = json.loads(record.read_text())
    else:
        trained = (manifest_of(folder) or {}).get("settings", {}) if folder.exists() else {}
        if not trained:
            return  # nothing trained yet, or an unfinished run from before the record
    for key, value in start.items():
        if trained.get(key) != value:
            raise SystemExit(f"{folder} was trained from {key}={trained.get(key)!r}, not "
                             f"{value!r}: tune from another start in another --out")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("method")
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", help="the start checkpoint (a model spec), for every run; "
                        "corecode: also planner=SPEC,coder=SPEC")  # fmt: skip
    parser.add_argument("--try", dest="tries", action="append", default=[], required=True)
    parser.add_argument(
        "--sampled",
        type=int,
        default=0,
        metavar="N",
        help="also evaluate sampled pass@1 on the validation tasks (N per task)",
    )
    parser.add_argument(
        "--on-training-tasks",
        action="store_true",
        help="with --sampled: also on the tasks each run drew its training prompts from",
    )
    parser.add_argument("--max-new-tokens", type=int, default=384,
                        help="the evaluation's token limit (--sampled)")  # fmt: skip
    args = parser.parse_args()
    if args.on_training_tasks and not args.sampled:
        raise SystemExit("--on-training-tasks evaluates as --sampled N does: give --sampled N")
    if args.sampled:  # refused now, not after the training
        in_float32(args.model or "(no --model: the base file's)")
    start = start_settings(args.method, args.model)  # refused now, not after the training
    for tried in args.tries:  # and a run begun from another start, before any training
        check_start(run_folder(args.out, shlex.split(tried)), start)
    rows = []
    for tried in args.tries:
        overrides = shlex.split(tried)
        folder = run_folder(args.out, overrides)
        if not finished(folder, args.method, args.base, overrides):
            folder.mkdir(parents=True, exist_ok=True)
            if start and not (folder / START_RECORD).exists():
                (folder / START_RECORD).write_text(json.dumps(start))
            command = [*CLI, "train", args.method, "--config", str(args.base), "--out", str(folder)]
            for item in [f"{key}={value}" for key, value in start.items()] + overrides:
                command += ["--set", item]
            print(f"training {tried} -> {folder}", file=sys.stderr, flush=True)
            # a killed tuning script does not leave its training run going
            subprocess.run(command, check=True, preexec_fn=partial(end_with_parent, os.getpid()))
        manifest = manifest_of(folder)
        rows.append(
            {
                "try": tried,
                "manifest": manifest,
                "folder": folder,
            }
        )
    print(f"{args.method} from {args.base}, validation reward of greedy completions")
    print("| try | steps | validation: start → end (change) | reward: first → last quarter "
          "| trend τ | s/step |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for r in rows:
        for line in training_lines(r["try"], r["manifest"]):
            print(line)
    if args.on_training_tasks:  # refused before hours of sampling, not after
        older = [str(r["folder"]) for r in rows if not r["manifest"]["data"].get("training_tasks")]
        if older:
            raise SystemExit(f"--on-training-tasks: no training_tasks in the manifests of "
                             f"{', '.join(older)} (an older corebench); train again")  # fmt: skip
    if args.sampled:
        sampled(rows, args)


def training_lines(tried: str, manifest: dict) -> list[str]:
    """A run's rows of the validation table: one, or for CoRe-Code one per phase (a planner
    phase's reward and a coder phase's are different rewards, so they are not compared)."""
    phases = manifest.get("phases") or [
        {"steps": manifest.get("steps"), "diagnostics": manifest.get("diagnostics")}
    ]
    lines = []
    for phase in phases:
        d = phase.get("diagnostics") or {}
        label = f"`{tried}`" + (
            f" {phase['role']} phase {phase['round']}" if "role" in phase else ""
        )
        curve = d.get("validation_curve") or []
        start, end = (curve[0]["reward"], curve[-1]["reward"]) if curve else (math.nan, math.nan)
        first, last, tau = (d.get(k) for k in ("reward_first_quarter", "reward_last_quarter",
                                               "trend_tau"))  # fmt: skip
        lines.append(
            f"| {label} | {phase.get('steps')} | {start:.3f} → {end:.3f} ({end - start:+.3f}) | "
            f"{_number(first)} → {_number(last)} | {_number(tau, 2)} | "
            f"{_number((d.get('timing') or {}).get('total_s'), 1)} |"
        )
    return lines


def _number(value: float | None, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if value is not None else "–"


def sampled(rows: list[dict], args: argparse.Namespace) -> None:
    """The start's and each run's sampled pass@1 on the validation tasks, and the difference."""
    first = rows[0]["manifest"]
    if any(r["manifest"]["data"]["validation_tasks"] != first["data"]["validation_tasks"]
           for r in rows):  # fmt: skip
        raise SystemExit("--sampled: the runs hold out different validation tasks")
    if any(evaluation_of(r["manifest"]) != evaluation_of(first) for r in rows):
        raise SystemExit("--sampled: the runs are evaluated by different systems or options; "
                         "tune each in its own --out")  # fmt: skip
    n, tokens = args.sampled, args.max_new_tokens
    folder = args.out / f"sampled-start-{key_of(evaluation_of(first))}-n{n}"  # per system
    start = sampled_shares(folder, args.model, first, n, tokens)
    tasks = sorted(start)
    print(f"\nsampled pass@1 on the {len(tasks)} validation tasks ({n} per task, temperature "
          f"{SAMPLED['temperature']}, top-p {SAMPLED['top_p']}, float32, seed 0 for all): "
          f"start {100 * sum(start.values()) / len(tasks):.1f} %")  # fmt: skip
    print("| try | pass@1 % | − start, points [95% CI] | better / worse | test | p |")
    print("|---|---|---|---|---|---|")
    runs = []
    for r in rows:
        shares = sampled_shares(r["folder"] / f"sampled-n{n}", trained_spec(r["folder"]),
                                r["manifest"], n, tokens)  # fmt: skip
        print(difference_row(r["try"], shares, start, n))
        runs.append((r["try"], r["manifest"]["settings"], shares, start))
    print_pooled(runs, n)
    if args.on_training_tasks:
        on_training_tasks(rows, args)


def difference_row(
    tried: str,
    shares: dict[str, float],
    start: dict[str, float],
    n: int,
    *,
    with_start: bool = False,
    result: Paired | Pooled | None = None,
) -> str:
    """One table row: a run's sampled pass@1 (after the task count and the start's, with
    ``with_start``), its difference from the start's (``result``, or else ``stats.paired``'s
    test of the per-task shares), the tasks it did better and worse on, and the test."""
    tasks = sorted(start)
    if result is None:
        result = paired([shares[t] for t in tasks], [start[t] for t in tasks], binary=n == 1)
    better = sum(shares[t] > start[t] for t in tasks)
    worse = sum(shares[t] < start[t] for t in tasks)
    cells = [f"`{tried}`"]
    if with_start:
        cells += [str(len(tasks)), f"{100 * sum(start.values()) / len(tasks):.1f}"]
    cells += [
        f"{100 * sum(shares[t] for t in tasks) / len(tasks):.1f}",
        f"{100 * result.difference:+.1f} [{100 * result.low:+.1f}, {100 * result.high:+.1f}]",
        f"{better} / {worse}",
        result.test,
        f"{result.p:.3f}",
    ]
    return "| " + " | ".join(cells) + " |"


def on_training_tasks(rows: list[dict], args: argparse.Namespace) -> None:
    """Each run's and the start's sampled pass@1 on the tasks that run drew its training prompts
    from: did it learn them? The start is sampled once per task list and evaluation."""
    n, tokens = args.sampled, args.max_new_tokens
    print("\nsampled pass@1 on the tasks each run drew its training prompts from (as above)")
    print("| try | tasks | start % | pass@1 % | − start, points [95% CI] | better / worse | test "
          "| p |\n|---|---|---|---|---|---|---|---|")  # fmt: skip
    runs = []
    for r in rows:
        manifest = r["manifest"]
        tasks = sorted(manifest["data"]["training_tasks"])
        settings = manifest["settings"]
        decides = [tasks, args.model, n, tokens, *evaluation_of(manifest),
                   settings["benchmark"], settings["benchmark_options"]]  # fmt: skip
        start = sampled_shares(args.out / f"training-start-{key_of(decides)}-n{n}", args.model,
                               manifest, n, tokens, tasks)  # fmt: skip
        shares = sampled_shares(r["folder"] / f"training-n{n}", trained_spec(r["folder"]),
                                manifest, n, tokens, tasks)  # fmt: skip
        print(difference_row(r["try"], shares, start, n, with_start=True))
        runs.append((r["try"], manifest["settings"], shares, start))
    print_pooled(runs, n, with_start=True)


def without_seed(tried: str) -> str:
    """A run's overrides less its training seed, to label a group of seeds."""
    return " ".join(item for item in shlex.split(tried) if not item.startswith("seed="))


Run = tuple[str, dict, dict[str, float], dict[str, float]]  # overrides, settings, shares, start


def same_training(a: dict, b: dict) -> bool:
    """Two runs' settings alike but for their seeds and output folders (a setting one manifest
    lacks, from an older corebench that did not have it, is not compared)."""
    return all(a[k] == b[k] for k in a.keys() & b.keys() if k not in ("seed", "out"))


class SeedGroup(NamedTuple):
    """Runs trained alike but for their seeds, sampled against one start."""

    label: str  # the first run's overrides less its seed
    settings: list[dict]  # every member's, to test a newcomer against
    seeds: dict[int, dict[str, float]]  # seed -> shares
    start: dict[str, float]

    def admits(self, settings: dict, start: dict[str, float]) -> bool:
        return start == self.start and all(same_training(s, settings) for s in self.settings)


def pooled_runs(runs: list[Run]) -> list[tuple[str, list[dict[str, float]], dict[str, float]]]:
    """Runs ``(overrides, settings, shares, start)`` trained alike but for their seeds
    (``same_training`` with every run of the group) and sampled against the same start (the
    same tasks, the same start samples), grouped: per group of two or more seeds, its label
    (the first run's overrides less the seed), each seed's shares (a seed given twice counted
    once) and the start's."""
    groups: list[SeedGroup] = []
    for tried, settings, shares, start in runs:
        group = next((g for g in groups if g.admits(settings, start)), None)
        if group is None:
            group = SeedGroup(without_seed(tried), [], {}, start)
            groups.append(group)
        group.settings.append(settings)
        group.seeds.setdefault(settings["seed"], shares)
    return [(g.label, list(g.seeds.values()), g.start) for g in groups if len(g.seeds) > 1]


def print_pooled(runs: list[Run], n: int, *, with_start: bool = False) -> None:
    """A row per group of runs that differ only in their seeds: the seeds' mean pass@1 against
    the start's, tested as the studies pool seeds (``stats.crossed``: seeds and tasks both
    random, each seed's per-task differences from the start's shares)."""
    for label, seeds, start in pooled_runs(runs):
        tasks = sorted(start)
        mean = {t: sum(shares[t] for shares in seeds) / len(seeds) for t in tasks}
        result = crossed(np.array([[shares[t] - start[t] for t in tasks] for shares in seeds]))
        tried = f"{label or '(base)'}, {len(seeds)} seeds pooled"
        print(difference_row(tried, mean, start, n, with_start=with_start, result=result))


if __name__ == "__main__":
    main()
