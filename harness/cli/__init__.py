"""The `corebench` command line: the group and shared options in ``group.py``, one module per
core subcommand; plugins add theirs (``train``, ``leaderboard``) through ``register_commands``."""

from . import evaluate, export, listing, run, sandbox, serve, show  # noqa: F401 - each registers
from .group import data_dir_option, executor_option, isolation_option, main, repeats_option

__all__ = [
    "data_dir_option",
    "executor_option",
    "isolation_option",
    "main",
    "repeats_option",
]
