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
from corebench.studies.report import Row, backend_label, render_markdown, report_of
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


def row(name: str, passed: list[int], tasks: int = 40, samples_per_task: int = 1) -> Row:
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
               backend="embedded", sampling="greedy max=512")  # fmt: skip


def rows() -> list[Row]:
    """40 tasks, one sample each. alone vs direct: 12 tasks only alone passes, 3 only direct
    (exact McNemar p = 2 * 576 / 2**15 = 0.03515625); other is direct again; pair passes 30."""
    direct = [1] * 5 + [0] * 35
    alone = [0] * 3 + [1] * 14 + [0] * 23
    pair = [1] * 30 + [0] * 10
    return [row("direct", direct), row("alone", alone), row("pair", pair), row("other", direct)]


def test_every_pair_once_with_holm_over_the_family_and_gains_reusing_it(tmp_path):
    study = study_file(tmp_path)
    report = report_of(study, rows())
    names = [(a.name, b.name) for a, b, _ in report.pairs]
    # every pair of rows in file order; the gain's comparisons are among them (not added twice)
    assert names == [(a, b) for i, a in enumerate(RUNS) for b in RUNS[i + 1 :]]
    tests = {names[i]: d for i, (_, _, d) in enumerate(report.pairs)}
    raw = [d.p for _, _, d in report.pairs]
    assert [d.p_holm for _, _, d in report.pairs] == pytest.approx(
        list(multipletests(raw, method="holm")[1])
    )
    moderate = tests["direct", "alone"]
    assert moderate.test == "exact McNemar" and moderate.p == 0.03515625 == binomtest(3, 15).pvalue
    # by hand: three tiny p's first, then 0.0352 twice: 3 * 0.0352 = 0.105 (raw < 0.05, Holm not)
    assert moderate.p_holm == pytest.approx(3 * 0.03515625) and not moderate.distinguishable
    assert not moderate.low <= 0 <= moderate.high  # the (unadjusted) interval follows the raw p
    assert tests["direct", "pair"].distinguishable and tests["direct", "other"].p == 1.0

    (gain,) = report.gains
    assert gain["best_role"].name == "alone"  # 14/40 beats other's 5/40
    for key, against in (("vs_roles", ("alone", "pair")), ("vs_direct", ("direct", "pair"))):
        family = tests[against]  # the family holds against[0] - pair; the gain is pair - it
        assert (gain[key].p, gain[key].p_holm) == (family.p, family.p_holm)
        assert gain[key].difference == -family.difference
        assert (gain[key].low, gain[key].high) == (-family.high, -family.low)
        assert gain[key].tasks == family.tasks


def test_planned_comparisons_plus_the_gains_make_the_family(tmp_path):
    extra = '\n[[compare]]\nrow = "pair"\nagainst = "direct"\n'
    report = report_of(study_file(tmp_path, extra), rows())
    names = [(a.name, b.name) for a, b, _ in report.pairs]
    assert names == [("pair", "direct"), ("pair", "alone")]  # (pair, direct) once
    raw = [d.p for _, _, d in report.pairs]
    assert [d.p_holm for _, _, d in report.pairs] == pytest.approx(
        list(multipletests(raw, method="holm")[1])
    )
    gain = report.gains[0]
    assert gain["vs_direct"] is report.pairs[0][2]  # the same comparison, not a second test
    assert gain["vs_roles"] is report.pairs[1][2]


def test_one_shared_task_is_not_distinguishable_and_no_shared_task_is_untested(tmp_path):
    study = study_file(tmp_path)
    one = [row("direct", [1], tasks=1), row("alone", [0], tasks=1)]
    far = row("pair", [1] * 40)
    far.per_task.index = [f"HumanEval/{i}" for i in range(40)]  # no task in common
    report = report_of(study, [*one, far, row("other", [0], tasks=1)])
    tests = {(a.name, b.name): d for a, b, d in report.pairs}
    single = tests["direct", "alone"]
    assert (single.tasks, single.difference, single.p) == (1, 1.0, 1.0)
    assert (single.low, single.high) == (-1.0, 1.0) and not single.distinguishable
    none = tests["direct", "pair"]
    assert none.tasks == 0 and none.p is None and none.p_holm is None
    assert not none.distinguishable
    # untested comparisons do not count towards the family's size
    tested = [d for d in tests.values() if d.p is not None]
    assert len(tested) == 3 and all(d.p_holm == 1.0 for d in tested)
    text = render_markdown(report, "corebench study study.toml")
    assert "| direct − pair | 0 | – | none (no shared tasks) | – | – | no |" in text


