"""Prompt templates live in ``.txt`` files next to the system that uses them."""

from __future__ import annotations

import functools
import importlib.resources
from string import Template


@functools.cache
def template(package: str, name: str) -> Template:
    """The template file ``name`` of ``package``; fields are written ``$field``."""
    return Template(importlib.resources.files(package).joinpath(name).read_text(encoding="utf-8"))


def render(package: str, name: str, **fields: object) -> str:
    return template(package, name).substitute({k: str(v) for k, v in fields.items()}).strip()
