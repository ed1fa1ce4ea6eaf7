"""The contest benchmarks judge as their official graders do.

LiveCodeBench: every program of ``measurements/versus_livecodebench.py`` (over 300, written to
probe the grader) judged by corebench and by LiveCodeBench's own ``run_test`` (PyPI's
``nvidia-livecodebench``) must get the same verdict on every test. APPS and CodeContests, whose
graders do not install: each documented behaviour of theirs is a row below (the rule it follows
named beside it, from ``hendrycks/apps`` ``eval/testing_util.py`` and ``google-deepmind/
code_contests`` ``execution/tester_sandboxer.cc``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import measurement_scripts
import pytest

from corebench.harness import FunctionalSuite
from corebench.harness.comparators import JsonEqual, Tokens, comparator_from_spec
from corebench.harness.sandbox import Executor
from corebench.harness.service.wire import Tests
from corebench.plugins.benchmarks.apps import Apps, apps_arguments, apps_expected
from corebench.plugins.benchmarks.contest_graders import (
    GRADERS,
    AppsCall,
    AppsOutput,
    CodeContestsOutput,
    LiveCodeBenchCall,
    LiveCodeBenchOutput,
    absl_double,
)
from corebench.plugins.benchmarks.livecodebench import LiveCodeBench

FIXTURES = Path(__file__).parent / "fixtures" / "hf"


versus = measurement_scripts.load("versus_livecodebench")


# --- LiveCodeBench ------------------------------------------------------------------------------

# the pairs the issue found judged differently (program's output, expected, LiveCodeBench's)
LCB_PAIRS = [
    ("1 2\n3", "1\n2 3", False),
    ("0.3333333", "0.333333333", False),
    ("12", "12.0000001", False),
    ("1.0", "1", True),
    ("3\n", "3", True),
    ("  3  \n\n", "3\n", True),
    ("1e3", "1000", True),
    ("YES", "Yes", False),
]


@pytest.mark.parametrize(("output", "expected", "passes"), LCB_PAIRS)
def test_livecodebench_output_check_is_its_graders(output, expected, passes):
    assert LiveCodeBenchOutput()(output, expected, []) is passes
    # LiveCodeBench's own line handling gives the same (its grade_stdio, after running a program)
    grader = versus.load_lcb_grader()
    got, want = grader.get_stripped_lines(output), grader.get_stripped_lines(expected)

    def same_line(g: str, w: str) -> bool:
        (ok_g, numbers_g), (ok_w, numbers_w) = map(grader.convert_line_to_decimals, (g, w))
        return g == w or (ok_g and ok_w and numbers_g == numbers_w)

    theirs = len(got) == len(want) and all(map(same_line, got, want))
    assert theirs is passes


def test_the_tokens_grader_stays_available_and_judges_otherwise():
    loose = LiveCodeBench(None, grader="tokens")
    row = versus.lcb_row(versus.STDIO[0])
    assert isinstance(loose.convert(row, "test").suite.comparator, Tokens)
    assert LiveCodeBench(None).convert(row, "test").suite.exit_status == "system_exit"
    functional = versus.lcb_row(versus.FUNCTIONAL[0])
    assert isinstance(loose.convert(functional, "test").suite.comparator, JsonEqual)
    assert isinstance(
        LiveCodeBench(None).convert(functional, "test").suite.comparator, LiveCodeBenchCall
    )
    # the pairs: the looser checker accepts three the official one refuses
    assert [Tokens()(o, e, []) for o, e, _ in LCB_PAIRS[:4]] == [True, True, True, False]


def test_livecodebench_agrees_with_its_own_grader_on_every_program_and_test():
    """Over 300 programs, stdin/stdout and functional, each test's verdict (pass, wrong answer,
    runtime error, time limit) from corebench and from LiveCodeBench's ``run_test``."""
    pytest.importorskip("numpy")
    versus.load_lcb_grader()  # fails here, clearly, when nvidia-livecodebench is missing
    cases = versus.cases()
    assert len(cases) >= 300
    pairs = [(c.problem, c.code) for c in cases]
    theirs = versus.judge_with_lcb(pairs, timeout=1)
    ours = versus.judge_with_corebench(pairs, time_limit_s=1.0)
    differ = [
        f"{c.problem.name}/{c.variant}: LiveCodeBench {a}, corebench {b}"
        for c, a, b in zip(cases, theirs, ours, strict=True)
        if a != b
    ]
    assert not differ, "\n".join(differ)
    # the set is not one-sided: every kind of verdict occurs, on both kinds of problem
    kinds = {k for verdicts in theirs for k in verdicts}
    assert kinds == {"pass", "wrong", "error", "timeout"}
    functional = [t for c, t in zip(cases, theirs, strict=True) if c.problem.func]
    stdio = [t for c, t in zip(cases, theirs, strict=True) if not c.problem.func]
    for group in (functional, stdio):
        assert {v[-1] for v in group} == {"pass", "wrong", "error", "timeout"}


