"""The `corebench` command group and the options several subcommands share."""

from __future__ import annotations

import atexit
import gc
import os
import sys
import warnings
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

import click

from .. import config as C
from ..errors import CorebenchError, UnknownNameError
from ..options import parse_assignments
from ..registry import PluginWarning, default_plugins


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    click.echo(f"warning: {message}", err=True)


class CorebenchGroup(click.Group):
    """The core commands plus those plugins add through the ``register_commands`` hook (loaded
    on first use, so the core imports nothing above it); a CorebenchError becomes one line on
    stderr and exit code 1."""

    _plugins_loaded = False

    def _load_plugin_commands(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        try:
            default_plugins().manager.hook.register_commands(cli=self)
        except Exception as exc:  # a broken plugin must not take the core commands with it
            warnings.warn(
                f"a plugin's register_commands failed: {exc!r}", PluginWarning, stacklevel=2
            )

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_plugin_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        self._load_plugin_commands()
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context) -> Any:
        warnings.showwarning = _show_warning
        try:
            return super().invoke(ctx)
        except CorebenchError as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=CorebenchGroup)
@click.version_option(package_name="corebench")
def main() -> None:
    """corebench: evaluate code-generation agents (benchmarks x systems x models)."""
    _, *older = gc.get_threshold()
    gc.set_threshold(C.GC_YOUNG_THRESHOLD, *older)
    # at exit the collector's last pass walks everything still held (datasets, references,
    # results: half a second after a HumanEval+ evaluation); frozen objects are left out of it
    atexit.register(gc.freeze)


# --- option values -----------------------------------------------------------------------------
def int_list(_ctx: click.Context, _param: click.Parameter, value: str | list[int]) -> list[int]:
    """``"1,10"`` (or a list, from a config file) -> sorted distinct positive integers."""
    items = value.split(",") if isinstance(value, str) else value
    try:
        ks = sorted({int(v) for v in items if str(v).strip()})
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None
    if not ks or min(ks) < 1:
        raise click.BadParameter("k values must be positive")
    return ks


def assignments(
    _ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, Any]:
    """Repeated ``KEY=VALUE`` flags -> a dict (values typed later by the component's Options)."""
    try:
        return parse_assignments(values, param.opts[-1])
    except CorebenchError as exc:
        raise click.BadParameter(str(exc)) from None


# --- a command's settings from a TOML file -----------------------------------------------------
TABLES = "tables"  # ctx.meta key: the file's KEY=VALUE tables, typed, for the command to merge


def _settings_file(ctx: click.Context, param: click.Parameter, path: Path | None) -> Path | None:
    """Fill the command's defaults from ``path`` (a flat table or a ``[run]`` table): keys are the
    long flags' names with ``_``; each repeatable ``KEY=VALUE`` flag is a table named as the run
    records it (``[system_options]`` for ``-O``, ``[benchmark_options]`` for ``-B``). Flags given
    on the command line win (errors are CorebenchErrors: one line, from the group)."""
    if path is None:
        return None
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CorebenchError(f"cannot read {path}: {exc}") from None
    data = data.get(ctx.info_name or "", data)
    flags: dict[str, click.Parameter] = {}
    tables: dict[str, click.Parameter] = {}
    for other in ctx.command.params:
        if other is param or not isinstance(other, click.Option):
            continue
        if other.multiple:
            tables[other.name or ""] = other
        for opt in other.opts:
            if opt.startswith("--"):
                flags[opt[2:].replace("-", "_")] = other
    defaults: dict[str, Any] = {}
    ctx.meta[TABLES] = {}
    for key, value in data.items():
        if key in tables:
            if not isinstance(value, dict):
                raise CorebenchError(f"{path}: {key} must be a table of KEY = VALUE")
            ctx.meta[TABLES][key] = value
        elif key in flags and not flags[key].multiple:
            if isinstance(value, list):  # k = [1, 5], tasks = ["Mbpp/2"]: the flag's own syntax
                value = ",".join(str(item) for item in value)
            defaults[flags[key].name or key] = value
        else:
            known = [k for k, p in flags.items() if not p.multiple] + list(tables)
            raise UnknownNameError(f"setting in {path}:", key, known)
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return path


def config_option(command_name: str) -> Any:
    return click.option(
        "--config",
        "config_file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        is_eager=True,
        expose_value=False,
        callback=_settings_file,
        help=f"TOML file of this command's settings (flag names; a flat or [{command_name}] "
        "table); flags given on the command line win.",
    )


def file_table(name: str, given: dict[str, Any]) -> dict[str, Any]:
    """A ``KEY=VALUE`` flag's values: the config file's table, updated by the flags given."""
    ctx = click.get_current_context()
    return {**ctx.meta.get(TABLES, {}).get(name, {}), **given}


# --- options shared by several subcommands -----------------------------------------------------
data_dir_option = click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    envvar=C.ENV_DATA_DIR,
    help=f"Folder with offline benchmark files (env: {C.ENV_DATA_DIR}).",
)


def _isolation(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """Settle the isolation before anything loads: one line if bubblewrap is missing."""
    from ..sandbox.isolation import isolation_mode

    if value:
        os.environ[C.ENV_ISOLATION] = value  # every executor of this process (training too)
    try:
        return isolation_mode(value)
    except CorebenchError as exc:
        raise click.ClickException(str(exc)) from None


isolation_option = click.option(
    "--isolation",
    type=click.Choice(["auto", "bwrap", "unsafe"]),
    envvar=C.ENV_ISOLATION,
    callback=_isolation,
    is_eager=True,
    help="How generated code is confined: auto (bubblewrap; refuse without it), bwrap, or unsafe "
    "(resource limits only, recorded in the run).",
)


def _executor(_ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """Settle where sandbox work runs for every executor of this process (training too)."""
    from ..sandbox.placement import KINDS

    if not value:
        return
    if value not in ("local", "ray") and not value.startswith(("ray://", "http://")):
        raise click.BadParameter(f"{value!r} is none of: {', '.join(KINDS)}")
    os.environ[C.ENV_EXECUTOR] = value


executor_option = click.option(
    "--executor",
    envvar=C.ENV_EXECUTOR,
    callback=_executor,
    expose_value=False,
    is_eager=True,
    metavar="WHERE",
    help="Where sandbox work runs: local (default), ray (the cluster at $RAY_ADDRESS, or a new "
    "one on this machine), ray://HOST:PORT (Ray Client), or http://HOST:PORT (a judging "
    "service). Every node confines programs as --isolation says.",
)
repeats_option = click.option(
    "--repeats",
    type=click.IntRange(min=0),
    default=C.DEFAULT_REPEATS,
    show_default=True,
    help="Measurement phase: timed runs on each of a task's heaviest tests, per passing solution (0: skip).",
)
