"""Benchmarks beyond EvalPlus: original MBPP on the shared data, and APPS, CodeContests and
LiveCodeBench on fixture files written in each dataset's real schema (loaded through the same
``datasets`` code as the Hub files)."""

from __future__ import annotations

import asyncio
import base64
import json
import pickle
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from corebench.harness import RunConfig, Verdict
from corebench.harness.comparators import Close, Comparator, Exact, Unwrap
from corebench.harness.errors import CorebenchError, DatasetMissingError
from corebench.harness.registry import default_plugins
from corebench.harness.runner import Runner
from corebench.harness.sandbox import Executor
from corebench.harness.store import Store
from corebench.plugins.benchmarks.contest_graders import AppsCall
from corebench.plugins.benchmarks.evalplus_oracles import MBPP_ORACLE_TASKS, EvalPlusComparator
from corebench.plugins.benchmarks.livecodebench import decode_tests

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
CLI = [sys.executable, "-m", "corebench.harness.cli"]
LCB = {"release": "release_v2"}  # the fixture folder holds test.jsonl and test2.jsonl

# Correct programs for the fixture tasks that have no usable reference solution.
SOLUTIONS = {
    "CodeContests/p00001 Reverse Lines": "import sys\nprint(''.join(reversed(sys.stdin.readlines())), end='')\n",
    "LiveCodeBench/3001": "class Solution:\n    def addUp(self, nums, k):\n        return sum(nums) * k\n",
    "LiveCodeBench/abc300_a": "print(2 * int(input()))\n",
    "LiveCodeBench/1990A": "input()\nxs = list(map(int, input().split()))\nprint(max(xs) - min(xs))\n",
}


def bench(name: str, data_dir: Path = FIXTURES, **options):
    return default_plugins().benchmarks.get(name).component(data_dir, **options)


def judge(benchmark, task_id: str, code: str):
    return asyncio.run(
        Executor(workers=2).evaluate(task_id, 0, code, benchmark.test_suite(task_id))
    )


def test_all_six_benchmarks_are_listed():
    out = subprocess.run([*CLI, "list"], capture_output=True, text=True, check=True).stdout
    listed = out.split("systems:")[0]
    for name in ("humaneval", "mbpp", "mbpp-original", "livecodebench", "codecontests", "apps"):
        assert f"\n  {name} " in listed


@pytest.mark.parametrize(
    ("name", "options", "expected"),
    [
        ("apps", {}, ["APPS/4001", "APPS/4002", "APPS/4003"]),  # 4004 has no tests: skipped
        ("codecontests", {}, ["CodeContests/1000_A. Two Sums", "CodeContests/p00001 Reverse Lines", "CodeContests/1001_B. Hard Sum"]),
        ("livecodebench", LCB, ["LiveCodeBench/3001", "LiveCodeBench/abc300_a", "LiveCodeBench/1990A"]),
    ],
)  # fmt: skip
def test_every_fixture_task_passes_with_a_correct_program(name, options, expected):
    benchmark = bench(name, **options)
    assert [t.task_id for t in benchmark.tasks()] == expected
    for task in benchmark.tasks():
        suite = benchmark.test_suite(task.task_id)
        code = SOLUTIONS.get(task.task_id, suite.reference_code)
        result = judge(benchmark, task.task_id, code)
        assert result.verdict is Verdict.passed, (task.task_id, result.first_failure)
        assert len(result.tests) == sum(map(len, suite.inputs.values()))
        wrong = judge(benchmark, task.task_id, "print(42)\n")
        assert wrong.verdict is not Verdict.passed


def test_apps_formats_call_based_and_stdio_tasks():
    apps = bench("apps")
    call = next(t for t in apps.tasks() if t.task_id == "APPS/4002")
    assert call.entry_point == "Solution.maxOf" and "class Solution:" in call.prompt
    assert isinstance(
        apps.test_suite("APPS/4002").comparator, AppsCall
    )  # outputs stored as [value]
    stdio = next(t for t in apps.tasks() if t.task_id == "APPS/4003")
    assert stdio.entry_point is None and "standard input" in stdio.prompt
    assert stdio.metadata["level"] == "competition"
    # 4003's tests are partly stored as lists of lines; a float printed with fewer digits passes
    short = "n = int(input())\nxs = list(map(int, input().split()))\nprint(round(sum(xs) / n, 8))\n"
    assert judge(apps, "APPS/4003", short).verdict is Verdict.passed


