"""A study's report: one row per [[run]] in the papers' layout (pass@k for the study's k list,
each pass@1 with its interval, test pass rate, runtime and memory against the reference, code
complexity, failure kinds), every pair of rows compared on their shared tasks, and the
Collaboration Gain of multi-role rows. Markdown for the repository, HTML for a browser."""

from __future__ import annotations

import html
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from corebench.harness.registry import default_plugins
from corebench.harness.store import Store
from corebench.harness.summary import efficiency, pass_at_k, samples_frame
from corebench.leaderboards.collect import model_name
from corebench.leaderboards.stats import ALPHA, Paired, interval, paired
from corebench.leaderboards.table import training_lineage

from .metrics import complexity, failure_kind, test_pass_rate
from .spec import Study


@dataclass
class Row:
    name: str
    label: str
    system: str
    model: str
    training: str
    per_task: pd.Series  # pass@1 per task (mean over its samples)
    samples_per_task: int
    values: dict[str, Any] = field(default_factory=dict)


def collect_row(study: Study, name: str, run_dir: Path, planned: dict[str, int]) -> Row:
    entry = next(r for r in study.runs if r.name == name)
    store = Store(run_dir, create=False)
    try:
        frame = samples_frame(store)
        samples = list(store.samples())
        metadata = store.metadata()
        spec = store.config().model
    finally:
        store.close()
    empty = pd.Series(dtype=float)
    per_task = empty if frame.empty else frame.groupby("task_id")["passed"].mean()
    rates = [test_pass_rate(r, planned.get(r.task_id, 0)) for _, r in samples]
    kinds = Counter(k for _, r in samples if (k := failure_kind(r)) is not None)
    measures = [complexity(s.code) for s, _ in samples]
    cc = [c for c, _ in measures if c is not None]
    mi = [m for _, m in measures if m is not None]
    eff = (efficiency(frame) or {}) if not frame.empty else {}
    low, high = interval(per_task.to_numpy())
    values: dict[str, Any] = {
        "tasks": int(per_task.size),
        "samples": len(samples),
        "pass@1_ci": (low, high),
        "test_pass_rate": float(np.mean(rates)) if rates else math.nan,
        "runtime_ratio": eff.get("runtime_ratio_median", math.nan),
        "memory_ratio": eff.get("memory_ratio_median", math.nan),
        "cc": float(np.mean(cc)) if cc else math.nan,
        "mi": float(np.mean(mi)) if mi else math.nan,
        "failures": kinds,
    }
    for k, v in (pass_at_k(frame, "passed", study.header.k) if not frame.empty else {}).items():
        values[f"pass@{k}"] = v
    counts = frame.groupby("task_id").size() if not frame.empty else pd.Series(dtype=int)
    return Row(
        name=name,
        label=entry.label or name,
        system=entry.system,
        model=model_name(metadata.get("models"), spec),
        training=training_lineage(metadata.get("models")),
        per_task=per_task,
        samples_per_task=int(counts.min()) if len(counts) else 0,
        values=values,
    )


def planned_tests(study: Study, data_dir: Path | None) -> dict[str, int]:
    """Each task's number of hidden tests, for test pass rates (tests never run count failed)."""
    plugins = default_plugins()
    counts: dict[str, int] = {}
    for run in study.runs:
        bench = plugins.benchmarks.get(run.benchmark).component(data_dir, **run.benchmark_options)
        for task in bench.tasks(run.split):
            if task.task_id not in counts:
                suite = bench.test_suite(task.task_id)
                counts[task.task_id] = sum(len(v) for v in suite.inputs.values())
    return counts


def compare(a: Row, b: Row) -> Paired:
    shared = a.per_task.index.intersection(b.per_task.index)
    binary = a.samples_per_task == 1 and b.samples_per_task == 1
    return paired(a.per_task[shared].to_numpy(), b.per_task[shared].to_numpy(), binary=binary)


@dataclass
class Report:
    study: Study
    rows: list[Row]
    pairs: list[tuple[Row, Row, Paired]]
    gains: list[dict[str, Any]]


def build_report(study: Study, run_dirs: dict[str, Path], data_dir: Path | None) -> Report:
    planned = planned_tests(study, data_dir)
    rows = [collect_row(study, run.name, run_dirs[run.name], planned) for run in study.runs]
    by_name = {r.name: r for r in rows}
    pairs = [(a, b, compare(a, b)) for i, a in enumerate(rows) for b in rows[i + 1 :]]
    gains = []
    for gain in study.gains:
        pair = by_name[gain.pair]
        roles = [by_name[n] for n in gain.roles]
        best = max(roles, key=lambda r: r.values.get("pass@1", -1.0))
        item: dict[str, Any] = {"pair": pair, "best_role": best, "vs_roles": compare(pair, best)}
        if gain.direct:
            item["direct"] = by_name[gain.direct]
            item["vs_direct"] = compare(pair, by_name[gain.direct])
        gains.append(item)
    return Report(study, rows, pairs, gains)


# --- rendering -----------------------------------------------------------------------------------
def _pct(value: float) -> str:
    return "–" if value is None or math.isnan(value) else f"{100 * value:.1f}"


def _num(value: float, digits: int = 2) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _p(value: float | None) -> str:
    if value is None:
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _failures(kinds: Counter, samples: int) -> str:
    if not kinds:
        return "none"
    return ", ".join(f"{kind} {100 * count / samples:.0f}%" for kind, count in kinds.most_common(4))


def _signed(d: Paired) -> str:
    return f"{100 * d.difference:+.1f} [{100 * d.low:+.1f}, {100 * d.high:+.1f}]"


