"""Base class of agent-system plugins."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from .errors import CorebenchError

if TYPE_CHECKING:
    from .context import SolveContext
    from .records import Task


class System(ABC):
    """Turns a task into code by calling models through ``ctx``.

    ``solve`` is plain sequential code per task; the runner keeps many tasks in flight so that
    calls from different tasks are batched by the backend.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    roles: ClassVar[tuple[str, ...]] = ("model",)
    options: ClassVar[dict[str, Any]] = {}  # option name -> default value

    def __init__(self, **options: Any):
        unknown = set(options) - set(self.options)
        if unknown:
            known = ", ".join(sorted(self.options)) or "none"
            raise CorebenchError(
                f"system {self.name!r} has no option {', '.join(sorted(unknown))} (options: {known})"
            )
        for key, value in options.items():
            default = self.options[key]
            if default is not None and not _same_kind(value, default):
                raise CorebenchError(
                    f"system {self.name!r} option {key} takes a {type(default).__name__}, "
                    f"got {value!r}"
                )
        self.config = {**self.options, **options}

    @abstractmethod
    async def solve(self, task: Task, ctx: SolveContext) -> str:
        """Return the final program for ``task``."""


def _same_kind(value: Any, default: Any) -> bool:
    """Whether ``value`` fits an option whose default is ``default`` (bool is not an int here)."""
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, int | float)
    return isinstance(value, type(default))
