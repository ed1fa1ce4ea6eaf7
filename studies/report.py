"""A study's report: one row per [[run]] in the papers' layout (pass@k for the study's k list,
each pass@1 with its interval, test pass rate, runtime and memory against the reference, code
complexity, failure kinds), the study's comparisons on shared tasks (one family, Holm-corrected),
and the Collaboration Gain of multi-role rows. Markdown for the repository, HTML for a browser."""

from __future__ import annotations

import html
import json
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from corebench.harness.config import MANIFEST_NAME
from corebench.harness.modelspec import DEFAULT_ROLE, parse_model_spec
from corebench.harness.registry import default_plugins
from corebench.harness.store import Store
from corebench.harness.summary import efficiency, pass_at_k, samples_frame
from corebench.leaderboards.collect import model_name, sampling_label
from corebench.leaderboards.stats import ALPHA, Paired, paired, proportion_interval, with_holm
from corebench.leaderboards.table import training_lineage

from .metrics import complexity, failure_kind, test_pass_rate
from .spec import Gain, Study, step_roles


@dataclass
class Row:
    name: str
    label: str
    system: str
    model: str
    training: str
    per_task: pd.Series  # pass@1 per task (mean over its samples)
    samples_per_task: int  # the most samples any task has (1: exactly one sample per task)
    values: dict[str, Any] = field(default_factory=dict)
    backend: str = ""  # per role where roles differ: "hf", "planner=hf,coder=embedded"
    sampling: str = ""  # collect.sampling_label: "greedy max=512", "T=0.8 top-p=0.95 max=512"
    per_task_rate: pd.Series = field(default_factory=lambda: pd.Series(dtype=float))
    # the share of each task's hidden tests passed (mean over its samples)


def backend_label(spec: str) -> str:
    """The backend behind each role of a stored model spec (``hf``, ``planner=hf,coder=vllm``)."""
    roles = parse_model_spec(spec)
    if set(roles) == {DEFAULT_ROLE}:
        return roles[DEFAULT_ROLE].backend
    return ",".join(f"{role}={ref.backend}" for role, ref in roles.items())


def collect_row(study: Study, name: str, run_dir: Path, planned: dict[str, int]) -> Row:
    entry = next(r for r in study.runs if r.name == name)
    store = Store(run_dir, create=False)
    try:
        frame = samples_frame(store)
        samples = list(store.samples())
        metadata = store.metadata()
        config = store.config()
    finally:
        store.close()
    empty = pd.Series(dtype=float)
    per_task = empty if frame.empty else frame.groupby("task_id")["passed"].mean()
    rates = [test_pass_rate(r, planned.get(r.task_id, 0)) for _, r in samples]
    per_task_rate = (
        pd.Series(rates, index=[r.task_id for _, r in samples]).groupby(level=0).mean()
        if rates
        else pd.Series(dtype=float)
    )
    kinds = Counter(k for _, r in samples if (k := failure_kind(r)) is not None)
    measures = [complexity(s.code) for s, _ in samples]
    cc = [c for c, _ in measures if c is not None]
    mi = [m for _, m in measures if m is not None]
    eff = (efficiency(frame) or {}) if not frame.empty else {}
    low, high = proportion_interval(per_task.to_numpy(dtype=float))
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
        model=model_name(metadata.get("models"), config.model),
        training=training_lineage(metadata.get("models")),
        per_task=per_task,
        samples_per_task=int(counts.max()) if len(counts) else 0,
        values=values,
        backend=backend_label(config.model),
        sampling=sampling_label(config),
        per_task_rate=per_task_rate,
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


def compare(a: Row, b: Row, metric: str = "pass@1") -> Paired:
    """Row ``a`` minus row ``b`` on their shared tasks, in ``metric`` per task: pass@1 (exact
    McNemar when both have one sample per task) or the test pass rate (the sign-flip
    permutation test, as for pass@1 over several samples); no Holm p yet."""
    x, y = (a.per_task, b.per_task) if metric == "pass@1" else (a.per_task_rate, b.per_task_rate)
    shared = x.index.intersection(y.index).sort_values()
    binary = metric == "pass@1" and a.samples_per_task == 1 and b.samples_per_task == 1
    result = paired(x[shared].to_numpy(), y[shared].to_numpy(), binary=binary)
    return replace(result, metric=metric)