def test_several_samples_per_task_use_the_sign_flip_test(tmp_path):
    rng = np.random.default_rng(0)
    rates = [list(np.round(4 * rng.random(12)) / 4) for _ in RUNS]
    made = [row(name, r, tasks=12, samples_per_task=4) for name, r in zip(RUNS, rates, strict=True)]
    report = report_of(study_file(tmp_path), made)
    assert {d.test for _, _, d in report.pairs} == {"sign-flip permutation (exact)"}
    for _, _, d in report.pairs:
        assert (d.low <= 0 <= d.high) == (d.p >= 0.05)


def test_markdown_shows_backend_sampling_test_raw_and_holm_p(tmp_path):
    report = report_of(study_file(tmp_path), rows())
    text = render_markdown(report, "corebench study study.toml")
    assert "| row | system | model | backend; sampling | training |" in text
    assert "| direct | direct | scripted | embedded; greedy max=512 | base | 40 | 40 |" in text
    header = "| rows | tasks | difference [95% CI] | test | p | p (Holm) | distinguishable (Holm"
    assert header in text
    assert "| direct − alone | 40 | -22.5 [" in text
    assert "| exact McNemar | 0.035 | 0.105 | no |" in text
    assert "| pair | alone |" in text and "p (Holm)" in text.split("## Collaboration Gain")[1]
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


def test_a_second_metric_joins_the_same_holm_family(tmp_path):
    """`metrics = ["pass@1", "test_pass_rate"]`: every planned comparison in both, one family."""
    from dataclasses import replace as with_values

    study = study_file(tmp_path, '\n[[compare]]\nrow = "alone"\nagainst = "direct"\n')
    study = study.model_copy(
        update={"header": study.header.model_copy(update={"metrics": ["pass@1", "test_pass_rate"]})}
    )
    base = row("direct", [0] * 40)
    trained = row("alone", [1] * 3 + [0] * 37)  # 3 more tasks pass: not enough alone
    # the trained row passes a larger share of most tasks' tests
    rates = pd.Series([0.5] * 30 + [0.0] * 10, index=base.per_task.index)
    trained = with_values(trained, per_task_rate=rates)
    base = with_values(base, per_task_rate=pd.Series(0.25, index=base.per_task.index))
    others = [row(n, [0] * 40) for n in ("pair", "other")]
    report = report_of(study, [base, trained, *others])
    metrics = [(a.name, b.name, d.metric) for a, b, d in report.pairs]
    assert ("alone", "direct", "pass@1") in metrics and (
        "alone",
        "direct",
        "test_pass_rate",
    ) in metrics
    assert len(metrics) == len(set(metrics))
    raw = [d.p for *_, d in report.pairs]
    assert [d.p_holm for *_, d in report.pairs] == pytest.approx(
        list(multipletests(raw, method="holm")[1])
    )  # one family over both metrics and the gains
    rate = next(d for a, _, d in report.pairs if a.name == "alone" and d.metric == "test_pass_rate")
    assert rate.test.startswith("sign-flip") and rate.difference == pytest.approx(0.125)
    assert rate.distinguishable  # 30 tasks each +0.25, 10 each -0.25
    passed = next(d for a, _, d in report.pairs if a.name == "alone" and d.metric == "pass@1")
    assert passed.test == "exact McNemar" and not passed.distinguishable
    text = render_markdown(report, "corebench study x.toml")
    assert "| alone − direct (test pass rate) | 40 |" in text
