"""Base class of benchmark plugins."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from . import options as opts
from .comparators import Comparator
from .errors import UnknownNameError
from .records import Task
from .testsuite import FunctionalSuite


class Benchmark(ABC):
    """A set of tasks (what systems see) and their hidden test suites (what the sandbox runs)."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    splits: ClassVar[tuple[str, ...]] = ("test",)
    # comparators of this benchmark's own beyond the built-in ones: suites that use them can be
    # sent to the judging service (``corebench sandbox serve``) as data
    comparators: ClassVar[tuple[type[Comparator], ...]] = ()

    class Options(opts.Options):
        """A benchmark's options (``corebench run -B KEY=VALUE``); subclasses add fields."""

    def __init__(self, data_dir: Path | None = None, **options: Any):
        self.data_dir = data_dir
        self.options = opts.validate_options(
            f"benchmark {self.name!r} option", self.Options, options
        )

    def check_split(self, split: str) -> None:
        """One error (with a suggestion) for a split this benchmark does not have."""
        if split not in self.splits:
            raise UnknownNameError(f"{self.name} split", split, self.splits)

    @abstractmethod
    def tasks(self, split: str = "test") -> list[Task]:
        """The tasks of a split, in a stable order."""

    @abstractmethod
    def test_suite(self, task_id: str) -> FunctionalSuite:
        """The hidden tests of one task, of any split (a ``train`` split's suites are what
        ``corebench train`` rewards run)."""

    def dataset_info(self) -> dict[str, Any]:
        """Name, version, source and hash of the data, recorded in each run's metadata."""
        return {"name": self.name}
