"""The statistics of leaderboards and study reports against scipy, statsmodels and published
values: the sign-flip test and its inverted interval, exact McNemar, proportion intervals at 0/n
and n/n, Holm's correction, the crossed random-effects test of several training seeds (against
statsmodels' MixedLM and t-tests) and the minimum detectable effect (against statsmodels' power),
and the crossed design's projection to other numbers of seeds and tasks (against the test's own
standard error, a hand computation and a simulation)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from corebench.leaderboards.stats import (
    ALPHA,
    EXACT_MAX_TASKS,
    MONTE_CARLO_RESAMPLES,
    PERMUTATION_BATCH,
    PERMUTATION_SEED,
    Paired,
    crossed,
    crossed_design,
    holm,
    mcnemar,
    minimum_detectable,
    paired,
    paired_se,
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


@pytest.mark.parametrize(
    "d",
    [
        binary_pair(30, 20, 100, 228)[0] - binary_pair(30, 20, 100, 228)[1],  # MBPP+'s 378
        np.subtract(*rng_scores(164, 0.05, seed=6)),  # HumanEval+'s 164, four samples a task
        np.random.default_rng(7).normal(0.1, 0.3, EXACT_MAX_TASKS + 1),  # the first drawn size
    ],
    ids=["378 binary", "164 quarters", "17 continuous"],
)
def test_the_monte_carlo_sign_flips_are_scipys_draws_to_the_last_bit(d):
    """Beyond EXACT_MAX_TASKS, ``sign_flip`` draws scipy's sign vectors itself (scipy's loop
    over tasks was most of a report's time): its null distribution, in (d, ones) as
    ``sign_flip`` passes them, and its p are scipy's exactly, the last partial batch included."""
    assert MONTE_CARLO_RESAMPLES % PERMUTATION_BATCH  # a partial last batch is exercised
    scipy = stats.permutation_test(
        (np.stack([d, np.ones_like(d)]),), lambda x, axis: np.mean(x, axis=axis),
        permutation_type="samples", vectorized=True, n_resamples=MONTE_CARLO_RESAMPLES,
        batch=PERMUTATION_BATCH, axis=-1, rng=PERMUTATION_SEED,
    )  # fmt: skip
    null = sign_flip(d)
    assert not null.exact and len(null.flipped) == MONTE_CARLO_RESAMPLES
    assert np.array_equal(null.flipped, scipy.null_distribution[:, 0])
    assert np.array_equal(null.signs, scipy.null_distribution[:, 1])
    assert null.observed == scipy.statistic[0] and null.pvalue == scipy.pvalue[0]


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


# --- several training seeds: the crossed random-effects test --------------------------------------
def crossed_data(seed_sd: float, task_sd: float, noise_sd: float, shape=(3, 40), seed=1):
    rng = np.random.default_rng(seed)
    seeds, tasks = shape
    return (
        0.1
        + rng.normal(0, seed_sd, (seeds, 1))
        + rng.normal(0, task_sd, (1, tasks))
        + rng.normal(0, noise_sd, (seeds, tasks))
    )


@pytest.mark.parametrize("spread", [(0.3, 0.5, 0.4), (0.15, 0.3, 0.3), (0.4, 0.2, 0.1)])
def test_crossed_matches_statsmodels_reml_on_balanced_data(spread):
    """In a balanced design with positive components, REML's variance components and the
    standard error of the intercept (statsmodels MixedLM, crossed variance components) are the
    ANOVA estimates the test uses."""
    import warnings

    import pandas as pd
    import statsmodels.formula.api as smf

    d = crossed_data(*spread)
    seeds, tasks = d.shape
    frame = pd.DataFrame(
        [(s, t, d[s, t]) for s in range(seeds) for t in range(tasks)], columns=["seed", "task", "d"]
    )
    frame["all"] = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = smf.mixedlm(
            "d ~ 1", frame, groups="all", re_formula="0",
            vc_formula={"seed": "0 + C(seed)", "task": "0 + C(task)"},
        ).fit(reml=True)  # fmt: skip
    result = crossed(d)
    assert result.seed_variance > 0 and result.task_variance > 0
    assert result.difference == pytest.approx(fit.params["Intercept"])
    assert result.se == pytest.approx(fit.bse["Intercept"], rel=1e-3)
    assert [result.seed_variance, result.task_variance] == pytest.approx(list(fit.vcomp), rel=1e-3)
    assert result.residual_variance == pytest.approx(fit.scale, rel=1e-3)


