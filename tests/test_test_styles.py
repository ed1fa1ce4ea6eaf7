"""Test styles beyond differential calls: whole programs on stdin/stdout, assert-style expressions,
LeetCode-style ``Class.method`` entry points, and expected outputs stated by the dataset."""

from __future__ import annotations

import asyncio

import pytest

from corebench.harness import FunctionalSuite, Verdict
from corebench.harness.comparators import Tokens
from corebench.harness.sandbox import Executor

SUM_PROGRAM = FunctionalSuite(
    entry_point="",
    reference_code="",
    inputs={"public": [["1 2\n"]], "private": [["10 -3\n"], ["0 0\n"]]},
    expected={"public": ["3\n"], "private": ["7\n", "0\n"]},
    mode="stdio",
    comparator="tokens",
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
    stdio_match = Tokens()
    assert stdio_match("2.333333333\n", "2.3333333333\n", [])
    assert stdio_match("1 2\n3\n", "1 2 3", [])
    assert not stdio_match("2.34\n", "2.3333333333\n", [])
    assert not stdio_match("1 2", "1 2 3", [])
    assert not stdio_match(None, "1", [])


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


@pytest.mark.parametrize(
    "code",
    [
        "a, b = map(int, input().split())\nprint(a + b)\nexit()\n",
        "a, b = map(int, input().split())\nprint(a + b)\nquit()\n",
        "import sys\na, b = map(int, input().split())\nprint(a + b)\nsys.exit(0)\n",
        "a, b = map(int, open(0).read().split())\nprint(a + b)\n",
        "import os\na, b = map(int, os.read(0, 1 << 16).split())\nos.write(1, b'%d\\n' % (a + b))\n",
        "import sys\na, b = map(int, sys.stdin.buffer.read().split())\n"
        "sys.stdout.buffer.write(b'%d\\n' % (a + b))\n",
        "import os, sys\na, b = map(int, sys.stdin.readline().split())\n"
        "os.write(sys.stdout.fileno(), str(a + b).encode())\n",
        # the fast-exit idiom: flush, then leave without cleanup
        "import os, sys\na, b = map(int, input().split())\nprint(a + b)\nsys.stdout.flush()\nos._exit(0)\n",
        # a big-stack thread with a raised recursion limit, 100,000 calls deep
        "import sys, threading\nsys.setrecursionlimit(1 << 20)\nthreading.stack_size(1 << 27)\n"
        "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n"
        "def main():\n    a, b = map(int, input().split())\n    depth(100_000)\n    print(a + b)\n"
        "t = threading.Thread(target=main)\nt.start()\nt.join()\n",
        # deep recursion in the main thread
        "import sys\nsys.setrecursionlimit(10**6)\n"
        "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n"
        "a, b = map(int, input().split())\nprint(a + b + depth(200_000) - 200_000)\n",
    ],
    ids=[
        "exit", "quit", "sys.exit", "open(0)", "os.read", "buffer", "fileno", "os._exit",
        "big-stack-thread", "deep-recursion",
    ],
)  # fmt: skip
def test_contest_idioms_run_unchanged(code):
    result = judge(code)
    assert result.verdict is Verdict.passed, result.first_failure


def test_each_stdio_test_is_a_fresh_process_with_its_own_measurements():
    # state a program leaves behind (a global, a replaced sys.stdout) does not reach the next test
    code = (
        "import sys\n"
        "seen = getattr(sys, 'seen', 0)\n"
        "sys.seen = seen + 1\n"
        "a, b = map(int, input().split())\n"
        "print(a + b + seen)\n"
        "if a == 10:\n    block = bytearray(200 * 1024 * 1024)\n"
    )
    result = judge(code)
    assert result.verdict is Verdict.passed, result.first_failure
    peaks = [t.peak_memory_bytes for t in result.tests]
    assert peaks[1] > 190 * 1024**2 and peaks[0] < 20 * 1024**2 and peaks[2] < 20 * 1024**2
    assert all(t.cpu_s is not None and t.cpu_s >= 0 for t in result.tests)


def test_a_stdio_program_that_ignores_signals_and_spins_times_out_on_its_test():
    code = (
        "import signal\n"
        "for number in range(1, signal.NSIG):\n"
        "    try:\n        signal.signal(number, signal.SIG_IGN)\n"
        "    except (OSError, ValueError, RuntimeError):\n        pass\n"
        "a, b = map(int, input().split())\n"
        "while a == 10:\n    pass\n"
        "print(a + b)\n"
    )
    result = judge(code)
    assert result.verdict is Verdict.timeout and "private test 0" in result.first_failure


@pytest.mark.parametrize(
    ("got", "want", "ok"),
    [
        ("1000000006\n", "1000000007\n", False),  # integers are compared exactly
        ("1999999997.4\n", "1999999997\n", False),  # an integer answer is not a real one
        ("1999999997\n", "1999999997.0000001\n", True),  # a real answer allows a tolerance
        ("0.3333333\n", "0.33333333\n", True),
        ("0.3334\n", "0.3333\n", False),
        ("7\n", "007\n", True),  # the same integer
        ("-0\n", "0\n", True),
        ("12345678901234567890123\n", "12345678901234567890124\n", False),  # beyond doubles
        ("YES\n", "yes\n", False),  # case matters unless the benchmark says otherwise
        ("1e3\n", "1000.0\n", True),
        ("nan\n", "nan\n", True),  # same text
        ("inf\n", "1e400\n", False),
        ("1 2\n\n3   \n", "1 2 3", True),  # line breaks and trailing blanks do not matter
    ],
)
def test_contest_checker_compares_integers_exactly_and_reals_with_a_tolerance(got, want, ok):
    assert Tokens()(got, want, []) is ok


def test_codecontests_checker_ignores_case_like_the_official_one():
    from corebench.plugins.benchmarks.codecontests import CHECKER

    assert CHECKER("YES\n", "yes\n", [])
    assert CHECKER("0.50001\n", "0.5\n", [])  # 1e-5, as DeepMind's checker
    assert not CHECKER("1000000006\n", "1000000007\n", [])
