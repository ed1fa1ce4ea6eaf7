"""Leaderboards from stored runs: the table's numbers, deterministic CSV/HTML, and the page in a
real browser (Debian's chromium driven by Selenium, headless, from file://)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from corebench.harness import RunConfig
from corebench.harness.runner import Runner
from corebench.leaderboards import collect_runs, leaderboard_table, write_html
from corebench.leaderboards.stats import interval
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


def test_bootstrap_interval_is_reproducible_and_sensible():
    import numpy as np

    scores = np.array([1.0] * 30 + [0.0] * 70)
    low, high = interval(scores)
    assert (low, high) == interval(scores) and low < 0.3 < high
    assert 0.18 < low < 0.24 and 0.36 < high < 0.42  # about ±1.96 * sqrt(.3 * .7 / 100)


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


def test_paired_differences_and_exact_mcnemar():
    import numpy as np
    from scipy.stats import binomtest

    from corebench.leaderboards.stats import paired

    # 40 tasks, one sample each: a passes 12 tasks b fails, b passes 2 that a fails
    a = np.array([1] * 12 + [0] * 2 + [1] * 10 + [0] * 16, dtype=float)
    b = np.array([0] * 12 + [1] * 2 + [1] * 10 + [0] * 16, dtype=float)
    result = paired(a, b, binary=True)
    assert result.tasks == 40 and result.difference == 0.25
    assert result.low < 0.25 < result.high and result.low > 0  # the interval excludes 0
    # McNemar's exact test is the two-sided binomial test on the 14 discordant tasks
    assert result.p_mcnemar == binomtest(2, 14).pvalue
    assert result.p_bootstrap < 0.05 and result.distinguishable
    same = paired(a, a, binary=True)
    assert (same.difference, same.p_bootstrap, same.p_mcnemar) == (0.0, 1.0, 1.0)
    assert not same.distinguishable
    # a one-task-in-forty difference is noise at this size
    c = a.copy()
    c[0] = 0
    assert not paired(a, c, binary=True).distinguishable


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
    assert pooled["runs"] == "a b" and pooled["samples"] == 4
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
