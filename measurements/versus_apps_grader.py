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
        same = (got == [True]) == (verdict == "pass")
        agree, total = agree + same, total + 1
        print(f"{'ok ' if same else 'BAD'} stdio {output!r} vs {expected!r}: {got} ({rule})")
    for returned, expected, verdict, rule in rows["APPS_CALL"]:
        code = f"def f():\n    return {returned}\n"
        problem = {"input_output": {"inputs": [[]], "outputs": [expected], "fn_name": "f"}}
        got = apps_verdict(grader, problem, code)
        same = (got == [True]) == (verdict == "pass")
        agree, total = agree + same, total + 1
        print(f"{'ok ' if same else 'BAD'} call {returned} vs {expected!r}: {got} ({rule})")
    print(f"rows whose verdict APPS's own grader gives too: {agree} of {total}")


if __name__ == "__main__":
    main()