def test_codecontests_suites_sources_and_time_limits():
    contests = bench("codecontests")
    suite = contests.test_suite("CodeContests/1000_A. Two Sums")
    assert list(suite.inputs) == ["public", "private", "generated"]
    assert suite.reference_code.startswith("a, b")  # the Python 3 solution, not the C++ one
    reverse = contests.test_suite("CodeContests/p00001 Reverse Lines")
    assert reverse.reference_code == ""  # Python 2 only
    # 1.5 s: the tester's RLIMIT_CPU holds whole seconds; the tokens grader keeps the stated limit
    assert (reverse.time_limit_s, reverse.time_limit_fixed) == (1.0, True)
    loose = bench("codecontests", grader="tokens").test_suite("CodeContests/p00001 Reverse Lines")
    assert (loose.time_limit_s, loose.time_limit_fixed) == (1.5, False)
    task = contests.tasks()[0]
    assert task.metadata["source"] == "codeforces" and task.metadata["cf_rating"] == 800
    no_generated = bench("codecontests", generated_tests=False)
    assert "generated" not in no_generated.test_suite("CodeContests/1000_A. Two Sums").inputs


def test_benchmark_options_filter_and_are_checked():
    assert [t.task_id for t in bench("apps", level="interview").tasks()] == ["APPS/4002"]
    hard = bench("codecontests", source="codeforces", min_rating=1000).tasks()
    assert [t.task_id for t in hard] == ["CodeContests/1001_B. Hard Sum"]
    assert len(bench("livecodebench", release="release_v1").tasks()) == 2
    recent = bench("livecodebench", start_date="2023-06-01", **LCB).tasks()
    assert [t.metadata["contest_date"] for t in recent] == ["2023-11-05", "2024-07-20"]
    with pytest.raises(
        CorebenchError, match="unknown APPS level 'intro'. Did you mean 'introductory'"
    ):
        bench("apps", level="intro")
    with pytest.raises(CorebenchError, match="option min_rating: input should be a valid int"):
        bench("codecontests", min_rating="high")
    with pytest.raises(CorebenchError, match="option 'levle'. Did you mean 'level'"):
        bench("apps", levle="interview")
    with pytest.raises(CorebenchError, match="unknown release"):
        bench("livecodebench", release="v9")


def test_livecodebench_visible_examples_and_compressed_private_tests():
    lcb = bench("livecodebench", **LCB)
    task = next(t for t in lcb.tasks() if t.task_id == "LiveCodeBench/3001")
    assert task.examples == ["assert Solution().addUp([1, 2, 3], 2) == 12"]
    suite = lcb.test_suite("LiveCodeBench/3001")
    assert suite.inputs["private"] == [[[], 5], [[-1, 4], 3]] and suite.expected["private"] == [
        0,
        9,
    ]
    # hidden (private) inputs never reach the prompt
    assert "[-1, 4]" not in task.prompt and "-7" not in lcb.tasks()[1].prompt


def test_dataset_pickles_cannot_run_code():
    class Evil:
        def __reduce__(self):
            return (print, ("owned",))

    blob = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    with pytest.raises(pickle.UnpicklingError, match="refusing to load builtins.print"):
        decode_tests(blob)


