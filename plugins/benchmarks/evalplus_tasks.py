"""HumanEval+ and MBPP+ in EvalPlus's release format: differential tests on base and extra inputs."""

from __future__ import annotations

import re
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from corebench.harness import Benchmark, FunctionalSuite, Task, hookimpl
from corebench.harness.errors import DatasetMissingError, UnknownNameError
from corebench.harness.examples import docstring_examples
from corebench.harness.metadata import file_fingerprint
from corebench.plugins.benchmarks.evalplus_oracles import EvalPlusComparator
from corebench.plugins.benchmarks.mbpp_original import MbppProblem, load_mbpp
from corebench.plugins.benchmarks.mbpp_plus_inputs import mbpp_plus_inputs
from corebench.plugins.benchmarks.sources import DataFile, read_jsonl, unreadable

_ASSERT_LINE = re.compile(r"^\s*assert .+$", re.MULTILINE)


class EvalPlusBenchmark(Benchmark):
    """Shared loader for the EvalPlus datasets."""

    file_name: ClassVar[str]
    version: ClassVar[str]
    dataset: ClassVar[str]  # "mbpp" or "humaneval", EvalPlus's own name
    comparators = (EvalPlusComparator,)

    def _download(self) -> str:
        """The release file, fetched into EvalPlus's cache by its public helpers (needs the
        network); the version is this benchmark's (EvalPlus's own loader pins its default)."""
        from evalplus.data.utils import get_dataset_metadata, make_cache

        release = self.file_name.split("-", 1)[0]  # "MbppPlus", "HumanEvalPlus"
        url, path = get_dataset_metadata(release, self.version, mini=False)
        make_cache(url, path)
        return path

    @cached_property
    def path(self) -> Path:
        source = DataFile(
            self.name,
            (self.file_name, self.file_name.removesuffix(".gz")),
            f"the EvalPlus {self.version} release (evalplus on PyPI downloads it when online)",
            fetch=self._download,
        )
        return Path(source.locate(self.data_dir)[0])

    @cached_property
    def problems(self) -> dict[str, dict[str, Any]]:
        try:
            rows = read_jsonl(self.path)
        except (OSError, ValueError, EOFError) as exc:
            raise unreadable(self.name, self.path, exc) from exc
        return {row["task_id"]: row for row in rows}

    @cached_property
    def fingerprint(self) -> str:
        return file_fingerprint(self.path)

    def dataset_info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "path": str(self.path),
            "sha256": self.fingerprint,
        }

    def _problem(self, task_id: str) -> dict[str, Any]:
        try:
            return self.problems[task_id]
        except KeyError:
            raise UnknownNameError(f"{self.name} task", task_id, self.problems) from None

    def in_split(self, task_id: str, split: str) -> bool:
        """Whether a task of the release file belongs to ``split`` (``test``: all of them)."""
        return split == "test"

    def tasks(self, split: str = "test") -> list[Task]:
        self.check_split(split)
        return [
            Task(
                task_id=task_id,
                benchmark=self.name,
                prompt=p["prompt"],
                entry_point=p["entry_point"],
                examples=self.visible_examples(p),
            )
            for task_id, p in self.problems.items()
            if self.in_split(task_id, split)
        ]

    def visible_examples(self, problem: dict[str, Any]) -> list[str]:
        """Example tests the prompt itself shows (EvalPlus makes them part of the problem)."""
        return [m.group(0).strip() for m in _ASSERT_LINE.finditer(problem["prompt"])]

    def _inputs(self, task_id: str, inputs: list[Any]) -> list[Any]:
        return inputs

    def test_suite(self, task_id: str) -> FunctionalSuite:
        p = self._problem(task_id)
        return FunctionalSuite(
            entry_point=p["entry_point"],
            reference_code=p["prompt"] + p["canonical_solution"],
            inputs={
                "base": self._inputs(task_id, p["base_input"]),
                "plus": self._inputs(task_id, p["plus_input"]),
            },
            atol=float(p.get("atol") or 0.0),
            comparator=EvalPlusComparator(
                self.dataset, p["entry_point"], float(p.get("atol") or 0.0)
            ),
            fingerprint=self.fingerprint,
        )


