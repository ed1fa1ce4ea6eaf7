"""What the contest benchmarks (APPS, CodeContests, LiveCodeBench) share: tasks held as rows with
their suites, lookup by id with "did you mean", splits, and the prompt layout."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from corebench.harness import Benchmark, FunctionalSuite, Task
from corebench.harness.errors import UnknownNameError

from .contest_graders import GRADERS
from .hub_data import HubDataset

STDIO_INSTRUCTION = (
    "Write a complete Python 3 program that reads the input from standard input and writes the "
    "answer to standard output."
)


@dataclass
class ContestProblem:
    task: Task  # what systems see
    suite: FunctionalSuite  # what the sandbox runs


def task_prompt(statement: str, starter_code: str = "", entry_point: str | None = None) -> str:
    """The statement, then what to write: a program for stdin/stdout, or the starter code's method."""
    if entry_point is None:
        return f"{statement.strip()}\n\n{STDIO_INSTRUCTION}\n"
    return (
        f"{statement.strip()}\n\nComplete `{entry_point}` in this starter code:\n"
        f"```python\n{starter_code.strip()}\n```\n"
    )


class ContestBenchmark(Benchmark):
    """A benchmark loaded from a Hugging Face dataset, one file per split, judged by default as
    its official grader judges (``contest_graders``)."""

    source: ClassVar[HubDataset]
    comparators = GRADERS

    class Options(Benchmark.Options):
        grader: Literal["official", "tokens"] = Field(
            "official",
            description="official: as the benchmark's own grader checks outputs and ends "
            "programs (docs/benchmarks.md); tokens: corebench's contest checker (whitespace-"
            "separated tokens, numbers within a tolerance, exit status 0)",
        )

    @property
    def official(self) -> bool:
        return self.options.grader == "official"

    def __init__(self, data_dir: Path | None = None, **options: Any):
        super().__init__(data_dir, **options)
        self._splits: dict[str, tuple[dict[str, ContestProblem], dict[str, Any]]] = {}

    def split_files(self, split: str) -> list[str]:
        return [split]

    @abstractmethod
    def convert(self, row: dict[str, Any], split: str) -> ContestProblem | None:
        """One dataset row as a problem (None: skipped, e.g. filtered out by an option)."""

    def _load(self, split: str) -> tuple[dict[str, ContestProblem], dict[str, Any]]:
        self.check_split(split)
        rows, info = self.source.load(self.data_dir, self.split_files(split))
        problems = {}
        for row in rows:
            problem = self.convert(row, split)
            if problem is not None:
                problems[problem.task.task_id] = problem
        return problems, info

    def problems(self, split: str = "test") -> dict[str, ContestProblem]:
        if split not in self._splits:
            self._splits[split] = self._load(split)
        return self._splits[split][0]

    def tasks(self, split: str = "test") -> list[Task]:
        return [p.task for p in self.problems(split).values()]

    def test_suite(self, task_id: str) -> FunctionalSuite:
        for split in [*self._splits, "test"]:
            if task_id in self.problems(split):
                return self.problems(split)[task_id].suite
        raise UnknownNameError(f"{self.name} task", task_id, self.problems("test"))

    def dataset_info(self) -> dict[str, Any]:
        self.problems("test")
        # the grader is recorded apart too: runs judged by different graders never pool
        info = self._splits["test"][1]
        return {**info, "options": self.options.model_dump(), "grader": self.options.grader}
