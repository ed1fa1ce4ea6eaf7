"""Leaderboard plots as inline SVG (matplotlib, no pyplot state; byte-identical for the same table)."""

from __future__ import annotations

import io
import re

import matplotlib
import pandas as pd
from matplotlib.figure import Figure

from .table import VERDICTS

_SVG_STYLE = {"svg.hashsalt": "corebench", "svg.fonttype": "none", "font.size": 9}
# A fixed palette per verdict, so the same verdict has the same colour in every leaderboard.
VERDICT_COLOURS = dict(
    zip(
        VERDICTS,
        ["#2e7d32", "#c62828", "#ef6c00", "#6a1b9a", "#1565c0", "#795548", "#37474f", "#9e9e9e"],
        strict=False,
    )
)


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    text = buf.getvalue()
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.DOTALL)
    return text[text.index("<svg") :]  # drop the XML prolog and doctype: the SVG goes inline


def _label(row: pd.Series) -> str:
    return f"{row['system']} · {row['model']}"


def pass_vs_runtime(table: pd.DataFrame) -> str:
    """pass@1 against the median runtime ratio of passing solutions (1 = as fast as the reference)."""
    with matplotlib.rc_context(_SVG_STYLE):
        fig = Figure(figsize=(6.4, 4.0))
        ax = fig.add_subplot()
        measured = table.dropna(subset=["runtime_ratio_median"])
        for benchmark, rows in measured.groupby("benchmark", sort=True):
            ax.scatter(rows["runtime_ratio_median"], 100 * rows["pass@1"], label=benchmark)
            for _, row in rows.iterrows():
                ax.annotate(
                    row["system"],
                    (row["runtime_ratio_median"], 100 * row["pass@1"]),
                    textcoords="offset points",
                    xytext=(4, 4),
                )
        if measured.empty:
            ax.text(0.5, 0.5, "no passing solutions measured", ha="center", transform=ax.transAxes)
        else:
            ax.legend(title="benchmark")
        ax.axvline(1.0, color="#999", linewidth=0.8, linestyle="--")
        ax.set_xlabel("runtime / reference runtime (median over passing solutions)")
        ax.set_ylabel("pass@1 (%)")
        ax.set_title("Correctness against efficiency")
        return _svg(fig)


def pass_with_intervals(table: pd.DataFrame) -> str:
    """pass@1 per row with its exact 95 % interval (``stats.proportion_interval``)."""
    with matplotlib.rc_context(_SVG_STYLE):
        fig = Figure(figsize=(6.4, 0.9 + 0.32 * len(table)))
        ax = fig.add_subplot()
        labels = [f"{r['benchmark']} · {_label(r)}" for _, r in table.iterrows()]
        y = list(range(len(table)))[::-1]
        centre = 100 * table["pass@1"]
        err = [
            (centre - 100 * table["pass@1_ci_low"]).clip(lower=0),
            (100 * table["pass@1_ci_high"] - centre).clip(lower=0),
        ]
        ax.errorbar(centre, y, xerr=err, fmt="o", capsize=3)
        ax.set_yticks(y, labels)
        ax.set_xlabel("pass@1 (%) with 95 % interval over tasks")
        ax.set_title("pass@1")
        return _svg(fig)


def verdict_breakdown(table: pd.DataFrame) -> str:
    """Stacked share of each verdict per row."""
    with matplotlib.rc_context(_SVG_STYLE):
        fig = Figure(figsize=(6.4, 1.2 + 0.32 * len(table)))
        ax = fig.add_subplot()
        labels = [f"{r['benchmark']} · {_label(r)}" for _, r in table.iterrows()]
        y = list(range(len(table)))[::-1]
        left = pd.Series([0.0] * len(table), index=table.index)
        for verdict in VERDICTS:
            share = 100 * table[f"verdict_{verdict}"]
            if share.sum() == 0:
                continue
            ax.barh(y, share, left=left, label=verdict, color=VERDICT_COLOURS[verdict])
            left = left + share
        ax.set_yticks(y, labels)
        ax.set_xlim(0, 100)
        ax.set_xlabel("share of samples (%)")
        ax.set_title("Verdicts")
        ax.legend(ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.18), frameon=False)
        return _svg(fig)
