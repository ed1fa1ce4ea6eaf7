"""corebench's LiveCodeBench judging against LiveCodeBench's own grader, on programs written to
probe it: for every program and test, the same verdict? And how long does each take?

    .venv/bin/python measurements/versus_livecodebench.py [--time-limit 1] [--show-disagreements]

LiveCodeBench's grader is ``run_test`` from ``livecodebench.evaluation.testing_util`` (PyPI's
``nvidia-livecodebench``, installed with ``--no-deps`` by ``scripts/setup.sh --test``); it runs
each program in a fresh forked process, as LiveCodeBench's ``check_correctness`` does. corebench
judges the same programs through the ``livecodebench`` benchmark's own suites (rows in the
dataset's format, converted by the plugin) in its sandbox. Both stop at a program's first failing
test, so the per-test verdicts compared are those up to it.

The programs (``cases()``): six standard-input problems and five LeetCode-style functional ones,
each with three tests, and for each problem the correct program plus variants that print the
answer differently (blank lines, trailing spaces, line breaks in other places, integers as
floats, exponent notation, case, extra output, a crash after correct output, exit statuses, a
busy loop past the time limit, ...) or return it differently (tuples, floats for integers,
strings, None, sets, float error). What LiveCodeBench's in-process runner does that corebench
deliberately does not copy is listed in ``KNOWN_DIFFERENCES`` (each checked by a test).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import multiprocessing
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# --- the problems ------------------------------------------------------------------------------


@dataclass
class Problem:
    """One LiveCodeBench-format problem: stdin/stdout (``func`` empty) or functional."""

    name: str
    tests: list[tuple[str, str]]  # (input, expected output) as the dataset states them
    func: str = ""  # functional: the Solution method's name
    solve: str = ""  # stdio: code that reads stdin and sets `rows` (lines of string tokens)
    body: str = ""  # functional: the method's body computing `answer` from its arguments
    params: str = ""  # functional: the method's parameters


STDIO = [
    Problem(
        "sum",
        [("1 2\n", "3\n"), ("10 -3\n", "7\n"), ("1000000000 1000000000\n", "2000000000\n")],
        solve="a, b = map(int, input().split())\nrows = [[str(a + b)]]\n",
    ),
    Problem(
        "sorted",
        [("3\n3 1 2\n", "1 2 3\n"), ("1\n5\n", "5\n"), ("4\n-1 7 0 -1\n", "-1 -1 0 7\n")],
        solve="n = int(input())\nxs = sorted(map(int, input().split()))\nrows = [[str(x) for x in xs]]\n",
    ),
    Problem(
        "ratio",
        [("1 3\n", "0.333333333\n"), ("7 2\n", "3.500000000\n"), ("2 7\n", "0.285714286\n")],
        solve="a, b = map(int, input().split())\nrows = [[f'{a / b:.9f}']]\n",
    ),
    Problem(
        "parity",
        [("4\n", "Yes\n"), ("7\n", "No\n"), ("0\n", "Yes\n")],
        solve="n = int(input())\nrows = [['Yes' if n % 2 == 0 else 'No']]\n",
    ),
    Problem(
        "squares",
        [("3\n", "1 1\n2 4\n3 9\n"), ("1\n", "1 1\n"), ("2\n", "1 1\n2 4\n")],
        solve="n = int(input())\nrows = [[str(i), str(i * i)] for i in range(1, n + 1)]\n",
    ),
    Problem(
        "grid",
        [("2 3\n", "###\n###\n"), ("1 1\n", "#\n"), ("3 2\n", "##\n##\n##\n")],
        solve="h, w = map(int, input().split())\nrows = [['#' * w] for _ in range(h)]\n",
    ),
]

FUNCTIONAL = [
    Problem(
        "twoSum",
        [
            ("[2, 7, 11, 15]\n9", "[0, 1]"),
            ("[3, 2, 4]\n6", "[1, 2]"),
            ("[3, 3]\n6", "[0, 1]"),
        ],
        func="twoSum",
        params="nums, target",
        body=(
            "seen = {}\nanswer = None\nfor i, x in enumerate(nums):\n"
            "    if target - x in seen:\n        answer = [seen[target - x], i]\n        break\n"
            "    seen[x] = i\n"
        ),
    ),
    Problem(
        "isPalindrome",
        [('"racecar"', "true"), ('"ab"', "false"), ('"a"', "true")],
        func="isPalindrome",
        params="s",
        body="answer = s == s[::-1]\n",
    ),
    Problem(
        "average",
        [("[1, 2, 3, 4]", "2.5"), ("[5]", "5.0"), ("[1, 2]", "1.5")],
        func="average",
        params="nums",
        body="answer = sum(nums) / len(nums)\n",
    ),
    Problem(
        "pairUp",
        [("4", "[[1, 2], [3, 4]]"), ("2", "[[1, 2]]"), ("6", "[[1, 2], [3, 4], [5, 6]]")],
        func="pairUp",
        params="n",
        body="answer = [[i, i + 1] for i in range(1, n + 1, 2)]\n",
    ),
    Problem(
        "countVowels",
        [('"leetcode"', "4"), ('"xyz"', "0"), ('"AEIOU"', "5")],
        func="countVowels",
        params="word",
        body="answer = sum(c in 'aeiouAEIOU' for c in word)\n",
    ),
]

# --- how a program prints (stdio) or returns (functional) its answer ------------------------------

LINES = "'\\n'.join(' '.join(r) for r in rows)"
TOKENS = "[t for r in rows for t in r]"


def _map_tokens(expr: str) -> str:
    """Rows with every token passed through ``expr`` (of ``t``), then printed as lines."""
    return f"rows = [[{expr} for t in r] for r in rows]\nprint({LINES})\n"


NUMERIC = "t.lstrip('-').isdigit()"
# name -> code run after `rows` is set
PRINTERS: dict[str, str] = {
    "correct": f"print({LINES})\n",
    "no-final-newline": f"import sys\nsys.stdout.write({LINES})\n",
    "trailing-blank-lines": f"print({LINES})\nprint()\nprint()\n",
    "leading-blank-line": f"print()\nprint({LINES})\n",
    "trailing-spaces": "print('\\n'.join(' '.join(r) + '   ' for r in rows))\n",
    "leading-spaces": "print('\\n'.join('  ' + ' '.join(r) for r in rows))\n",
    "double-spaces": "print('\\n'.join('  '.join(r) for r in rows))\n",
    "tabs": "print('\\n'.join('\\t'.join(r) for r in rows))\n",
    "one-line": f"print(' '.join({TOKENS}))\n",
    "token-per-line": f"print('\\n'.join({TOKENS}))\n",
    "blank-line-between": "print('\\n\\n'.join(' '.join(r) for r in rows))\n",
    "crlf": "import sys\nsys.stdout.write('\\r\\n'.join(' '.join(r) for r in rows) + '\\r\\n')\n",
    "print-star": "for r in rows:\n    print(*r)\n",
    "ints-as-floats": _map_tokens(f"(t + '.0' if {NUMERIC} else t)"),
    "exponent": _map_tokens(f"(format(int(t), 'e') if {NUMERIC} else t)"),
    "plus-sign": _map_tokens(f"('+' + t if {NUMERIC} and not t.startswith('-') else t)"),
    "leading-zero": _map_tokens(f"('0' + t if {NUMERIC} and not t.startswith('-') else t)"),
    "trailing-dot": _map_tokens(f"(t + '.' if {NUMERIC} else t)"),
    "tiny-error": _map_tokens(f"(t + '.0000001' if {NUMERIC} else t)"),
    "fullwidth-digits": _map_tokens(
        "t.translate(str.maketrans('0123456789', '０１２３４５６７８９'))"
    ),
    "underscores": _map_tokens(f"(format(int(t), '_') if {NUMERIC} else t)"),
    "upper": _map_tokens("t.upper()"),
    "lower": _map_tokens("t.lower()"),
    "nan": _map_tokens(f"('nan' if {NUMERIC} else t)"),
    "wrong-value": _map_tokens(
        f"(str(int(t) + 1) if {NUMERIC} else {{'Yes': 'No', 'No': 'Yes'}}.get(t, t + '#'))"
    ),
    "extra-line": f"print({LINES})\nprint('done')\n",
    "extra-token": "rows[0].append('0')\n" + f"print({LINES})\n",
    "missing-last-line": "print('\\n'.join(' '.join(r) for r in rows[:-1]))\n",
    "lines-run-together": "print(''.join(' '.join(r) for r in rows))\n",
    "crash-after-output": f"print({LINES})\nraise ValueError('after the answer')\n",
    "crash-before-output": f"raise ValueError('before the answer')\nprint({LINES})\n",
    "sys-exit-0": f"import sys\nprint({LINES})\nsys.exit(0)\n",
    "sys-exit-1": f"import sys\nprint({LINES})\nsys.exit(1)\n",
    "sys-exit-text": f"import sys\nprint({LINES})\nsys.exit('bye')\n",
    "exit-builtin": f"print({LINES})\nexit()\n",
    "quit-builtin": f"print({LINES})\nquit()\n",
    "stderr-noise": f"import sys\nprint('debugging', file=sys.stderr)\nprint({LINES})\n",
    "answer-to-stderr": f"import sys\nprint({LINES}, file=sys.stderr)\n",
    "main-guard": f"def main():\n    print({LINES})\n\nif __name__ == '__main__':\n    main()\n",
    "syntax-error": f"print({LINES}\n",
    "busy-loop": "while True:\n    pass\n",
}
# how a program reads its input, besides input(): (name, code put before the problem's reader)
READERS = {
    "stdin-read": "import sys\n_data = iter(sys.stdin.read().split('\\n'))\ninput = lambda: next(_data)\n",
    "readline": "import sys\ninput = lambda: sys.stdin.readline().rstrip('\\n')\n",
}

# name -> code run after `answer` is set, in the method
RETURNS: dict[str, str] = {
    "correct": "return answer\n",
    "tuple": "return tuple(answer) if isinstance(answer, list) else answer\n",
    "nested-tuples": "return [tuple(a) if isinstance(a, list) else a for a in answer] "
    "if isinstance(answer, list) else answer\n",
    "as-float": "return float(answer) if isinstance(answer, int) else answer\n",
    "as-int": "return int(answer) if isinstance(answer, (bool, float)) else answer\n",
    "as-string": "return str(answer)\n",
    "as-json-text": "import json\nreturn json.dumps(answer)\n",
    "as-set": "return set(answer) if isinstance(answer, list) else answer\n",
    "none": "return None\n",
    "reversed": "return answer[::-1] if isinstance(answer, list) else answer\n",
    "off-by-one": "return answer + 1 if isinstance(answer, (int, float)) and "
    "not isinstance(answer, bool) else (not answer if isinstance(answer, bool) else answer + [0])\n",
    "float-error": "return answer + 1e-12 if isinstance(answer, float) else answer\n",
    "negated": "return not answer if isinstance(answer, bool) else answer\n",
    "prints-too": "print('debugging', answer)\nreturn answer\n",
    "raises": "raise ValueError('no answer')\n",
    "busy-loop": "while True:\n    pass\n",
}


def _indent(code: str, by: str = "        ") -> str:
    return "".join(by + line if line.strip() else line for line in code.splitlines(True))


def stdio_program(problem: Problem, printer: str, reader: str = "") -> str:
    return READERS.get(reader, "") + problem.solve + PRINTERS[printer]


def functional_program(problem: Problem, returns: str) -> str:
    return (
        "from typing import List\n\nclass Solution:\n"
        f"    def {problem.func}(self, {problem.params}):\n"
        + _indent(problem.body + RETURNS[returns])
    )


@dataclass
class Case:
    problem: Problem
    variant: str
    code: str


def cases() -> list[Case]:
    """Every program of the comparison, in a stable order."""
    found = []
    for problem in STDIO:
        for printer in PRINTERS:
            found.append(Case(problem, printer, stdio_program(problem, printer)))
        for reader in READERS:
            found.append(Case(problem, reader, stdio_program(problem, "correct", reader)))
    for problem in FUNCTIONAL:
        for returns in RETURNS:
            found.append(Case(problem, returns, functional_program(problem, returns)))
    return found


# What LiveCodeBench's in-process runner does that corebench does not copy, as (problem, program,
# LiveCodeBench's verdicts, corebench's): artefacts of running a program as a function inside the
# grader's own process with stdin and stdout replaced by text buffers.
KNOWN_DIFFERENCES = [
    (
        "sum",
        "import os, sys\na, b = map(int, input().split())\nprint(a + b)\nsys.stdout.flush()\n"
        "os._exit(0)\n",
        "os._exit(0) after the answer: it ends the runner's own process, and every test counts "
        "failed (-1)",
        ["error", "error", "error"],
        ["pass", "pass", "pass"],
    ),
    (
        "sum",
        "a, b = map(int, open(0).read().split())\nprint(a + b)\n",
        "reads open(0): the runner's star-import of io shadows the open it patches, so the "
        "program reads the grader's own standard input (empty: a runtime error)",
        ["error"],
        ["pass", "pass", "pass"],
    ),
    (
        "sum",
        "import sys\na, b = map(int, sys.stdin.buffer.readline().split())\nprint(a + b)\n",
        "reads sys.stdin.buffer: the runner's stdin is a StringIO, which has none (runtime error)",
        ["error"],
        ["pass", "pass", "pass"],
    ),
    (
        "sum",
        "import os\na, b = map(int, input().split())\nos.write(1, f'{a + b}\\n'.encode())\n",
        "writes to file descriptor 1: the runner captures sys.stdout only (no output seen)",
        ["wrong"],
        ["pass", "pass", "pass"],
    ),
    (
        "sum",
        "a, b = map(int, input().split())\ndef f():\n    global a\n    return a + b\nprint(f())\n",
        "a `global` at top level: the runner wraps the program in a function, so the name is "
        "no module global (NameError)",
        ["error"],
        ["pass", "pass", "pass"],
    ),
]

# --- judging with each --------------------------------------------------------------------------


def lcb_row(problem: Problem) -> dict[str, Any]:
    """The problem as a row of ``livecodebench/code_generation_lite``: the first test public."""
    testtype = "functional" if problem.func else "stdin"
    tests = [{"input": i, "output": o, "testtype": testtype} for i, o in problem.tests]
    return {
        "question_id": problem.name,
        "question_title": problem.name,
        "question_content": f"Problem {problem.name}.",
        "platform": "leetcode" if problem.func else "atcoder",
        "contest_date": "2026-01-01T00:00:00",
        "starter_code": "",
        "difficulty": "easy",
        "public_test_cases": json.dumps(tests[:1]),
        "private_test_cases": json.dumps(tests[1:]),
        "metadata": json.dumps({"func_name": problem.func} if problem.func else {}),
    }


def lcb_sample(problem: Problem) -> dict[str, Any]:
    """The problem as LiveCodeBench's ``get_evaluation_sample`` gives it to ``run_test``."""
    return {
        "input_output": json.dumps(
            {
                "inputs": [i for i, _ in problem.tests],
                "outputs": [o for _, o in problem.tests],
                "fn_name": problem.func or None,
            }
        )
    }


