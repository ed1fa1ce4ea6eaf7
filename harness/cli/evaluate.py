"""`corebench evaluate`: an EvalPlus-style samples file judged into a run directory."""

from __future__ import annotations

import time
from pathlib import Path

import click

from .. import config as C
from ..registry import default_plugins
from .group import (
    data_dir_option,
    executor_option,
    int_list,
    isolation_option,
    main,
    repeats_option,
)


@main.command()
@click.option("--bench", "benchmark", required=True, help="Benchmark the samples are for.")
@click.option(
    "--samples",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="JSONL: task_id plus solution or completion.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="Run directory for the results (re-running resumes).",
)
@click.option(
    "--k", "k", default="1,10,100", show_default=True, callback=int_list, help="pass@k values."
)
@data_dir_option
@repeats_option
@executor_option
@isolation_option
def evaluate(
    benchmark: str,
    samples: Path,
    out: Path,
    k: list[int],
    data_dir: Path | None,
    repeats: int,
    isolation: str,
) -> None:
    """Judge an EvalPlus-style samples file in the sandbox (a drop-in for `evalplus.evaluate`)."""
    import asyncio

    from ..evaluate import evaluate_samples, write_reports
    from ..summary import format_summary

    bench = default_plugins().benchmarks.get(benchmark).component(C.data_dir_setting(data_dir))
    started = time.perf_counter()
    judged = asyncio.run(evaluate_samples(bench, samples, out, k, repeats=repeats))
    click.echo(f"{out}: judged {judged} samples in {time.perf_counter() - started:.1f} s", err=True)
    results, summary_path, summary = write_reports(out)
    click.echo(f"wrote {results} and {summary_path}", err=True)
    click.echo(format_summary(summary))
