"""What a training run logs while it runs, beside its rewards: where each step's time goes
(``timing.txt``: generation, sandbox reward, the rest of the step: the update) and the mean
reward of greedy completions on held-out validation tasks every few steps (``validation.txt``),
so that a run that is not learning shows it before it ends. Both survive a resumed run: lines
after the step it resumes from are dropped and given again."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .distributed import is_main_process


class StepLog:
    """Lines ``STEP VALUE...`` appended to a file, one per step; a resumed run keeps those
    before the step it resumes from."""

    def __init__(self, path: Path, resume_step: int = 0):
        self.path = Path(path)
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        kept = [x for x in lines if x.strip() and int(float(x.split()[0])) < resume_step]
        if is_main_process():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("".join(f"{x}\n" for x in kept))

    def add(self, step: int, *values: float) -> None:
        if is_main_process():
            with open(self.path, "a") as f:
                f.write(" ".join([str(step), *(f"{v:.6g}" for v in values)]) + "\n")

    def rows(self) -> list[list[float]]:
        return read_rows(self.path)


def read_rows(path: Path) -> list[list[float]]:
    """A step log's lines as numbers (none where there is no file), for reading a run's logs
    without opening them as a ``StepLog`` (which rewrites the file)."""
    path = Path(path)
    if not path.exists():
        return []
    return [[float(v) for v in x.split()] for x in path.read_text().splitlines() if x.strip()]


class StepClock:
    """Seconds per step spent generating and judging rewards; the rest of the step is the
    update (forward, backward, optimizer). ``timing.txt``: STEP generation reward total tokens
    (the completion tokens generated)."""

    PARTS = ("generation", "reward", "validation")  # validation is left out of the step

    def __init__(self, path: Path, resume_step: int = 0):
        self.log = StepLog(path, resume_step)
        self.spent = dict.fromkeys(self.PARTS, 0.0)
        self.tokens = 0
        self.started: float | None = None

    def begin(self) -> None:
        self.spent = dict.fromkeys(self.PARTS, 0.0)
        self.tokens = 0
        self.started = time.perf_counter()

    def add(self, part: str, seconds: float) -> None:
        self.spent[part] += seconds

    def generated(self, completions: list[list[int]]) -> None:
        """Count a rollout batch's completion tokens."""
        self.tokens += sum(len(c) for c in completions)

    def end(self, step: int) -> None:
        if self.started is None:
            return
        total = time.perf_counter() - self.started - self.spent["validation"]
        self.log.add(step, self.spent["generation"], self.spent["reward"], total, self.tokens)
        self.started = None

    def timed(self, part: str, work: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        try:
            return work()
        finally:
            self.add(part, time.perf_counter() - started)


def timing_summary(rows: list[list[float]]) -> dict[str, float]:
    """Mean seconds per step: generation, reward, update (the rest of the step), total (means,
    not medians: a trainer that updates every other step puts its update in half the steps)."""
    if not rows:
        return {}
    generation = [r[1] for r in rows]
    reward = [r[2] for r in rows]
    total = [r[3] for r in rows]
    update = [t - g - w for g, w, t in zip(generation, reward, total, strict=True)]
    tokens = sum(r[4] for r in rows if len(r) > 4)
    return {
        "steps": len(rows),
        "generation_s": statistics.fmean(generation),
        "reward_s": statistics.fmean(reward),
        "update_s": statistics.fmean(update),
        "total_s": statistics.fmean(total),
        "tokens_per_s": tokens / sum(generation) if sum(generation) else 0.0,
    }


def validation_curve(rows: list[list[float]]) -> list[dict[str, float]]:
    """``validation.txt`` as the manifest keeps it: the step and the mean validation reward."""
    return [{"step": int(r[0]), "reward": r[1]} for r in rows]
