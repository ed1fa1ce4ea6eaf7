"""Summaries of stored runs: pass@k (unbiased), verdicts, efficiency, model usage.

The summary works on plain rows (``samples_rows``): pandas, which the leaderboards and studies
use (``samples_frame``), takes a quarter of a second to import, on every ``evaluate``, ``run``
and ``show``. ``pass_at_k`` and ``efficiency`` take either.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from evalplus.eval import estimate_pass_at_k

from .config import MEMORY_FLOOR_BYTES
from .records import Verdict
from .sandbox.cgroups import RSS_ACCOUNTING
from .sandbox.isolation import is_unsafe
from .store import Store

if TYPE_CHECKING:
    import pandas as pd

Rows = Iterable[Mapping[str, Any]]


def samples_frame(store: Store) -> pd.DataFrame:
    """One row per finished sample, as a DataFrame."""
    import pandas as pd

    return pd.DataFrame(samples_rows(store))


def samples_rows(store: Store) -> list[dict[str, Any]]:
    """One row per finished sample."""
    rows = []
    for solution, result in store.samples(tests=False):
        base = result.suite_verdicts.get("base")
        rows.append(
            {
                "task_id": solution.task_id,
                "sample_index": solution.sample_index,
                "verdict": result.verdict.value,
                "passed": result.passed,
                "passed_base": (base is Verdict.passed) if base is not None else result.passed,
                "has_base": base is not None,
                "runtime_s": result.runtime_s,
                "cpu_s": result.cpu_s,
                "peak_memory_bytes": result.peak_memory_bytes,
                "calls": len(solution.trace),
                "prompt_tokens": solution.prompt_tokens,
                "completion_tokens": solution.completion_tokens,
                "solve_wall_s": solution.wall_time_s,
                "error": solution.error,
                **measurement_columns(result),
            }
        )
    return rows


def measurement_columns(result) -> dict[str, Any]:
    e = result.measurement
    if e is None:
        return dict.fromkeys(
            [
                "eff_runtime_s",
                "eff_ref_runtime_s",
                "eff_peak",
                "eff_ref_peak",
                "runtime_ratio",
                "memory_ratio",
            ]
        )
    reference = e.reference_calibrated_cpu_s  # None: a run stored before CPU ratios (wall times)
    return {
        "eff_runtime_s": e.runtime_s if reference is None else e.calibrated_cpu_s,
        "eff_ref_runtime_s": e.reference_runtime_s if reference is None else reference,
        "eff_peak": max(e.peak_memory_bytes, MEMORY_FLOOR_BYTES),
        "eff_ref_peak": max(e.reference_peak_memory_bytes, MEMORY_FLOOR_BYTES),
        "runtime_ratio": e.runtime_ratio,
        "memory_ratio": e.memory_ratio,
    }


def _records(rows: Rows | pd.DataFrame) -> list[Mapping[str, Any]]:
    """Plain rows, from a DataFrame too."""
    return rows.to_dict("records") if hasattr(rows, "to_dict") else list(rows)


def _number(value: Any) -> float | None:
    """A value as a float; None when it is missing (None, or NaN in a DataFrame)."""
    return None if value is None or math.isnan(value) else float(value)


def _numbers(rows: list[Mapping[str, Any]], column: str) -> list[float]:
    """The column's values that are not missing."""
    return [v for row in rows if (v := _number(row[column])) is not None]


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else math.nan


def _ratio(numerators: list[float], denominators: list[float]) -> float:
    """sum / sum, each summed pairwise as numpy (and pandas) sum them."""
    denominator = float(np.sum(denominators))
    return float(np.sum(numerators)) / denominator if denominator else math.nan


def efficiency(rows: Rows | pd.DataFrame) -> dict[str, Any] | None:
    """Normalized efficiency of measured passing solutions: per-solution median ratios, and
    EffiBench-style aggregates (sum over solutions / sum over their references)."""
    measured = [r for r in _records(rows) if _number(r["runtime_ratio"]) is not None]
    if not measured:
        return None
    return {
        "measured": len(measured),
        "runtime_ratio_median": _median(_numbers(measured, "runtime_ratio")),
        "memory_ratio_median": _median(_numbers(measured, "memory_ratio")),
        "net": _ratio(_numbers(measured, "eff_runtime_s"), _numbers(measured, "eff_ref_runtime_s")),
        "nmu": _ratio(_numbers(measured, "eff_peak"), _numbers(measured, "eff_ref_peak")),
    }


