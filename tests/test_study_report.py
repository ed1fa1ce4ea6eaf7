"""A study report's statistics from synthetic rows (no model runs): one family of comparisons,
each pair of rows once, Holm-corrected; Collaboration Gain reusing the family's p; the backend and
sampling of each row."""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest
from statsmodels.stats.multitest import multipletests

from corebench.leaderboards.stats import proportion_interval
from corebench.studies.evidence import backend_label
from corebench.studies.report import Row, render_markdown, report_of
from corebench.studies.spec import load_study

RUNS = ["direct", "alone", "pair", "other"]
STUDY = """
[study]
name = "synthetic"
benchmark = "mbpp"

[[run]]
name = "direct"
system = "direct"

[[run]]
name = "alone"
system = "direct"
label = "Coder alone"

[[run]]
name = "pair"
system = "corecode"

[[run]]
name = "other"
system = "cot"

[[gain]]
pair = "pair"
roles = ["alone", "other"]
direct = "direct"
"""


@pytest.fixture(autouse=True)
def benchmark_data(data_dir, monkeypatch):
    """Loading a study checks its benchmarks' data (from $COREBENCH_DATA_DIR)."""
    monkeypatch.setenv("COREBENCH_DATA_DIR", str(data_dir))


def study_file(tmp_path: Path, extra: str = ""):
    path = tmp_path / "study.toml"
    path.write_text(textwrap.dedent(STUDY + extra))
    return load_study(path)


def row(
    name: str,
    passed: list[int],
    tasks: int = 40,
    samples_per_task: int = 1,
    seed: int | None = None,
) -> Row:
    """A row whose task i scores ``passed[i]`` (pass rate over its samples)."""
    per_task = pd.Series(passed[:tasks], index=[f"Mbpp/{i}" for i in range(tasks)], dtype=float)
    values = {
        "tasks": tasks,
        "samples": tasks * samples_per_task,
        "pass@1": float(per_task.mean()),
        "pass@1_ci": proportion_interval(per_task.to_numpy()),
        "test_pass_rate": float(per_task.mean()),
        "runtime_ratio": math.nan,
        "memory_ratio": math.nan,
        "cc": 2.0,
        "mi": 60.0,
        "failures": Counter({"wrong_answer": 1}),
    }
    return Row(name, name, "direct", "scripted", "", per_task, samples_per_task, values,
               backend="embedded", sampling="greedy max=512", seed=seed,
               per_task_rate=per_task.copy())  # fmt: skip


def rows() -> list[Row]:
    """40 tasks, one sample each. alone vs direct: 12 tasks only alone passes, 3 only direct
    (exact McNemar p = 2 * 576 / 2**15 = 0.03515625); other is direct again; pair passes 30."""
    direct = [1] * 5 + [0] * 35
    alone = [0] * 3 + [1] * 14 + [0] * 23
    pair = [1] * 30 + [0] * 10
    return [row("direct", direct), row("alone", alone), row("pair", pair), row("other", direct)]


def by_key(report) -> dict[tuple[str, str, str], object]:
    return {(c.row, c.against, c.metric): c for c in report.comparisons}


