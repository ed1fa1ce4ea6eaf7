"""The hooks a corebench plugin implements.

A plugin is a module (or object) exposed through the ``corebench`` entry-point group. It
implements any of these hooks with ``@hookimpl`` and calls ``register`` once per component:

    from corebench.harness import Benchmark, hookimpl

    @hookimpl
    def register_benchmarks(register):
        register(MyBenchmark)
"""

from __future__ import annotations

from collections.abc import Callable

import click
import pluggy

from .config import PLUGIN_PROJECT

hookspec = pluggy.HookspecMarker(PLUGIN_PROJECT)
hookimpl = pluggy.HookimplMarker(PLUGIN_PROJECT)


@hookspec
def register_benchmarks(register: Callable[[type], None]) -> None:
    """Register :class:`~corebench.harness.Benchmark` subclasses: ``register(cls)``."""


@hookspec
def register_systems(register: Callable[[type], None]) -> None:
    """Register :class:`~corebench.harness.System` subclasses: ``register(cls)``."""


@hookspec
def register_backends(register: Callable[[type], None]) -> None:
    """Register :class:`~corebench.harness.Backend` subclasses: ``register(cls)``."""


@hookspec
def register_commands(cli: click.Group) -> None:
    """Add commands to the ``corebench`` CLI: ``cli.add_command(command)`` (a click command).
    ``corebench train`` and ``corebench leaderboard`` are added this way."""