def pass_at_k(rows: Rows | pd.DataFrame, column: str, ks: list[int]) -> dict[int, float]:
    """Mean over tasks of the unbiased pass@k estimator (k larger than n is left out)."""
    samples: Counter[str] = Counter()
    passed: Counter[str] = Counter()
    for row in _records(rows):
        samples[row["task_id"]] += 1
        passed[row["task_id"]] += bool(row[column])
    if not samples:
        return {}
    tasks = sorted(samples)  # the mean's order, so that it does not depend on the rows'
    n = np.array([samples[task] for task in tasks])
    c = np.array([passed[task] for task in tasks])
    return {k: float(estimate_pass_at_k(n, c, k).mean()) for k in ks if k <= n.min()}


def summarize(store: Store) -> dict[str, Any]:
    config = store.config()
    metadata = store.metadata()
    rows = samples_rows(store)
    summary: dict[str, Any] = {
        "benchmark": config.benchmark,
        "system": config.system,
        "model": config.model,
        "tasks": len({r["task_id"] for r in rows}),
        "samples": len(rows),
        "wall_s": metadata.get("wall_s"),
        "isolation": metadata.get("isolation"),
        "memory_accounting": metadata.get("memory_accounting"),
    }
    if not rows:
        return summary
    summary["pass@k"] = pass_at_k(rows, "passed", config.k)
    if any(r["has_base"] for r in rows):  # EvalPlus benchmarks: base tests alone, and base + extra
        summary["pass@k_base"] = pass_at_k(rows, "passed_base", config.k)
    summary["verdicts"] = dict(Counter(r["verdict"] for r in rows).most_common())
    passing = [r for r in rows if r["passed"]]
    for column, key in (
        ("runtime_s", "runtime_s_passing"),
        ("peak_memory_bytes", "peak_memory_bytes_passing"),
    ):
        values = _numbers(passing, column)
        summary[key] = {
            "mean": statistics.fmean(values) if values else None,
            "median": _median(values) if values else None,
        }
    summary["efficiency"] = efficiency(rows)
    usage = ("calls", "prompt_tokens", "completion_tokens", "solve_wall_s")
    per_task: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(usage, 0.0))
    for row in rows:
        for column in usage:
            per_task[row["task_id"]][column] += _number(row[column]) or 0.0
    summary["per_task"] = {
        column: statistics.fmean(task[column] for task in per_task.values()) for column in usage
    }
    return summary


def format_summary(summary: dict[str, Any]) -> str:
    lines = [
        f"{summary['benchmark']} · {summary['system']} · {summary['model']}",
        f"tasks {summary['tasks']}, samples {summary['samples']}, wall {summary.get('wall_s') or 0:.1f} s",
    ]
    if is_unsafe(summary.get("isolation")):
        lines.append(
            "isolation                  UNSAFE: programs ran unconfined (resource limits only); "
            "their verdicts and measurements are not protected from them"
        )
    if summary.get("memory_accounting") == RSS_ACCOUNTING:
        lines.append(
            "memory                     resident high-water mark only (no memory cgroup here): "
            "pages a program keeps outside its address space are not counted"
        )
    if not summary["samples"]:
        return "\n".join([*lines, "no finished samples"])
    for key, label in (("pass@k_base", "base tests"), ("pass@k", "all tests (base + extra)")):
        if key in summary:
            values = ", ".join(f"pass@{k} {100 * v:.1f}%" for k, v in summary[key].items())
            lines.append(f"{label:<26} {values}")
    lines.append(
        "verdicts                   "
        + ", ".join(f"{k} {v}" for k, v in summary["verdicts"].items())
    )
    rt, mem = summary["runtime_s_passing"], summary["peak_memory_bytes_passing"]
    if rt["mean"] is not None:
        lines.append(
            f"runtime of passing         mean {1e3 * rt['mean']:.3f} ms, median {1e3 * rt['median']:.3f} ms"
        )
        lines.append(
            f"peak memory of passing     mean {mem['mean'] / 1024:.0f} KiB, median {mem['median'] / 1024:.0f} KiB"
        )
    eff = summary.get("efficiency")
    if eff:
        lines.append(
            f"vs reference ({eff['measured']} measured) runtime x{eff['runtime_ratio_median']:.2f} median, "
            f"NET {eff['net']:.2f}; memory x{eff['memory_ratio_median']:.2f} median, NMU {eff['nmu']:.2f}"
        )
    t = summary["per_task"]
    lines.append(
        f"per task                   {t['calls']:.1f} calls, {t['prompt_tokens']:.0f} prompt + "
        f"{t['completion_tokens']:.0f} completion tokens, {t['solve_wall_s']:.1f} s solving"
    )
    return "\n".join(lines)