def test_missing_files_are_one_clear_error(tmp_path, monkeypatch):
    with pytest.raises(
        DatasetMissingError,
        match=r"apps/test.jsonl .* not found in .*huggingface.co/datasets/codeparrot/apps",
    ):
        bench("apps", tmp_path).tasks()
    with pytest.raises(DatasetMissingError, match="livecodebench/test3.jsonl"):
        bench(
            "livecodebench", FIXTURES
        ).tasks()  # the default release needs test.jsonl … test6.jsonl
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DatasetMissingError, match="offline and no data folder given"):
        bench("codecontests", None).tasks()
    # every built-in benchmark follows the same rules, with the same message
    for name, file in [
        ("mbpp", "MbppPlus-v0.2.0.jsonl.gz"),
        ("humaneval", "HumanEvalPlus-v0.1.10.jsonl.gz"),
        ("mbpp-original", "mbpp.jsonl.gz"),
        ("apps", "apps/test.jsonl"),
    ]:
        with pytest.raises(
            DatasetMissingError, match=rf": {re.escape(file)}.* not found in {tmp_path}"
        ):
            bench(name, tmp_path).tasks()
        with pytest.raises(
            DatasetMissingError, match=rf"offline and no data folder given; {re.escape(file)} is"
        ):
            bench(name, None).tasks()
    (tmp_path / "mbpp.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(DatasetMissingError, match=r"original MBPP: cannot read .*mbpp.jsonl.gz"):
        bench("mbpp-original", tmp_path).tasks()


def test_mbpp_original_splits_references_and_hidden_asserts(data_dir):
    mbpp = bench("mbpp-original", data_dir)
    sizes = {split: len(mbpp.tasks(split)) for split in mbpp.splits}
    assert sizes == {"test": 500, "validation": 90, "train": 374, "prompt": 10}
    for task_id in ("Mbpp/11", "Mbpp/367"):  # 367's asserts need test_setup_code's tree
        suite = mbpp.test_suite(task_id)
        assert judge(mbpp, task_id, suite.reference_code).verdict is Verdict.passed
    wrong = judge(mbpp, "Mbpp/11", "def remove_Occ(s, ch):\n    return s\n")
    assert wrong.verdict is Verdict.wrong_answer and "expected 'heo'" in wrong.first_failure
    for task in mbpp.tasks():
        tests = mbpp.problems[task.task_id].tests
        assert tests[0].strip() in task.prompt and task.examples == [tests[0]]
        hidden = [t for t in tests[1:] if t.strip() != tests[0].strip()]  # 37, 337, 508 repeat it
        assert not any(test.strip() in task.prompt for test in hidden)


def test_a_run_on_a_fixture_benchmark_with_options(tmp_path, scripted, plugins_with_scripted):
    scripted.respond = staticmethod(
        lambda request: f"```python\n{SOLUTIONS['LiveCodeBench/abc300_a']}```"
    )
    config = RunConfig(
        benchmark="livecodebench", system="direct", model="scripted",
        benchmark_options={**LCB, "platform": "atcoder"},
    )  # fmt: skip
    Runner(config, tmp_path / "run", data_dir=FIXTURES, plugins=plugins_with_scripted).run()
    store = Store(tmp_path / "run", create=False)
    [(solution, result)] = list(store.samples())
    assert solution.task_id == "LiveCodeBench/abc300_a" and result.verdict is Verdict.passed
    assert "standard input" in scripted.requests[0].messages[-1].content
    assert "complete program" in scripted.requests[0].messages[-1].content
    assert store.metadata()["dataset"]["options"]["platform"] == "atcoder"


@pytest.mark.model
@pytest.mark.parametrize(
    ("name", "options"),
    [("apps", []), ("codecontests", ["-B", "source=codeforces"]), ("livecodebench", ["-B", "release=release_v2"])],
)  # fmt: skip
def test_cli_runs_the_embedded_model_on_fixture_benchmarks(name, options, tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [*CLI, "run", "--bench", name, *options, "--system", "direct", "--limit", "2",
         "--max-new-tokens", "96", "--data-dir", str(FIXTURES), "--out", str(run_dir)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = json.loads(subprocess.check_output([*CLI, "show", str(run_dir), "--json"]))
    assert shown["tasks"] == 2 and sum(shown["verdicts"].values()) == 2


def test_humaneval_train_and_heldout_split_the_tasks_disjointly(data_dir):
    from corebench.training.contamination import items, near_duplicates

    humaneval = bench("humaneval", data_dir)
    train, heldout = humaneval.tasks("train"), humaneval.tasks("heldout")
    assert (len(train), len(heldout)) == (124, 40)  # 25/33 and 8/33 of 164, as the class study
    ids = {t.task_id for t in train} | {t.task_id for t in heldout}
    assert len(ids) == 164 and ids == {t.task_id for t in humaneval.tasks("test")}
    assert [t.task_id for t in heldout][:9] == [
        *(f"HumanEval/{i}" for i in range(8)),
        "HumanEval/33",
    ]

    # no shared id; three near variants (filter by prefix / by substring share every base
    # test; pairs / triples summing to zero; two `sum_squares` share one test), which training
    # leaves out
    flags = near_duplicates(items(humaneval, "train"), items(humaneval, "heldout"))
    assert [f.line() for f in flags] == [
        "HumanEval/29 HumanEval/7 tests 1.000",
        "HumanEval/43 HumanEval/40 description 0.920",
        "HumanEval/142 HumanEval/133 name 0.091",
    ]
    with pytest.raises(
        CorebenchError, match="unknown humaneval split 'held_out'. Did you mean 'heldout'"
    ):
        humaneval.tasks("held_out")


def test_online_evalplus_files_come_through_evalplus_public_helpers_at_our_version(
    tmp_path, monkeypatch, data_dir
):
    """No network here: EvalPlus's own cache writer is replaced by a copy of the offline file,
    so what is checked is the wiring (the release and version asked for, the path used)."""
    import gzip

    import evalplus.data.utils as evalplus_utils

    asked = []

    def make_cache(url, path):
        asked.append(url)
        Path(path).write_bytes(
            gzip.decompress((data_dir / "MbppPlus-v0.2.0.jsonl.gz").read_bytes())
        )

    monkeypatch.setattr(evalplus_utils, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(evalplus_utils, "make_cache", make_cache)
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    mbpp = bench("mbpp", None)
    assert len(mbpp.tasks()) == 378 and mbpp.path == tmp_path / "MbppPlus-v0.2.0.jsonl"
    assert asked == [
        "https://github.com/evalplus/mbppplus_release/releases/download/v0.2.0/MbppPlus.jsonl.gz"
    ]


def _same_shape(a, b) -> bool:
    """Equal values of the same types all the way down (a tuple is not a list, {} not set())."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(_same_shape, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_shape(a[k], b[k]) for k in a)
    return a == b or (a != a and b != b)  # NaN equals NaN here


def test_mbpp_plus_inputs_have_the_shapes_evalplus_gives_them_on_every_task(data_dir):
    from evalplus.data.mbpp import mbpp_deserialize_inputs

    from corebench.plugins.benchmarks.evalplus_tasks import MbppPlus

    benchmark = MbppPlus(data_dir)
    converted = 0
    for task_id, problem in benchmark.problems.items():
        suite = benchmark.test_suite(task_id)
        for name in ("base", "plus"):
            theirs = mbpp_deserialize_inputs(task_id, problem[f"{name}_input"])
            assert _same_shape(suite.inputs[name], theirs), (task_id, name)
            converted += theirs is not problem[f"{name}_input"]
    assert converted == 2 * 52  # MBPP+ v0.2.0 holds 52 of the tasks whose inputs are converted


def test_a_comparator_exact_for_strings_takes_only_the_equal_string():
    # what lets the harness judge a long expected string by its digest alone
    expected = "1 2 3"
    others = ["1 2 3 ", "1 2 4", "", 0, 1, True, None, [expected], (expected,), set(expected)]
    comparators = [Exact(), Close(), Close(atol=0.5), Unwrap()]
    for dataset in ("mbpp", "humaneval"):
        for entry in [*sorted(MBPP_ORACLE_TASKS), "find_zero", "string_sequence"]:
            comparators += [EvalPlusComparator(dataset, entry, atol) for atol in (0.0, 1e-6)]
    exact = [c for c in comparators if c.exact_for_strings]
    # MBPP+'s oracles are its own; HumanEval+'s one is find_zero's
    assert {(c.dataset, c.entry_point) for c in exact if isinstance(c, EvalPlusComparator)} == {
        ("mbpp", "find_zero"), ("mbpp", "string_sequence"),
        *(("humaneval", entry) for entry in [*MBPP_ORACLE_TASKS, "string_sequence"]),
    }  # fmt: skip
    for comparator in exact:
        assert comparator.accepts_equal and comparator("1 2 3", expected, [5]), comparator
        for other in others:
            assert not comparator(other, expected, [5]), (comparator, other)
    # why MBPP+'s own oracles are left out: several take more than the equal string
    for entry, other in [
        ("are_equivalent", "no"), ("sum_div", 0), ("similar_elements", "3 2 1"), ("check_str", "x"),
    ]:  # fmt: skip
        assert EvalPlusComparator("mbpp", entry)(other, expected, [5]), entry


def test_a_comparator_that_does_not_say_how_it_compares_cannot_be_made():
    class Nothing(Comparator):
        name = "nothing"

    with pytest.raises(TypeError, match="abstract"):
        Nothing()