class MbppPlus(EvalPlusBenchmark):
    name = "mbpp"
    description = "MBPP+ (EvalPlus v0.2.0): 378 tasks, base and extra differential tests"
    file_name = "MbppPlus-v0.2.0.jsonl.gz"
    version = "v0.2.0"
    dataset = "mbpp"
    splits = ("test", "train")
    ORIGINAL_SPLITS = ("train", "validation", "test", "prompt")

    class Options(EvalPlusBenchmark.Options):
        train_from: list[str] = Field(
            ["train", "validation"],
            description="original MBPP splits whose tasks not in MBPP+ form the train split "
            "(train, validation, test, prompt)",
        )

    def __init__(self, data_dir: Path | None = None, **options: Any):
        super().__init__(data_dir, **options)
        for split in self.options.train_from:
            if split not in self.ORIGINAL_SPLITS:
                raise UnknownNameError("original MBPP split", split, self.ORIGINAL_SPLITS)

    def tasks(self, split: str = "test") -> list[Task]:
        """``train``: original MBPP's tasks that are not in MBPP+, from its train and validation
        splits (option ``train_from`` adds its test and prompt splits: MBPP+ draws from every
        split and leaves out about half of them; the exclusion is by task id), in MBPP+'s prompt
        format."""
        if split != "train":
            return super().tasks(split)
        return [
            Task(
                task_id=f"Mbpp/{p.task_id}",
                benchmark=self.name,
                prompt=p.prompt,
                entry_point=p.entry_point,
                examples=[p.tests[0]],
                metadata={"split": "train"},
            )
            for p in self._train_problems().values()
        ]

    def test_suite(self, task_id: str) -> FunctionalSuite:
        """MBPP+'s suites; for a train task, its three original asserts (rewards, SFT targets)."""
        if task_id not in self.problems:
            try:
                train = self._train_problems()
            except DatasetMissingError:  # no original MBPP here: only MBPP+'s own ids exist
                train = {}
            if task_id in train:
                return train[task_id].suite(f"mbpp-train:{self.fingerprint}")
        return super().test_suite(task_id)

    def _train_problems(self) -> dict[str, MbppProblem]:
        if not hasattr(self, "_train"):
            evaluated = set(self.problems)
            self._train = {
                f"Mbpp/{p.task_id}": p
                for p in load_mbpp(self.data_dir)
                if p.split in self.options.train_from
                and f"Mbpp/{p.task_id}" not in evaluated
                and not p.setup
                and p.entry_point
            }
        return self._train

    def _inputs(self, task_id: str, inputs: list[Any]) -> list[Any]:
        return mbpp_plus_inputs(task_id, inputs)


HELD_OUT_PERIOD, HELD_OUT_PER_PERIOD = 33, 8


class HumanEvalPlus(EvalPlusBenchmark):
    """``test`` is all 164 tasks. ``train`` (124) and ``heldout`` (40) split them 25/33 : 8/33 as
    the MAGRPO class study does: ``HumanEval/i`` is held out when ``i % 33 < 8``, so the held-out
    tasks are spread over the whole file (HumanEval grows harder towards its end)."""

    name = "humaneval"
    description = "HumanEval+ (EvalPlus v0.1.10): 164 tasks, base and extra differential tests"
    file_name = "HumanEvalPlus-v0.1.10.jsonl.gz"
    version = "v0.1.10"
    dataset = "humaneval"
    splits = ("test", "train", "heldout")

    def in_split(self, task_id: str, split: str) -> bool:
        if split == "test":
            return True
        held_out = int(task_id.rsplit("/", 1)[1]) % HELD_OUT_PERIOD < HELD_OUT_PER_PERIOD
        return held_out == (split == "heldout")

    def visible_examples(self, problem: dict[str, Any]) -> list[str]:
        """The docstring's examples (doctests, or ``f(x) == y`` / ``f(x) ➞ y`` lines) as asserts."""
        return docstring_examples(problem["prompt"], problem["entry_point"])


@hookimpl
def register_benchmarks(register):
    register(MbppPlus)
    register(HumanEvalPlus)
