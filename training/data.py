"""Training tasks: a benchmark's train split, checked against every evaluation benchmark."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from corebench.harness.errors import CorebenchError
from corebench.harness.records import Task
from corebench.harness.registry import Plugins, default_plugins

from .contamination import Overlap, Text, check
from .settings import TrainSettings


@dataclass(frozen=True)
class TrainTask:
    task: Task  # what the policy sees
    tests: list[str]  # assert statements the rewards run in the sandbox
    reference: str  # a reference solution (SFT targets, template plans)


@dataclass
class TrainData:
    tasks: list[TrainTask]
    overlaps: list[Overlap]  # found by the contamination check (dropped unless allowed)
    source: str  # benchmark and split


def load_train_data(settings: TrainSettings, plugins: Plugins | None = None) -> TrainData:
    plugins = plugins or default_plugins()
    data_dir = Path(settings.data_dir) if settings.data_dir else None
    benchmark = plugins.benchmarks.get(settings.benchmark).component(data_dir)
    if "train" not in benchmark.splits or not hasattr(benchmark, "train_tests"):
        raise CorebenchError(f"benchmark {settings.benchmark!r} has no train split")
    train = []
    for task in benchmark.tasks("train"):
        tests, reference = benchmark.train_tests(task.task_id)
        train.append(TrainTask(task, tests, reference))
    evaluation = []
    for name in settings.eval_benchmarks:
        evaluated = plugins.benchmarks.get(name).component(data_dir)
        evaluation += [
            Text(t.task_id, t.prompt, evaluated.test_suite(t.task_id).reference_code)
            for t in evaluated.tasks("test")
        ]
    texts = [Text(t.task.task_id, t.task.prompt, t.reference) for t in train]
    overlaps = check(texts, evaluation, allow=settings.allow_overlap or settings.exclude_overlaps)
    if settings.exclude_overlaps and not settings.allow_overlap:
        dropped = {o.train_id for o in overlaps}
        train = [t for t in train if t.task.task_id not in dropped]
    if settings.tasks_limit:
        train = train[: settings.tasks_limit]
    if not train:
        raise CorebenchError("no training tasks left after the contamination check")
    return TrainData(train, overlaps, f"{settings.benchmark}:train")
