"""Training tasks: a benchmark's train split, checked against every evaluation benchmark."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from corebench.harness.errors import CorebenchError
from corebench.harness.extract import extract_code
from corebench.harness.records import Task
from corebench.harness.registry import Plugins, default_plugins
from corebench.harness.testsuite import FunctionalSuite

from .contamination import Flag, Thresholds, check, items
from .rewards import rewarded_suite
from .settings import TrainSettings


@dataclass(frozen=True)
class TrainTask:
    task: Task  # what the policy sees
    suite: FunctionalSuite  # what the rewards run in the sandbox (the benchmark's test_suite)

    @property
    def reference(self) -> str:
        """A reference solution (SFT targets, template plans, efficiency terms); may be ''."""
        return self.suite.reference_code

    def code_from(self, text: str) -> str:
        """The program in a completion: the entry function, or a whole stdin/stdout program."""
        entry = self.task.entry_point
        return extract_code(text, entry, program=self.suite.mode == "stdio").code


@dataclass
class TrainData:
    tasks: list[TrainTask]
    overlaps: list[Flag]  # near duplicates of evaluation tasks (dropped unless allowed)
    source: str  # benchmark and split
    validation: list[TrainTask] = field(default_factory=list)  # held out of ``tasks``
    filtered: dict[str, int] = field(default_factory=dict)  # curriculum.filtered_tasks's


def load_train_data(settings: TrainSettings, plugins: Plugins | None = None) -> TrainData:
    plugins = plugins or default_plugins()
    data_dir = Path(settings.data_dir) if settings.data_dir else None
    benchmark = plugins.benchmarks.get(settings.benchmark).component(
        data_dir, **settings.benchmark_options
    )
    if "train" not in benchmark.splits:
        raise CorebenchError(
            f"benchmark {settings.benchmark!r} has no train split (splits: "
            f"{', '.join(benchmark.splits)})"
        )
    # the tests rewards run: a fixed subset of very large suites, the base tests for "class"
    train = [
        TrainTask(t, rewarded_suite(benchmark.test_suite(t.task_id), t.task_id, settings.reward))
        for t in benchmark.tasks("train")
    ]
    evaluation = []
    # every evaluation benchmark's evaluated tasks (its `eval_split` where it has one, else its
    # test split), the training benchmark's own included
    for name in dict.fromkeys([*settings.eval_benchmarks, settings.benchmark]):
        evaluated = plugins.benchmarks.get(name).component(data_dir)
        split = settings.eval_split if settings.eval_split in evaluated.splits else "test"
        evaluation += items(evaluated, split)
    overlaps = check(
        items(benchmark, "train"),
        evaluation,
        thresholds(settings),
        allow=settings.allow_overlap or settings.exclude_overlaps,
    )
    if settings.exclude_overlaps and not settings.allow_overlap:
        dropped = {o.train_id for o in overlaps}
        train = [t for t in train if t.task.task_id not in dropped]
    train, validation = hold_out(train, settings.validation_tasks)
    if settings.tasks_limit:
        train = train[: settings.tasks_limit]
    if not train:
        raise CorebenchError("no training tasks left after the contamination check")
    return TrainData(train, overlaps, f"{settings.benchmark}:train", validation)


VALIDATION_SEED = 0  # the held-out slice is the same for every training seed


def hold_out(tasks: list[TrainTask], count: int) -> tuple[list[TrainTask], list[TrainTask]]:
    """(training tasks, ``count`` validation tasks): a fixed random sample of the tasks (drawn
    with ``VALIDATION_SEED``, whatever the training seed), both in their original order."""
    if count <= 0:
        return tasks, []
    if count >= len(tasks):
        raise CorebenchError(
            f"validation_tasks = {count} leaves no training tasks (there are {len(tasks)})"
        )
    held = set(random.Random(VALIDATION_SEED).sample(range(len(tasks)), count))
    return (
        [t for i, t in enumerate(tasks) if i not in held],
        [t for i, t in enumerate(tasks) if i in held],
    )


def thresholds(settings: TrainSettings) -> Thresholds:
    """The near-duplicate thresholds a training run uses (settings ``decontaminate_*``)."""
    return Thresholds(
        description=settings.decontaminate_description,
        code=settings.decontaminate_code,
        tests=settings.decontaminate_tests,
    )
