"""Summaries of stored runs: pass@k (unbiased), verdicts, efficiency, model usage."""

from __future__ import annotations

from typing import Any

import pandas as pd
from evalplus.eval import estimate_pass_at_k

from .config import MEMORY_FLOOR_BYTES
from .records import Verdict
from .sandbox.isolation import is_unsafe
from .store import Store


def samples_frame(store: Store) -> pd.DataFrame:
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
                **_measurement_columns(result),
            }
        )
    return pd.DataFrame(rows)


def _measurement_columns(result) -> dict[str, Any]:
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


def efficiency(frame: pd.DataFrame) -> dict[str, Any] | None:
    """Normalized efficiency of measured passing solutions: per-solution median ratios, and
    EffiBench-style aggregates (sum over solutions / sum over their references)."""
    measured = frame.dropna(subset=["runtime_ratio"])
    if measured.empty:
        return None
    return {
        "measured": len(measured),
        "runtime_ratio_median": float(measured["runtime_ratio"].median()),
        "memory_ratio_median": float(measured["memory_ratio"].median()),
        "net": float(measured["eff_runtime_s"].sum() / measured["eff_ref_runtime_s"].sum()),
        "nmu": float(measured["eff_peak"].sum() / measured["eff_ref_peak"].sum()),
    }


def pass_at_k(frame: pd.DataFrame, column: str, ks: list[int]) -> dict[int, float]:
    """Mean over tasks of the unbiased pass@k estimator (k larger than n is left out)."""
    per_task = frame.groupby("task_id")[column].agg(["size", "sum"])
    out = {}
    for k in ks:
        if k <= per_task["size"].min():
            out[k] = float(
                estimate_pass_at_k(
                    per_task["size"].to_numpy(), per_task["sum"].to_numpy(), k
                ).mean()
            )
    return out


def summarize(store: Store) -> dict[str, Any]:
    config = store.config()
    metadata = store.metadata()
    frame = samples_frame(store)
    summary: dict[str, Any] = {
        "benchmark": config.benchmark,
        "system": config.system,
        "model": config.model,
        "tasks": int(frame["task_id"].nunique()) if len(frame) else 0,
        "samples": len(frame),
        "wall_s": metadata.get("wall_s"),
        "isolation": metadata.get("isolation"),
    }
    if not len(frame):
        return summary
    summary["pass@k"] = pass_at_k(frame, "passed", config.k)
    if frame["has_base"].any():  # EvalPlus benchmarks: base tests alone, and base + extra
        summary["pass@k_base"] = pass_at_k(frame, "passed_base", config.k)
    summary["verdicts"] = frame["verdict"].value_counts().to_dict()
    passing = frame[frame["passed"]]
    summary["runtime_s_passing"] = {
        "mean": _stat(passing["runtime_s"].mean()),
        "median": _stat(passing["runtime_s"].median()),
    }
    summary["peak_memory_bytes_passing"] = {
        "mean": _stat(passing["peak_memory_bytes"].mean()),
        "median": _stat(passing["peak_memory_bytes"].median()),
    }
    summary["efficiency"] = efficiency(frame)
    per_task = frame.groupby("task_id")[
        ["calls", "prompt_tokens", "completion_tokens", "solve_wall_s"]
    ].sum()
    summary["per_task"] = {col: float(per_task[col].mean()) for col in per_task.columns}
    return summary


def _stat(value: float) -> float | None:
    return None if pd.isna(value) else float(value)


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