def best_role(gain: Gain, by_name: dict[str, Row]) -> Row:
    """The gain's single-role row with the highest pass@1 (the first of equals)."""
    return max((by_name[n] for n in gain.roles), key=lambda r: r.values.get("pass@1", -1.0))


def gain_comparisons(gain: Gain, by_name: dict[str, Row]) -> list[tuple[str, str]]:
    """(pair, its best single role) and, where given, (pair, direct)."""
    return [(gain.pair, best_role(gain, by_name).name)] + (
        [(gain.pair, gain.direct)] if gain.direct else []
    )


def family(study: Study, rows: list[Row]) -> list[tuple[Row, Row, Paired]]:
    """Every comparison the report makes, each pair of rows once per metric, with Holm-adjusted
    p over them all: ``study.comparisons()`` (planned, or every pair of rows) in each of the
    study's ``metrics``, then the Collaboration Gain comparisons (pass@1) not among them."""
    by_name = {r.name: r for r in rows}
    wanted = [(a, b, m) for a, b in study.comparisons() for m in study.header.metrics]
    wanted += [
        (*pair, "pass@1") for gain in study.gains for pair in gain_comparisons(gain, by_name)
    ]
    seen: set[tuple[frozenset[str], str]] = set()
    unique = []
    for a, b, metric in wanted:
        if a != b and (frozenset((a, b)), metric) not in seen:
            seen.add((frozenset((a, b)), metric))
            unique.append((by_name[a], by_name[b], metric))
    tested = with_holm([compare(a, b, metric) for a, b, metric in unique])
    return [(a, b, d) for (a, b, _), d in zip(unique, tested, strict=True)]


def _lookup(pairs: list[tuple[Row, Row, Paired]], a: Row, b: Row) -> Paired:
    """``a`` minus ``b`` from the family (negated where the family has ``b`` minus ``a``)."""
    for x, y, d in (p for p in pairs if p[2].metric == "pass@1"):
        if (x.name, y.name) == (a.name, b.name):
            return d
        if (x.name, y.name) == (b.name, a.name):
            return replace(d, difference=-d.difference, low=-d.high, high=-d.low)
    raise KeyError(f"{a.name} - {b.name} is not in the report's family of comparisons")


def gains_of(study: Study, rows: list[Row], pairs: list[tuple[Row, Row, Paired]]) -> list[dict]:
    """Each [[gain]]: the pair row against its best single role and against ``direct``, the
    comparisons (and their p and Holm p) taken from the family."""
    by_name = {r.name: r for r in rows}
    gains = []
    for gain in study.gains:
        pair, best = by_name[gain.pair], best_role(gain, by_name)
        item: dict[str, Any] = {"pair": pair, "best_role": best}
        item["vs_roles"] = _lookup(pairs, pair, best)
        if gain.direct:
            item["direct"] = by_name[gain.direct]
            item["vs_direct"] = _lookup(pairs, pair, item["direct"])
        gains.append(item)
    return gains


@dataclass
class Report:
    study: Study
    rows: list[Row]
    pairs: list[tuple[Row, Row, Paired]]
    gains: list[dict[str, Any]]
    training: list[dict[str, Any]] = field(default_factory=list)  # manifests, with step name


def report_of(study: Study, rows: list[Row], training: list[dict[str, Any]] = ()) -> Report:
    """The report of collected rows: the family of comparisons, then the gains from it."""
    pairs = family(study, rows)
    return Report(study, rows, pairs, gains_of(study, rows, pairs), list(training))


