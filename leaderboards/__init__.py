"""Leaderboards built from stored runs: a CSV and a self-contained HTML page.

``collect`` reads run directories into one frame of samples, ``table`` aggregates it into one row
per (benchmark, system, model), ``page`` renders the HTML (Jinja2 template, matplotlib plots).
"""

from __future__ import annotations

import importlib
from typing import Any

# Loaded on first use: scipy and matplotlib cost seconds, and every `corebench` command imports
# this package (for the `leaderboard` command it adds).
_HOMES = {
    "collect_runs": "collect",
    "find_run_dirs": "collect",
    "write_html": "page",
    "COLUMNS": "table",
    "leaderboard_table": "table",
    "write_csv": "table",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)


__all__ = [
    "COLUMNS",
    "collect_runs",
    "find_run_dirs",
    "leaderboard_table",
    "write_csv",
    "write_html",
]