def tables(report: Report) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of each table, shared by the Markdown and the HTML."""
    ks = report.study.header.k
    header = ["row", "system", "model", "training", "tasks", "samples"]
    header += [f"pass@{k} %" for k in ks]
    header += ["pass@1 95% CI", "test pass rate %", "runtime ×ref", "memory ×ref", "CC", "MI"]
    header += ["failures (share of samples)"]
    results = []
    for r in report.rows:
        low, high = r.values["pass@1_ci"]
        results.append(
            [r.label, r.system, r.model, r.training or "base", str(r.values["tasks"]),
             str(r.values["samples"])]
            + [_pct(r.values.get(f"pass@{k}", math.nan)) for k in ks]
            + [f"{_pct(low)}–{_pct(high)}", _pct(r.values["test_pass_rate"]),
               _num(r.values["runtime_ratio"]), _num(r.values["memory_ratio"]),
               _num(r.values["cc"]), _num(r.values["mi"], 1),
               _failures(r.values["failures"], r.values["samples"])]
        )  # fmt: skip
    diffs = [
        [f"{a.label} − {b.label}", str(d.tasks), _signed(d), _p(d.p_bootstrap), _p(d.p_mcnemar),
         "yes" if d.distinguishable else "no"]
        for a, b, d in report.pairs
    ]  # fmt: skip
    out = [
        ("Results", header, results),
        (
            "Paired differences in pass@1 (percentage points, shared tasks)",
            ["rows", "tasks", "difference [95% CI]", "p (paired bootstrap)", "p (exact McNemar)",
             f"distinguishable at {ALPHA}"],
            diffs,
        ),
    ]  # fmt: skip
    if report.gains:
        gains = []
        for g in report.gains:
            line = [g["pair"].label, g["best_role"].label, _signed(g["vs_roles"]),
                    _p(g["vs_roles"].p_bootstrap)]  # fmt: skip
            if "vs_direct" in g:
                line += [g["direct"].label, _signed(g["vs_direct"]), _p(g["vs_direct"].p_bootstrap)]
            else:
                line += ["–", "–", "–"]
            gains.append(line)
        out.append(
            (
                "Collaboration Gain (pass@1 percentage points)",
                ["pair", "best single role", "gain over it [95% CI]", "p", "direct",
                 "gain over direct [95% CI]", "p"],
                gains,
            )
        )  # fmt: skip
    return out


DEFINITIONS = """\
- pass@k: the unbiased estimator over each task's samples, averaged over tasks; the interval is a
  95 % percentile bootstrap over tasks.
- Paired differences compare two rows on the tasks both have: the mean per-task difference in
  pass@1 with a paired bootstrap interval and two-sided p-value (tasks resampled); when both rows
  have one sample per task, also the exact McNemar test on the tasks where exactly one passed.
  "Distinguishable" means p < 0.05 (McNemar's where it applies); with many pairs, some small
  p-values are expected by chance.
- Test pass rate: passed hidden tests over the task's hidden tests, every test judged (not only
  up to the first failure), averaged over samples.
- Runtime and memory ×ref: medians over passing solutions of their calibrated CPU time and peak
  memory against the task's reference solution, measured one at a time.
- CC: mean cyclomatic complexity of the functions a solution defines; MI: maintainability index
  (0-100), both by radon, over solutions with code.
- Failures: the exception type of a runtime error, else the verdict (timeout, wrong_answer, ...).
- Collaboration Gain: a multi-role row's pass@1 minus that of the best row running one of its
  roles alone on the same model, and minus `direct`'s.
"""


def render_markdown(report: Report, command: str) -> str:
    study = report.study
    title = study.header.title or study.header.name
    lines = [f"# {title}", ""]
    if study.header.description:
        lines += [study.header.description.strip(), ""]
    lines += [
        f"Scale `{study.scale}`; reproduce with `{command}`.",
        "",
    ]
    for name, header, rows in tables(report):
        lines += [f"## {name}", "", "| " + " | ".join(header) + " |"]
        lines += ["|" + "---|" * len(header)]
        lines += [
            "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows
        ]
        lines += [""]
    lines += ["## Definitions", "", DEFINITIONS]
    return "\n".join(lines)


def render_html(report: Report, command: str) -> str:
    import importlib.resources

    style = (
        importlib.resources.files("corebench.leaderboards")
        .joinpath("templates", "leaderboard.css")
        .read_text("utf-8")
    )
    title = html.escape(report.study.header.title or report.study.header.name)
    parts = [
        "<!doctype html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>{title}</title>',
        f"<style>{style}</style></head><body>",
        f"<h1>{title}</h1>",
        f"<p>{html.escape(report.study.header.description.strip())}</p>",
        f"<p>Scale <code>{html.escape(report.study.scale)}</code>; reproduce with "
        f"<code>{html.escape(command)}</code>.</p>",
    ]
    for name, header, rows in tables(report):
        parts.append(f"<h2>{html.escape(name)}</h2><table><thead><tr>")
        parts += [f"<th>{html.escape(h)}</th>" for h in header]
        parts.append("</tr></thead><tbody>")
        for row in rows:
            parts.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
        parts.append("</tbody></table>")
    items = "".join(
        f"<li>{html.escape(line[2:])}</li>"
        for line in DEFINITIONS.replace("\n  ", " ").splitlines()
        if line.startswith("- ")
    )
    parts.append(f"<h2>Definitions</h2><ul>{items}</ul></body></html>\n")
    return "\n".join(parts)