def test_every_pair_once_with_holm_over_the_family_and_gains_reusing_it(tmp_path):
    study = study_file(tmp_path)
    report = report_of(study, rows())
    names = [(c.row, c.against) for c in report.comparisons]
    # every pair of rows in file order; the gain's comparisons are among them (not added twice)
    assert names == [(a, b) for i, a in enumerate(RUNS) for b in RUNS[i + 1 :]]
    assert all(c.primary and c.metric == "pass@1" for c in report.comparisons)
    tests = {(c.row, c.against): c.result for c in report.comparisons}
    raw = [c.result.p for c in report.comparisons]
    assert [c.result.p_holm for c in report.comparisons] == pytest.approx(
        list(multipletests(raw, method="holm")[1])
    )
    moderate = tests["direct", "alone"]
    assert moderate.test == "exact McNemar" and moderate.p == 0.03515625 == binomtest(3, 15).pvalue
    # by hand: three tiny p's first, then 0.0352 twice: 3 * 0.0352 = 0.105 (raw < 0.05, Holm not)
    assert moderate.p_holm == pytest.approx(3 * 0.03515625) and not moderate.distinguishable
    assert not moderate.low <= 0 <= moderate.high  # the (unadjusted) interval follows the raw p
    assert tests["direct", "pair"].distinguishable and tests["direct", "other"].p == 1.0

    (gain,) = report.gains
    assert gain["best_role"] == "alone"  # 14/40 beats other's 5/40
    for key, against in (("vs_roles", ("alone", "pair")), ("vs_direct", ("direct", "pair"))):
        family = tests[against]  # the family holds against[0] - pair; the gain is pair - it
        assert (gain[key].p, gain[key].p_holm) == (family.p, family.p_holm)
        assert gain[key].difference == -family.difference
        assert (gain[key].low, gain[key].high) == (-family.high, -family.low)
        assert gain[key].tasks == family.tasks


def test_planned_comparisons_plus_the_gains_make_the_family(tmp_path):
    extra = '\n[[compare]]\nrow = "pair"\nagainst = "direct"\n'
    report = report_of(study_file(tmp_path, extra), rows())
    names = [(c.row, c.against) for c in report.comparisons]
    assert names == [("pair", "direct"), ("pair", "alone")]  # (pair, direct) once
    raw = [c.result.p for c in report.comparisons]
    assert [c.result.p_holm for c in report.comparisons] == pytest.approx(
        list(multipletests(raw, method="holm")[1])
    )
    gain = report.gains[0]
    assert gain["vs_direct"] is report.comparisons[0].result  # the same test, not a second one
    assert gain["vs_roles"] is report.comparisons[1].result


def test_one_shared_task_is_not_distinguishable_and_no_shared_task_is_untested(tmp_path):
    study = study_file(tmp_path)
    one = [row("direct", [1], tasks=1), row("alone", [0], tasks=1)]
    far = row("pair", [1] * 40)
    far.per_task.index = [f"HumanEval/{i}" for i in range(40)]  # no task in common
    report = report_of(study, [*one, far, row("other", [0], tasks=1)])
    tests = {(c.row, c.against): c for c in report.comparisons}
    single = tests["direct", "alone"].result
    assert (single.tasks, single.difference, single.p) == (1, 1.0, 1.0)
    assert (single.low, single.high) == (-1.0, 1.0) and not single.distinguishable
    # one task: no standard error, so nothing could have been detected
    assert math.isnan(tests["direct", "alone"].mde)
    assert tests["direct", "alone"].verdict(1.0).startswith("null: too small to tell")
    none = tests["direct", "pair"].result
    assert none.tasks == 0 and none.p is None and none.p_holm is None
    assert not none.distinguishable and tests["direct", "pair"].verdict(1.0) == "untested"
    # untested comparisons do not count towards the family's size
    tested_ = [c.result for c in tests.values() if c.result.p is not None]
    assert len(tested_) == 3 and all(d.p_holm == 1.0 for d in tested_)
    text = render_markdown(report)
    assert "| direct − pair | pass@1 (primary) | 0 | – | – | – | none (no shared tasks) |" in text


def test_several_samples_per_task_use_the_sign_flip_test(tmp_path):
    rng = np.random.default_rng(0)
    rates = [list(np.round(4 * rng.random(12)) / 4) for _ in RUNS]
    made = [row(name, r, tasks=12, samples_per_task=4) for name, r in zip(RUNS, rates, strict=True)]
    report = report_of(study_file(tmp_path), made)
    assert {c.result.test for c in report.comparisons} == {"sign-flip permutation (exact)"}
    for c in report.comparisons:
        assert (c.result.low <= 0 <= c.result.high) == (c.result.p >= 0.05)


