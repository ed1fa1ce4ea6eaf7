"""``corebench train``: added to the CLI through the ``register_commands`` hook."""

from __future__ import annotations

from pathlib import Path

import click

from corebench.harness import hookimpl
from corebench.harness.cli import data_dir_option

from .settings import METHODS


@click.command()
@click.argument("method", type=click.Choice(METHODS))
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, path_type=Path),
    help="TOML file of training settings (a flat table or [train]).",
)
@click.option("--set", "overrides", multiple=True, help="Setting KEY=VALUE (repeatable).")
@click.option("--out", help="Checkpoint directory (overrides the config's `out`).")
@click.option(
    "--accelerate-config",
    "accelerate_file",
    type=click.Path(path_type=Path),
    help="Only write a multi-GPU accelerate/DeepSpeed config here and print the launch command.",
)
@click.option(
    "--gpus",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="GPUs for --accelerate-config.",
)
@data_dir_option
def train(method: str, config_path: Path | None, overrides: tuple[str, ...], out: str | None,
          accelerate_file: Path | None, gpus: int, data_dir: Path | None) -> None:  # fmt: skip
    """Train checkpoints: grpo, pta (plan-then-act), magrpo (helper/main pair), corecode
    (planner/coder, collaboration-aware), sft (planner/coder cold start)."""
    from .dispatch import evaluate_command
    from .dispatch import train as run_training
    from .settings import load_settings

    flags = {"out": out, "data_dir": str(data_dir) if data_dir else None}
    given = {key: value for key, value in flags.items() if value is not None}
    # bad settings fail before any launch
    settings = load_settings(method, config_path, overrides, **given)
    if accelerate_file:
        from .scaleout import launch_command, write_accelerate_config

        write_accelerate_config(accelerate_file, gpus)
        click.echo(f"wrote {accelerate_file}; run:")
        click.echo(launch_command(accelerate_file, method, config_path, overrides, given))
        return
    checkpoints = run_training(settings)
    for role, path in checkpoints.items():
        click.echo(f"{role}: {path}")
    click.echo(f"evaluate with: {evaluate_command(settings, checkpoints)}")


@hookimpl
def register_commands(cli: click.Group) -> None:
    from .decontaminate import decontaminate

    cli.add_command(train)
    cli.add_command(decontaminate)