def test_the_documented_differences_from_livecodebenchs_runner_are_real():
    """What the runner does because it runs programs in its own process, which corebench does
    not copy (docs/benchmarks.md): each difference as both sides judge it today."""
    problems = {p.name: p for p in versus.STDIO}
    pairs = [(problems[name], code) for name, code, *_ in versus.KNOWN_DIFFERENCES]
    theirs = versus.judge_with_lcb(pairs, timeout=1)
    ours = versus.judge_with_corebench(pairs, time_limit_s=1.0)
    for (_, _, why, lcb, corebench), a, b in zip(
        versus.KNOWN_DIFFERENCES, theirs, ours, strict=True
    ):
        assert (a, b) == (lcb, corebench), why


# --- APPS ---------------------------------------------------------------------------------------

# (what the program prints, the expected output, verdict, APPS's rule that decides it)
APPS_STDIO = [
    ("3\n", "3\n", "pass", "the whole output stripped equals the expected stripped"),
    ("  3  \n\n\n", "3\n", "pass", "the same, after stripping"),
    ("1 2\n3\n", "1 2\n3\n", "pass", "the same text"),
    (" 1 2 \n 3\n", "1 2\n3\n", "pass", "each line stripped, then the whole"),
    ("1  2\n3\n", "1 2\n3\n", "pass", "lines as sets of tokens"),
    ("3\n1 2\n", "1 2\n3\n", "pass", "the lines as a set: their order is not checked"),
    ("2 1\n3\n", "1 2\n3\n", "pass", "a line as a set: token order is not checked"),
    ("1 1 2\n", "1 2\n", "pass", "a line as a set: repeated tokens count once"),
    ("1 2 3\n", "1 2\n3\n", "wrong", "tokens on other lines make other sets"),
    ("0.3333333\n", "0.333333333\n", "pass", "one float per line, numpy allclose"),
    ("0.33\n", "0.333333333\n", "wrong", "outside allclose's tolerance"),
    ("1.0\n", "1\n", "pass", "floats per line"),
    ("1e3\n", "1000\n", "pass", "floats per line"),
    ("1.0001 2\n", "1 2\n", "pass", "tokens rounded to 3 decimals, as sets"),
    ("1.01 2\n", "1 2\n", "wrong", "not equal at 3 decimals"),
    ("YES\n", "Yes\n", "wrong", "case matters"),
    ("3\nextra\n", "3\n", "wrong", "extra output"),
    ("", "0\n", "wrong", "no output"),
    ("1\n\n2\n", "1\n \n2\n", "pass", "expected lines stripped: a blank line stays, empty"),
    ("1\n2\n", "1\n \n2\n", "wrong", "the expected blank line is an empty set the output lacks"),
    ("1\n\n2\n", "1\n2\n", "pass", "blank output lines are dropped"),
]
# (what the function returns, the expected value as JSON states it, verdict, rule)
APPS_CALL = [
    ("[1, 2]", [1, 2], "pass", "=="),
    ("(1, 2)", [1, 2], "pass", "a tuple is a list"),
    ("5", [5], "pass", "the first element of an expected list"),
    ("[5]", [[5]], "pass", "the first element of an expected list"),
    ("[(1, 2)]", [[[1, 2]]], "pass", "a list of tuples as lists, against the first element"),
    ("[(1, 2)]", [[1, 2]], "wrong", "nested tuples are not lists"),
    ("1.0", [1], "pass", "Python's == (1.0 == 1)"),
    ("True", [1], "pass", "Python's == (True == 1)"),
    ("'5'", [5], "wrong", "a string is not a number"),
    ("{1: 'a'}", {"1": "a"}, "pass", "a dict's keys stated as text are integers"),
    ("None", [0], "wrong", "=="),
]


