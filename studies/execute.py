"""Running a study: its training steps, then its runs, each an ordinary checkpoint folder or run
directory under the study's folder, once per seed where the study has seeds. Running it again
does only what is missing:

- a training step is finished when every role's checkpoint has its manifest (written last);
  an unfinished one resumes from its last saved step (training's own resume); each step trains
  in a process of its own, whose memory is returned when it ends;
- a run resumes like `corebench run` (finished samples are kept, the rest is done).

Each folder's name carries a hash of what decides its contents (``NAME-HASH``; the seed is one
of the settings), so a changed entry gets a fresh folder and is re-run; nothing made under the
old settings is mixed in. What each finished step and row leaves is exported as evidence
(``evidence.py``) as soon as it is done; the report is built from that alone.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corebench.harness.config import RESULTS_DB
from corebench.harness.errors import CorebenchError
from corebench.harness.runner import Runner
from corebench.training.dispatch import drop_resume_states, finished_checkpoints
from corebench.training.dispatch import train as run_training
from corebench.training.settings import TrainSettings, load_settings

from . import evidence
from .spec import RunEntry, Study

Say = Callable[[str], None]


@dataclass(frozen=True)
class Layout:
    """Where a study keeps its steps (``study`` as run for a seed: ``Study.for_seed``)."""

    root: Path

    def checkpoints(self, study: Study, step_name: str) -> Path:
        step = next(t for t in study.train if t.name == step_name)
        return self.root / "checkpoints" / f"{step.name}-{study.train_key(step)}"

    def run_dir(self, study: Study, run: RunEntry) -> Path:
        return self.root / "runs" / f"{run.name}-{study.run_key(run)}"

    def report(self, suffix: str) -> Path:
        return self.root / f"report.{suffix}"


PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent ends
# looked up once, here: a subprocess's preexec_fn runs between fork and exec, where loading a
# library is not safe in a process with threads
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def end_with_parent(parent: int | None = None) -> None:
    """Ask the kernel (Linux) for SIGTERM when this process's parent ends, a warning where it
    refuses; with ``parent`` (the pid that started this process), exit at once where it is
    already gone. The request survives ``exec``, so ``functools.partial(end_with_parent,
    os.getpid())`` is a ``subprocess`` ``preexec_fn`` too. It reaches this process only: its own
    children (sandboxed programs, each under its limits) are not tied to it."""
    if _PRCTL is not None and _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        warnings.warn(
            f"prctl(PR_SET_PDEATHSIG) failed ({os.strerror(ctypes.get_errno())}): this "
            "process keeps running if its parent is killed",
            stacklevel=1,
        )
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def _tied_to(parent: int, target: Callable[..., object], args: tuple) -> None:
    """``target(*args)`` in a child that ends when ``parent`` does: on Linux the kernel sends
    it SIGTERM then; a child whose parent is already gone exits at once."""
    end_with_parent(parent)
    target(*args)


def in_child(target: Callable[..., object], *args: object) -> int | None:
    """Run ``target(*args)`` in a fresh (spawned) process and wait for it; its exit code. On
    Linux the child does not outlive the study's process: stopping the study (``kill PID``)
    stops it."""
    child = multiprocessing.get_context("spawn").Process(
        target=_tied_to, args=(os.getpid(), target, args)
    )
    child.start()
    child.join()
    return child.exitcode


def train_in_child(settings: TrainSettings) -> None:
    """Train in a fresh process, so that what training holds (models, optimizer state, the
    trainer's caches: gigabytes that outlive the trainer) is returned when it ends, before the
    next step or the runs (one process for a whole study grew past 20 GiB)."""
    exitcode = in_child(run_training, settings)
    if exitcode != 0:
        raise CorebenchError(
            f"training step {settings.method} -> {settings.out} failed (exit code "
            f"{exitcode}); its output is above, and running the study again resumes it"
        )


def seeded_studies(study: Study) -> list[tuple[int | None, Study]]:
    """(seed, the study as run for it) for each of the study's seeds; (None, study) without."""
    if not study.header.seeds:
        return [(None, study)]
    return [(seed, study.for_seed(seed)) for seed in study.header.seeds]


def run_study(
    study: Study,
    layout: Layout,
    *,
    data_dir: Path | None = None,
    say: Say | None = None,
) -> None:
    """Train what is missing, then run what is missing, seed by seed, exporting each finished
    step's and row's evidence into the study's folder."""
    say = say or (lambda text: print(text, file=sys.stderr))
    entries = {r.name: r for r in study.runs}
    done_once: set[str] = set()  # rows run once (unseeded), done under the first seed
    carried = carried_seeds(study, layout)
    if carried:
        refuse_to_retrain_under_kept_rows(study, layout, carried)
    for seed, seeded in seeded_studies(study):
        if seed in carried:
            # a seed finished in an earlier start whose working folders are gone (a study carried
            # over sessions by its committed evidence): its rows stand; nothing is retrained
            say(f"seed {seed}: every row's evidence is in {layout.root}, from an earlier start")
            done_once.update(r.name for r in seeded.runs if not study.seeded(r))
            continue
        checkpoints: dict[str, dict[str, Path]] = {}
        for step in seeded.train:
            out = layout.checkpoints(seeded, step.name)
            settings = load_settings(
                step.method,
                None,
                **{**seeded.train_settings(step, checkpoints), "out": str(out)},
                **(
                    {"data_dir": str(data_dir)}
                    if data_dir and "data_dir" not in step.settings
                    else {}
                ),
            )
            once = not study.seeded_step(step.name)  # trained once for all seeds
            label = step.name + ("" if once else f" seed {seed}")
            done = finished_checkpoints(settings)
            if done is None:
                say(f"train {label} ({step.method}) -> {out}")
                train_in_child(settings)
                done = finished_checkpoints(settings)
                assert done is not None, f"training {label} left no manifests in {out}"
            else:
                say(f"train {label}: done ({out})")
            # a finished step is never resumed (changed settings train in a folder of their own)
            drop_resume_states(out)
            checkpoints[step.name] = done
            step_seed = None if once else seed
            # a step trained once, trained again here: the skipped seeds' rows came from the
            # earlier training, whose record therefore stays
            evidence.export_training(
                layout.root, step.name, step_seed, done, keep_earlier=bool(carried) and once
            )
        for run in seeded.runs:
            row_seed = seed if study.seeded(run) else None
            if row_seed is None and run.name in done_once:
                continue
            done_once.add(run.name)
            run_dir = layout.run_dir(seeded, run)
            config = seeded.config(run, checkpoints)
            runner = Runner(
                config,
                run_dir,
                data_dir=data_dir,
                repeats=study.header.repeats,
                all_tests=True,  # test pass rates need every test judged
            )
            label = run.name + ("" if row_seed is None else f" seed {row_seed}")
            say(f"run {label} ({config.system}, {config.model}) -> {run_dir}")
            outcome = runner.run()  # with nothing left, only a pending measurement phase runs
            say(
                f"run {label}: {outcome.completed} new samples, {outcome.already_done} already done"
            )
            entry = entries[run.name].model_dump(exclude={"name"})
            entry["seed"] = row_seed if row_seed is not None else entry["seed"]
            evidence.export_run(
                layout.root, run.name, row_seed, run_dir, entry, data_dir, seeded.run_key(run)
            )


def carried_seeds(study: Study, layout: Layout) -> set[int]:
    """The seeds whose rows (a seed's own, and the first seed's the rows run once) all have
    evidence of their current version in the folder and no working folder here: run in an
    earlier start, on another machine. Decided before anything trains."""
    found = set()
    for index, (seed, seeded) in enumerate(seeded_studies(study)):
        rows = [(r, seed) for r in seeded.runs if study.seeded(r)]
        rows += [(r, None) for r in seeded.runs if not study.seeded(r) and index == 0]
        if seed is not None and rows and all(exported_elsewhere(seeded, layout, *r) for r in rows):
            found.add(seed)
    return found


def refuse_to_retrain_under_kept_rows(study: Study, layout: Layout, carried: set[int]) -> None:
    """The rows run once are run under the first seed: carried with it, they stay as the
    earlier start made them. A step they come from (directly or through other steps) that must
    be trained again for the seeds still to run would pair those seeds with a second training
    of it: refused, before anything trains."""
    first, seeded = seeded_studies(study)[0]
    if first not in carried or not set(study.header.seeds) - carried:
        return  # the rows run once are run again, or no seed is left to train
    kept = {r.name: study.steps_behind(r) for r in study.runs if not study.seeded(r)}
    for step in sorted(set().union(*kept.values())):
        out = layout.checkpoints(seeded, step)  # a step a row run once uses: trained once
        if not out.exists():  # to be trained again (a folder here resumes its own training)
            rows = ", ".join(name for name, steps in kept.items() if step in steps)
            raise CorebenchError(
                f"step {step!r} was trained in an earlier start whose checkpoints are not in "
                f"{out}, and the rows run once from it ({rows}) are kept from that start: the "
                "seeds still to run would be compared with them from a second training. Copy "
                "that start's checkpoints folder in, or run the study in a new folder"
            )


def exported_elsewhere(seeded: Study, layout: Layout, run: RunEntry, seed: int | None) -> bool:
    """Whether a row (``seeded``: the study as run for its seed) has evidence of its current
    version in the study's folder but no working folder here: it was run in another start."""
    if layout.run_dir(seeded, run).exists():
        return False  # run here: resumed and exported as usual
    return is_current(evidence.read_row(layout.root, run.name, seed), seeded.run_key(run))


def is_current(found: dict | None, key: str) -> bool:
    """Whether a row's exported evidence (``evidence.read_row``) is of its version ``key``."""
    return found is not None and found["settings"].get("run_key") == key


def export_missing(study: Study, layout: Layout, data_dir: Path | None) -> list[str]:
    """Export the evidence of rows that have a finished run directory but no exported files (a
    folder from before the evidence files), or whose files came from another version of the row
    (their ``run_key`` differs); returns the rows still missing (``NAME[ seed S]``, marked
    ``stale`` where old evidence is there but the row as the study now declares it never ran)."""
    missing = []
    for seed, seeded in seeded_studies(study):
        for run in seeded.runs:
            row_seed = seed if study.seeded(run) else None
            if row_seed is None and study.header.seeds and seed != study.header.seeds[0]:
                continue  # a row run once: under the first seed
            key = seeded.run_key(run)
            found = evidence.read_row(layout.root, run.name, row_seed)
            if is_current(found, key):
                continue
            run_dir = layout.run_dir(seeded, run)
            if (run_dir / RESULTS_DB).exists():
                entry = next(r for r in study.runs if r.name == run.name).model_dump(
                    exclude={"name"}
                )
                if row_seed is not None:
                    entry["seed"] = row_seed
                try:
                    evidence.export_run(
                        layout.root, run.name, row_seed, run_dir, entry, data_dir, key
                    )
                    continue
                except evidence.UnfinishedRow:
                    why = " (unfinished)"
            else:
                why = " (stale: the row changed since)" if found else ""
            missing.append(run.name + ("" if row_seed is None else f" seed {row_seed}") + why)
    return missing
