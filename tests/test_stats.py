"""The statistics of leaderboards and study reports against scipy, statsmodels and published
values: the sign-flip test and its inverted interval, exact McNemar, proportion intervals at 0/n
and n/n, and Holm's correction."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from corebench.leaderboards.stats import (
    ALPHA,
    MONTE_CARLO_RESAMPLES,
    Paired,
    holm,
    mcnemar,
    paired,
    proportion_interval,
    sign_flip,
    with_holm,
)

SIX = np.array([0.25, 0.25, 0.25, 0.25, 0.0, 0.0])


def scipy_sign_flip(d: np.ndarray, exact: bool = True) -> float:
    """scipy's two-sided sign-flip p for the mean (exact, or as `sign_flip` draws it)."""
    return stats.permutation_test(
        (d,),
        lambda x, axis: np.mean(x, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=2 ** len(d) if exact else MONTE_CARLO_RESAMPLES,
        rng=0,
    ).pvalue


def binary_pair(only_a: int, only_b: int, both: int, neither: int) -> tuple[np.ndarray, np.ndarray]:
    a = [1] * only_a + [0] * only_b + [1] * both + [0] * neither
    b = [0] * only_a + [1] * only_b + [1] * both + [0] * neither
    return np.array(a, dtype=float), np.array(b, dtype=float)


def rng_scores(n: int, shift: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-task pass rates of two rows with 4 samples per task, the first better by ``shift``."""
    rng = np.random.default_rng(seed)
    base = rng.random(n)
    a = np.round(4 * np.clip(base + shift + rng.normal(0, 0.2, n), 0, 1)) / 4
    b = np.round(4 * np.clip(base + rng.normal(0, 0.2, n), 0, 1)) / 4
    return a, b


def test_the_six_task_case_is_the_exact_sign_flip_p_not_a_bootstrap_one():
    result = paired(SIX, np.zeros(6))
    assert result.p == 0.125 == scipy_sign_flip(SIX)  # 8 of the 64 sign vectors, two-sided
    assert result.test == "sign-flip permutation (exact)"
    assert result.low <= 0 <= result.high  # consistent with p >= 0.05


def test_p_at_zero_is_scipys_and_any_shift_is_scipys_test_of_the_shifted_differences():
    a, b = rng_scores(12, 0.1, seed=1)
    null = sign_flip(a - b)
    assert null.exact and null.p_value(0.0) == null.pvalue == scipy_sign_flip(a - b)
    for delta in (-0.3, 0.05, 0.12, 0.4):
        assert null.p_value(delta) == pytest.approx(scipy_sign_flip(a - b - delta), abs=1e-12)
    # beyond EXACT_MAX_TASKS: seeded Monte Carlo, the same draws as scipy with the same seed
    a, b = rng_scores(40, 0.1, seed=2)
    null = sign_flip(a - b)
    assert not null.exact and null.p_value(0.0) == null.pvalue
    assert null.pvalue == pytest.approx(scipy_sign_flip(a - b, exact=False), abs=0.005)
    assert null.pvalue >= 1 / (MONTE_CARLO_RESAMPLES + 1)  # scipy adds one: never 0
    assert paired(a, b).test == f"sign-flip permutation (Monte Carlo, {MONTE_CARLO_RESAMPLES})"
    assert paired(a, b) == paired(a, b)  # seeded: the same numbers every time


@pytest.mark.parametrize("counts", [(0, 0, 3, 3), (1, 0, 5, 5), (4, 1, 3, 6), (9, 1, 2, 4)])
def test_exact_mcnemar_equals_the_exact_sign_flip_test_on_binary_data(counts):
    a, b = binary_pair(*counts)
    only_a, only_b = counts[:2]
    expected = stats.binomtest(only_a, only_a + only_b).pvalue if only_a + only_b else 1.0
    assert mcnemar(a, b) == expected
    assert mcnemar(a, b) == pytest.approx(scipy_sign_flip(a - b), rel=1e-12)
    result = paired(a, b, binary=True)
    assert result.test == "exact McNemar" and result.p == expected


CASES = {
    "six tasks": (SIX, np.zeros(6), False),
    "clearly better on 40 tasks": (*binary_pair(12, 2, 10, 16), True),
    "same rates, 40 tasks": (*binary_pair(5, 5, 10, 20), True),
    "borderline, 15 tasks": (*binary_pair(9, 1, 2, 3), True),
    "multi-sample, 12 tasks": (*rng_scores(12, 0.15, seed=3), False),
    "multi-sample, 60 tasks": (*rng_scores(60, 0.08, seed=4), False),
    "multi-sample, worse": (*rng_scores(30, -0.2, seed=5), False),
}


@pytest.mark.parametrize("name", CASES)
def test_the_interval_contains_zero_exactly_when_p_is_at_least_alpha(name):
    a, b, binary = CASES[name]
    result = paired(a, b, binary=binary)
    assert result.low < result.high  # never a point
    assert -1 <= result.low <= result.difference <= result.high <= 1
    assert (result.low <= 0 <= result.high) == (result.p >= ALPHA), result
    null = sign_flip(a - b)
    # the ends are where the inverted test starts to reject
    for end, outward in ((result.low, -1e-6), (result.high, 1e-6)):
        if abs(end) < 1:
            assert null.p_value(end + outward) < ALPHA


def test_the_clear_40_task_case_is_distinguishable_only_after_holm_says_so():
    a, b = binary_pair(12, 2, 10, 16)
    result = paired(a, b, binary=True)
    assert result.p == stats.binomtest(2, 14).pvalue and result.p < ALPHA
    assert 0 < result.low < result.difference == 0.25 < result.high
    assert not result.distinguishable  # no Holm p yet: not decided
    (alone,) = with_holm([result])
    assert alone.p_holm == result.p and alone.distinguishable


def test_one_shared_task_no_tasks_and_no_differences():
    for binary in (True, False):
        one = paired(np.array([1.0]), np.array([0.0]), binary=binary)
        assert (one.tasks, one.difference, one.p) == (1, 1.0, 1.0)
        assert (one.low, one.high) == (-1.0, 1.0)  # nothing can be excluded
        assert not with_holm([one])[0].distinguishable
    few = paired(np.ones(4), np.zeros(4), binary=True)  # 2/16 of sign vectors: p = 0.125
    assert few.p == 0.125 and (few.low, few.high) == (-1.0, 1.0)
    none = paired(np.array([]), np.array([]))
    assert none.tasks == 0 and none.p is None and math.isnan(none.low) and math.isnan(none.high)
    assert with_holm([none])[0].p_holm is None
    same = paired(SIX, SIX)
    assert (same.difference, same.p) == (0.0, 1.0)


@pytest.mark.parametrize(
    "passed, n, low, high",
    [
        (0, 20, 0.0, 1 - 0.025 ** (1 / 20)),  # about 0.1684
        (20, 20, 0.025 ** (1 / 20), 1.0),  # about 0.8316
        (5, 20, 0.0866, 0.4910),
    ],
)
def test_clopper_pearson_at_one_sample_per_task(passed, n, low, high):
    scores = np.array([1.0] * passed + [0.0] * (n - passed))
    got = proportion_interval(scores)
    assert got == pytest.approx((low, high), abs=5e-5)


def test_published_clopper_pearson_bounds():
    assert proportion_interval(np.zeros(20))[1] == pytest.approx(0.1684, abs=1e-4)
    assert proportion_interval(np.ones(20))[0] == pytest.approx(0.8316, abs=1e-4)


def test_wilson_over_tasks_with_several_samples_per_task():
    from statsmodels.stats.proportion import proportion_confint

    rates = np.array([0.5, 0.25, 1.0, 0.0, 0.75] * 4)  # 20 tasks, 4 samples each
    low, high = proportion_interval(rates)
    assert (low, high) == pytest.approx(proportion_confint(10.0, 20, method="wilson"))
    assert low < rates.mean() < high
    assert proportion_interval(np.array([])) == pytest.approx((math.nan, math.nan), nan_ok=True)


def test_holm_by_hand_with_untested_entries():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> 0.06 (monotone)
    raw = [0.01, None, 0.04, 0.03, math.nan, 0.005]
    assert holm(raw) == pytest.approx([0.03, None, 0.06, 0.06, None, 0.02])
    tested = [p for p in raw if p is not None and not math.isnan(p)]
    expected = multipletests(tested, method="holm")[1]
    assert [p for p in holm(raw) if p is not None] == pytest.approx(list(expected))
    assert holm([]) == [] and holm([None]) == [None]


def test_with_holm_fills_the_adjusted_p_and_decides_distinguishable():
    family = [
        Paired(40, 0.2, 0.05, 0.35, 0.03, "exact McNemar"),
        Paired(40, 0.3, 0.1, 0.5, 0.001, "exact McNemar"),
        Paired(0, math.nan, math.nan, math.nan, None, "none (no shared tasks)"),
    ]
    adjusted = with_holm(family)
    assert [d.p_holm for d in adjusted] == pytest.approx([0.03, 0.002, None])
    assert [d.distinguishable for d in adjusted] == [True, True, False]
    first = with_holm([*family[:2], Paired(40, 0.1, -0.1, 0.3, 0.02, "exact McNemar")])
    assert [d.p_holm for d in first] == pytest.approx([0.04, 0.003, 0.04])
