"""Leaderboards from stored runs: the table's numbers, deterministic CSV/HTML, and the page in a
real browser (Debian's chromium driven by Selenium, headless, from file://)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from corebench.harness import RunConfig
from corebench.harness.runner import Runner
from corebench.leaderboards import collect_runs, leaderboard_table, write_html
from corebench.leaderboards.stats import proportion_interval
from corebench.leaderboards.table import COLUMNS

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / ".pytest_cache" / "screenshots"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"

# Correct programs for the first MBPP+ tasks; other tasks get a wrong one.
CORRECT = {
    "similar_elements": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n",
    "is_not_prime": "def is_not_prime(n):\n    return n < 2 or any(n % i == 0 for i in range(2, int(n ** 0.5) + 1))\n",
    "heap_queue_largest": "import heapq\ndef heap_queue_largest(nums, n):\n    return heapq.nlargest(n, nums)\n",
}


def respond(request):
    text = request.messages[-1].content
    if text.startswith("You are the Planner"):
        return "Input/Output: PLAN-MARKER for the task."
    if text.startswith("Think step by step") or text.startswith("Recall"):
        return "Reasoning."
    name = re.search(r"function `(\w+)`", text).group(1)
    # cot gets only the first task right, so the systems differ
    code = CORRECT.get(name, f"def {name}(*args):\n    return None\n")
    if "think step by step" in text and name != "similar_elements":
        code = f"def {name}(*args):\n    raise ValueError('no')\n"
    return f"```python\n{code}```"


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory, data_dir):
    from conftest import ScriptedBackend, scripted_plugins

    ScriptedBackend.respond = staticmethod(respond)
    root = tmp_path_factory.mktemp("runs")
    plugins = scripted_plugins()
    for system, limit in (("direct", 4), ("cot", 4), ("corecode", 3)):
        config = RunConfig(benchmark="mbpp", system=system, model="scripted", limit=limit)
        Runner(config, root / f"mbpp-{system}", data_dir=data_dir, plugins=plugins).run()
    return root


def test_table_rows_numbers_and_shared_set(run_dirs):
    table = leaderboard_table(collect_runs([run_dirs]))
    assert list(table.columns) == COLUMNS
    rows = table.set_index("system")
    assert rows.loc["direct", "pass@1"] == pytest.approx(3 / 4)
    assert rows.loc["cot", "pass@1"] == pytest.approx(1 / 4)
    assert rows.loc["corecode", "pass@1"] == pytest.approx(1.0)
    assert list(table["system"]) == ["corecode", "direct", "cot"]  # best first
    # corecode covers 3 tasks: the comparison set is those 3 for every row
    assert set(table["shared_tasks"]) == {3}
    assert rows.loc["direct", "pass@1_shared"] == pytest.approx(1.0)
    assert rows.loc["cot", "verdict_runtime_error"] == pytest.approx(3 / 4)
    verdicts = table[[c for c in COLUMNS if c.startswith("verdict_")]].sum(axis=1)
    assert verdicts.to_list() == pytest.approx([1.0, 1.0, 1.0])
    assert rows.loc["corecode", "calls_per_task"] == 2.0
    assert rows.loc["direct", "pass@1_ci_low"] <= 0.75 <= rows.loc["direct", "pass@1_ci_high"]
    assert (rows["measured"] > 0).all()  # passing solutions were timed against the reference


def test_pass_at_1_interval_is_clopper_pearson_at_one_sample_per_task():
    import numpy as np

    # published exact 95 % bounds: 0/20 -> upper 1 - 0.025^(1/20), 20/20 -> its mirror
    assert proportion_interval(np.zeros(20)) == pytest.approx((0.0, 0.16843), abs=1e-5)
    assert proportion_interval(np.ones(20)) == pytest.approx((0.83157, 1.0), abs=1e-5)
    assert proportion_interval(np.array([1.0] * 5 + [0.0] * 15)) == pytest.approx(
        (0.0866, 0.4910), abs=1e-4
    )
    low, high = proportion_interval(np.array([1.0] * 30 + [0.0] * 70))
    assert 0.21 < low < 0.3 < high < 0.4  # about ±1.96 * sqrt(.3 * .7 / 100), a little wider


def test_cli_writes_identical_csv_and_html_from_the_same_runs(run_dirs, tmp_path):
    outputs = []
    for attempt in ("a", "b"):
        csv, html = tmp_path / attempt / "lb.csv", tmp_path / attempt / "lb.html"
        proc = subprocess.run(
            [sys.executable, "-m", "corebench.harness.cli", "leaderboard", str(run_dirs),
             "--csv", str(csv), "--html", str(html)],
            capture_output=True, text=True,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        outputs.append((csv.read_bytes(), html.read_bytes()))
    assert outputs[0] == outputs[1]
    html = outputs[0][1].decode()
    fetches = r"""(src|href)\s*=\s*["']?(https?:|//)|url\(\s*["']?(https?:|//)|@import|<link"""
    assert re.search(fetches, html) is None  # self-contained: nothing is fetched


def test_unknown_paths_are_one_clear_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "corebench.harness.cli", "leaderboard", str(tmp_path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 1 and proc.stderr.startswith("Error: no runs found")


def browser():
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail(
            "chromium and chromedriver are needed for the browser test: "
            "apt-get install chromium chromium-driver (scripts/setup.sh --test does it)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def test_page_in_a_real_browser(run_dirs, tmp_path):
    from selenium.webdriver.common.by import By

    runs = collect_runs([run_dirs])
    table = leaderboard_table(runs)
    page = tmp_path / "leaderboard.html"
    write_html(table, runs, page)
    driver = browser()
    try:
        driver.get(page.as_uri())
        assert driver.title == "corebench leaderboard"
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []

        def systems() -> list[str]:
            cells = driver.find_elements(By.CSS_SELECTOR, "#leaderboard tbody td[data-col=system]")
            return [c.text for c in cells]

        assert systems() == ["corecode", "direct", "cot"]
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SCREENSHOTS / "leaderboard-top.png"))
        header = driver.find_element(By.CSS_SELECTOR, "th[data-col='pass@1']")
        header.click()  # ascending
        assert systems() == ["cot", "direct", "corecode"]
        assert header.get_attribute("aria-sort") == "ascending"
        driver.find_element(By.CSS_SELECTOR, "th[data-col=system]").click()
        assert systems() == ["corecode", "cot", "direct"]

        driver.find_element(By.ID, "filter").send_keys("cot")
        visible = [r for r in driver.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")]
        assert [r.is_displayed() for r in visible] == [False, True, False]
        driver.find_element(By.ID, "filter").clear()
        driver.execute_script("document.getElementById('filter').dispatchEvent(new Event('input'))")

        for plot in ("plot-pass-vs-runtime", "plot-pass", "plot-verdicts"):
            svg = driver.find_element(By.CSS_SELECTOR, f"#{plot} svg")
            assert svg.size["width"] > 200 and svg.size["height"] > 100, plot
        assert driver.find_elements(By.CSS_SELECTOR, "#plot-pass-vs-runtime svg text")

        corecode_row = driver.find_element(
            By.XPATH, "//tr[td[@data-col='system' and text()='corecode']]"
        )
        corecode_row.find_element(By.CSS_SELECTOR, "button.open-tasks").click()
        assert driver.find_element(By.ID, "task-view").is_displayed()
        tasks = driver.find_elements(By.CSS_SELECTOR, "#task-list button.task")
        assert [t.get_attribute("data-task") for t in tasks] == ["Mbpp/2", "Mbpp/3", "Mbpp/4"]
        tasks[1].click()
        detail = driver.find_element(By.ID, "task-detail")
        assert "Mbpp/3" in detail.text and "passed" in detail.text
        assert "PLAN-MARKER" in detail.find_element(By.CSS_SELECTOR, "pre.plan").text
        assert "def is_not_prime" in detail.find_element(By.CSS_SELECTOR, "pre.code").text
        assert len(detail.find_elements(By.CSS_SELECTOR, "details.call")) == 2
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(tmp_path / "leaderboard.png"))
        shutil.copy(tmp_path / "leaderboard.png", SCREENSHOTS / "leaderboard.png")
        assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
    finally:
        driver.quit()


def test_plans_read_as_each_system_renders_them():
    from corebench.harness import ExecutionResult, Solution, Verdict
    from corebench.harness.registry import default_plugins
    from corebench.leaderboards.collect import sample_detail
    from corebench.plugins.systems.corecode.outline import parse_plan

    systems = default_plugins().systems
    result = ExecutionResult(task_id="t", sample_index=0, verdict=Verdict.wrong_answer)
    plan = "Input/Output: a list in, its sum out.\nSteps:\n1. total = sum(xs)\nFinal step: give it back."
    corecode = Solution(
        task_id="t", sample_index=0, code="",
        artifacts={"plan": plan, "plan_outline": parse_plan(plan).as_artifact()},
    )  # fmt: skip
    shown = sample_detail(corecode, result, systems.get("corecode").component)["plan"]
    assert shown.startswith(plan)
    assert shown.endswith(
        "[outline: sections missing: Branches, Loops, Complexity; lines of code: 1]"
    )
    mapcoder = Solution(
        task_id="t", sample_index=0, code="",
        artifacts={
            "recalled": {"asked": 3, "parsed": 1},
            "plans": [{"plan": "use a set", "confidence": 80}, {"plan": "sort", "confidence": 10}],
        },
    )  # fmt: skip
    shown = sample_detail(mapcoder, result, systems.get("mapcoder").component)["plan"]
    assert (
        shown == "[exemplars recalled: 1 of 3]\n\n(confidence 80) use a set\n\n(confidence 10) sort"
    )
    assert sample_detail(mapcoder, result)["plan"] == ""  # the base class knows no `plans`


def test_paired_differences_exact_mcnemar_and_sign_flip():
    import numpy as np
    from scipy.stats import binomtest, permutation_test

    from corebench.leaderboards.stats import paired, with_holm

    # 40 tasks, one sample each: a passes 12 tasks b fails, b passes 2 that a fails
    a = np.array([1] * 12 + [0] * 2 + [1] * 10 + [0] * 16, dtype=float)
    b = np.array([0] * 12 + [1] * 2 + [1] * 10 + [0] * 16, dtype=float)
    (result,) = with_holm([paired(a, b, binary=True)])
    assert result.tasks == 40 and result.difference == 0.25
    # McNemar's exact test is the two-sided binomial test on the 14 discordant tasks
    assert result.test == "exact McNemar" and result.p == binomtest(2, 14).pvalue
    assert 0 < result.low < 0.25 < result.high  # the inverted sign-flip test excludes 0 too
    assert result.p_holm == result.p < 0.05 and result.distinguishable
    same = with_holm([paired(a, a, binary=True)])[0]
    assert (same.difference, same.p) == (0.0, 1.0) and not same.distinguishable
    # a one-task-in-forty difference is noise at this size
    c = a.copy()
    c[0] = 0
    assert not with_holm([paired(a, c, binary=True)])[0].distinguishable
    # one shared task is never "distinguishable", whatever its difference
    one = with_holm([paired(np.array([1.0]), np.array([0.0]), binary=True)])[0]
    assert one.p == 1.0 and (one.low, one.high) == (-1.0, 1.0) and not one.distinguishable
    # six tasks, four better by a quarter: the exact sign-flip p (8 of 64 sign vectors)
    six = np.array([0.25, 0.25, 0.25, 0.25, 0.0, 0.0])
    exact = permutation_test(
        (six,), lambda x, axis: x.mean(axis=axis), permutation_type="samples",
        vectorized=True, n_resamples=64,
    ).pvalue  # fmt: skip
    result = paired(six, np.zeros(6))
    assert result.p == exact == 0.125 and result.low <= 0 <= result.high


def test_runs_pool_only_with_the_same_sampling_and_split_and_models_have_no_paths(
    tmp_path, data_dir
):
    from conftest import ScriptedBackend, scripted_plugins

    from corebench.leaderboards.collect import model_name

    ScriptedBackend.respond = staticmethod(respond)
    plugins = scripted_plugins()
    settings = [("a", 0.0, 0), ("b", 0.0, 1), ("c", 0.7, 0)]  # a and b differ only in the seed
    for name, temperature, seed in settings:
        config = RunConfig(
            benchmark="mbpp", system="direct", model="scripted", limit=2,
            temperature=temperature, seed=seed,
        )  # fmt: skip
        Runner(config, tmp_path / name, data_dir=data_dir, plugins=plugins).run()
    table = leaderboard_table(collect_runs([tmp_path]))
    assert sorted(table["sampling"]) == ["T=0.7 top-p=0.95 max=512", "greedy max=512"]
    pooled = table.set_index("sampling").loc["greedy max=512"]
    # greedy: the seed changes nothing, so b's samples are a's and count once
    assert pooled["runs"] == "a" and pooled["samples"] == 2
    assert set(table["model"]) == {"scripted"}  # the backend's own label

    # a trained checkpoint is named by its manifest and weights, never by where it lies
    trained = {
        "*": {
            "backend": "hf",
            "target": "/home/me/ckpt/run7/model",
            "label": "grpo(embedded, 10 steps)",
            "weights_sha256": "1a2b3c4d5e6f",
        }
    }
    assert model_name(trained, "hf:/home/me/ckpt/run7/model") == "grpo(embedded, 10 steps)@1a2b3c4d"
    # runs stored before backends labelled their models: the spec without its paths
    assert (
        model_name(None, "planner=hf:/x/y/planner,coder=embedded")
        == "coder=embedded,planner=hf:planner"
    )


def test_pooling_counts_each_sample_once_and_a_copied_run_changes_nothing(tmp_path, data_dir):
    from conftest import ScriptedBackend, scripted_plugins

    ScriptedBackend.respond = staticmethod(respond)
    plugins = scripted_plugins()
    for name, seed in (("c", 0), ("d", 1), ("e", 0)):  # e repeats c's seed
        config = RunConfig(
            benchmark="mbpp", system="direct", model="scripted", limit=2, n=2, k=[1, 2, 4],
            temperature=0.7, seed=seed,
        )  # fmt: skip
        Runner(config, tmp_path / name, data_dir=data_dir, plugins=plugins).run()
    table = leaderboard_table(collect_runs([tmp_path]))
    (row,) = table.to_dict("records")
    # different seeds at T > 0 add up (2 tasks x 2 samples each); the same seed again adds nothing
    assert row["samples"] == 8 and row["runs"] == "c d"
    assert row["pass@k"].split()[-1].startswith("4:")  # 4 samples per task: pass@4 is defined
    shutil.copytree(tmp_path / "c", tmp_path / "c-copy")
    shutil.copytree(tmp_path / "d", tmp_path / "d-copy")
    again = leaderboard_table(collect_runs([tmp_path]))
    pd.testing.assert_frame_equal(again, table)  # every number, pass@k and wall time included
    alone = leaderboard_table(collect_runs([tmp_path / "c", tmp_path / "c-copy"]))
    assert alone.loc[0, "samples"] == 4 and alone.loc[0, "runs"] == "c"
    assert not any(k.startswith("4:") for k in alone.loc[0, "pass@k"].split())  # none invented
