"""One row per (benchmark, system, model): correctness with confidence intervals, efficiency,
verdicts, cost and provenance. Column names are stable (see the README)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from corebench.harness.modelspec import DEFAULT_ROLE, without_paths
from corebench.harness.records import Verdict
from corebench.harness.sandbox.isolation import is_unsafe
from corebench.harness.summary import efficiency, pass_at_k

from .collect import Run
from .stats import proportion_interval

VERDICTS = [v.value for v in Verdict]
COLUMNS = [
    "benchmark",
    "system",
    "model",
    "sampling",
    "tasks",
    "samples",
    "pass@1",
    "pass@1_ci_low",
    "pass@1_ci_high",
    "pass@1_base",
    "shared_tasks",
    "pass@1_shared",
    "pass@k",
    "runtime_ratio_median",
    "memory_ratio_median",
    "net",
    "nmu",
    "measured",
    *[f"verdict_{v}" for v in VERDICTS],
    "calls_per_task",
    "prompt_tokens_per_task",
    "completion_tokens_per_task",
    "wall_s_per_task",
    "latency_s_per_task",
    "isolation",
    "model_identity",
    "training",
    "corebench_version",
    "date",
    "runs",
]


def model_identity(models: dict[str, Any] | None) -> str:
    """Short, stable description of the weights behind each role."""
    parts = []
    for role, ident in sorted((models or {}).items()):
        name = Path(ident.get("gguf") or ident.get("path") or ident.get("target") or "").name
        digest = ident.get("gguf_sha256") or next(iter((ident.get("files") or {}).values()), "")
        label = f"{ident.get('backend', '?')}:{name or ident.get('target', '')}"
        if digest:
            label += f"@{digest[:8]}"
        parts.append(label if role == DEFAULT_ROLE else f"{role}={label}")
    return "; ".join(parts)


def training_lineage(models: dict[str, Any] | None) -> str:
    """From checkpoint manifests: how each role's weights were trained (empty for base models)."""
    parts = []
    for role, ident in sorted((models or {}).items()):
        manifest = ident.get("manifest")
        if manifest:
            base = without_paths(str(manifest.get("base_model", "?")))
            text = f"{manifest.get('method', '?')} from {base}"
            if manifest.get("steps") is not None:
                steps = manifest["steps"]
                text += f", {steps} step{'' if steps == 1 else 's'}"
            parts.append(text if role == DEFAULT_ROLE else f"{role}: {text}")
    return "; ".join(parts)


def pool(runs: list[Run]) -> tuple[pd.DataFrame, list[tuple[Run, float]]]:
    """The runs' samples with each sample counted once (by ``sample_id``; the first run in the
    given order keeps it), and each run that contributed with the share of its samples kept."""
    frame = pd.concat([r.samples.assign(_run=i) for i, r in enumerate(runs)], ignore_index=True)
    frame = frame.drop_duplicates("sample_id", keep="first")
    kept = frame["_run"].value_counts()
    used = [(r, kept[i] / len(r.samples)) for i, r in enumerate(runs) if kept.get(i, 0)]
    return frame.drop(columns="_run").reset_index(drop=True), used


def _row(key: tuple[str, str, str, str], members: list[Run], shared: set[str]) -> dict[str, Any]:
    frame, used = pool(members)
    runs = [r for r, _ in used]
    benchmark, system, model, sampling = key
    per_task = frame.groupby("task_id")["passed"].mean()
    low, high = proportion_interval(per_task.to_numpy(dtype=float))
    ks = sorted({k for r in runs for k in r.metadata["config"]["k"]})
    passk = pass_at_k(frame, "passed", ks)
    on_shared = frame[frame["task_id"].isin(shared)]
    tasks = frame["task_id"].nunique()
    counts = frame["verdict"].value_counts()
    cost = frame.groupby("task_id")[
        ["calls", "prompt_tokens", "completion_tokens", "solve_wall_s"]
    ].sum()
    eff = efficiency(frame) or {}
    meta = runs[0].metadata
    return {
        "benchmark": benchmark,
        "system": system,
        "model": model,
        "sampling": sampling,
        "tasks": tasks,
        "samples": len(frame),
        "pass@1": passk.get(1, float("nan")),
        "pass@1_ci_low": low,
        "pass@1_ci_high": high,
        "pass@1_base": pass_at_k(frame, "passed_base", [1]).get(1, float("nan")),
        "shared_tasks": len(shared),
        "pass@1_shared": pass_at_k(on_shared, "passed", [1]).get(1, float("nan"))
        if len(on_shared)
        else float("nan"),
        "pass@k": " ".join(f"{k}:{v:.4f}" for k, v in passk.items()),
        "runtime_ratio_median": eff.get("runtime_ratio_median", float("nan")),
        "memory_ratio_median": eff.get("memory_ratio_median", float("nan")),
        "net": eff.get("net", float("nan")),
        "nmu": eff.get("nmu", float("nan")),
        "measured": eff.get("measured", 0),
        **{f"verdict_{v}": float(counts.get(v, 0)) / len(frame) for v in VERDICTS},
        "calls_per_task": float(cost["calls"].mean()),
        "prompt_tokens_per_task": float(cost["prompt_tokens"].mean()),
        "completion_tokens_per_task": float(cost["completion_tokens"].mean()),
        # run wall time over tasks (what a task costs with batching; a run's share of the samples
        # kept counts that share of its wall time), and one task's own latency
        "wall_s_per_task": sum((r.metadata.get("wall_s") or 0.0) * share for r, share in used)
        / tasks,
        "latency_s_per_task": float(cost["solve_wall_s"].mean()),
        # "unsafe" when any pooled run let programs run unconfined
        "isolation": "unsafe"
        if any(is_unsafe(r.metadata.get("isolation")) for r in runs)
        else meta.get("isolation", ""),
        "model_identity": model_identity(meta.get("models")),
        "training": training_lineage(meta.get("models")),
        "corebench_version": meta.get("corebench_version", ""),
        "date": min(str(r.metadata.get("created", ""))[:10] for r in runs),
        "runs": " ".join(sorted(r.name for r in runs)),
    }


def leaderboard_table(runs: list[Run]) -> pd.DataFrame:
    """Aggregate runs into one row per (benchmark, system, model), best pass@1 first.

    Runs with the same key are pooled (more samples per task), each sample counted once (see
    ``collect.sample_id``: at temperature 0 the seed changes nothing), so pooling a run with a
    copy of itself changes nothing; ``runs`` names the runs that contributed samples.
    ``pass@1_shared`` is computed on the tasks every row of the same benchmark covers, so rows on
    different subsets compare fairly. The pass@1 interval is ``stats.proportion_interval``.
    """
    groups: dict[tuple[str, str, str, str], list[Run]] = {}
    for run in runs:
        if len(run.samples):
            groups.setdefault(run.key, []).append(run)
    shared: dict[str, set[str]] = {}
    for (benchmark, *_), members in groups.items():
        tasks = set().union(*(set(r.samples["task_id"]) for r in members))
        shared[benchmark] = shared[benchmark] & tasks if benchmark in shared else tasks
    rows = [_row(key, members, shared[key[0]]) for key, members in groups.items()]
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.sort_values(
        ["benchmark", "pass@1", "system", "model"], ascending=[True, False, True, True]
    ).reset_index(drop=True)


def write_csv(table: pd.DataFrame, path: Path) -> None:
    """Fixed column order and float format, so the same runs give the same bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False, float_format="%.6g", lineterminator="\n")
