"""`corebench serve`: a backend as an OpenAI-compatible HTTP endpoint."""

from __future__ import annotations

import contextlib

import click

from .. import config as C
from .group import main


@main.command()
@click.option(
    "--model",
    default=C.DEFAULT_MODEL,
    show_default=True,
    help="Model spec of the backend to serve (no roles).",
)
@click.option("--name", help="Model name clients ask for (default: the spec).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8000, show_default=True, help="Port (0: any free port).")
def serve(model: str, name: str | None, host: str, port: int) -> None:
    """Serve a backend as an OpenAI-compatible endpoint (/v1/chat/completions, /v1/models)."""
    from ..runner import single_backend
    from ..server import ModelServer

    backend = single_backend(model)
    backend.load()
    server = ModelServer(backend, name or model, host, port)
    click.echo(f"serving {name or model} at {server.url}", err=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
