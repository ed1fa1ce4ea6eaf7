"""Training launched as several processes (``accelerate launch --num_processes N``): one process
writes the files every process would otherwise write, and rewards are gathered from all."""

from __future__ import annotations

import os


def world_size() -> int:
    """Processes training together (1 without a launcher)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    """The process that writes checkpoints' extra files, manifests and reward logs (the
    launcher's rank 0; the only process without a launcher). Read from the launcher's environment,
    so it is known before any trainer starts the process group."""
    return int(os.environ.get("RANK", "0")) == 0


def gather_rewards(values: list[float]) -> list[float]:
    """Every process's rewards of this step, in process order (each process scores its own
    completions; a trainer calls its reward function on every process at the same point)."""
    if world_size() == 1:
        return values
    from accelerate.utils import gather_object

    return [float(v) for v in gather_object(list(values))]


def wait_for_everyone() -> None:
    """Every process waits here until all have arrived: after the main process writes files
    that the others read next (a phase's checkpoint, which the next phase loads)."""
    if world_size() > 1:
        from accelerate import PartialState

        PartialState().wait_for_everyone()
