"""Running a study: its training steps, then its runs, each an ordinary checkpoint folder or run
directory under the study's folder. Running it again does only what is missing:

- a training step is finished when every role's checkpoint has its manifest (written last);
  an unfinished one resumes from its last saved step (training's own resume); each step trains
  in a process of its own, whose memory is returned when it ends;
- a run resumes like `corebench run` (finished samples are kept, the rest is done).

Each folder's name carries a hash of what decides its contents (``NAME-HASH``), so a changed
entry gets a fresh folder and is re-run; nothing made under the old settings is mixed in.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corebench.harness.errors import CorebenchError
from corebench.harness.runner import Runner
from corebench.training.dispatch import finished_checkpoints
from corebench.training.dispatch import train as run_training
from corebench.training.settings import TrainSettings, load_settings

from .spec import RunEntry, Study

Say = Callable[[str], None]


@dataclass(frozen=True)
class Layout:
    """Where a study keeps its steps."""

    root: Path

    def checkpoints(self, study: Study, step_name: str) -> Path:
        step = next(t for t in study.train if t.name == step_name)
        return self.root / "checkpoints" / f"{step.name}-{study.train_key(step)}"

    def run_dir(self, study: Study, run: RunEntry) -> Path:
        return self.root / "runs" / f"{run.name}-{study.run_key(run)}"

    def report(self, suffix: str) -> Path:
        return self.root / f"report.{suffix}"


def train_in_child(settings: TrainSettings) -> None:
    """Train in a fresh process, so that what training holds (models, optimizer state, the
    trainer's caches: gigabytes that outlive the trainer) is returned when it ends, before the
    next step or the runs (one process for a whole study grew past 20 GiB)."""
    child = multiprocessing.get_context("spawn").Process(target=run_training, args=(settings,))
    child.start()
    child.join()
    if child.exitcode != 0:
        raise CorebenchError(
            f"training step {settings.method} -> {settings.out} failed (exit code "
            f"{child.exitcode}); its output is above, and running the study again resumes it"
        )


def run_study(
    study: Study,
    layout: Layout,
    *,
    data_dir: Path | None = None,
    say: Say | None = None,
) -> dict[str, Path]:
    """Train what is missing, then run what is missing; returns each run's directory."""
    say = say or (lambda text: print(text, file=sys.stderr))
    checkpoints: dict[str, dict[str, Path]] = {}
    for step in study.train:
        out = layout.checkpoints(study, step.name)
        settings = load_settings(
            step.method,
            None,
            **{**study.train_settings(step, checkpoints), "out": str(out)},
            **({"data_dir": str(data_dir)} if data_dir and "data_dir" not in step.settings else {}),
        )
        done = finished_checkpoints(settings)
        if done is None:
            say(f"train {step.name} ({step.method}) -> {out}")
            train_in_child(settings)
            done = finished_checkpoints(settings)
            assert done is not None, f"training {step.name} left no manifests in {out}"
        else:
            say(f"train {step.name}: done ({out})")
        checkpoints[step.name] = done
    run_dirs = {}
    for run in study.runs:
        run_dir = layout.run_dir(study, run)
        config = study.config(run, checkpoints)
        runner = Runner(
            config,
            run_dir,
            data_dir=data_dir,
            repeats=study.header.repeats,
            all_tests=True,  # test pass rates need every test judged
        )
        say(f"run {run.name} ({config.system}, {config.model}) -> {run_dir}")
        outcome = runner.run()  # with nothing left, only a pending measurement phase runs
        say(f"run {run.name}: {outcome.completed} new samples, {outcome.already_done} already done")
        run_dirs[run.name] = run_dir
    return run_dirs