def test_markdown_shows_backend_sampling_test_raw_and_holm_p_mde_and_verdict(tmp_path):
    report = report_of(study_file(tmp_path), rows())
    text = render_markdown(report)
    assert "| row | seed | system | model | backend; sampling | training |" in text
    assert "| direct | – | direct | scripted | embedded; greedy max=512 | base | 40 | 40 |" in text
    header = "| rows | metric | tasks | difference [95% CI] | per seed | seeds agree | test | p |"
    assert header in text
    assert "| direct − Coder alone | pass@1 (primary) | 40 | -22.5 [" in text
    assert "| exact McNemar | 0.035 | 0.105 |" in text
    assert "| pair | Coder alone |" in text and "p (Holm)" in text.split("## Collaboration Gain")[1]
    assert "null: could have detected ≥ 33.1 points |" in text and "| distinguishable |" in text
    assert "| 1.000 | 1.000 | – | null: the rows agree on every task" in text  # direct − other
    assert "Pre-registered: **no** (no registration recorded" in text
    assert "Holm" in text.split("## Definitions")[1]


@pytest.mark.parametrize(
    "spec, label",
    [
        ("embedded", "embedded"),
        ("hf:/ckpt/run3/model", "hf"),
        ("vllm:Qwen/Qwen2.5-Coder-7B?tensor_parallel_size=2", "vllm"),
        ("planner=hf:/x/planner,coder=embedded", "planner=hf,coder=embedded"),
    ],
)
def test_backend_label_per_role(spec, label):
    assert backend_label(spec) == label


def with_header(study, **values):
    return study.model_copy(update={"header": study.header.model_copy(update=values)})


def test_the_primary_metric_alone_decides_and_secondaries_are_a_family_of_their_own(tmp_path):
    """primary = pass@1, secondary = [test_pass_rate]: a large test-pass-rate difference with
    no pass@1 difference is reported, never called distinguishable."""
    from dataclasses import replace as with_values

    study = study_file(tmp_path, '\n[[compare]]\nrow = "alone"\nagainst = "direct"\n')
    study = with_header(study, secondary=["test_pass_rate"])
    base = row("direct", [0] * 40)
    trained = row("alone", [1] * 3 + [0] * 37)  # 3 more tasks pass: not enough alone
    # the trained row passes a larger share of most tasks' tests (partial credit)
    rates = pd.Series([0.5] * 30 + [0.0] * 10, index=base.per_task.index)
    trained = with_values(trained, per_task_rate=rates)
    base = with_values(base, per_task_rate=pd.Series(0.25, index=base.per_task.index))
    others = [row(n, [0] * 40) for n in ("pair", "other")]
    report = report_of(study, [base, trained, *others])
    found = by_key(report)
    assert len(found) == len(report.comparisons)
    primary = [c for c in report.comparisons if c.primary]
    secondary = [c for c in report.comparisons if not c.primary]
    assert {c.metric for c in primary} == {"pass@1"} and {c.metric for c in secondary} == {
        "test_pass_rate"
    }
    assert report.comparisons == primary + secondary  # the primary family first
    for members in (primary, secondary):  # each family corrected on its own
        raw = [c.result.p for c in members]
        assert [c.result.p_holm for c in members] == pytest.approx(
            list(multipletests(raw, method="holm")[1])
        )
    rate = found["alone", "direct", "test_pass_rate"]
    assert rate.result.test.startswith("sign-flip") and rate.result.difference == pytest.approx(
        0.125
    )
    assert rate.result.p_holm < 0.05 and not rate.distinguishable  # secondary: decides nothing
    assert rate.verdict(1.0) == "secondary: reported, not decided"
    passed = found["alone", "direct", "pass@1"]
    assert passed.result.test == "exact McNemar" and not passed.distinguishable
    text = render_markdown(report)
    assert "| Coder alone − direct | test_pass_rate (secondary) | 40 |" in text


