"""Sandboxed execution: every generated program runs here, in a child process, never in the harness.

``Executor`` is the one entry point on this machine; ``executor_for`` picks where work runs (here,
a Ray cluster's nodes, a judging service). ``docs/design.md`` describes the parts behind them.
"""

from .executor import Executor
from .isolation import isolation_mode, memory_limit_bytes
from .oracle import Reference
from .placement import SandboxExecutor, executor_for

__all__ = [
    "Executor",
    "Reference",
    "SandboxExecutor",
    "executor_for",
    "isolation_mode",
    "memory_limit_bytes",
]
