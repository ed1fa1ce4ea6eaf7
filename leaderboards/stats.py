"""The statistics leaderboards and study reports show, from scipy and statsmodels: an interval for
a row's score, and for two rows on their shared tasks a paired difference with its interval and
p-values. Tasks are the unit that is resampled (samples of one task are not independent).
Seeds are fixed: the same runs give the same numbers."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from corebench.harness.config import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED

ALPHA = 0.05  # a difference is "distinguishable from noise" when p < ALPHA (two-sided)


def interval(per_task: np.ndarray) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of the mean of per-task scores, resampling tasks."""
    values = np.asarray(per_task, dtype=float)
    if len(values) == 0:
        return math.nan, math.nan
    if len(values) == 1 or np.all(values == values[0]):
        return float(values.mean()), float(values.mean())
    result = stats.bootstrap(
        (values,),
        np.mean,
        n_resamples=BOOTSTRAP_RESAMPLES,
        method="percentile",
        random_state=BOOTSTRAP_SEED,
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


@dataclass(frozen=True)
class Paired:
    """Row a minus row b on the tasks both have."""

    tasks: int
    difference: float
    low: float
    high: float
    p_bootstrap: float  # two-sided, from the paired bootstrap distribution of the difference
    p_mcnemar: float | None  # exact McNemar test, when both rows have one sample per task

    @property
    def distinguishable(self) -> bool:
        p = self.p_mcnemar if self.p_mcnemar is not None else self.p_bootstrap
        return p < ALPHA


def paired(a: np.ndarray, b: np.ndarray, binary: bool = False) -> Paired:
    """Paired comparison of per-task scores ``a`` and ``b`` (same task order). ``binary``: each
    score is one sample's pass (0 or 1), so the exact McNemar test applies."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    differences = a - b
    mean = float(differences.mean()) if len(differences) else math.nan
    if len(differences) < 2 or np.all(differences == differences[0]):
        p = 1.0 if not len(differences) or differences[0] == 0 else 0.0
        low = high = mean
    else:
        result = stats.bootstrap(
            (a, b),
            lambda x, y, axis: np.mean(x - y, axis=axis),
            paired=True,
            vectorized=True,
            n_resamples=BOOTSTRAP_RESAMPLES,
            method="percentile",
            random_state=BOOTSTRAP_SEED,
        )
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        draws = result.bootstrap_distribution
        p = min(1.0, 2 * min(float(np.mean(draws <= 0)), float(np.mean(draws >= 0))))
    return Paired(len(differences), mean, low, high, p, mcnemar(a, b) if binary else None)


def mcnemar(a: np.ndarray, b: np.ndarray) -> float:
    """Exact McNemar p-value for paired pass/fail outcomes (only discordant tasks count)."""
    from statsmodels.stats.contingency_tables import mcnemar as test

    a, b = np.asarray(a) > 0.5, np.asarray(b) > 0.5
    table = [[int(np.sum(a & b)), int(np.sum(a & ~b))], [int(np.sum(~a & b)), int(np.sum(~a & ~b))]]
    if table[0][1] + table[1][0] == 0:
        return 1.0
    return float(test(table, exact=True).pvalue)
