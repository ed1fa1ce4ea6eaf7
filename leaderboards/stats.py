"""The statistics leaderboards and study reports show, from scipy and statsmodels.

- A row's pass@1 interval: Clopper–Pearson when every task's score is 0 or 1, else Wilson over
  tasks (``proportion_interval``).
- Two rows on their shared tasks (``paired``): the mean per-task difference, the exact paired
  sign-flip permutation test (exact McNemar when both rows have one sample per task; the two
  agree on such data), and the 95 % interval obtained by inverting the sign-flip test.
- A family of comparisons: Holm's step-down correction (``holm``, ``with_holm``); a difference is
  distinguishable when its Holm-adjusted p is below ``ALPHA``.

Tasks are the unit (samples of one task are not independent). Monte Carlo draws use a fixed seed:
the same runs give the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

ALPHA = 0.05  # two-sided; intervals are 1 - ALPHA, "distinguishable" is Holm-adjusted p < ALPHA
EXACT_MAX_TASKS = 16  # the sign-flip test enumerates all 2**n sign vectors up to this many tasks
MONTE_CARLO_RESAMPLES = 100_000  # beyond it: seeded random sign vectors (p resolves 1e-3 well)
PERMUTATION_SEED = 0
PERMUTATION_BATCH = 8192  # sign vectors per batch inside scipy (bounds memory)
BISECTION_STEPS = 50  # interval ends to about 2**-50


def proportion_interval(per_task: np.ndarray) -> tuple[float, float]:
    """95 % interval for the mean of per-task pass rates (nan, nan without tasks).

    Every score 0 or 1 (one sample per task, or all of a task's samples agree): exact
    Clopper–Pearson with count = tasks passed, nobs = tasks. Otherwise Wilson with nobs = tasks
    and count = sum of per-task pass rates: a rate in [0, 1] with mean p has variance at most
    p(1 - p), the binomial variance, so this is conservative. Both stay sensible at 0/n and n/n.
    """
    from statsmodels.stats.proportion import proportion_confint

    values = np.asarray(per_task, dtype=float)
    if not len(values):
        return math.nan, math.nan
    count = float(values.sum())
    if np.isin(values, (0.0, 1.0)).all():
        low, high = proportion_confint(round(count), len(values), alpha=ALPHA, method="beta")
    else:
        low, high = proportion_confint(count, len(values), alpha=ALPHA, method="wilson")
    return float(low), float(high)


def _mean(x: np.ndarray, axis: int) -> np.ndarray:
    return np.mean(x, axis=axis)


@dataclass(frozen=True)
class SignFlip:
    """The sign-flip null distribution of the mean of differences d, for any shift δ.

    For each sign vector s (all 2**n when exact, else seeded Monte Carlo draws) it keeps
    ``flipped`` = mean(d·s) and ``signs`` = mean(s). Testing "d - δ is symmetric about 0" uses
    T_s(δ) = mean((d - δ)·s) = flipped - δ·signs against the observed mean(d) - δ, so p(δ) is
    cheap for every δ. p(0) is scipy's ``permutation_test`` p-value (same draws, same rule).
    """

    observed: float  # mean(d)
    flipped: np.ndarray
    signs: np.ndarray
    exact: bool
    pvalue: float  # scipy's two-sided p at δ = 0

    @property
    def name(self) -> str:
        how = "exact" if self.exact else f"Monte Carlo, {len(self.flipped)}"
        return f"sign-flip permutation ({how})"

    def p_value(self, delta: float) -> float:
        """Two-sided p of the shift δ, by scipy's rule: 2·min(P(T ≤ t), P(T ≥ t)) capped at 1,
        ties within 100 ulp of t counted, and for Monte Carlo one added to count and total."""
        observed = self.observed - delta
        null = self.flipped - delta * self.signs
        gamma = abs(np.finfo(float).eps * 100 * observed)
        extra = 0 if self.exact else 1
        less = (np.count_nonzero(null <= observed + gamma) + extra) / (len(null) + extra)
        greater = (np.count_nonzero(null >= observed - gamma) + extra) / (len(null) + extra)
        return float(min(1.0, 2 * min(less, greater)))

    def interval(self, p_zero: float) -> tuple[float, float]:
        """The 1 - ALPHA interval for the mean difference: the shifts δ in [-1, 1] the sign-flip
        test does not reject, {δ : p(δ) ≥ ALPHA}. Each end is found by bisection (50 steps,
        rounded to 1e-10) between the mean (p = 1 there) and ±1, or ±1 itself when not rejected.
        ``p_zero`` is the reported p at δ = 0 (McNemar's on binary data) and decides the side of
        0, so 0 is inside exactly when p_zero ≥ ALPHA. With few tasks nothing is rejected
        ([-1, 1]; one task always). The shift model has one degenerate case: when every task's
        difference is the same value c on six or more tasks, every other δ is rejected and the
        interval is [c, c]."""
        return _snap(self._end(-1.0, p_zero)), _snap(self._end(1.0, p_zero))

    def _accepts(self, delta: float) -> bool:
        return self.p_value(delta) >= ALPHA

    def _end(self, bound: float, p_zero: float) -> float:
        mean = self.observed
        if min(mean, bound) < 0 < max(mean, bound):  # 0 lies on this side
            if p_zero < ALPHA:
                return self._bisect(mean, 0.0)
            return bound if self._accepts(bound) else self._bisect(0.0, bound)
        return bound if self._accepts(bound) else self._bisect(mean, bound)

    def _bisect(self, inside: float, outside: float) -> float:
        for _ in range(BISECTION_STEPS):
            middle = (inside + outside) / 2
            if self._accepts(middle):
                inside = middle
            else:
                outside = middle
        return inside


def _snap(value: float) -> float:
    """An interval end rounded to 1e-10 (bisection and tie tolerance leave ~1e-14), never -0.0."""
    return round(value, 10) + 0.0


def sign_flip(differences: np.ndarray) -> SignFlip:
    """The sign-flip test of the mean of ``differences``, ``scipy.stats.permutation_test``'s
    (``permutation_type="samples"``): exact up to ``EXACT_MAX_TASKS`` tasks, by scipy; else
    ``MONTE_CARLO_RESAMPLES`` seeded draws, scipy's own by ``monte_carlo_sign_flips``. A row of
    ones goes through the same sign vectors, so their mean(s) comes back with the null
    distribution."""
    d = np.asarray(differences, dtype=float)
    if len(d) == 1:  # scipy wants two observations; the two sign vectors give p = 1
        return SignFlip(float(d[0]), np.array([d[0], -d[0]]), np.array([1.0, -1.0]), True, 1.0)
    if len(d) > EXACT_MAX_TASKS:
        null = monte_carlo_sign_flips(d)
        flip = SignFlip(float(np.mean(d)), null[:, 0], null[:, 1], False, math.nan)
        return replace(flip, pvalue=flip.p_value(0.0))
    result = stats.permutation_test(
        (np.stack([d, np.ones_like(d)]),),
        _mean,
        permutation_type="samples",
        vectorized=True,
        n_resamples=2 ** len(d),
        batch=PERMUTATION_BATCH,
        axis=-1,
        rng=PERMUTATION_SEED,
    )
    null = result.null_distribution
    return SignFlip(
        float(result.statistic[0]), null[:, 0], null[:, 1], True, float(result.pvalue[0])
    )


def monte_carlo_sign_flips(d: np.ndarray) -> np.ndarray:
    """The null distribution ``scipy.stats.permutation_test`` draws for ``sign_flip`` beyond
    ``EXACT_MAX_TASKS`` tasks, the same numbers without its loop over tasks (about 3 s a call
    at 378 tasks, most of a study report's time): per batch, the same ``rng.permuted`` draw
    of each task's order of (d, -d) that scipy's one-sample "samples" test makes, the task's
    own sign where its first entry stays first; then the means over tasks, summed in scipy's
    memory order (tasks outermost). A row per draw: (mean(d·s), mean(s))."""
    rng = np.random.default_rng(PERMUTATION_SEED)
    n, batch = len(d), min(PERMUTATION_BATCH, MONTE_CARLO_RESAMPLES)
    order = np.tile(np.arange(2), (batch, n, 1))
    rows = np.stack([d, np.ones_like(d)]).T[:, None, :]  # (n, 1, 2)
    # scipy's layout, whose strides decide how the mean sums: per task, draw and row, the kept
    # entry beside the other (n, batch, 2, 2; the other is never read)
    layout = np.empty((n, batch, 2, 2))
    null = []
    for start in range(0, MONTE_CARLO_RESAMPLES, batch):
        take = min(batch, MONTE_CARLO_RESAMPLES - start)
        signs = 1.0 - 2.0 * rng.permuted(order, axis=-1)[:take, :, 0].T  # (n, take)
        kept = layout[:, :take, :, 0]
        np.multiply(signs[:, :, None], rows, out=kept)
        null.append(np.mean(kept.transpose(1, 2, 0), axis=-1))
    return np.concatenate(null)


def mcnemar(a: np.ndarray, b: np.ndarray) -> float:
    """Exact McNemar p: the two-sided binomial test (p = 1/2) on the discordant tasks; 1 if none."""
    a, b = np.asarray(a) > 0.5, np.asarray(b) > 0.5
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    if only_a + only_b == 0:
        return 1.0
    return float(stats.binomtest(only_a, only_a + only_b).pvalue)


@dataclass(frozen=True)
class Paired:
    """Row a minus row b on the tasks both have: mean difference, its interval (from the
    sign-flip test, unadjusted), the test's p, and the Holm-adjusted p within its family."""

    tasks: int
    difference: float
    low: float
    high: float
    p: float | None  # None: nothing to test (no shared tasks)
    test: str
    p_holm: float | None = None  # filled in by ``with_holm`` over the report's family
    metric: str = "pass@1"  # what was compared per task
    se: float = math.nan  # standard error of the difference (for its minimum detectable effect)
    df: float = 0.0  # its degrees of freedom

    @property
    def distinguishable(self) -> bool:
        return self.p_holm is not None and self.p_holm < ALPHA


def paired(a: np.ndarray, b: np.ndarray, binary: bool = False) -> Paired:
    """Paired comparison of per-task scores ``a`` and ``b`` (same task order). ``binary``: each
    score is one sample's pass (0 or 1), and the p is exact McNemar's."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired scores differ in shape: {a.shape} and {b.shape}")
    if not len(a):
        return Paired(0, math.nan, math.nan, math.nan, None, "none (no shared tasks)")
    null = sign_flip(a - b)
    p, test = (mcnemar(a, b), "exact McNemar") if binary else (null.pvalue, null.name)
    low, high = null.interval(p)
    se, df = paired_se(a - b)
    return Paired(len(a), float(np.mean(a - b)), low, high, p, test, se=se, df=df)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values (statsmodels ``multipletests``); None or nan entries are untested,
    stay None and do not count towards the family's size."""
    from statsmodels.stats.multitest import multipletests

    tested = [i for i, p in enumerate(pvalues) if p is not None and not math.isnan(p)]
    out: list[float | None] = [None] * len(pvalues)
    if tested:
        adjusted = multipletests([pvalues[i] for i in tested], alpha=ALPHA, method="holm")[1]
        for i, p in zip(tested, adjusted, strict=True):
            out[i] = float(p)
    return out


def with_holm(family: Sequence[Paired]) -> list[Paired]:
    """The family's comparisons with their Holm-adjusted p filled in."""
    adjusted = holm([d.p for d in family])
    return [replace(d, p_holm=p) for d, p in zip(family, adjusted, strict=True)]


# --- several training runs per arm (a study's seeds) ---------------------------------------------
@dataclass(frozen=True)
class Pooled:
    """The mean of per-(seed, task) differences under a two-way crossed random-effects model,
    d[s, t] = μ + a_s + b_t + e_st (training runs and tasks both random), with its standard error,
    Satterthwaite's degrees of freedom, the two-sided t-test of μ = 0 and the 95 % interval."""

    seeds: int
    tasks: int
    difference: float
    se: float
    df: float
    p: float
    low: float
    high: float
    seed_variance: float  # σ²_a: between training runs
    task_variance: float  # σ²_b: between tasks
    residual_variance: float  # σ²_e: a task's difference varying from run to run

    test = "crossed random effects (seeds × tasks), Satterthwaite t"


def crossed(differences: np.ndarray) -> Pooled:
    """The test of a difference pooled over S ≥ 2 training seeds (rows) and T ≥ 2 tasks
    (columns), every seed having every task.

    The variance components come from the two-way ANOVA's mean squares (MS_seed, MS_task,
    MS_resid; σ²_a = (MS_seed − MS_resid)/T, σ²_b = (MS_task − MS_resid)/S, σ²_e = MS_resid, a
    negative estimate set to 0), which in this balanced design are REML's (statsmodels'
    ``MixedLM``, tested) when both are positive; a truncated one drops its term (tested against
    ``MixedLM`` with that random effect left out). Var(mean) = σ²_a/S + σ²_b/T + σ²_e/(ST), a
    combination of mean squares whose degrees of freedom are Satterthwaite's: with seeds that disagree the test has about
    S − 1 of them, with seeds that agree about T − 1. One seed's rows repeated S times give the
    one-sample t-test of the per-task differences; tasks that all differ alike give the t-test of
    the per-seed means. With every difference alike there is no variance at all: the p-value and
    interval are the sign-flip test's of the per-task means."""
    d = np.asarray(differences, dtype=float)
    seeds, tasks = d.shape
    if seeds < 2 or tasks < 2:
        raise ValueError(f"a crossed test needs two seeds and two tasks, not {d.shape}")
    mean = float(d.mean())
    by_seed, by_task = d.mean(axis=1), d.mean(axis=0)
    if np.ptp(d) == 0:  # every difference alike (decided exactly, not by a rounded variance):
        # no variance to scale by, so the sign-flip test of the per-task means and its interval
        flip = sign_flip(by_task)
        low, high = flip.interval(flip.pvalue)
        nothing = float((seeds - 1) * (tasks - 1))
        return Pooled(seeds, tasks, mean, 0.0, nothing, flip.pvalue, low, high, 0.0, 0.0, 0.0)
    ms_seed = tasks * float(np.sum((by_seed - mean) ** 2)) / (seeds - 1)
    ms_task = seeds * float(np.sum((by_task - mean) ** 2)) / (tasks - 1)
    residual = d - by_seed[:, None] - by_task[None, :] + mean
    ms_resid = float(np.sum(residual**2)) / ((seeds - 1) * (tasks - 1))
    seed_var = max(0.0, (ms_seed - ms_resid) / tasks)
    task_var = max(0.0, (ms_task - ms_resid) / seeds)
    se, df = _mean_se((ms_seed, ms_task, ms_resid), seed_var > 0, task_var > 0, seeds, tasks)
    p = float(2 * stats.t.sf(abs(mean) / se, df))
    half = float(stats.t.ppf(1 - ALPHA / 2, df)) * se
    return Pooled(
        seeds, tasks, mean, se, df, p, mean - half, mean + half, seed_var, task_var, ms_resid
    )


def _mean_se(
    mean_squares: tuple[float, float, float],
    seeds_vary: bool,
    tasks_vary: bool,
    seeds: int,
    tasks: int,
) -> tuple[float, float]:
    """The standard error of the grand mean and its Satterthwaite degrees of freedom, from the
    mean squares (MS_seed, MS_task, MS_resid): S·T·Var(mean) = Σ c_i MS_i, a truncated (zero)
    component dropping its mean square's term."""
    ms_seed, ms_task, ms_resid = mean_squares
    terms = [
        (float(seeds_vary), ms_seed, seeds - 1),
        (float(tasks_vary), ms_task, tasks - 1),
        (1.0 - seeds_vary - tasks_vary, ms_resid, (seeds - 1) * (tasks - 1)),
    ]
    total = sum(c * ms for c, ms, _ in terms)
    se = math.sqrt(max(0.0, total) / (seeds * tasks))
    spread = sum((c * ms) ** 2 / k for c, ms, k in terms if c and ms)
    return se, (total**2 / spread if spread > 0 else float((seeds - 1) * (tasks - 1)))


def crossed_design(
    pooled: Pooled, seeds: int, tasks: int, samples: float = 1
) -> tuple[float, float]:
    """The standard error and Satterthwaite degrees of freedom that ``crossed`` would give, on
    average, with ``seeds`` training seeds and ``tasks`` tasks, were the variance components
    those ``pooled`` estimated: each mean square replaced by its expectation (E MS_seed = T·σ²_a
    + σ²_e, E MS_task = S·σ²_b + σ²_e, E MS_resid = σ²_e). At ``pooled``'s own design it gives
    ``pooled``'s standard error and degrees of freedom back. For planning: how many seeds or
    tasks a study needs before an effect of a given size is detectable (``minimum_detectable``).

    ``samples`` is how many times more samples per task and seed each row would take, their
    per-task mean compared: σ²_e is divided by it. That is the most more samples can buy, and
    exact only where σ²_e is all sampling noise; the part of it that is how a task's difference
    varies between training runs stays whatever the samples (one sample per run cannot tell the
    two apart). The seed and task components are the runs' and the tasks' and stay."""
    if seeds < 2 or tasks < 2:
        raise ValueError(f"a crossed design needs two seeds and two tasks, not {seeds} × {tasks}")
    if samples < 1:  # fewer samples would add noise, which this bound does not describe
        raise ValueError(f"samples is a factor of at least 1, not {samples}")
    a, b = pooled.seed_variance, pooled.task_variance
    e = pooled.residual_variance / samples
    mean_squares = (tasks * a + e, seeds * b + e, e)
    return _mean_se(mean_squares, a > 0, b > 0, seeds, tasks)


POWER = 0.8  # minimum detectable effects are stated at this power


def minimum_detectable(se: float, df: float, family: int, alpha: float = ALPHA) -> float:
    """The smallest true difference a two-sided t-test at the family's corrected level
    (Bonferroni's α/m, Holm's first and strictest step) detects with 80 % power, for a standard
    error ``se`` with ``df`` degrees of freedom: (t_{1−α/2m} + t_{0.8})·SE (Miller, "Adding Error
    Bars to Evals", 2024, with t in place of z)."""
    if math.isnan(se) or se <= 0 or df <= 0:  # no variance: nothing to size an effect by
        return math.nan
    level = alpha / max(1, family)
    return float((stats.t.ppf(1 - level / 2, df) + stats.t.ppf(POWER, df)) * se)


def paired_se(differences: np.ndarray) -> tuple[float, float]:
    """(standard error, degrees of freedom) of the mean of per-task differences: sd/√n, n − 1."""
    d = np.asarray(differences, dtype=float)
    if len(d) < 2:
        return math.nan, 0.0
    if np.ptp(d) == 0:  # all alike: exactly no spread (np.std may round to 1e-17 instead)
        return 0.0, float(len(d) - 1)
    return float(np.std(d, ddof=1) / math.sqrt(len(d))), float(len(d) - 1)
