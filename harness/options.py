"""Options of every component (benchmark, system, backend) and of training: one pydantic model
each, one ``KEY=VALUE`` parser, one way to refuse an unknown or mistyped key.

A component declares its options as a nested class::

    class MapCoder(System):
        class Options(System.Options):
            k: int = Field(3, description="exemplars to recall")

and reads them as ``self.options.k``. ``corebench list --options`` prints them with their docs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import CorebenchError, UnknownNameError


class Options(BaseModel):
    """Base of every options model: typed fields with a description each; unknown keys refused,
    and values of another type too (``"4"`` is not an int: text is decoded by ``parse_value``
    first, so ``-O k=4`` and ``?max_batch=4`` give 4)."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, strict=True)


Model = TypeVar("Model", bound=BaseModel)


def parse_value(raw: str) -> Any:
    """A ``KEY=VALUE`` value: JSON when it parses (``3``, ``true``, ``[1,2]``), else the text."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def split_assignment(item: str, what: str = "option") -> tuple[str, str]:
    """``"k=3"`` -> ``("k", "3")``: the one reader of ``KEY=VALUE`` text (``-O``, ``-B``,
    ``train --set``, a model spec's ``?k=v``); the value's type is the options model's business."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise CorebenchError(f"bad {what} {item!r}: expected KEY=VALUE")
    return key.strip(), raw


def parse_assignments(items: Iterable[str], what: str = "option") -> dict[str, Any]:
    """``["k=3", "name=x"]`` -> ``{"k": 3, "name": "x"}`` (values decoded by ``parse_value``)."""
    return {key: parse_value(raw) for key, raw in (split_assignment(i, what) for i in items)}


def validate_options(kind: str, model: type[Model], given: dict[str, Any]) -> Model:
    """``given`` checked against ``model``: one line for an unknown key (with a suggestion) or a
    value of the wrong type, naming ``kind`` (e.g. ``system 'mapcoder' option``)."""
    fields = model.model_fields
    for key in given:
        if key not in fields:
            raise UnknownNameError(kind, key, fields)
    try:
        return model.model_validate(given)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "value"
        raise CorebenchError(
            f"{kind} {where}: {error['msg'].lower()} (got {error.get('input')!r})"
        ) from None


def describe(model: type[BaseModel]) -> list[tuple[str, str, str, str]]:
    """(name, type, default, description) of each option, for ``corebench list --options``."""
    rows = []
    for name, field in model.model_fields.items():
        annotation = getattr(field.annotation, "__name__", None) or str(field.annotation)
        annotation = annotation.replace("typing.", "")
        default = (
            "required" if field.is_required() else json.dumps(field.get_default(), default=str)
        )
        rows.append((name, annotation, default, field.description or ""))
    return rows
