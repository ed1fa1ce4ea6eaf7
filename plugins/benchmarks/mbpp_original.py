"""The original MBPP (Austin et al., 2021): 974 tasks with assert tests and standard splits by
task id (1-10 prompt, 11-510 test, 511-600 validation, 601-974 train).

Read from ``mbpp.jsonl.gz`` in the data folder, or through ``datasets`` from the Hugging Face
Hub (``google-research-datasets/mbpp``, config ``full``) when online. Registered as the
``mbpp-original`` benchmark; MBPP+ uses it for its training split.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from corebench.harness import Benchmark, FunctionalSuite, Task, hookimpl
from corebench.harness.errors import UnknownNameError
from corebench.harness.metadata import file_fingerprint
from corebench.harness.testsuite import assert_suite
from corebench.plugins.benchmarks.sources import DataFile, read_jsonl, unreadable

FILE_NAME = "mbpp.jsonl.gz"
HUB_ID = "google-research-datasets/mbpp"
SPLITS = {"prompt": (1, 10), "test": (11, 510), "validation": (511, 600), "train": (601, 974)}


@dataclass(frozen=True)
class MbppProblem:
    task_id: int
    text: str
    code: str
    tests: list[str]
    setup: str

    def suite(self, fingerprint: str) -> FunctionalSuite:
        """All its asserts, judged as expressions against the values they state."""
        return assert_suite(
            self.tests,
            self.code,
            entry_point=self.entry_point or "",
            setup_code=self.setup,
            fingerprint=fingerprint,
        )

    @property
    def split(self) -> str:
        return next(name for name, (lo, hi) in SPLITS.items() if lo <= self.task_id <= hi)

    @property
    def entry_point(self) -> str | None:
        """The function the tests call that the reference code defines."""
        for test in self.tests:
            for name in re.findall(r"(\w+)\s*\(", test):
                if re.search(rf"^\s*def\s+{re.escape(name)}\s*\(", self.code, re.MULTILINE):
                    return name
        return None

    @property
    def prompt(self) -> str:
        """The task as MBPP+ writes it: the description and the first test in a docstring."""
        return f'"""\n{self.text.strip()}\n{self.tests[0].strip()}\n"""\n'


def _rows_from_hub() -> list[dict[str, Any]]:
    from datasets import load_dataset

    dataset = load_dataset(HUB_ID, "full")
    return [row for split in dataset.values() for row in split]


def load_mbpp(data_dir: Path | None) -> list[MbppProblem]:
    """All 974 problems, ordered by task id."""
    source = DataFile(
        "original MBPP", (FILE_NAME,), f"https://huggingface.co/datasets/{HUB_ID}", _rows_from_hub
    )
    found, local = source.locate(data_dir)
    if local:
        try:
            rows = read_jsonl(found)
        except (OSError, ValueError, EOFError) as exc:
            raise unreadable("original MBPP", found, exc) from exc
    else:
        rows = found
    problems = [
        MbppProblem(
            task_id=int(row["task_id"]),
            text=row["text"],
            code=row["code"].replace("\r\n", "\n"),
            tests=list(row["test_list"]),
            setup=row.get("test_setup_code") or "",
        )
        for row in rows
    ]
    return sorted(problems, key=lambda p: p.task_id)


class MbppOriginal(Benchmark):
    """MBPP as published: each task's three asserts are its tests (``test_setup_code`` first).

    The prompt shows the description and the first assert (as MBPP+ does); all three asserts are
    judged, as in the standard protocol, so only the second and third are hidden. An assert of
    the form ``f(x) == <literal>`` is judged by comparing the value the sandbox reports with the
    literal in the harness; any other assert by the truth of its condition.
    """

    name = "mbpp-original"
    description = "original MBPP (Austin et al.): 500 test tasks (974 in all), assert tests"
    splits = ("test", "validation", "train", "prompt")

    @cached_property
    def problems(self) -> dict[str, MbppProblem]:
        return {f"Mbpp/{p.task_id}": p for p in load_mbpp(self.data_dir)}

    def tasks(self, split: str = "test") -> list[Task]:
        self.check_split(split)
        return [
            Task(
                task_id=task_id,
                benchmark=self.name,
                prompt=p.prompt,
                entry_point=p.entry_point,
                examples=[p.tests[0]],
                metadata={"split": split},
            )
            for task_id, p in self.problems.items()
            if p.split == split
        ]

    def test_suite(self, task_id: str) -> FunctionalSuite:
        try:
            problem = self.problems[task_id]
        except KeyError:
            raise UnknownNameError(f"{self.name} task", task_id, self.problems) from None
        return problem.suite(self.fingerprint)

    @cached_property
    def fingerprint(self) -> str:
        path = self.data_dir / FILE_NAME if self.data_dir else None
        return file_fingerprint(path) if path and path.exists() else HUB_ID

    def dataset_info(self) -> dict[str, Any]:
        path = self.data_dir / FILE_NAME if self.data_dir else None
        source = str(path) if path and path.exists() else f"hf:{HUB_ID}"
        return {"name": self.name, "source": source, "sha256": self.fingerprint}


@hookimpl
def register_benchmarks(register):
    register(MbppOriginal)
