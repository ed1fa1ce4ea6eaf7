"""Read stored runs into one frame of samples (plus what the per-task view shows)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from corebench.harness.config import RESULTS_DB as DB_NAME
from corebench.harness.config import TRACE_CHARS
from corebench.harness.errors import CorebenchError
from corebench.harness.modelspec import DEFAULT_ROLE, without_paths
from corebench.harness.records import ExecutionResult, RunConfig, Solution
from corebench.harness.registry import default_plugins
from corebench.harness.store import Store
from corebench.harness.summary import samples_frame
from corebench.harness.system import System


@dataclass
class Run:
    """One run directory: its identity, its samples, and the traces for the per-task view."""

    name: str
    # (benchmark[:split], system label, model by name and provenance, sampling): runs are pooled
    # into one row only when all four agree
    key: tuple[str, str, str, str]
    metadata: dict[str, Any]
    samples: pd.DataFrame  # with a `sample_id` column (see `sample_id`)
    details: list[dict[str, Any]] = field(default_factory=list)


def find_run_dirs(paths: list[Path]) -> list[Path]:
    """Run directories among ``paths``: each path is a run, or a folder of runs (one level)."""
    found: list[Path] = []
    for path in paths:
        if (path / DB_NAME).exists():
            found.append(path)
        elif path.is_dir():
            found.extend(sorted(p for p in path.iterdir() if (p / DB_NAME).exists()))
        else:
            raise CorebenchError(f"{path} is not a run directory (no {DB_NAME} in it)")
    if not found:
        raise CorebenchError(f"no runs found in {', '.join(map(str, paths))}")
    return sorted(set(found), key=lambda p: p.resolve().as_posix())


def system_label(system: str, options: dict[str, Any]) -> str:
    """``corecode`` or ``corecode[debug_rounds=2,retrieval=true]``: options make a different system
    (and ``apps[level="introductory"]`` a different benchmark)."""
    if not options:
        return system
    inner = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(options.items()))
    return f"{system}[{inner}]"


def benchmark_label(name: str, options: dict[str, Any], metadata: dict[str, Any]) -> str:
    """The benchmark with its options and, where it records one, the grader that judged the run
    (``apps[grader="official",level="interview"]``): runs judged by different graders, or before
    graders were recorded, are different rows."""
    grader = (metadata.get("dataset") or {}).get("grader")
    return system_label(name, {**options, **({"grader": grader} if grader else {})})


def model_name(models: dict[str, Any] | None, spec: str) -> str:
    """Each role's model as its backend labelled it (name and provenance, never a machine path),
    with a short hash of its weights where known; runs stored before labels: the spec without
    paths."""
    if not models or not all(isinstance(i, dict) and i.get("label") for i in models.values()):
        return without_paths(spec)
    parts = []
    for role, ident in sorted(models.items()):
        text = ident["label"] + (
            f"@{ident['weights_sha256'][:8]}" if ident.get("weights_sha256") else ""
        )
        parts.append(text if role == DEFAULT_ROLE else f"{role}={text}")
    return ",".join(parts)


def sampling_label(config: RunConfig) -> str:
    """What decides how samples are drawn, besides the seed (pooled runs add samples)."""
    if config.temperature == 0:
        return f"greedy max={config.max_new_tokens}"
    return f"T={config.temperature:g} top-p={config.top_p:g} max={config.max_new_tokens}"


def sample_id(task_id: str, sample_index: int, config: dict[str, Any]) -> str:
    """A sample's identity when runs are pooled: task and sample index, and the seed when
    sampling (temperature > 0); greedy decoding gives the same sample whatever the seed."""
    if config["temperature"] == 0:
        return f"{task_id}#{sample_index}"
    return f"{task_id}#seed={config['seed']}#{sample_index}"


def _clip(text: str | None) -> str:
    text = text or ""
    return (
        text
        if len(text) <= TRACE_CHARS
        else text[:TRACE_CHARS] + f"\n[... {len(text) - TRACE_CHARS} more characters]"
    )


def sample_detail(
    solution: Solution, result: ExecutionResult, system: type[System] = System
) -> dict[str, Any]:
    """What the per-task view shows for one sample: verdict, failing input, plan (as the
    system renders it), code, trace."""
    plan = system.plan_text(solution.artifacts)
    return {
        "task_id": solution.task_id,
        "sample": solution.sample_index,
        "verdict": result.verdict.value,
        "failure": _clip(result.first_failure or solution.error),
        "plan": _clip(plan),
        "code": _clip(solution.code),
        "calls": [
            {
                "role": call.role,
                "prompt": _clip(call.messages[-1].content if call.messages else ""),
                "completion": _clip(call.completion),
                "tokens": call.completion_tokens,
            }
            for call in solution.trace
        ],
    }


def _system_class(name: str) -> type[System]:
    """The registered system, or the base class for one no longer installed."""
    systems = default_plugins().systems
    return systems.get(name).component if name in systems else System


def read_run(run_dir: Path, details: bool = True) -> Run:
    store = Store(run_dir, create=False)
    try:
        config = store.config()
        frame = samples_frame(store)
        system = _system_class(config.system)
        rows = [sample_detail(s, r, system) for s, r in store.samples()] if details else []
        metadata = store.metadata()
    finally:
        store.close()
    benchmark = benchmark_label(config.benchmark, config.benchmark_options, metadata)
    key = (
        benchmark if config.split == "test" else f"{benchmark}:{config.split}",
        system_label(config.system, config.system_options),
        model_name(metadata.get("models"), config.model),
        sampling_label(config),
    )
    metadata = {**metadata, "config": config.model_dump()}
    frame["sample_id"] = [
        sample_id(t, i, metadata["config"])
        for t, i in zip(frame.get("task_id", []), frame.get("sample_index", []), strict=True)
    ]
    return Run(run_dir.name, key, metadata, frame, rows)


def collect_runs(paths: list[Path], details: bool = True) -> list[Run]:
    """Every run under ``paths``, in a stable order."""
    return [read_run(p, details) for p in find_run_dirs(paths)]