def trained_manifests(study: Study, checkpoints: dict[str, Path]) -> list[dict[str, Any]]:
    """Each training step's checkpoint manifests (``checkpoints``: step name -> its folder), in
    the study's order, each with its step's name; steps not trained yet are left out."""
    out = []
    for step in study.train:
        for role in step_roles(step):
            path = checkpoints.get(step.name, Path("/nonexistent")) / role / MANIFEST_NAME
            if path.exists():
                out.append({"step": step.name, **json.loads(path.read_text())})
    return out


def build_report(
    study: Study,
    run_dirs: dict[str, Path],
    data_dir: Path | None,
    checkpoints: dict[str, Path] | None = None,
) -> Report:
    planned = planned_tests(study, data_dir)
    rows = [collect_row(study, run.name, run_dirs[run.name], planned) for run in study.runs]
    return report_of(study, rows, trained_manifests(study, checkpoints or {}))


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
    if not d.tasks:
        return "–"
    return f"{100 * d.difference:+.1f} [{100 * d.low:+.1f}, {100 * d.high:+.1f}]"


def _tested(d: Paired) -> list[str]:
    """Test, raw p, Holm p, distinguishable."""
    return [d.test, _p(d.p), _p(d.p_holm), "yes" if d.distinguishable else "no"]


def tables(report: Report) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of each table, shared by the Markdown and the HTML."""
    ks = report.study.header.k
    header = ["row", "system", "model", "backend; sampling", "training", "tasks", "samples"]
    header += [f"pass@{k} %" for k in ks]
    header += ["pass@1 95% CI", "test pass rate %", "runtime ×ref", "memory ×ref", "CC", "MI"]
    header += ["failures (share of samples)"]
    results = []
    for r in report.rows:
        low, high = r.values["pass@1_ci"]
        results.append(
            [r.label, r.system, r.model, f"{r.backend}; {r.sampling}", r.training or "base",
             str(r.values["tasks"]), str(r.values["samples"])]
            + [_pct(r.values.get(f"pass@{k}", math.nan)) for k in ks]
            + [f"{_pct(low)}–{_pct(high)}", _pct(r.values["test_pass_rate"]),
               _num(r.values["runtime_ratio"]), _num(r.values["memory_ratio"]),
               _num(r.values["cc"]), _num(r.values["mi"], 1),
               _failures(r.values["failures"], r.values["samples"])]
        )  # fmt: skip
    diffs = [
        [f"{a.label} − {b.label}" + ("" if d.metric == "pass@1" else " (test pass rate)"),
         str(d.tasks), _signed(d), *_tested(d)]
        for a, b, d in report.pairs
    ]  # fmt: skip
    out = [
        ("Results", header, results),
        (
            "Paired differences in pass@1, or where marked the test pass rate (percentage "
            "points, shared tasks)",
            ["rows", "tasks", "difference [95% CI]", "test", "p", "p (Holm)",
             f"distinguishable (Holm p < {ALPHA})"],
            diffs,
        ),
    ]  # fmt: skip
    if report.training:
        out.append(training_table(report.training))
    if report.gains:
        gains = []
        for g in report.gains:
            roles, line = g["vs_roles"], [g["pair"].label, g["best_role"].label]
            line += [_signed(roles), _p(roles.p), _p(roles.p_holm)]
            if "vs_direct" in g:
                direct = g["vs_direct"]
                line += [g["direct"].label, _signed(direct), _p(direct.p), _p(direct.p_holm)]
            else:
                line += ["–", "–", "–", "–"]
            gains.append(line)
        out.append(
            (
                "Collaboration Gain (pass@1 percentage points)",
                ["pair", "best single role", "gain over it [95% CI]", "p", "p (Holm)", "direct",
                 "gain over direct [95% CI]", "p", "p (Holm)"],
                gains,
            )
        )  # fmt: skip
    return out


def training_table(manifests: list[dict[str, Any]]) -> tuple[str, list[str], list[list[str]]]:
    """Per trained checkpoint: what its training logged (``training/diagnostics.py``)."""
    header = ["step", "method", "role", "steps", "reward: first → last quarter",
              "trend (Kendall τ, p)", "groups with reward variance %", "mean |advantage|",
              "grad norm (median)", "loss: first → last"]  # fmt: skip
    rows = []
    for m in manifests:
        d = m.get("diagnostics") or {}
        losses = [e["loss"] for e in m.get("loss_curve") or []]
        rows.append(
            [m["step"], m.get("method", "?"), m.get("role", "?"), str(m.get("steps", "–")),
             f"{_num(d.get('reward_first_quarter', math.nan), 3)} → "
             f"{_num(d.get('reward_last_quarter', math.nan), 3)}" if d else "–",
             f"{_num(d.get('trend_tau', math.nan))}, {_p(_nan_none(d.get('trend_p')))}" if d else "–",
             _pct(d.get("groups_with_variance", math.nan)) if d else "–",
             _num(d.get("mean_abs_advantage", math.nan), 3) if d else "–",
             _num(d.get("grad_norm_median", math.nan), 3) if d else "–",
             f"{losses[0]:.3f} → {losses[-1]:.3f}" if losses else "–"]
        )  # fmt: skip
    return "Training (what each checkpoint's training logged)", header, rows


def _nan_none(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


DEFINITIONS = """\
- pass@k: the unbiased estimator over each task's samples, averaged over tasks. The pass@1
  interval is 95 % exact Clopper-Pearson over tasks when every task's score is 0 or 1 (one sample
  per task), else Wilson with the task count as n and the sum of per-task pass rates as the
  count (conservative: a rate in [0, 1] varies at most as much as a pass/fail outcome).
