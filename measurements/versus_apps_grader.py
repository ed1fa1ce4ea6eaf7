"""The APPS behaviour table of ``tests/test_contest_graders.py`` run through APPS's own grader:
does each row's verdict hold there too?

    git clone https://github.com/hendrycks/apps /tmp/apps
    .venv/bin/python measurements/versus_apps_grader.py /tmp/apps

APPS's ``eval/testing_util.py`` does not install (it is a script in the repository, and imports
``pyext``, whose last release predates Python 3.11); this script loads it from a clone, with a
stand-in for the one ``pyext`` call it makes (``RuntimeModule.from_string``: a module made from
source text, which the stand-in makes with ``exec``), and runs every row in a forked process of
its own (the grader disables ``os`` functions in the process it runs in). Each stdio row is a
program that writes the row's output; each call-based row, a function returning its value.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import multiprocessing
import os
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Whole programs on APPS's first fixture problem (print a + b; tests/fixtures/hf/apps), as
# (what it probes, code, APPS's verdict, corebench's under grader=official): the first failing
# test's kind, or "pass". Where the two differ, corebench keeps its way (docs/design.md): it
# does not copy what APPS's in-process runner does to `exit`, `quit`, `__name__` and the streams.
READ = "a, b = map(int, input().split())\n"
PROGRAMS = [
    ("correct", READ + "print(a + b)\n", "pass", "pass"),
    ("wrong", READ + "print(a - b)\n", "wrong", "wrong"),
    (
        "Counter from the header",
        "c = Counter(input().split())\nprint(sum(map(int, c.elements())))\n",
        "pass",
        "pass",
    ),
    ("sqrt from the header", READ + "print(a + b + int(sqrt(0)))\n", "pass", "pass"),
    (
        "numpy from the header",
        "print(int(np.sum(list(map(int, input().split())))))\n",
        "pass",
        "pass",
    ),
    ("exit() is None there", READ + "print(a + b)\nexit()\n", "error", "pass"),
    ("quit() is None there", READ + "print(a + b)\nquit()\n", "error", "pass"),
    (
        "sys.exit(0) after the answer",
        "import sys\n" + READ + "print(a + b)\nsys.exit(0)\n",
        "pass",
        "pass",
    ),
    (
        "sys.exit(1) after the answer",
        "import sys\n" + READ + "print(a + b)\nsys.exit(1)\n",
        "pass",
        "pass",
    ),
    ("a crash after the answer", READ + "print(a + b)\nraise ValueError\n", "error", "error"),
    (
        "a __main__ guard",
        "def main():\n    " + READ + "    print(a + b)\n\nif __name__ == '__main__':\n    main()\n",
        "wrong",
        "pass",
    ),
    ("a syntax error", READ + "print(a + b\n", "error", "error"),
    (
        "sys.stdin.buffer (a StringIO there)",
        "import sys\na, b = map(int, sys.stdin.buffer.readline().split())\nprint(a + b)\n",
        "error",
        "pass",
    ),
    (
        "writing to fd 1 (not captured there)",
        "import os\n" + READ + "os.write(1, f'{a + b}\\n'.encode())\n",
        "wrong",
        "pass",
    ),
]
SUM_TESTS = {
    "inputs": ["1 2\n", "10 -3\n", "1000000000 1000000000\n"],
    "outputs": ["3\n", "7\n", "2000000000\n"],
}


def apps_kind(results: list | None) -> str:
    """APPS's per-test results (True, False, -1 error or time limit, -2 compile error) as the
    first failure's kind."""
    for result in results or [-1]:
        if result is not True:
            return "wrong" if result is False else "error"
    return "pass"


def table_rows() -> dict[str, list[tuple]]:
    """The APPS rows as the test file states them (read as literals, not imported)."""
    tree = ast.parse((ROOT / "tests" / "test_contest_graders.py").read_text())
    rows = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in (
            "APPS_STDIO",
            "APPS_CALL",
        ):
            rows[node.targets[0].id] = ast.literal_eval(node.value)
    return rows


def load_grader(repo: Path):
    stand_in = types.ModuleType("pyext")

    class RuntimeModule:
        @staticmethod
        def from_string(name: str, doc: str, code: str) -> types.ModuleType:
            module = types.ModuleType(name, doc)
            exec(code, module.__dict__)  # noqa: S102 - what pyext does
            return module

    stand_in.RuntimeModule = RuntimeModule
    sys.modules["pyext"] = stand_in
    spec = importlib.util.spec_from_file_location(
        "apps_testing_util", repo / "eval" / "testing_util.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _child(grader, problem, code, queue) -> None:
    quiet = os.open(os.devnull, os.O_RDWR)
    os.dup2(quiet, 1)  # its debugging prints
    queue.put(grader.run_test(problem=problem, test=code))


def apps_verdict(grader, problem: dict, code: str) -> list | None:
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=_child, args=(grader, problem, code, queue))
    process.start()
    process.join(30)
    if process.is_alive():
        process.kill()
    return queue.get() if not queue.empty() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path, help="a clone of hendrycks/apps")
    grader = load_grader(parser.parse_args().repo)
    rows = table_rows()
    agree = total = 0
    for output, expected, verdict, rule in rows["APPS_STDIO"]:
        code = f"import sys\nsys.stdout.write({output!r})\n"
        problem = {"input_output": {"inputs": [""], "outputs": [expected]}}
        got = apps_verdict(grader, problem, code)
        same = got == [verdict == "pass"]  # a crash of the grader agrees with no row
        agree, total = agree + same, total + 1
        print(f"{'ok ' if same else 'BAD'} stdio {output!r} vs {expected!r}: {got} ({rule})")
    for returned, expected, verdict, rule in rows["APPS_CALL"]:
        code = f"def f():\n    return {returned}\n"
        problem = {"input_output": {"inputs": [[]], "outputs": [expected], "fn_name": "f"}}
        got = apps_verdict(grader, problem, code)
        same = got == [verdict == "pass"]
        agree, total = agree + same, total + 1
        print(f"{'ok ' if same else 'BAD'} call {returned} vs {expected!r}: {got} ({rule})")
    print(f"rows whose verdict APPS's own grader gives too: {agree} of {total}")
    same = 0
    for what, code, expected, _ in PROGRAMS:
        got = apps_kind(apps_verdict(grader, {"input_output": dict(SUM_TESTS)}, code))
        same += got == expected
        print(f"{'ok ' if got == expected else 'BAD'} program, {what}: APPS {got}")
    print(f"programs APPS's grader judges as stated: {same} of {len(PROGRAMS)}")


if __name__ == "__main__":
    main()
