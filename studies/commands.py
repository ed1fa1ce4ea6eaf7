"""``corebench study``: added to the CLI through the ``register_commands`` hook."""

from __future__ import annotations

from pathlib import Path

import click

from corebench.harness import hookimpl
from corebench.harness.cli import data_dir_option, executor_option, isolation_option


@click.command()
@click.argument("study_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--scale",
    default="full",
    show_default=True,
    help="A [scale.NAME] of the study (e.g. smoke: minutes on a CPU), or full.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="The study's folder (default: runs/studies/NAME-SCALE). Re-running does what is missing.",
)
@click.option("--report-only", is_flag=True, help="Only write the report from what is done.")
@data_dir_option
@executor_option
@isolation_option
def study(study_file: Path, scale: str, out: Path | None, report_only: bool,
          data_dir: Path | None, isolation: str) -> None:  # fmt: skip
    """Run a declared study (training steps, then runs) and write its report: pass@k with
    intervals, paired differences with p-values, test pass rates, complexity, failure kinds."""
    from corebench.harness import config as C
    from corebench.harness.registry import default_plugins

    from .evidence import register
    from .execute import Layout, export_missing, run_study
    from .report import build_report, render_html, render_markdown
    from .spec import load_study

    data = C.data_dir_setting(data_dir)
    # every mistake at once, before anything trains, runs or reports
    spec = load_study(study_file, scale, default_plugins(), data)
    layout = Layout(out or C.DEFAULT_RUNS_DIR / "studies" / f"{spec.header.name}-{scale}")
    if report_only:
        missing = export_missing(spec, layout, data)  # folders from before the evidence files
        if missing:
            raise click.ClickException(
                f"not run yet: {', '.join(missing)} (run without --report-only)"
            )
    else:
        register(study_file, layout.root, scale)
        run_study(spec, layout, data_dir=data, say=lambda t: click.echo(t, err=True))
    report = build_report(spec, layout.root, study_file)
    markdown, page = layout.report("md"), layout.report("html")
    markdown.write_text(render_markdown(report))
    page.write_text(render_html(report))
    click.echo(f"wrote {markdown} and {page}", err=True)
    click.echo(markdown.read_text())


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(study)
