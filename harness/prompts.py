"""Prompt templates live in ``.txt`` files next to the system that uses them."""

from __future__ import annotations

import functools
import importlib.resources
from string import Template


@functools.cache
def template(package: str, name: str) -> Template:
    """The template file ``name`` of ``package``; fields are written ``$field``."""
    return Template(importlib.resources.files(package).joinpath(name).read_text(encoding="utf-8"))


def deliverable_fields(entry_point: str | None) -> dict[str, str]:
    """How templates name what to write: a function (``entry_point``) or, for stdin/stdout tasks
    (no entry point), a whole program. Fields ``deliverable``, ``target`` and ``io``."""
    if entry_point:
        return {
            "deliverable": f"defines the function `{entry_point}`",
            "target": f"the function `{entry_point}`",
            "io": f"what `{entry_point}` receives and what it returns",
        }
    return {
        "deliverable": "is a complete program that reads standard input and writes standard output",
        "target": "the program",
        "io": "what the program reads from standard input and what it writes to standard output",
    }


def render(package: str, name: str, **fields: object) -> str:
    """Fill a template; passing ``entry_point`` also provides :func:`deliverable_fields`."""
    if "entry_point" in fields:
        fields = {**deliverable_fields(fields["entry_point"]), **fields}  # type: ignore[arg-type]
    return template(package, name).substitute({k: str(v) for k, v in fields.items()}).strip()
