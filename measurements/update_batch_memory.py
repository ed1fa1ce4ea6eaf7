"""How much peak memory ``update_batch`` saves a GRPO-family training run (grpo, pta, corecode):
the same run once per ``update_batch``, each in a process of its own, its peak resident memory
taken by the kernel (``wait4``'s ``ru_maxrss``, read from outside the training's interpreter),
its step times from the run's ``timing.txt`` phase by phase, and what should not change: the
rewards of every completion and the validation rewards (the same completions score the same),
and each phase's median gradient norm (the same update, to rounding).

    COREBENCH_DATA_DIR=../shared/data WANDB_MODE=disabled HF_HUB_OFFLINE=1 \\
    .venv/bin/python measurements/update_batch_memory.py corecode --config studies/tuning/corecode.toml \\
        --set planner_model=hf:PLANNER --set coder_model=hf:CODER --set bf16=false --set lora_rank=1 \\
        --set steps=2 --set rollout_dtype=float32 --planner-phase RUN/round1/planner --batches 16 8 4

``--planner-phase`` reuses a finished CoRe-Code planner phase (its ``model`` and ``phase.json``,
not its trainer states), so that only the coder phase trains. Settings not given are the config
file's. The runs are kept under ``--out`` (a temporary folder if not given).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from corebench.harness.config import MANIFEST_NAME
from corebench.training.corecode import PHASE_RECORD
from corebench.training.progress import read_rows

CLI = [sys.executable, "-m", "corebench.harness.cli"]
ROLE_ORDER = {"planner": 0, "coder": 1}  # a CoRe-Code round trains its planner first

# A small process that runs the command and reports the kernel's account of it. The command is
# not forked from this script: a process's ``ru_maxrss`` also holds the peak of the process it
# was forked from, up to its ``exec`` (Linux keeps the old image's high-water mark), so forked
# from a large caller it would read at least that caller's peak.
LAUNCHER = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
"""


