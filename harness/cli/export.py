"""`corebench export`: a run's samples as JSON lines, corebench's records or EvalPlus samples."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .group import main


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--jsonl",
    "output",
    type=click.Path(path_type=Path),
    required=True,
    help="Output file ('-' for stdout).",
)
@click.option(
    "--format",
    "form",
    type=click.Choice(["corebench", "evalplus"]),
    default="corebench",
    show_default=True,
    help="corebench: each sample's solution (with its trace) and execution result; evalplus: "
    "an EvalPlus samples file ({task_id, solution} per line) that evalplus.evaluate or "
    "`corebench evaluate` re-judges.",
)
def export(run_dir: Path, output: Path, form: str) -> None:
    """Export every finished sample as JSON lines."""
    from ..store import Store

    store = Store(run_dir, create=False)
    lines = (
        json.dumps({"task_id": s.task_id, "solution": s.code})
        if form == "evalplus"
        else json.dumps(
            {"solution": s.model_dump(mode="json"), "result": r.model_dump(mode="json")}
        )
        for s, r in store.samples()
    )
    if str(output) == "-":
        for line in lines:
            click.echo(line)
    else:
        count = 0
        with open(output, "w") as f:
            for line in lines:
                f.write(line + "\n")
                count += 1
        click.echo(f"wrote {count} samples to {output}", err=True)
