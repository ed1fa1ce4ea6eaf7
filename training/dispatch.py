"""``corebench train METHOD``: dispatch to the method's trainer and report where checkpoints went."""

from __future__ import annotations

import shlex
from pathlib import Path

from .settings import EVALUATE_WITH, TrainSettings


def train(settings: TrainSettings) -> dict[str, Path]:
    """Run one training method; returns the checkpoint directory of each role."""
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
        f"--system {EVALUATE_WITH[settings.method]}",
    ]
    if settings.method == "magrpo" and settings.turns > 1:
        parts.append(f"-O turns={settings.turns}")
    parts.append(f"--model {shlex.quote(model_spec(checkpoints))}")
    return " ".join(parts)
