"""Base class of agent-system plugins."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from . import options as opts
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

    class Options(opts.Options):
        """A system's options (``corebench run -O KEY=VALUE``); subclasses add fields."""

    def __init__(self, **options: Any):
        self.options = opts.validate_options(f"system {self.name!r} option", self.Options, options)

    @abstractmethod
    async def solve(self, task: Task, ctx: SolveContext) -> str:
        """Return the final program for ``task``."""

    @classmethod
    def role_prompt(cls, role: str, task: Task, **context: str) -> str:
        """The prompt ``role`` is given for ``task``: what training optimises for this system, so
        that a trained checkpoint is evaluated with what it learned. ``context`` is what the role
        sees besides the task (CoRe-Code's coder: ``plan``; helper-main's later turns: both
        codes and ``feedback``). Systems that training serves override it."""
        raise CorebenchError(f"system {cls.name!r} does not say its prompts (role_prompt)")

    @classmethod
    def plan_text(cls, artifacts: dict[str, Any]) -> str | None:
        """How a stored solution's plan reads in a leaderboard's per-task view (None: no plan).
        Systems that keep their plan in another shape override this."""
        plan = artifacts.get("plan")
        return plan if isinstance(plan, str) else None
