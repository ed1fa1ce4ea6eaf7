"""The manifest written next to each trained checkpoint, and the reward-curve plot."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from corebench.harness.config import MANIFEST_NAME
from corebench.harness.metadata import environment_metadata

from .contamination import excluded_by
from .data import TrainData
from .distributed import world_size
from .rollouts import recorded_rollout_dtype
from .settings import TrainSettings


def data_fingerprint(data: TrainData) -> str:
    """sha256 over the training tasks as the policy and the rewards see them (expected outputs by
    the repr of their canonical form: some are dicts keyed by tuples, which JSON cannot hold, and
    sets, whose order changes with the interpreter's hash seed)."""
    from .contamination import canonical

    digest = hashlib.sha256()
    for item in data.tasks:
        suite = item.suite
        expected = repr(canonical(suite.expected))
        seen = [item.task.task_id, item.task.prompt, suite.content_key, expected]
        digest.update(json.dumps(seen).encode())
    return digest.hexdigest()


def write_manifest(
    checkpoint: Path,
    *,
    settings: TrainSettings,
    role: str,
    base_model: str,
    data: TrainData,
    steps: int,
    reward_curve: list[dict[str, float]],
    extra: dict[str, Any] | None = None,
) -> Path:
    manifest = {
        "method": settings.method,
        "role": role,
        "base_model": base_model,
        "steps": steps,
        "data": {
            "source": data.source,
            "tasks": len(data.tasks),
            "sha256": data_fingerprint(data),
            "overlaps_found": len({o.train_id for o in data.overlaps}),
            "excluded_by": excluded_by(data.overlaps),
            "overlaps_kept": settings.allow_overlap,
            "validation_tasks": [t.task.task_id for t in data.validation],
            "filter": data.filtered,
            "training_tasks": [t.task.task_id for t in data.tasks],  # after the prompt filter
        },
        "settings": settings.model_dump(),
        "processes": world_size(),  # training processes (a multi-process launch: more than 1)
        # the type its engine rollouts and prompt filter decoded in (None: neither ran)
        "rollout_dtype": recorded_rollout_dtype(settings.out),
        "reward_curve": reward_curve,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "corebench_version": environment_metadata().get("corebench_version"),
        **(extra or {}),
    }
    path = Path(checkpoint) / MANIFEST_NAME
    path.write_text(json.dumps(manifest, indent=2, default=str))
    return path


def plot_reward_curve(curves: dict[str, list[dict[str, float]]], path: Path, title: str) -> None:
    """Mean reward per step (and a moving average) for each curve, as SVG or PNG."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 3.6))
    ax = fig.add_subplot()
    for label, curve in curves.items():
        steps = [p["step"] for p in curve]
        rewards = [p["reward"] for p in curve]
        line = ax.plot(steps, rewards, alpha=0.35, linewidth=1)[0]
        window = max(1, len(rewards) // 10)
        smooth = [
            sum(rewards[max(0, i - window + 1) : i + 1])
            / len(rewards[max(0, i - window + 1) : i + 1])
            for i in range(len(rewards))
        ]
        ax.plot(steps, smooth, color=line.get_color(), label=f"{label} ({window}-step mean)")
    ax.set_xlabel("step")
    ax.set_ylabel("mean reward")
    ax.set_title(title)
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(
        path, bbox_inches="tight", metadata={"Date": None} if path.suffix == ".svg" else None
    )