@pytest.mark.parametrize(("output", "expected", "verdict", "rule"), APPS_STDIO)
def test_apps_output_check_row(output, expected, verdict, rule):
    assert AppsOutput()(output, expected, []) is (verdict == "pass"), rule


@pytest.mark.parametrize(("returned", "expected", "verdict", "rule"), APPS_CALL)
def test_apps_call_check_row(returned, expected, verdict, rule):
    output = eval(returned)  # noqa: S307 - literals of this file
    assert AppsCall()(output, apps_expected(expected), []) is (verdict == "pass"), rule


def test_apps_runs_programs_as_its_grader():
    """Whole programs as APPS's grader runs them (its import header, `exit` and `quit` set to
    None, no `__main__`, `sys.exit(n)` a normal end), with the two idioms corebench keeps:
    ``measurements/versus_apps_grader.py`` checks APPS's verdicts on the same programs."""
    apps_versus = measurement_scripts.load("versus_apps_grader")
    programs = apps_versus.PROGRAMS
    apps = Apps(FIXTURES)
    suite = apps.test_suite("APPS/4001")
    assert suite.inputs["tests"] == [[i] for i in apps_versus.SUM_TESTS["inputs"]]

    async def judge_all():
        executor = Executor(workers=2)
        jobs = [
            executor.judge("APPS/4001", i, code, suite)
            for i, (_, code, _, _) in enumerate(programs)
        ]
        return await asyncio.gather(*jobs)

    results = asyncio.run(judge_all())
    got = {
        what: next((k for k in versus.corebench_kinds(r) if k != "pass"), "pass")
        for (what, *_), r in zip(programs, results, strict=True)
    }
    assert got == {what: ours for what, _, _, ours in programs}


def test_apps_converts_dict_arguments_as_its_grader():
    assert apps_arguments([{"1": 2, "3": 4}, "dropped"]) == [{1: 2, 3: 4}]
    assert apps_arguments([{"a": 1}]) == [{"a": 1}]  # keys that are not integers: unchanged
    assert apps_expected({"2": [1]}) == [{2: [1]}]
    assert apps_expected([{"2": 1}]) == [{2: 1}]
    assert apps_expected([1, 2]) == [1, 2]


def test_apps_benchmark_uses_its_graders_rules_and_time_limit():
    apps = Apps(FIXTURES)
    stdio = next(p for p in apps.problems().values() if p.suite.mode == "stdio").suite
    assert isinstance(stdio.comparator, AppsOutput)
    assert (stdio.time_limit_s, stdio.time_limit_fixed, stdio.exit_status) == (
        4.0,
        True,
        "system_exit",
    )
    call = next(p for p in apps.problems().values() if p.suite.mode == "call").suite
    assert isinstance(call.comparator, AppsCall)
    loose = Apps(FIXTURES, grader="tokens")
    task = next(iter(loose.problems().values())).task.task_id
    assert not loose.test_suite(task).time_limit_fixed


