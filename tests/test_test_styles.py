"""Test styles beyond differential calls: whole programs on stdin/stdout, assert-style expressions,
LeetCode-style ``Class.method`` entry points, and expected outputs stated by the dataset."""

from __future__ import annotations

import asyncio

import pytest

from corebench.harness import FunctionalSuite, Verdict
from corebench.harness.sandbox import Executor
from corebench.harness.sandbox.compare import stdio_match

SUM_PROGRAM = FunctionalSuite(
    entry_point="",
    reference_code="",
    inputs={"public": [["1 2\n"]], "private": [["10 -3\n"], ["0 0\n"]]},
    expected={"public": ["3\n"], "private": ["7\n", "0\n"]},
    mode="stdio",
    comparator="stdio",
    time_limit_s=2.0,
)


def judge(code: str, suite: FunctionalSuite = SUM_PROGRAM, task_id: str = "t/sum"):
    return asyncio.run(Executor(workers=2).evaluate(task_id, 0, code, suite))


@pytest.mark.parametrize(
    "code",
    [
        "a, b = map(int, input().split())\nprint(a + b)\n",
        "import sys\na, b = map(int, sys.stdin.read().split())\nsys.stdout.write(f'{a + b}\\n')\n",
        "import sys\ndef main():\n    a, b = map(int, sys.stdin.buffer.readline().split())\n"
        "    print(a + b)\n    sys.exit(0)\n\nif __name__ == '__main__':\n    main()\n",
        "a, b = map(int, input().split())\nprint(a + b, end='   \\n\\n')\n",  # trailing blanks
    ],
)
def test_stdio_programs_pass(code):
    result = judge(code)
    assert result.verdict is Verdict.passed, result.first_failure
    assert result.suite_verdicts == {"public": Verdict.passed, "private": Verdict.passed}
    assert len(result.tests) == 3


@pytest.mark.parametrize(
    ("code", "verdict", "detail"),
    [
        (
            "a, b = map(int, input().split())\nprint(a + b if a < 5 else 0)\n",
            Verdict.wrong_answer,
            "private test 0: input ['10 -3\\n']: got '0\\n', expected '7\\n'",
        ),
        ("print(int(input()) + 1)\n", Verdict.runtime_error, "ValueError"),
        ("import sys\nsys.exit(3)\n", Verdict.runtime_error, "exit status 3"),
        ("while True:\n    pass\n", Verdict.timeout, ""),
        ("print(", Verdict.syntax_error, "SyntaxError"),
    ],
)
def test_stdio_failures_get_their_verdicts(code, verdict, detail):
    result = judge(code)
    assert result.verdict is verdict
    assert detail in (result.first_failure or "")


def test_printing_a_pass_to_the_real_stdout_cannot_fake_one():
    code = "import os\nos.write(1, b'3\\n7\\n0\\n')\n"
    assert judge(code).verdict is Verdict.wrong_answer


def test_stdio_comparison_is_token_based_with_a_float_tolerance():
    assert stdio_match("2.333333333\n", "2.3333333333\n")
    assert stdio_match("1 2\n3\n", "1 2 3")
    assert not stdio_match("2.34\n", "2.3333333333\n")
    assert not stdio_match("1 2", "1 2 3")
    assert not stdio_match(None, "1")


def test_assert_style_expressions_with_setup_code():
    suite = FunctionalSuite(
        entry_point="",
        reference_code="def area(r):\n    return 3 * r * r\n",
        inputs={"base": [["area(R)"], ["area(2) > area(1)"]]},
        expected={"base": [27, True]},
        mode="expr",
        setup_code="R = 3\n",
    )
    assert judge("def area(r):\n    return 3 * r ** 2\n", suite, "t/area").verdict is Verdict.passed
    wrong = judge("def area(r):\n    return r\n", suite, "t/area")
    assert wrong.verdict is Verdict.wrong_answer and "got 3, expected 27" in wrong.first_failure


def test_class_method_entry_points_and_json_outputs():
    suite = FunctionalSuite(
        entry_point="Solution.pair",
        reference_code="",
        inputs={"base": [[1, 2], [3, 4]]},
        expected={"base": [[1, 2], [3, 4]]},
        comparator="json",
        time_limit_s=2.0,
    )
    code = "class Solution:\n    def pair(self, a, b):\n        return (a, b)\n"
    assert judge(code, suite, "t/pair").verdict is Verdict.passed
    missing = judge("class Other:\n    pass\n", suite, "t/pair")
    assert missing.verdict is Verdict.runtime_error and "Solution.pair" in missing.first_failure


def test_a_reference_that_fails_a_stated_test_does_not_block_judging():
    suite = FunctionalSuite(
        entry_point="",
        reference_code="def sign(x):\n    return 1\n",  # wrong on the second test
        inputs={"base": [["sign(5)"], ["sign(-5)"]]},
        expected={"base": [1, -1]},
        mode="expr",
    )
    assert judge("def sign(x):\n    return 1 if x > 0 else -1\n", suite, "t/sign").passed
    assert not judge(suite.reference_code, suite, "t/sign").passed
