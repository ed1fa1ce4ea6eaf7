"""`corebench sandbox serve`: the sandbox as a judging service over HTTP."""

from __future__ import annotations

import signal
from pathlib import Path

import click

from .. import config as C
from .group import data_dir_option, executor_option, isolation_option, main


@main.group()
def sandbox() -> None:
    """The sandbox on its own: serve it to RL trainers and other hosts."""


@sandbox.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=int, default=C.SERVICE_PORT, show_default=True, help="Port (0: any free)."
)
@click.option(
    "--token",
    envvar=C.ENV_JUDGE_TOKEN,
    help=f"Bearer token clients must send (env: {C.ENV_JUDGE_TOKEN}); required off loopback.",
)
@click.option(
    "--workers", type=click.IntRange(min=1), help="Programs run at once (default: CPU cores)."
)
@click.option(
    "--capacity",
    type=click.IntRange(min=1),
    help=f"Programs admitted at once, running or waiting; more get 429 "
    f"(default: {C.SERVICE_PENDING_PER_WORKER} per worker).",
)
@data_dir_option
@executor_option
@isolation_option
def serve(
    host: str,
    port: int,
    token: str | None,
    workers: int | None,
    capacity: int | None,
    data_dir: Path | None,
    isolation: str,
) -> None:
    """Judge programs sent over HTTP against a registered benchmark's task or tests in the
    request, in the same sandbox and with the same verdicts as `run` and `evaluate`."""
    from ..sandbox import Executor, executor_for
    from ..sandbox.placement import executor_setting
    from ..service import JudgeServer, JudgeService

    where = executor_setting()
    if where.startswith("http://"):
        raise click.ClickException("a judging service judges on this machine or a Ray cluster")
    service = JudgeService(
        Executor(workers=workers, isolation=isolation)
        if where == "local"
        else executor_for(where, isolation),
        data_dir=C.data_dir_setting(data_dir),
        capacity=capacity,
    )
    server = JudgeServer(service, host, port, token)
    health = service.health()
    click.echo(
        f"judging at {server.url} ({health['isolation']}, {health['engine']} engine, "
        f"{health['workers']} workers, capacity {health['capacity']})",
        err=True,
    )

    signal.signal(signal.SIGTERM, lambda *_: server.stop())  # finish what was admitted, then exit
    signal.signal(signal.SIGINT, lambda *_: server.stop())
    server.serve_forever()
    server.close()
    click.echo("stopped; every admitted program was answered", err=True)