def peak_rss_kb(command: list[str], log: Path) -> tuple[int, int]:
    """Run ``command`` (output to ``log``); its exit status and peak resident memory in KiB as
    the kernel accounted it (the largest of the process and the children it waited for),
    through a small launcher of its own (``LAUNCHER``)."""
    report = log.with_suffix(".peak")
    with log.open("w") as out:
        launched = subprocess.run([sys.executable, "-c", LAUNCHER, str(report), *command],
                                  stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    if launched.returncode or not report.exists():
        raise SystemExit(f"the launcher failed ({launched.returncode}); see {log}")
    status, peak = report.read_text().split()
    return int(status), int(peak)


def phases(run: Path) -> list[Path]:
    """The run's folders with a ``timing.txt``, in the order they trained (a CoRe-Code run's
    ``roundN/planner`` then ``roundN/coder``; a one-phase run's own folder)."""

    def order(folder: Path) -> tuple[int, int]:
        rounds = re.findall(r"round(\d+)", str(folder.relative_to(run)))
        return (int(rounds[-1]) if rounds else 0, ROLE_ORDER.get(folder.name, 0))

    return sorted((t.parent for t in run.rglob("timing.txt")), key=order)


def logged(run: Path) -> str:
    """The run's rewards and validation rewards, phase by phase, as one text to compare."""
    names = ("rewards.txt", "validation.txt")
    return "\n".join((f / n).read_text() for f in phases(run) for n in names if (f / n).exists())


def grad_norm(phase: Path) -> float | None:
    """A finished phase's median gradient norm: from its record (a CoRe-Code phase) or from
    the manifest of the model it saved (a one-phase run)."""
    for record in (phase / PHASE_RECORD, phase / "model" / MANIFEST_NAME):
        if record.exists():
            return json.loads(record.read_text()).get("diagnostics", {}).get("grad_norm_median")
    return None


def label(phase: Path, run: Path) -> str:
    """A phase's name in the table: its folder in the run (``run`` for a one-phase run)."""
    return "run" if phase == run else str(phase.relative_to(run))


def train(method: str, out: Path, args: argparse.Namespace, batch: int) -> dict:
    """One training run with ``update_batch = batch`` in ``out``: its exit status, peak, step
    times and gradient norms by phase, and its logged rewards."""
    out.mkdir(parents=True)
    if args.planner_phase:
        phase = out / "round1" / "planner"
        phase.mkdir(parents=True)
        for name in ("model", PHASE_RECORD):  # what marks a phase as finished (corecode.py)
            (phase / name).symlink_to(args.planner_phase.resolve() / name)
    command = [*CLI, "train", method, "--out", str(out)]
    if args.config:
        command += ["--config", str(args.config)]
    for item in [*args.set, f"update_batch={batch}"]:
        command += ["--set", item]
    log = out.with_suffix(".log")
    status, peak = peak_rss_kb(command, log)
    if status:
        tail = "\n".join(log.read_text().splitlines()[-20:])
        print(f"update_batch {batch}: exit {status} ({log})\n{tail}", file=sys.stderr)
    trained = phases(out)  # a reused planner phase has no timing.txt here
    return {
        "status": status,
        "peak_kb": peak,
        "steps": {label(f, out): read_rows(f / "timing.txt") for f in trained},
        "grad_norms": {label(f, out): grad_norm(f) for f in trained},
        "logged": logged(out),
    }


def report(method: str, runs: dict[int, dict]) -> None:
    print(f"{method}, one run per update_batch; peak resident memory from the kernel (wait4)")
    print(f"{'update_batch':>12}{'exit':>6}{'peak GiB':>10}  phase: step seconds (generation, "
          "reward, update), median gradient norm")  # fmt: skip
    for batch, run in runs.items():
        parts = []
        for phase, rows in run["steps"].items():
            steps = ", ".join(
                f"{r[3]:.1f} ({r[1]:.1f}, {r[2]:.1f}, {r[3] - r[1] - r[2]:.1f})" for r in rows
            )
            norm = run["grad_norms"].get(phase)
            parts.append(f"{phase}: {steps}" + (f", {norm:.6g}" if norm is not None else ""))
        print(f"{batch:>12}{run['status']:>6}{run['peak_kb'] / 2**20:>10.2f}  {'; '.join(parts)}")
    if any(run["status"] for run in runs.values()):
        raise SystemExit("a run failed (its log's end is above)")
    texts = {run["logged"] for run in runs.values()}
    print("rewards and validation rewards: " + (
        "the same in every run" if len(texts) == 1 else f"{len(texts)} different logs"))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("method", choices=["grpo", "pta", "corecode"])
    parser.add_argument("--config", type=Path)
    parser.add_argument("--set", action="append", default=[], help="a setting, KEY=VALUE")
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 8, 4],
                        help="update_batch values (one equal to a step's completions: the whole update)")  # fmt: skip
    parser.add_argument("--planner-phase", type=Path,
                        help="corecode: a finished planner phase to reuse (only the coder trains)")  # fmt: skip
    parser.add_argument("--out", type=Path, help="where to keep the runs (new folder)")
    args = parser.parse_args()
    if args.planner_phase:
        if args.method != "corecode":
            parser.error("--planner-phase is for corecode")
        if not ((args.planner_phase / "model" / "config.json").exists()
                and (args.planner_phase / PHASE_RECORD).exists()):  # fmt: skip
            parser.error(f"{args.planner_phase} is not a finished phase (model/, {PHASE_RECORD})")
    if len(set(args.batches)) != len(args.batches):
        parser.error("--batches: each value once")
    with tempfile.TemporaryDirectory() as folder:
        root = args.out or Path(folder)
        runs = {b: train(args.method, root / f"ub{b}", args, b) for b in args.batches}
    report(args.method, runs)


if __name__ == "__main__":
    main()
