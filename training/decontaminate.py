"""``corebench decontaminate``: training tasks that are near duplicates of evaluation tasks, one
line per flagged pair (``TRAIN_ID EVAL_ID criterion score``; ``contamination.py`` says how each
criterion is measured). Training drops these tasks by default."""

from __future__ import annotations

from pathlib import Path

import click

from corebench.harness import config as C
from corebench.harness.cli import data_dir_option


def split_spec(text: str, default: str) -> tuple[str, list[str]]:
    """``BENCH[:SPLIT,SPLIT...]`` as (benchmark, splits)."""
    name, _, splits = text.partition(":")
    return name, [s for s in splits.split(",") if s] or [default]


@click.command()
@click.option(
    "--train", "train_spec", required=True, metavar="BENCH[:SPLITS]",
    help="The training tasks: a benchmark and its splits (default: train), e.g. "
    "mbpp-original:train,validation,test,prompt.",
)  # fmt: skip
@click.option(
    "--eval", "eval_specs", required=True, multiple=True, metavar="BENCH[:SPLITS]",
    help="Evaluation tasks (default split: test); repeatable.",
)  # fmt: skip
@click.option(
    "--description",
    type=click.FloatRange(0, 1),
    default=C.NEAR_DUPLICATE_DESCRIPTION,
    show_default=True,
    help="Least prose similarity (difflib ratio) that flags a pair.",
)
@click.option(
    "--code",
    type=click.FloatRange(0, 1),
    default=C.NEAR_DUPLICATE_CODE,
    show_default=True,
    help="Least similarity of the canonical syntax trees.",
)
@click.option(
    "--tests",
    type=click.FloatRange(0, 1),
    default=C.NEAR_DUPLICATE_TESTS,
    show_default=True,
    help="Least share of a training task's tests the other has.",
)
@data_dir_option
def decontaminate(train_spec: str, eval_specs: tuple[str, ...], description: float, code: float,
                  tests: float, data_dir: Path | None) -> None:  # fmt: skip
    """Print each training task that is a near duplicate of an evaluation task: TRAIN_ID EVAL_ID
    criterion score (criteria: id, description, code, tests, name)."""
    from corebench.harness.registry import default_plugins

    from .contamination import Thresholds, excluded_by, items, near_duplicates

    plugins = default_plugins()
    data = C.data_dir_setting(data_dir)

    def tasks(spec: str, default: str) -> list:
        name, splits = split_spec(spec, default)
        benchmark = plugins.benchmarks.get(name).component(data)
        for split in splits:
            benchmark.check_split(split)
        return [item for split in splits for item in items(benchmark, split)]

    train = tasks(train_spec, "train")
    evaluation = [item for spec in eval_specs for item in tasks(spec, "test")]
    flags = near_duplicates(train, evaluation, Thresholds(description=description, code=code,
                                                          tests=tests))  # fmt: skip
    for flag in flags:
        click.echo(flag.line())
    counts = ", ".join(f"{criterion} {n}" for criterion, n in excluded_by(flags).items())
    flagged = len({f.train_id for f in flags})
    click.echo(
        f"{flagged} of {len(train)} training tasks flagged against {len(evaluation)} "
        f"evaluation tasks ({counts})",
        err=True,
    )
