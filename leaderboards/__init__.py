"""Leaderboards built from stored runs: a CSV and a self-contained HTML page.

``collect`` reads run directories into one frame of samples, ``table`` aggregates it into one row
per (benchmark, system, model), ``page`` renders the HTML (Jinja2 template, matplotlib plots).
"""

from .collect import collect_runs, find_run_dirs
from .page import write_html
from .table import COLUMNS, leaderboard_table, write_csv

__all__ = [
    "COLUMNS",
    "collect_runs",
    "find_run_dirs",
    "leaderboard_table",
    "write_csv",
    "write_html",
]
