"""DeepMind CodeContests (Li et al., 2022): stdin/stdout problems from Codeforces, AtCoder,
CodeChef and others, with public, private and generated tests.

Rows as in ``deepmind/code_contests`` (``name``, ``description``, ``public_tests``,
``private_tests``, ``generated_tests`` as ``{input: [...], output: [...]}``, ``source`` and
``difficulty`` as enum numbers, ``solutions`` as ``{language: [...], solution: [...]}``,
``time_limit``, ``cf_rating``, ``cf_tags``). Local copy: ``<data>/code_contests/test.jsonl``
(or .parquet). The ``source`` option selects e.g. the Codeforces subset.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from corebench.harness import FunctionalSuite, StdioExample, Task, hookimpl
from corebench.harness.comparators import Tokens
from corebench.harness.errors import UnknownNameError

from .contest_graders import CodeContestsOutput
from .contest_tasks import ContestBenchmark, ContestProblem, task_prompt
from .hub_data import HubDataset

SOURCES = {
    0: "unknown",
    1: "codechef",
    2: "codeforces",
    3: "hackerearth",
    4: "codejam",
    5: "atcoder",
    6: "aizu",
}
PYTHON3 = 3  # the dataset's language enum (1 is Python 2, which cannot serve as a reference)
SUITES = ("public_tests", "private_tests", "generated_tests")
# grader="tokens": corebench's contest checker with CodeContests' tolerance and case rule (where
# the official check compares integers as doubles, it compares them exactly, and it allows the
# tolerance relatively above 1, where doubles cannot hold an absolute 1e-5)
CHECKER = Tokens(float_tolerance=1e-5, case_sensitive=False)
DEFAULT_TIME_LIMIT_S = 10.0  # the tester's TestOptions default, for a problem without its own


def tester_time_limit(seconds: float) -> float:
    """A time limit as DeepMind's tester sets it (RLIMIT_CPU: whole seconds, at least 1); the
    tester takes the limit from its caller, which passes the problem's (10 s without one)."""
    return float(max(1, int(seconds))) if seconds else DEFAULT_TIME_LIMIT_S


class CodeContests(ContestBenchmark):
    name = "codecontests"
    description = "DeepMind CodeContests: stdin/stdout, public/private/generated tests, by source"
    splits = ("test", "valid", "train")

    class Options(ContestBenchmark.Options):
        source: str = Field("", description="only this source (codeforces, atcoder, ...)")
        min_rating: int = Field(0, ge=0, description="lowest Codeforces rating (0: any)")
        max_rating: int = Field(0, ge=0, description="highest Codeforces rating (0: any)")
        generated_tests: bool = Field(True, description="judge on the generated tests too")

    source = HubDataset(
        "codecontests",
        "code_contests",
        "deepmind/code_contests",
        {s: f"data/{s}-*.parquet" for s in ("test", "valid", "train")},
    )

    def __init__(self, data_dir: Path | None = None, **options: Any):
        super().__init__(data_dir, **options)
        if self.options.source and self.options.source not in SOURCES.values():
            raise UnknownNameError("CodeContests source", self.options.source, SOURCES.values())

    def convert(self, row: dict[str, Any], split: str) -> ContestProblem | None:
        source = SOURCES.get(int(row.get("source") or 0), "unknown")
        rating = int(row.get("cf_rating") or 0)
        if self.options.source and source != self.options.source:
            return None
        if self.options.min_rating and rating < self.options.min_rating:
            return None
        if self.options.max_rating and (not rating or rating > self.options.max_rating):
            return None
        suites = SUITES if self.options.generated_tests else SUITES[:2]
        inputs, expected = {}, {}
        for name in suites:
            tests = row.get(name) or {}
            if tests.get("input"):
                short = name.removesuffix("_tests")
                inputs[short] = [[text] for text in tests["input"]]
                expected[short] = list(tests["output"])
        if not inputs:
            return None
        solutions = row.get("solutions") or {}
        python3 = [
            code
            for lang, code in zip(
                solutions.get("language", []), solutions.get("solution", []), strict=False
            )
            if lang == PYTHON3
        ]
        limit = row.get("time_limit") or {}
        seconds = float(limit.get("seconds") or 0) + float(limit.get("nanos") or 0) / 1e9
        metadata = {
            "split": split,
            "source": source,
            "difficulty": int(row.get("difficulty") or 0),
            "cf_rating": rating,
            "cf_tags": list(row.get("cf_tags") or []),
        }
        task_id = f"CodeContests/{row['name']}"
        return ContestProblem(
            Task(
                task_id=task_id,
                benchmark=self.name,
                prompt=task_prompt(row["description"]),
                # the public tests are the statement's examples (the prompt shows them)
                examples=public_examples(row.get("public_tests") or {}),
                metadata=metadata,
            ),
            FunctionalSuite(
                entry_point="",
                reference_code=python3[0] if python3 else "",
                inputs=inputs,
                expected=expected,
                comparator=CodeContestsOutput() if self.official else CHECKER,
                mode="stdio",
                time_limit_s=tester_time_limit(seconds) if self.official else (seconds or None),
                # the tester's `passed` is the output check alone, whatever the exit status
                exit_status="any" if self.official else "zero",
                time_limit_fixed=self.official,
            ),
        )


def public_examples(tests: dict[str, list[str]]) -> list[StdioExample]:
    return [
        StdioExample(input=i, output=o)
        for i, o in zip(tests.get("input") or [], tests.get("output") or [], strict=False)
    ]


@hookimpl
def register_benchmarks(register):
    register(CodeContests)
