"""`corebench list`: every registered benchmark, system and backend, optionally with options."""

from __future__ import annotations

import click

from ..options import describe
from ..registry import default_plugins
from .group import main


@main.command("list")
@click.option(
    "--options",
    "with_options",
    is_flag=True,
    help="Also each component's options: name, type, default and what it does.",
)
def list_plugins(with_options: bool) -> None:
    """List every benchmark, system and backend, with the plugin and distribution it came from."""
    plugins = default_plugins()
    for kind, registry in plugins.kinds().items():
        click.echo(f"{kind}s:")
        for entry in registry:
            origin = entry.origin
            click.echo(
                f"  {entry.name:<14} {entry.description}  [{origin.distribution} {origin.version}]"
            )
            if not with_options:
                continue
            flag = {"benchmark": "-B ", "system": "-O ", "backend": "?"}.get(kind, "")
            for name, type_, default, doc in describe(entry.component.Options):
                click.echo(f"      {flag}{name}: {type_} = {default}  {doc}".rstrip())
