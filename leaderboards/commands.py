"""``corebench leaderboard``: added to the CLI through the ``register_commands`` hook."""

from __future__ import annotations

from pathlib import Path

import click

from corebench.harness import hookimpl


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), help="Write the table as CSV.")
@click.option("--html", "html_path", type=click.Path(path_type=Path), help="Write the HTML page.")
def leaderboard(runs: tuple[Path, ...], csv_path: Path | None, html_path: Path | None) -> None:
    """Rank the stored runs in RUNS (run directories, or folders of them): CSV and HTML."""
    from . import collect_runs, leaderboard_table, write_csv, write_html

    collected = collect_runs(list(runs), details=html_path is not None)
    table = leaderboard_table(collected)
    if csv_path:
        write_csv(table, csv_path)
    if html_path:
        write_html(table, collected, html_path)
    shown = table[["benchmark", "system", "model", "tasks", "pass@1", "pass@1_base"]].copy()
    for column in ("pass@1", "pass@1_base"):
        shown[column] = (100 * shown[column]).round(1)
    click.echo(shown.to_string(index=False))
    for path in (csv_path, html_path):
        if path:
            click.echo(f"wrote {path}")


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(leaderboard)
