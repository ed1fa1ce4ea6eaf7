"""Options of systems and benchmarks: declared as ``{name: default}``, checked when given."""

from __future__ import annotations

from typing import Any

from .errors import CorebenchError


def same_kind(value: Any, default: Any) -> bool:
    """Whether ``value`` fits an option whose default is ``default`` (bool is not an int here)."""
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, int | float)
    return isinstance(value, type(default))


def checked_options(
    kind: str, name: str, declared: dict[str, Any], given: dict[str, Any]
) -> dict[str, Any]:
    """The declared defaults updated with ``given``; one error for an unknown or mistyped option.

    A default of ``None`` accepts any value.
    """
    unknown = set(given) - set(declared)
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        raise CorebenchError(
            f"{kind} {name!r} has no option {', '.join(sorted(unknown))} (options: {known})"
        )
    for key, value in given.items():
        default = declared[key]
        if default is not None and not same_kind(value, default):
            raise CorebenchError(
                f"{kind} {name!r} option {key} takes a {type(default).__name__}, got {value!r}"
            )
    return {**declared, **given}