- Backend; sampling: the backend of each role's model, and the temperature, top-p and token limit.
- Paired differences compare two rows on the tasks both have: the mean per-task difference in
  pass@1. Test: exact McNemar (two-sided binomial test on the tasks where exactly one row passed)
  when both rows have one sample per task, else the two-sided paired sign-flip permutation test
  of the mean difference (exact over all 2^n sign flips up to 16 tasks, else 100000 seeded
  random flips). The 95 % interval inverts the sign-flip test: the shifts d for which the
  per-task differences minus d are not rejected at 0.05; it contains 0 exactly when p >= 0.05,
  is [-100, +100] when the tasks are too few to reject anything, and is a single value when
  every one of six or more tasks differs by that same amount (identical rows: [0, 0]).
- A study may compare rows in more than pass@1 (`metrics`): "(test pass rate)" marks the
  difference in the share of each task's hidden tests passed, tested by the sign-flip test.
- The family is every comparison listed (the study's planned comparisons, or every pair of rows,
  in each of its metrics, plus the Collaboration Gain comparisons, each pair of rows once per
  metric). p (Holm) is Holm's step-down
  adjustment over that family; "distinguishable" means p (Holm) < 0.05. Intervals are not
  adjusted.
- Test pass rate: passed hidden tests over the task's hidden tests, every test judged (not only
  up to the first failure), averaged over samples.
- Runtime and memory ×ref: medians over passing solutions of their CPU time and peak memory
  against the task's reference solution, the two timed together (their runs alternating), one
  solution at a time.
- CC: mean cyclomatic complexity of the functions a solution defines; MI: maintainability index
  (0-100), both by radon, over solutions with code.
- Failures: the exception type of a runtime error, else the verdict (timeout, wrong_answer, ...).
- Training: per checkpoint, the mean reward per step over the first and the last quarter of its
  steps, Kendall's tau of the mean reward per step against the step with its two-sided p (a
  rising curve has tau > 0), the share of groups (a prompt's completions) whose rewards differ
  (group-relative advantages are zero in the others, which teach nothing), the mean absolute
  advantage (reward minus its group's mean), the median gradient norm of the updates, and for
  SFT the training loss at the first and the last step.
- Collaboration Gain: a multi-role row's pass@1 minus that of the best row running one of its
  roles alone on the same model, and minus `direct`'s; the same comparisons, p and p (Holm) as in
  the paired differences.
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