# --- CodeContests -------------------------------------------------------------------------------

# (program's output, expected output, verdict, OutputsMatch's rule)
CODECONTESTS = [
    ("3\n", "3", "pass", "tokens split at ASCII blanks"),
    ("1 2\n3", "1\n2 3", "pass", "line structure does not matter"),
    ("YES", "yes", "pass", "tokens lower-cased"),
    ("0.3333333", "0.333333333", "pass", "numbers less than 1e-5 apart"),
    ("0.33332", "0.33333", "wrong", "1e-5 apart is not less than 1e-5"),
    ("12", "12.0000001", "pass", "numbers within 1e-5"),
    ("1000000000000000001", "1000000000000000000", "pass", "integers compared as doubles"),
    ("3", "4", "wrong", "different numbers"),
    ("1e3", "1000", "pass", "exponents read as from_chars reads them"),
    ("+5", "5", "pass", "SimpleAtod takes a leading +"),
    ("0x10", "16", "wrong", "no hexadecimal: compared as text"),
    ("1_000", "1000", "wrong", "no digit separators: compared as text"),
    ("nan", "nan", "pass", "equal token lists"),
    ("nan 1", "nan 1.0", "wrong", "a NaN is never within 1e-5"),
    ("inf 1", "inf 1.0", "wrong", "inf − inf is NaN"),
    ("3\f", "3", "pass", "a form feed does not split tokens, but SimpleAtod strips it"),
    ("a\fb", "a b", "wrong", "a form feed does not split tokens"),
    ("3 4", "3", "wrong", "a different number of tokens"),
    ("Ａ", "ａ", "wrong", "lower-casing is ASCII only"),
]


@pytest.mark.parametrize(("output", "expected", "verdict", "rule"), CODECONTESTS)
def test_codecontests_output_check_row(output, expected, verdict, rule):
    assert CodeContestsOutput()(output, expected, []) is (verdict == "pass"), rule


def test_absl_double_reads_what_simpleatod_reads():
    assert absl_double("1.") == 1.0 and absl_double(".5") == 0.5
    assert absl_double("-inf") == float("-inf") and absl_double("INFINITY") == float("inf")
    assert absl_double("nan(x1)") != absl_double("nan(x1)")  # a NaN
    for text in ("1e", "e5", "+-1", "--1", "1.2.3", "٣", "0x1p3", ""):
        assert absl_double(text) is None, text


# --- exit statuses, time limits, records ------------------------------------------------------


def _stdio_suite(exit_status: str) -> FunctionalSuite:
    return FunctionalSuite(
        "",
        "",
        {"tests": [["1 2\n"]]},
        expected={"tests": ["3\n"]},
        comparator=LiveCodeBenchOutput(),
        mode="stdio",
        time_limit_s=1.0,
        exit_status=exit_status,
    )


@pytest.mark.parametrize(
    ("code", "zero", "system_exit", "any_ending"),
    [
        ("import sys\nprint(3)\nsys.exit(1)\n", "runtime_error", "passed", "passed"),
        ("print(3)\nraise ValueError('after')\n", "runtime_error", "runtime_error", "passed"),
        (
            "import os\nprint(3, flush=True)\nos._exit(4)\n",
            "runtime_error",
            "runtime_error",
            "passed",
        ),
        ("print(4)\n", "wrong_answer", "wrong_answer", "wrong_answer"),
        ("print(3, flush=True)\nwhile True:\n    pass\n", "timeout", "timeout", "timeout"),
    ],
)
def test_exit_statuses_decide_which_endings_are_judged(code, zero, system_exit, any_ending):
    async def verdicts():
        executor = Executor(workers=1)
        return [
            (await executor.judge("t/exit", 0, code, _stdio_suite(status))).verdict.value
            for status in ("zero", "system_exit", "any")
        ]

    assert asyncio.run(verdicts()) == [zero, system_exit, any_ending]


