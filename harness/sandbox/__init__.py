"""Sandboxed execution: every generated program runs here, in a child process, never in the harness.

``Executor`` is the one entry point; ``docs/design.md`` describes the parts behind it.
"""

from .executor import Executor
from .isolation import isolation_mode, memory_limit_bytes
from .oracle import Reference

__all__ = ["Executor", "Reference", "isolation_mode", "memory_limit_bytes"]
