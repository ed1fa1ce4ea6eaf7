"""`corebench show`: a run's summary."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .group import main


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def show(run_dir: Path, as_json: bool) -> None:
    """Print the summary of a run: pass@k, verdicts, runtime, memory, calls and tokens."""
    from ..store import Store
    from ..summary import format_summary, summarize

    summary = summarize(Store(run_dir, create=False))
    click.echo(json.dumps(summary, indent=2) if as_json else format_summary(summary))