def test_a_fixed_time_limit_holds_with_a_reference():
    from corebench.harness.sandbox.executor import time_limit

    suite = _stdio_suite("zero")
    suite.time_limit_s = 4.0
    assert time_limit(suite, 1.0) == 4.0 * 1.0  # the reference's 4x (its factor happens to be 4)
    assert time_limit(suite, 0.5) == 2.0
    suite.time_limit_fixed = True
    assert time_limit(suite, 0.5) == 4.0
    assert time_limit(suite, 2.0) == 4.0  # not a floor: the reference's 8 s do not count
    assert time_limit(suite, None) == 4.0
    suite.time_limit_s = None  # fixed, but no limit of its own: the reference's
    assert time_limit(suite, 2.0) == 8.0


def test_suites_with_graders_travel_to_the_judging_service_as_data():
    suite = _stdio_suite("system_exit")
    suite.time_limit_fixed = True
    known = {c.name: c for c in GRADERS}
    again = Tests.of(suite).suite(known)
    assert (again.exit_status, again.time_limit_fixed) == ("system_exit", True)
    assert isinstance(again.comparator, LiveCodeBenchOutput)
    for grader in GRADERS:
        assert isinstance(comparator_from_spec(grader().spec(), known), grader)
    assert _stdio_suite("any").content_key != _stdio_suite("zero").content_key
    with pytest.raises(ValueError, match="exit_status"):
        _stdio_suite("sometimes")


def test_runs_record_their_grader_and_never_pool_across_graders():
    """A LiveCodeBench run judged by the official grader, one by the tokens grader and one
    stored before graders were recorded are three rows of a leaderboard."""
    from corebench.leaderboards.collect import benchmark_label

    info = LiveCodeBench(FIXTURES, release="release_v2").dataset_info()
    assert info["grader"] == "official" and info["options"]["grader"] == "official"
    loose = LiveCodeBench(FIXTURES, release="release_v2", grader="tokens").dataset_info()
    labels = {
        benchmark_label("livecodebench", {}, {"dataset": info}),
        benchmark_label("livecodebench", {"grader": "tokens"}, {"dataset": loose}),
        benchmark_label("livecodebench", {}, {"dataset": {"sha256": info["sha256"]}}),
    }
    assert labels == {
        'livecodebench[grader="official"]',
        'livecodebench[grader="tokens"]',
        "livecodebench",
    }


def test_resuming_a_run_under_another_grader_is_refused_as_changed_data():
    from corebench.harness.metadata import provenance_changes

    official = LiveCodeBench(FIXTURES, release="release_v2").dataset_info()
    loose = LiveCodeBench(FIXTURES, release="release_v2", grader="tokens").dataset_info()
    assert provenance_changes({"dataset": official}, official) == []
    assert provenance_changes({"dataset": loose}, official) == [
        "the benchmark's options changed (grader: 'tokens' now 'official')"
    ]


@pytest.mark.measurement_phase
@pytest.mark.parametrize(
    ("exit_status", "ending"),
    [
        ("system_exit", "import sys\nsys.exit(1)\n"),
        ("any", "raise ValueError('after')\n"),
        ("any", "raise KeyboardInterrupt\n"),
        ("any", "import os, sys\nsys.stdout.flush()\nos._exit(3)\n"),  # ends the process itself
    ],
)
def test_a_program_judged_despite_its_ending_is_measured_too(exit_status, ending):
    """The measurement phase lets a program end as its judging did (a refusal otherwise)."""
    suite = _stdio_suite(exit_status)
    suite.reference_code = "a, b = map(int, input().split())\nprint(a + b)\n"
    code = suite.reference_code + ending
    executor = Executor(workers=1)
    assert asyncio.run(executor.evaluate("t/exit", 0, code, suite)).passed
    measured = asyncio.run(executor.measure("t/exit", code, suite, 2))
    assert measured.runtime_ratio is not None and measured.runtime_ratio > 0