def lcb_kinds(results: list[Any]) -> list[str]:
    """LiveCodeBench's per-test results (True/False, -1 … -4) as verdict kinds."""
    kinds = {True: "pass", False: "wrong", -2: "wrong", -3: "timeout", -4: "error", -1: "error"}
    return [kinds.get(r if isinstance(r, bool) else int(r), f"unknown {r!r}") for r in results]


def corebench_kinds(result: Any) -> list[str]:
    """corebench's per-test verdicts of one program as verdict kinds (a program that fails to
    load fails its first test: LiveCodeBench then stops with a runtime error)."""
    names = {
        "passed": "pass",
        "wrong_answer": "wrong",
        "timeout": "timeout",
        "runtime_error": "error",
        "syntax_error": "error",
        "memory_exceeded": "error",
    }
    if not result.tests:
        return [names.get(result.verdict.value, result.verdict.value)]
    return [names.get(t.verdict.value, t.verdict.value) for t in result.tests]


def load_lcb_grader():
    """LiveCodeBench's ``testing_util`` module, loaded from its file (the package's
    ``__init__`` imports its model runners, whose dependencies the tests do not install)."""
    spec = importlib.util.find_spec("livecodebench")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("nvidia-livecodebench is not installed (scripts/setup.sh --test)")
    path = Path(spec.submodule_search_locations[0]) / "evaluation" / "testing_util.py"
    module_spec = importlib.util.spec_from_file_location("lcb_testing_util", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def _lcb_child(grader, sample, code, timeout, send) -> None:
    import os

    quiet = os.open(os.devnull, os.O_RDWR)  # what programs print outside the grader's capture
    for fd in (0, 1, 2):  # (a multiprocessing child's stdin is /dev/null too)
        os.dup2(quiet, fd)
    sys.set_int_max_str_digits(50000)  # as LiveCodeBench's evaluation module sets it
    results, _ = grader.run_test(sample, test=code, timeout=timeout)
    send.send([r if isinstance(r, bool) else int(r) for r in results])


def _lcb_one(grader, problem: Problem, code: str, timeout: int) -> list[str]:
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(
        target=_lcb_child, args=(grader, lcb_sample(problem), code, timeout, send)
    )
    process.start()
    send.close()
    process.join((timeout + 1) * len(problem.tests) + 5)
    if process.is_alive():
        process.kill()
        process.join()
    try:
        results = receive.recv() if receive.poll() else None
    except EOFError:
        results = None
    receive.close()
    # nothing back: LiveCodeBench counts every test failed (-1)
    return lcb_kinds(results if results is not None else [-1] * len(problem.tests))


def judge_with_lcb(
    problems_codes: list[tuple[Problem, str]], timeout: int, workers: int = 2
) -> list[list[str]]:
    """Each program judged by LiveCodeBench's ``run_test`` in a forked process of its own (as its
    ``check_correctness``, with the same global timeout), ``workers`` at a time; verdict kinds
    per test."""
    grader = load_lcb_grader()
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda pc: _lcb_one(grader, pc[0], pc[1], timeout), problems_codes))


