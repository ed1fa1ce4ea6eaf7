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

from .contest_tasks import ContestBenchmark, ContestProblem, task_prompt
from .hub_data import HubDataset

LEVELS = ("introductory", "interview", "competition")


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
        if fn_name:
            entry = f"Solution.{fn_name}" if "class Solution" in starter else fn_name
            suite = FunctionalSuite(
                entry_point=entry,
                reference_code=solutions[0] if solutions else "",
                inputs={"tests": [list(args) for args in inputs]},
                expected={"tests": outputs},
                comparator=Unwrap(),  # as APPS's grader: [value] or value
            )
        else:
            entry = None
            suite = FunctionalSuite(
                entry_point="",
                reference_code=solutions[0] if solutions else "",
                inputs={"tests": [[_text(i)] for i in inputs]},
                expected={"tests": [_text(o) for o in outputs]},
                comparator=Tokens(),  # a contest checker; APPS's own grader compares sets of tokens
                mode="stdio",
            )
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
