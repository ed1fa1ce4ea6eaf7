"""The self-contained HTML leaderboard: one file, no network, sortable/filterable table,
plots, and a per-task view of each row (verdicts with plan, code, failure and trace)."""

from __future__ import annotations

import importlib.resources
import math
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from . import plots
from .collect import Run, sample_id

# Columns the HTML table shows (the CSV has them all), with their headings.
SHOWN = {
    "benchmark": "benchmark",
    "system": "system",
    "model": "model",
    "sampling": "sampling",
    "tasks": "tasks",
    "samples": "samples",
    "pass@1": "pass@1 %",
    "pass@1_base": "base %",
    "pass@1_shared": "shared-set %",
    "runtime_ratio_median": "runtime ×ref",
    "memory_ratio_median": "memory ×ref",
    "calls_per_task": "calls/task",
    "completion_tokens_per_task": "tokens/task",
    "wall_s_per_task": "s/task",
    "training": "training",
    "isolation": "isolation",
}
KEY = ("benchmark", "system", "model", "sampling")  # a row's key, as `Run.key`
PERCENT = {"pass@1", "pass@1_base", "pass@1_shared"}


def _cell(column: str, value: Any) -> dict[str, Any]:
    """Display text and sort key of one cell."""
    if isinstance(value, float):
        if math.isnan(value):
            return {"text": "–", "sort": ""}
        if column in PERCENT:
            return {"text": f"{100 * value:.1f}", "sort": f"{value:.6f}"}
        return {"text": f"{value:.2f}", "sort": f"{value:.6f}"}
    if column == "isolation" and value == "unsafe":
        return {"text": "UNSAFE", "sort": value, "title": "programs ran unconfined: not comparable"}
    return {"text": str(value), "sort": str(value)}


def _rows(table: pd.DataFrame) -> list[dict[str, Any]]:
    rows = []
    for index, row in table.iterrows():
        cells = {c: _cell(c, row[c]) for c in SHOWN}
        low, high = row["pass@1_ci_low"], row["pass@1_ci_high"]
        if not math.isnan(low):
            cells["pass@1"]["title"] = f"95 % interval {100 * low:.1f}–{100 * high:.1f}"
        rows.append({"id": int(index), "cells": cells, "runs": row["runs"]})
    return rows


def _details(table: pd.DataFrame, runs: list[Run]) -> dict[str, list[dict[str, Any]]]:
    """Per row: its samples for the per-task view, in task order, each counted once as the table
    counts it (the first run in ``runs`` order keeps a sample)."""
    out = {}
    for index, row in table.iterrows():
        names, key = set(row["runs"].split()), tuple(row[c] for c in KEY)
        kept: dict[str, dict[str, Any]] = {}
        for run in (r for r in runs if r.name in names and r.key == key):
            config = run.metadata["config"]
            for d in run.details:
                kept.setdefault(sample_id(d["task_id"], d["sample"], config), d)
        samples = list(kept.values())
        out[str(index)] = sorted(samples, key=lambda d: (_task_order(d["task_id"]), d["sample"]))
    return out


def _task_order(task_id: str) -> tuple[str, int]:
    prefix, _, number = task_id.rpartition("/")
    return (prefix, int(number)) if number.isdigit() else (task_id, 0)


def _asset(name: str) -> str:
    return importlib.resources.files(__package__).joinpath("templates", name).read_text("utf-8")


def render_html(table: pd.DataFrame, runs: list[Run], title: str = "corebench leaderboard") -> str:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(__package__, "templates"),
        autoescape=True,
        keep_trailing_newline=True,
    )
    return env.get_template("leaderboard.html.j2").render(
        title=title,
        columns=SHOWN,
        rows=_rows(table),
        details=_details(table, runs),
        plots={
            "pass_vs_runtime": plots.pass_vs_runtime(table),
            "pass_with_intervals": plots.pass_with_intervals(table),
            "verdicts": plots.verdict_breakdown(table),
        },
        style=_asset("leaderboard.css"),
        script=_asset("leaderboard.js"),
        versions=sorted(set(table["corebench_version"])),
    )


def write_html(table: pd.DataFrame, runs: list[Run], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(table, runs), encoding="utf-8")
