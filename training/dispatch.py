"""``corebench train METHOD``: dispatch to the method's trainer and report where checkpoints went."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from corebench.harness.config import ENV_EXECUTOR, ENV_JUDGE_URL, MANIFEST_NAME
from corebench.harness.decoding.precision import native_bfloat16

from .settings import TrainSettings, evaluated_with

EMULATED_BF16 = (
    "note: bf16 = true on a CPU without native bfloat16 (AVX512-BF16 or AMX): torch emulates "
    "it (on a 2-core AVX-512 CPU a training pass took 3.7x as long as in float32, bf16 = false; "
    "measurements/cpu_precision.py measures this one)"
)


def train(settings: TrainSettings) -> dict[str, Path]:
    """Run one training method; returns the checkpoint directory of each role."""
    with judging_at(settings.judge_url, settings.executor):
        return _train(settings)


@contextlib.contextmanager
def judging_at(url: str | None, executor: str | None = None) -> Iterator[None]:
    """Rewards judge on the service at ``url``, or where ``executor`` says (when given), while
    training runs."""
    given = {ENV_JUDGE_URL: url, ENV_EXECUTOR: executor}
    before = {name: os.environ.get(name) for name in given}
    os.environ.update({name: value for name, value in given.items() if value})
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _train(settings: TrainSettings) -> dict[str, Path]:
    if settings.bf16 and settings.use_cpu and not native_bfloat16("cpu"):
        print(EMULATED_BF16, file=sys.stderr)
    if settings.method in ("grpo", "pta"):
        from .grpo import train_grpo

        return train_grpo(settings)
    if settings.method == "magrpo":
        from .magrpo import train_magrpo

        return train_magrpo(settings)
    if settings.method == "corecode":
        from .corecode import train_corecode

        return train_corecode(settings)
    from .sft import train_sft

    return train_sft(settings)


def roles(settings: TrainSettings) -> tuple[str, ...]:
    """The roles a method trains, one checkpoint folder each under ``settings.out``."""
    if settings.method in ("grpo", "pta"):
        return ("model",)
    if settings.method == "magrpo":
        return ("helper", "main")
    if settings.method == "sft":
        return tuple(settings.sft_roles)
    return ("planner", "coder")


def finished_checkpoints(settings: TrainSettings) -> dict[str, Path] | None:
    """Each role's final checkpoint when training already finished (its manifest is written
    last), else None."""
    folders = {role: Path(settings.out) / role for role in roles(settings)}
    if all((folder / MANIFEST_NAME).exists() for folder in folders.values()):
        return folders
    return None


# where each trainer keeps the states a killed run resumes from (``checkpoint-<step>`` folders):
# GRPO and PTA, MAGRPO (comlrl), SFT per role, CoRe-Code per round and role
RESUME_STATES = ("trainer", "trainer-state", "*-trainer", "round*/*/trainer")


def drop_resume_states(out: Path) -> int:
    """Delete the resume states of the finished run in ``out`` (weights, optimizer and scheduler
    state: three times the model's size per trainer); returns how many. Only the trainers' own
    folders are looked in, and only what lies inside ``out`` once links are resolved; role
    checkpoints, logs and CoRe-Code's phase models stay."""
    inside = out.resolve()
    states = {
        state
        for folder in RESUME_STATES
        for state in out.glob(f"{folder}/checkpoint-*")
        if state.name.removeprefix("checkpoint-").isdigit()
        and state.is_dir()
        and not state.is_symlink()
        and state.resolve().is_relative_to(inside)
    }
    for state in states:
        shutil.rmtree(state)
    return len(states)


def model_spec(checkpoints: dict[str, Path]) -> str:
    """The `--model` value that evaluates these checkpoints."""
    if list(checkpoints) == ["model"]:
        return f"hf:{checkpoints['model']}"
    return ",".join(f"{role}=hf:{path}" for role, path in checkpoints.items())


def evaluate_command(settings: TrainSettings, checkpoints: dict[str, Path]) -> str:
    """The `corebench run` command that evaluates these checkpoints the way they were trained."""
    parts = [
        "corebench run",
        f"--bench {settings.benchmark}",
        f"--system {evaluated_with(settings.method, list(checkpoints))}",
    ]
    if settings.method == "magrpo" and settings.turns > 1:
        parts.append(f"-O turns={settings.turns}")
    parts.append(f"--model {shlex.quote(model_spec(checkpoints))}")
    return " ".join(parts)
