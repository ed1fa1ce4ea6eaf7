"""Whether a training run could learn, from what it logged: group-relative methods learn only from
groups whose rewards differ (equal rewards give zero advantages and no gradient), so a study
report shows, per trained checkpoint, how many groups had reward variance, the mean absolute
advantage, the gradient norms, and whether the reward curve rose (Kendall's tau of the mean
reward per step against the step, with its p-value from scipy)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats


def diagnose(
    rewards: list[float], group: int, per_step: int, grad_norms: list[float]
) -> dict[str, Any]:
    """``rewards`` in the order given, ``group`` completions per group (consecutive, as both
    trainers score them: a prompt's completions together), ``per_step`` rewards per step."""
    values = np.asarray(rewards, dtype=float)
    groups = values[: len(values) // group * group].reshape(-1, group) if group else values[:0]
    spread = groups.std(axis=1) if len(groups) else np.zeros(0)
    advantages = np.abs(groups - groups.mean(axis=1, keepdims=True)) if len(groups) else groups
    steps = [
        float(values[i : i + per_step].mean()) for i in range(0, len(values), max(1, per_step))
    ]
    quarter = max(1, len(steps) // 4)
    out: dict[str, Any] = {
        "steps": len(steps),
        "groups": len(groups),
        "groups_with_variance": float(np.mean(spread > 0)) if len(groups) else math.nan,
        "mean_abs_advantage": float(advantages.mean()) if advantages.size else math.nan,
        "reward_first_quarter": float(np.mean(steps[:quarter])) if steps else math.nan,
        "reward_last_quarter": float(np.mean(steps[-quarter:])) if steps else math.nan,
        "grad_norm_median": float(np.median(grad_norms)) if grad_norms else math.nan,
        "grad_norms": len(grad_norms),
    }
    out.update(trend(steps))
    return out


def trend(curve: list[float]) -> dict[str, float]:
    """Kendall's tau of ``curve`` against its index and the two-sided p (scipy; nan with fewer
    than three points or a flat curve)."""
    if len(curve) < 3 or len(set(curve)) == 1:
        return {"trend_tau": math.nan, "trend_p": math.nan}
    result = stats.kendalltau(np.arange(len(curve)), curve)
    return {"trend_tau": float(result.statistic), "trend_p": float(result.pvalue)}