def test_the_minimum_detectable_effect_is_the_textbook_one_at_the_family_level(tmp_path):
    """MDE = (t_{1-a/2m} + t_0.8) sd/sqrt(n), n - 1 df, m the family's size; a paired t-test of
    that size has 80 % power (statsmodels), and the report's nulls say so."""
    from scipy import stats
    from statsmodels.stats.power import TTestPower

    report = report_of(study_file(tmp_path), rows())
    size = len(report.comparisons)
    by = {(c.row, c.against): c for c in report.comparisons}
    c = by["direct", "alone"]
    direct, alone = (r.per_task.to_numpy() for r in rows()[:2])
    d = direct - alone
    se = d.std(ddof=1) / np.sqrt(len(d))
    level = 0.05 / size
    expected = (stats.t.ppf(1 - level / 2, len(d) - 1) + stats.t.ppf(0.8, len(d) - 1)) * se
    assert c.mde == pytest.approx(expected)
    power = TTestPower().power(c.mde / d.std(ddof=1), nobs=len(d), alpha=level)
    assert power == pytest.approx(0.8, abs=0.01)
    assert c.verdict(0.875) == f"null: could have detected ≥ {100 * c.mde:.1f} points"
    assert c.verdict(c.mde).startswith("null: too small to tell")


def seeded_study(tmp_path):
    extra = """
[[train]]
name = "grpo"
method = "grpo"

[[compare]]
row = "alone"
against = "direct"
"""
    study = study_file(tmp_path, extra.replace('system = "direct"\nlabel = "Coder alone"', ""))
    runs = [
        r.model_copy(update={"model": "hf:@grpo"}) if r.name == "alone" else r for r in study.runs
    ]
    return with_header(study.model_copy(update={"runs": runs}), seeds=[0, 1, 2])


def test_seeds_pool_into_the_crossed_random_effects_test_and_each_seed_is_shown(tmp_path):
    from corebench.leaderboards.stats import crossed, minimum_detectable

    study = seeded_study(tmp_path)
    assert study.seeded(study.runs[1]) and not study.seeded(study.runs[0])
    rng = np.random.default_rng(3)
    base = [int(x) for x in rng.random(40) < 0.3]
    trained = {s: [int(x) for x in (rng.random(40) < 0.3 + 0.1 * (s + 1))] for s in (0, 1, 2)}
    made = [row("direct", base)] + [row("alone", trained[s], seed=s) for s in (0, 1, 2)]
    made += [row("pair", base), row("other", base)]
    report = report_of(study, made)
    c = by_key(report)["alone", "direct", "pass@1"]
    expected = crossed(np.array([np.array(trained[s]) - np.array(base) for s in (0, 1, 2)]))
    assert (c.result.difference, c.result.p, c.result.low, c.result.high) == pytest.approx(
        (expected.difference, expected.p, expected.low, expected.high)
    )
    assert c.result.test.startswith("crossed random effects (3 seeds × 40 tasks)")
    assert [s for s, _ in c.per_seed] == [0, 1, 2]
    for s, d in c.per_seed:  # each seed's own McNemar against the one base row
        assert d.difference == pytest.approx(np.mean(np.array(trained[s]) - np.array(base)))
        assert d.test == "exact McNemar"
    assert c.seeds_agree is all(d.difference > 0 for _, d in c.per_seed)
    size = sum(x.primary and x.result.p is not None for x in report.comparisons)
    assert size == 3  # the planned comparison and the gain's two
    assert c.mde == pytest.approx(minimum_detectable(expected.se, expected.df, size))
    text = render_markdown(report)
    assert "| alone | 0 | direct |" in text and "| alone | 2 | direct |" in text
    assert "training seeds: 0, 1, 2" in text


def test_seeds_that_disagree_in_sign_are_said_to(tmp_path):
    study = seeded_study(tmp_path)
    base = [0] * 20 + [1] * 20
    up, down = [1] * 30 + [0] * 10, [0] * 30 + [1] * 10
    made = [row("direct", base), row("alone", up, seed=0), row("alone", up, seed=1)]
    made += [row("alone", down, seed=2), row("pair", base), row("other", base)]
    c = by_key(report_of(study, made))["alone", "direct", "pass@1"]
    assert [round(d.difference, 3) for _, d in c.per_seed] == [0.25, 0.25, -0.25]
    assert c.seeds_agree is False