def judge_with_corebench(
    problems_codes: list[tuple[Problem, str]], time_limit_s: float, grader: str = "official"
) -> list[list[str]]:
    """Each program judged by corebench's ``livecodebench`` benchmark (its suite for the row, with
    ``time_limit_s`` per test) in the sandbox, two at a time; verdict kinds per test."""
    from corebench.harness.sandbox import Executor
    from corebench.plugins.benchmarks.livecodebench import LiveCodeBench

    benchmark = LiveCodeBench(None, grader=grader)
    suites = {}
    for problem, _ in problems_codes:
        if problem.name not in suites:
            suite = benchmark.convert(lcb_row(problem), "test").suite
            suite.time_limit_s = time_limit_s
            suites[problem.name] = suite

    async def judge_all():
        executor = Executor(workers=2)
        jobs = [
            executor.judge(f"LiveCodeBench/{p.name}", i, code, suites[p.name])
            for i, (p, code) in enumerate(problems_codes)
        ]
        return await asyncio.gather(*jobs)

    return [corebench_kinds(r) for r in asyncio.run(judge_all())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-limit", type=int, default=1, help="seconds per test, both sides")
    parser.add_argument("--show-disagreements", action="store_true")
    args = parser.parse_args()
    programs = cases()
    pairs = [(c.problem, c.code) for c in programs]
    started = time.perf_counter()
    theirs = judge_with_lcb(pairs, args.time_limit)
    lcb_s = time.perf_counter() - started
    started = time.perf_counter()
    ours = judge_with_corebench(pairs, float(args.time_limit))
    ours_s = time.perf_counter() - started
    same = [a == b for a, b in zip(theirs, ours, strict=True)]
    tests = sum(len(t) for t in theirs)
    busy = sum(c.variant == "busy-loop" for c in programs)
    print(f"programs: {len(programs)} ({tests} test verdicts), {busy} of them past the time limit")
    print(f"same verdict on every test: {sum(same)} of {len(programs)}")
    print(f"LiveCodeBench run_test (a fork per program, 2 at a time): {lcb_s:.1f} s")
    print(f"corebench sandbox (2 workers): {ours_s:.1f} s")
    if args.show_disagreements:
        for case, a, b, ok in zip(programs, theirs, ours, same, strict=True):
            if not ok:
                print(f"  {case.problem.name}/{case.variant}: LiveCodeBench {a}, corebench {b}")


if __name__ == "__main__":
    main()