def test_crossed_with_no_seed_variance_is_reml_with_tasks_alone():
    """A negative seed component is set to 0; the standard error is then REML's for a model
    with task effects only (statsmodels MixedLM grouped by task)."""
    import warnings

    import pandas as pd
    import statsmodels.formula.api as smf

    d = crossed_data(0.05, 0.3, 0.3)
    result = crossed(d)
    assert result.seed_variance == 0 and result.df == pytest.approx(d.shape[1] - 1)
    frame = pd.DataFrame(
        [(t, d[s, t]) for s in range(d.shape[0]) for t in range(d.shape[1])], columns=["task", "d"]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = smf.mixedlm("d ~ 1", frame, groups="task").fit(reml=True)
    assert result.se == pytest.approx(fit.bse["Intercept"], rel=1e-3)


def test_crossed_with_identical_seeds_is_the_one_sample_t_test_of_the_task_differences():
    x = np.random.default_rng(2).normal(0.2, 1, 40)
    result = crossed(np.vstack([x, x, x]))
    expected = stats.ttest_1samp(x, 0)
    assert result.p == pytest.approx(expected.pvalue) and result.df == pytest.approx(39)
    interval = expected.confidence_interval(0.95)
    assert (result.low, result.high) == pytest.approx((interval.low, interval.high))


def test_crossed_with_seeds_that_shift_every_task_alike_is_the_t_test_of_the_seed_means():
    """Training runs differ, tasks do not: only S - 1 = 3 degrees of freedom, as it should be."""
    a = np.random.default_rng(3).normal(0.3, 0.2, 4)
    result = crossed(np.repeat(a[:, None], 30, axis=1))
    assert result.p == pytest.approx(stats.ttest_1samp(a, 0).pvalue)
    assert result.df == pytest.approx(3)


def test_crossed_satterthwaite_degrees_of_freedom_by_hand():
    d = crossed_data(0.3, 0.5, 0.4)
    seeds, tasks = d.shape
    m = d.mean()
    ms_seed = tasks * ((d.mean(1) - m) ** 2).sum() / (seeds - 1)
    ms_task = seeds * ((d.mean(0) - m) ** 2).sum() / (tasks - 1)
    resid = d - d.mean(1)[:, None] - d.mean(0)[None, :] + m
    ms_resid = (resid**2).sum() / ((seeds - 1) * (tasks - 1))
    total = ms_seed + ms_task - ms_resid
    df = total**2 / (
        ms_seed**2 / (seeds - 1)
        + ms_task**2 / (tasks - 1)
        + ms_resid**2 / ((seeds - 1) * (tasks - 1))
    )
    result = crossed(d)
    assert result.df == pytest.approx(df) and result.se == pytest.approx(np.sqrt(total / d.size))
    assert result.p == pytest.approx(2 * stats.t.sf(abs(m) / result.se, df))


def test_crossed_degenerate_cases():
    assert crossed(np.zeros((3, 5))).p == 1.0
    for value, shape in ((0.25, (3, 5)), (0.1, (3, 5)), (1 / 3, (5, 7)), (0.7, (3, 40))):
        # no variance (0.1 and 1/3 are not exact in binary: a computed variance rounds to 1e-17)
        same = crossed(np.full(shape, value))
        flip = sign_flip(np.full(shape[1], value))
        assert same.se == 0 and same.p == pytest.approx(flip.pvalue)
        assert (same.low, same.high) == flip.interval(flip.pvalue)
    assert crossed(np.full((3, 5), 0.25)).p == pytest.approx(2 / 2**5)
    three = crossed(np.full((3, 3), 0.1))  # 3 tasks: p 0.25, and an interval that holds 0
    assert three.p == pytest.approx(0.25) and three.low <= 0 <= three.high
    assert paired_se(np.full(378, 0.1)) == (0.0, 377.0)
    with pytest.raises(ValueError, match="two seeds and two tasks"):
        crossed(np.zeros((1, 5)))


DESIGNS = {
    "both components": crossed_data(0.3, 0.5, 0.4),
    "no seed component": crossed_data(0.05, 0.3, 0.3),
    "no task component": crossed_data(0.4, 0.01, 0.3, shape=(4, 30), seed=3),
    # runs and tasks interact only (every row and column mean alike): both components negative
    "neither component": 0.1 + 0.1 * np.outer([1, -1, 0], [1, -1, 2, -2, 0]),
    "no variance": np.full((3, 5), 0.25),
}


@pytest.mark.parametrize("name", DESIGNS)
def test_crossed_design_at_the_observed_design_gives_the_test_back(name):
    """At the study's own design, a positive component's mean square at its expectation is the
    observed one, and a truncated component's term is dropped by both: the projection gives the
    test's standard error and degrees of freedom back, whichever components were truncated."""
    result = crossed(DESIGNS[name])
    truncated = {
        "both components": (False, False), "no seed component": (True, False),
        "no task component": (False, True), "neither component": (True, True),
        "no variance": (True, True),
    }[name]  # fmt: skip
    assert (result.seed_variance == 0, result.task_variance == 0) == truncated
    assert crossed_design(result, result.seeds, result.tasks) == pytest.approx(
        (result.se, result.df)
    )


def test_crossed_design_elsewhere_by_hand():
    """Both components positive: Var(mean) = σ²_a/S + σ²_b/T + σ²_e/(ST), with Satterthwaite's
    degrees of freedom of T·σ²_a + S·σ²_b + σ²_e as a sum of mean squares; more seeds never
    take the standard error below the task component's floor, sqrt(σ²_b / T)."""
    result = crossed(crossed_data(0.3, 0.5, 0.4))
    a, b, e = result.seed_variance, result.task_variance, result.residual_variance
    seeds, tasks = 10, 100
    se, df = crossed_design(result, seeds, tasks)
    assert se == pytest.approx(math.sqrt(a / seeds + b / tasks + e / (seeds * tasks)))
    ms = [(tasks * a + e, seeds - 1), (seeds * b + e, tasks - 1)]
    total = ms[0][0] + ms[1][0] - e
    spread = sum(m**2 / k for m, k in ms) + e**2 / ((seeds - 1) * (tasks - 1))
    assert df == pytest.approx(total**2 / spread)
    many = crossed_design(result, 10_000, tasks)[0]
    assert math.sqrt(b / tasks) < many < crossed_design(result, 20, tasks)[0]
    assert many == pytest.approx(math.sqrt(b / tasks), rel=0.01)
    with pytest.raises(ValueError, match="two seeds and two tasks"):
        crossed_design(result, 1, tasks)


def test_crossed_design_with_more_samples_per_task_by_hand_and_in_simulation():
    """``samples`` divides the residual component alone. In simulation (pass/fail samples, both
    rows drawn with common random numbers as the studies sample them): where each seed's
    checkpoint passes a task with the same probability, the residual estimated from one sample
    per task, divided by four, is on average the one estimated from four samples per task, and
    the task component is the same; where checkpoints differ from seed to seed task by task,
    four samples leave more residual than that: the projection is the most samples can buy."""
    result = crossed(crossed_data(0.3, 0.5, 0.4))
    a, b, e = result.seed_variance, result.task_variance, result.residual_variance
    assert crossed_design(result, 10, 100, samples=4) == crossed_design(
        replace(result, residual_variance=e / 4), 10, 100
    )
    assert crossed_design(result, 10, 100, samples=4)[0] == pytest.approx(
        math.sqrt(a / 10 + b / 100 + e / 4 / 1000)
    )
    for fewer in (0, 0.5):
        with pytest.raises(ValueError, match="at least 1"):
            crossed_design(result, 3, 100, samples=fewer)

    rng = np.random.default_rng(11)
    seeds, tasks = 3, 400
    start = rng.beta(0.3, 1.5, tasks)  # pass probabilities, most tasks rarely solved
    gain = rng.normal(0.01, 0.1, tasks)

    def study(samples: int, between_runs: float) -> np.ndarray:
        trained = np.clip(start + gain + rng.normal(0, between_runs, (seeds, tasks)), 0, 1)
        draws = rng.random((seeds, tasks, samples))  # one draw per sample for both rows
        passed = (draws < trained[..., None]).mean(axis=2)
        return passed - (draws < start[None, :, None]).mean(axis=2)

    def components(samples: int, between_runs: float) -> tuple[float, float]:
        pooled = [crossed(study(samples, between_runs)) for _ in range(200)]
        return (
            float(np.mean([r.residual_variance for r in pooled])),
            float(np.mean([r.task_variance for r in pooled])),
        )

    (one, task_one), (four, task_four) = components(1, 0.0), components(4, 0.0)
    assert one / 4 == pytest.approx(four, rel=0.05)
    assert task_one == pytest.approx(task_four, rel=0.15)
    assert task_four < four  # the simulation is one where samples matter
    (one, _), (four, _) = components(1, 0.15), components(4, 0.15)
    assert four > 1.25 * (one / 4)  # runs that differ: the projection is optimistic


@pytest.mark.parametrize(
    "spread, seeds, tasks, power",
    [((0.2, 0.5, 0.6), 5, 60, (0.77, 0.83)), ((0.5, 0.4, 0.6), 3, 100, (0.70, 0.80))],
)
def test_crossed_design_minimum_detectable_effect_has_about_80_percent_power_in_simulation(
    spread, seeds, tasks, power
):
    """Data drawn with the estimated components at another design and a true difference equal
    to the projected MDE: the crossed test rejects at the family's level about 80 % of the time
    with many degrees of freedom (5 × 60, df 42), and somewhat less with three seeds that vary
    (3 × 100, df about 2): there Miller's t-quantile MDE is optimistic, as the docs say."""
    result = crossed(crossed_data(*spread))
    family = 2
    se, df = crossed_design(result, seeds, tasks)
    mde = minimum_detectable(se, df, family)
    rng = np.random.default_rng(7)
    a, b, e = (math.sqrt(v) for v in (result.seed_variance, result.task_variance,
                                       result.residual_variance))  # fmt: skip
    draws = 2000
    rejected = sum(
        crossed(
            mde
            + rng.normal(0, a, (seeds, 1))
            + rng.normal(0, b, (1, tasks))
            + rng.normal(0, e, (seeds, tasks))
        ).p
        < ALPHA / family
        for _ in range(draws)
    )
    assert power[0] <= rejected / draws <= power[1]


@pytest.mark.parametrize("n, family", [(40, 1), (378, 6), (12, 3)])
def test_minimum_detectable_effect_has_80_percent_power_at_the_corrected_level(n, family):
    """Miller's MDE with t quantiles: a one-sample t-test of that true effect has ~80 % power
    at alpha / family (statsmodels' noncentral-t power)."""
    from statsmodels.stats.power import TTestPower

    sd = 0.37
    se = sd / np.sqrt(n)
    mde = minimum_detectable(se, n - 1, family)
    power = TTestPower().power(mde / sd, nobs=n, alpha=0.05 / family)
    assert power == pytest.approx(0.8, abs=0.012)
    assert math.isnan(minimum_detectable(0.0, n - 1, family))  # no variance: undefined
