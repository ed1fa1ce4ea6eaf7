"""Sandboxed execution: every generated program runs here, in a child process, never in the harness."""

from .executor import Executor, Reference
from .isolation import isolation_mode, memory_limit_bytes

__all__ = ["Executor", "Reference", "isolation_mode", "memory_limit_bytes"]
