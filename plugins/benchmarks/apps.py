"""APPS (Hendrycks et al., 2021): 10,000 problems at three levels, stdin/stdout or call-based tests.

Rows as in ``codeparrot/apps`` (``problem_id``, ``question``, ``solutions`` and ``input_output``
as JSON text, ``difficulty``, ``starter_code``). Local copy: ``<data>/apps/test.jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import Field

from corebench.harness import FunctionalSuite, StdioExample, Task, hookimpl
from corebench.harness.comparators import Tokens, Unwrap
from corebench.harness.errors import UnknownNameError
from corebench.harness.examples import io_blocks, statement_examples

from .contest_graders import AppsCall, AppsOutput, apps_int_keys
from .contest_tasks import ContestBenchmark, ContestProblem, task_prompt
from .hub_data import HubDataset

LEVELS = ("introductory", "interview", "competition")
TIME_LIMIT_S = 4.0  # per test, as APPS's grader (``timeout = 4``; there wall-clock, here CPU)
# What APPS's grader runs before every program (``run_test``'s header: imports, numpy among them).
# Not copied, since the reference solutions run after the same prelude and use them: its
# ``reliability_guard`` sets ``exit`` and ``quit`` to None, and its module is named ``tmp_sol``,
# so there ``exit()`` fails and a ``__main__`` guard is false (docs/design.md lists these).
OFFICIAL_PRELUDE = (
    "import sys\nimport time\nimport itertools\n"
    "from itertools import accumulate, product, permutations, combinations\n"
    "import collections\n"
    "from collections import Counter, OrderedDict, deque, defaultdict, ChainMap\n"
    "from functools import lru_cache\nimport math\n"
    "from math import sqrt, sin, cos, tan, ceil, fabs, floor, gcd, exp, log, log2\n"
    "import fractions\nfrom typing import List, Tuple\nimport numpy as np\nimport random\n"
    "import heapq\nfrom heapq import *\n"
)


def apps_arguments(args: list[Any]) -> list[Any]:
    """A call's arguments as APPS's grader passes them: a first argument that is a dict with
    integer keys stated as text replaces the arguments, keyed by integers."""
    converted = apps_int_keys(args[0]) if args and isinstance(args[0], dict) else None
    return args if converted is None else [converted]


def apps_expected(value: Any) -> Any:
    """An expected result as APPS's grader compares it: a dict (or a list starting with one)
    with integer keys stated as text becomes ``[dict keyed by integers]``."""
    if isinstance(value, dict) and (converted := apps_int_keys(value)) is not None:
        value = [converted]
    first = value[0] if isinstance(value, list) and value else None
    if isinstance(first, dict) and (converted := apps_int_keys(first)) is not None:
        value = [converted]
    return value


def _text(value: Any) -> str:
    """APPS stores some stdin/stdout values as lists of lines."""
    return "\n".join(map(str, value)) if isinstance(value, list) else str(value)


class Apps(ContestBenchmark):
    name = "apps"
    description = "APPS: introductory/interview/competition problems, stdin/stdout and call-based"
    splits = ("test", "train")

    class Options(ContestBenchmark.Options):
        level: str = Field("", description="introductory, interview or competition ('' = all)")

    source = HubDataset(
        "apps", "apps", "codeparrot/apps", {"test": "test.jsonl", "train": "train.jsonl"}
    )

    def __init__(self, data_dir: Path | None = None, **options: Any):
        super().__init__(data_dir, **options)
        if self.options.level and self.options.level not in LEVELS:
            raise UnknownNameError("APPS level", self.options.level, LEVELS)

    def convert(self, row: dict[str, Any], split: str) -> ContestProblem | None:
        level = self.options.level
        if level and row["difficulty"] != level:
            return None
        try:
            io = json.loads(row["input_output"]) if row["input_output"] else {}
        except ValueError:
            return None
        inputs, outputs = io.get("inputs") or [], io.get("outputs") or []
        if not inputs or len(inputs) != len(outputs):
            return None  # no usable tests (some training rows)
        solutions = json.loads(row["solutions"]) if row.get("solutions") else []
        fn_name = io.get("fn_name")
        starter = row.get("starter_code") or ""
        official = self.official
        if fn_name:
            entry = f"Solution.{fn_name}" if "class Solution" in starter else fn_name
            suite = FunctionalSuite(
                entry_point=entry,
                reference_code=solutions[0] if solutions else "",
                inputs={
                    "tests": [
                        apps_arguments(list(args)) if official else list(args) for args in inputs
                    ]
                },
                expected={"tests": [apps_expected(o) for o in outputs] if official else outputs},
                comparator=AppsCall() if official else Unwrap(),
            )
        else:
            entry = None
            suite = FunctionalSuite(
                entry_point="",
                reference_code=solutions[0] if solutions else "",
                inputs={"tests": [[_text(i)] for i in inputs]},
                expected={"tests": [_text(o) for o in outputs]},
                comparator=AppsOutput() if official else Tokens(),
                mode="stdio",
                # its grader runs a program in-process and catches SystemExit
                exit_status="system_exit" if official else "zero",
            )
        if official:
            suite.time_limit_s, suite.time_limit_fixed = TIME_LIMIT_S, True
            suite.prelude = OFFICIAL_PRELUDE
        # train and test both number their problems from 0: train ids name their split
        task_id = (
            f"APPS/{row['problem_id']}" if split == "test" else f"APPS/{split}/{row['problem_id']}"
        )
        # examples: only what the statement shows (APPS has no separate public tests)
        if entry is None:
            examples: list[str | StdioExample] = list(statement_examples(row["question"]))
        else:
            examples = list(
                io_blocks(row["question"], f"Solution().{fn_name}" if "." in entry else entry)
            )
        return ContestProblem(
            Task(
                task_id=task_id,
                benchmark=self.name,
                prompt=task_prompt(row["question"], starter, entry),
                entry_point=entry,
                examples=examples,
                metadata={"split": split, "level": row["difficulty"], "url": row.get("url", "")},
            ),
            suite,
        )


@hookimpl
def register_benchmarks(register):
    register(Apps)
