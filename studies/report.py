"""A study's report, built from its folder's evidence files alone (``evidence.py``): one row per
[[run]] and seed in the papers' layout (pass@k for the study's k list, each pass@1 with its
interval, test pass rate, runtime and memory against the reference, code complexity, failure
kinds); the planned comparisons in the declared primary metric (one Holm family, which alone
decides what is distinguishable) and in the secondary metrics (a family of their own), each with
its minimum detectable effect, pooled over training seeds where the study has them; the
Collaboration Gain of multi-role rows; what training logged; the training data's decontamination;
and whether the study was pre-registered. Markdown for the repository, HTML for a browser."""

from __future__ import annotations

import html
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from corebench.harness.errors import CorebenchError
from corebench.harness.summary import efficiency, pass_at_k
from corebench.leaderboards.stats import (
    ALPHA,
    POWER,
    Paired,
    crossed,
    minimum_detectable,
    paired,
    proportion_interval,
    with_holm,
)
from corebench.training.contamination import CRITERIA

from . import evidence
from .metrics import complexity
from .spec import Gain, Study, step_roles

PASSED = evidence.OUTCOME[next(iter(evidence.OUTCOME))]  # "P"


@dataclass
class Row:
    """One [[run]] entry run once (``seed`` None) or for one training seed."""

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
    seed: int | None = None

    def scores(self, metric: str) -> pd.Series:
        return self.per_task if metric == "pass@1" else self.per_task_rate


def row_from_evidence(study: Study, name: str, seed: int | None, data: dict[str, Any]) -> Row:
    """A row from its exported samples, results and settings."""
    entry = next(r for r in study.runs if r.name == name)
    results, samples, settings = data["results"], data["samples"], data["settings"]
    rows = [{"task_id": r["task_id"], "passed": r["verdict"] == "passed"} for r in results]
    frame = pd.DataFrame(rows, columns=["task_id", "passed"])
    per_task = frame.groupby("task_id")["passed"].mean().astype(float)
    rates = [
        r["tests"].count(PASSED) / len(r["tests"])
        if r["tests"]
        else float(r["verdict"] == "passed")
        for r in results
    ]
    per_task_rate = (
        pd.Series(rates, index=[r["task_id"] for r in results]).groupby(level=0).mean()
        if rates
        else pd.Series(dtype=float)
    )
    measured = [r["measurement"] for r in results if r.get("measurement")]
    eff = efficiency(measured) or {}
    measures = [complexity(s["solution"]) for s in samples]
    cc = [c for c, _ in measures if c is not None]
    mi = [m for _, m in measures if m is not None]
    low, high = proportion_interval(per_task.to_numpy(dtype=float))
    values: dict[str, Any] = {
        "tasks": int(per_task.size),
        "samples": len(results),
        "pass@1_ci": (low, high),
        "test_pass_rate": float(np.mean(rates)) if rates else math.nan,
        "runtime_ratio": eff.get("runtime_ratio_median", math.nan),
        "memory_ratio": eff.get("memory_ratio_median", math.nan),
        "cc": float(np.mean(cc)) if cc else math.nan,
        "mi": float(np.mean(mi)) if mi else math.nan,
        "failures": Counter(r["failure"] for r in results if r["failure"] is not None),
    }
    for k, v in (pass_at_k(rows, "passed", study.header.k) if rows else {}).items():
        values[f"pass@{k}"] = v
    counts = frame.groupby("task_id").size()
    return Row(
        name=name,
        label=entry.label or name,
        system=entry.system,
        model=settings["model"],
        training=settings["training"],
        per_task=per_task,
        samples_per_task=int(counts.max()) if len(counts) else 0,
        values=values,
        backend=settings["backend"],
        sampling=settings["sampling"],
        per_task_rate=per_task_rate,
        seed=seed,
    )


def compare(a: Row, b: Row, metric: str = "pass@1") -> Paired:
    """Row ``a`` minus row ``b`` on their shared tasks, in ``metric`` per task: pass@1 (exact
    McNemar when both have one sample per task) or the test pass rate (the sign-flip
    permutation test, as for pass@1 over several samples); no Holm p yet."""
    x, y = a.scores(metric), b.scores(metric)
    shared = x.index.intersection(y.index).sort_values()
    binary = metric == "pass@1" and a.samples_per_task == 1 and b.samples_per_task == 1
    result = paired(x[shared].to_numpy(), y[shared].to_numpy(), binary=binary)
    return replace(result, metric=metric)


def _row_for(rows: list[Row], seed: int) -> Row:
    """An arm's row for ``seed`` (its only row where it was run once)."""
    return next(r for r in rows if r.seed in (seed, None))


def seed_differences(a: list[Row], b: list[Row], metric: str) -> np.ndarray:
    """Arm ``a`` minus arm ``b`` in ``metric``, a row per training seed (in order) and a column
    per task every seed's rows share (sorted by id). The arms must have seeds."""
    seeds = sorted({r.seed for r in a + b if r.seed is not None})
    if not seeds:
        raise ValueError("seed_differences needs arms run once per training seed")
    pairs = [(_row_for(a, s).scores(metric), _row_for(b, s).scores(metric)) for s in seeds]
    shared = pairs[0][0].index
    for x, y in pairs:
        shared = shared.intersection(x.index).intersection(y.index)
    shared = shared.sort_values()
    return np.array([x[shared].to_numpy() - y[shared].to_numpy() for x, y in pairs])


def compare_arms(
    a: list[Row], b: list[Row], metric: str
) -> tuple[Paired, list[tuple[int, Paired]]]:
    """Arm ``a`` minus arm ``b``: without seeds, ``compare`` of their rows; with seeds, each
    seed's ``compare`` (described, not tested in the family) and the test pooled over seeds and
    tasks (``stats.crossed``) on the tasks every seed shares."""
    seeds = sorted({r.seed for r in a + b if r.seed is not None})
    if not seeds:
        return compare(a[0], b[0], metric), []
    per_seed = [(s, compare(_row_for(a, s), _row_for(b, s), metric)) for s in seeds]
    if len(seeds) == 1:
        return per_seed[0][1], per_seed
    d = seed_differences(a, b, metric)
    if d.shape[1] < 2:
        return Paired(d.shape[1], math.nan, math.nan, math.nan, None,
                      "none (fewer than two shared tasks)", metric=metric), per_seed  # fmt: skip
    pooled = crossed(d)
    test = (
        f"crossed random effects ({len(seeds)} seeds × {d.shape[1]} tasks), Satterthwaite t "
        f"(df {pooled.df:.1f})"
    )
    result = Paired(d.shape[1], pooled.difference, pooled.low, pooled.high, pooled.p, test,
                    metric=metric, se=pooled.se, df=pooled.df)  # fmt: skip
    return result, per_seed


@dataclass(frozen=True)
class Comparison:
    """A planned comparison (or a Collaboration Gain's) in one metric."""

    row: str
    against: str
    metric: str
    primary: bool  # in the primary metric: decides, with the primary family's Holm p
    result: Paired  # the test: pooled over seeds where the rows have them
    per_seed: tuple[tuple[int, Paired], ...] = ()
    mde: float = math.nan  # minimum detectable effect at 80 % power, family-corrected

    @property
    def seeds_agree(self) -> bool | None:
        """Whether every seed's difference has the result's sign (None without seeds)."""
        if not self.per_seed or math.isnan(self.result.difference):
            return None
        sign = np.sign(self.result.difference)
        return bool(sign != 0 and all(np.sign(d.difference) == sign for _, d in self.per_seed))

    @property
    def distinguishable(self) -> bool:
        return self.primary and self.result.distinguishable

    def verdict(self, headroom: float) -> str:
        """What the comparison says: distinguishable, or a null with what it could have seen
        (``headroom``: the largest difference possible either way)."""
        if not self.primary:
            return "secondary: reported, not decided"
        if self.result.p_holm is None:
            return "untested"
        if self.distinguishable:
            return "distinguishable"
        if self.result.se == 0:
            if self.result.difference == 0:
                return "null: the rows agree on every task (no variance to size an effect by)"
            return "null: every task differs alike (no variance to size an effect by)"
        if math.isnan(self.mde) or self.mde >= headroom:
            return "null: too small to tell (no possible effect was likely to be seen)"
        return f"null: could have detected ≥ {100 * self.mde:.1f} points"


def arms(rows: list[Row]) -> dict[str, list[Row]]:
    """Rows by their [[run]] entry, in order, each entry's seeds in order."""
    out: dict[str, list[Row]] = {}
    for r in rows:
        out.setdefault(r.name, []).append(r)
    return {
        name: sorted(rs, key=lambda r: -1 if r.seed is None else r.seed) for name, rs in out.items()
    }


def arm_pass1(rows: list[Row]) -> float:
    """An arm's pass@1: the mean over its seeds."""
    values = [r.values.get("pass@1", math.nan) for r in rows]
    return float(np.mean(values)) if values else math.nan


def best_role(gain: Gain, by_arm: dict[str, list[Row]]) -> str:
    """The gain's single-role row with the highest pass@1 (the first of equals)."""
    return max(gain.roles, key=lambda n: arm_pass1(by_arm[n]) if by_arm[n] else -1.0)


def gain_comparisons(gain: Gain, by_arm: dict[str, list[Row]]) -> list[tuple[str, str]]:
    """(pair, its best single role) and, where given, (pair, direct)."""
    return [(gain.pair, best_role(gain, by_arm))] + (
        [(gain.pair, gain.direct)] if gain.direct else []
    )


def family(study: Study, rows: list[Row]) -> list[Comparison]:
    """Every comparison the report makes, each pair of rows once per metric: the planned
    comparisons (or every pair of rows) in the primary metric, then the Collaboration Gain's
    pass@1 comparisons not among them (secondary where pass@1 is not the primary metric), then
    the same in each secondary metric. Holm's
    correction runs over the primary family and, apart, over the secondary one; each
    comparison's minimum detectable effect is at its family's corrected level."""
    by_arm = arms(rows)
    gains = [pair for gain in study.gains for pair in gain_comparisons(gain, by_arm)]
    wanted = []
    for metric in study.header.metrics:
        wanted += [(a, b, metric) for a, b in study.comparisons()]
    # the Collaboration Gain is in pass@1: a secondary comparison where pass@1 is not declared
    wanted += [(a, b, "pass@1") for a, b in gains]
    seen: set[tuple[frozenset[str], str]] = set()
    unique = []
    for a, b, metric in wanted:
        if a != b and (frozenset((a, b)), metric) not in seen:
            seen.add((frozenset((a, b)), metric))
            unique.append((a, b, metric))
    tested = [(a, b, m, *compare_arms(by_arm[a], by_arm[b], m)) for a, b, m in unique]
    out: list[Comparison] = []
    for is_primary in (True, False):
        members = [t for t in tested if (t[2] == study.header.primary) == is_primary]
        adjusted = with_holm([t[3] for t in members])
        size = sum(d.p is not None for d in adjusted)
        for (a, b, metric, _, per_seed), result in zip(members, adjusted, strict=True):
            mde = minimum_detectable(result.se, result.df, size)
            out.append(Comparison(a, b, metric, is_primary, result, tuple(per_seed), mde))
    order = {(a, b, m): i for i, (a, b, m) in enumerate(unique)}
    return sorted(out, key=lambda c: (not c.primary, order[c.row, c.against, c.metric]))


def _lookup(comparisons: list[Comparison], a: str, b: str) -> Paired:
    """``a`` minus ``b`` in pass@1 from the family (negated where it holds ``b`` minus ``a``)."""
    for c in (c for c in comparisons if c.metric == "pass@1"):
        if (c.row, c.against) == (a, b):
            return c.result
        if (c.row, c.against) == (b, a):
            d = c.result
            return replace(d, difference=-d.difference, low=-d.high, high=-d.low)
    raise KeyError(f"{a} - {b} is not in the report's family of comparisons")


def gains_of(study: Study, rows: list[Row], comparisons: list[Comparison]) -> list[dict]:
    """Each [[gain]]: the pair row against its best single role and against ``direct``, the
    comparisons (and their p and Holm p) taken from the family."""
    by_arm = arms(rows)
    out = []
    for gain in study.gains:
        best = best_role(gain, by_arm)
        item: dict[str, Any] = {"pair": gain.pair, "best_role": best}
        item["vs_roles"] = _lookup(comparisons, gain.pair, best)
        if gain.direct:
            item["direct"] = gain.direct
            item["vs_direct"] = _lookup(comparisons, gain.pair, gain.direct)
        out.append(item)
    return out


@dataclass
class Report:
    study: Study
    rows: list[Row]
    comparisons: list[Comparison]
    gains: list[dict[str, Any]]
    training: list[dict[str, Any]] = field(default_factory=list)  # per step, seed and role
    registration: dict[str, Any] | None = None
    given_sha256: str = ""  # of the study file the report was built for

    def label(self, name: str) -> str:
        entry = next((r for r in self.study.runs if r.name == name), None)
        return (entry.label or name) if entry else name


def report_of(
    study: Study,
    rows: list[Row],
    training: list[dict[str, Any]] = (),
    registration: dict[str, Any] | None = None,
    given_sha256: str = "",
) -> Report:
    """The report of collected rows: the families of comparisons, then the gains from them."""
    comparisons = family(study, rows)
    return Report(study, rows, comparisons, gains_of(study, rows, comparisons), list(training),
                  registration, given_sha256)  # fmt: skip


def build_report(study: Study, root: Path, study_file: Path) -> Report:
    """The report from the evidence in ``root`` (every row must have been exported)."""
    from .execute import seeded_studies

    rows, missing = [], []
    for run in study.runs:
        for seed in study.seeds_of(run):
            data = evidence.read_row(root, run.name, seed)
            if data is None:
                missing.append(run.name + ("" if seed is None else f" seed {seed}"))
            else:
                rows.append(row_from_evidence(study, run.name, seed, data))
    if missing:
        raise CorebenchError(f"not run yet: {', '.join(missing)} (run without --report-only)")
    training, seen = [], set()
    for seed, seeded in seeded_studies(study):
        for step in seeded.train:
            step_seed = seed if study.seeded_step(step.name) else None
            if (step.name, step_seed) in seen:
                continue
            seen.add((step.name, step_seed))
            logged = evidence.read_training(root, step.name, step_seed) or {}
            earlier = evidence.read_earlier_trainings(root, step.name, step_seed)
            for label, record in [
                *((f"{step.name} (earlier start {k})", e) for k, e in enumerate(earlier, 1)),
                (step.name + (" (latest start)" if earlier else ""), logged),
            ]:
                for role in step_roles(step):
                    if role in record:
                        training.append(
                            {"step": label, "seed": step_seed, "role": role, **record[role]}
                        )
    return report_of(study, rows, training, evidence.read_registration(root),
                     evidence.sha256(study_file))  # fmt: skip


# --- rendering -----------------------------------------------------------------------------------
def _pct(value: float) -> str:
    return "–" if value is None or math.isnan(value) else f"{100 * value:.1f}"


def _num(value: float, digits: int = 2) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _p(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _failures(kinds: Counter, samples: int) -> str:
    if not kinds:
        return "none"
    return ", ".join(f"{kind} {100 * count / samples:.0f}%" for kind, count in kinds.most_common(4))


def _signed(d: Paired) -> str:
    if not d.tasks or math.isnan(d.difference):
        return "–"
    return f"{100 * d.difference:+.1f} [{100 * d.low:+.1f}, {100 * d.high:+.1f}]"


def _seed(seed: int | None) -> str:
    return "–" if seed is None else str(seed)


def headroom(report: Report, c: Comparison) -> float:
    """The largest difference the comparison could show either way: for a rate in [0, 1],
    the against-row's distance to 0 or to 1, whichever is larger."""
    rows = arms(report.rows)[c.against]
    level = float(np.mean([r.scores(c.metric).mean() for r in rows]))
    return max(level, 1 - level) if level == level else 1.0


def results_table(report: Report) -> tuple[str, list[str], list[list[str]]]:
    ks = report.study.header.k
    header = ["row", "seed", "system", "model", "backend; sampling", "training", "tasks",
              "samples"] + [f"pass@{k} %" for k in ks]  # fmt: skip
    header += ["pass@1 95% CI", "test pass rate %", "runtime ×ref", "memory ×ref", "CC", "MI"]
    header += ["failures (share of samples)"]
    lines = []
    for r in report.rows:
        low, high = r.values["pass@1_ci"]
        lines.append(
            [r.label, _seed(r.seed), r.system, r.model, f"{r.backend}; {r.sampling}",
             r.training or "base", str(r.values["tasks"]), str(r.values["samples"])]
            + [_pct(r.values.get(f"pass@{k}", math.nan)) for k in ks]
            + [f"{_pct(low)}–{_pct(high)}", _pct(r.values["test_pass_rate"]),
               _num(r.values["runtime_ratio"]), _num(r.values["memory_ratio"]),
               _num(r.values["cc"]), _num(r.values["mi"], 1),
               _failures(r.values["failures"], r.values["samples"])]
        )  # fmt: skip
    return "Results", header, lines


def comparisons_table(report: Report) -> tuple[str, list[str], list[list[str]]]:
    header = ["rows", "metric", "tasks", "difference [95% CI]", "per seed", "seeds agree",
              "test", "p", "p (Holm)", f"MDE ({POWER:.0%} power)", "verdict"]  # fmt: skip
    lines = []
    for c in report.comparisons:
        d = c.result
        per_seed = ", ".join(f"{s}: {100 * p.difference:+.1f}" for s, p in c.per_seed) or "–"
        agree = {None: "–", True: "yes", False: "no"}[c.seeds_agree]
        metric = f"{c.metric} ({'primary' if c.primary else 'secondary'})"
        lines.append(
            [f"{report.label(c.row)} − {report.label(c.against)}", metric, str(d.tasks),
             _signed(d), per_seed, agree, d.test, _p(d.p), _p(d.p_holm),
             _pct(c.mde), c.verdict(headroom(report, c))]
        )  # fmt: skip
    primary = report.study.header.primary
    title = (
        f"Comparisons (percentage points, shared tasks; primary metric {primary}, decided by "
        f"Holm p < {ALPHA} within the primary family)"
    )
    return title, header, lines


def gains_table(report: Report) -> tuple[str, list[str], list[list[str]]]:
    lines = []
    for g in report.gains:
        roles, line = g["vs_roles"], [report.label(g["pair"]), report.label(g["best_role"])]
        line += [_signed(roles), _p(roles.p), _p(roles.p_holm)]
        if "vs_direct" in g:
            direct = g["vs_direct"]
            line += [report.label(g["direct"]), _signed(direct), _p(direct.p), _p(direct.p_holm)]
        else:
            line += ["–", "–", "–", "–"]
        lines.append(line)
    header = ["pair", "best single role", "gain over it [95% CI]", "p", "p (Holm)", "direct",
              "gain over direct [95% CI]", "p", "p (Holm)"]  # fmt: skip
    return "Collaboration Gain (pass@1 percentage points)", header, lines


def _first_last(curve: list[dict[str, Any]] | None, key: str = "reward", digits: int = 3) -> str:
    if not curve:
        return "–"
    return f"{_num(curve[0][key], digits)} → {_num(curve[-1][key], digits)}"


def training_table(logged: list[dict[str, Any]]) -> tuple[str, list[str], list[list[str]]]:
    """Per trained checkpoint (step, seed, role): what its training logged."""
    header = ["step", "seed", "method", "role", "steps", "reward: first → last quarter",
              "trend (Kendall τ, p)", "groups with reward variance %", "mean |advantage|",
              "grad norm (median)", "validation reward: first → last", "loss: first → last"]  # fmt: skip
    lines = []
    for item in logged:
        m = item["manifest"]
        d = m.get("diagnostics") or {}
        lines.append(
            [item["step"], _seed(item["seed"]), m.get("method", "?"), item["role"],
             str(m.get("steps", "–")),
             f"{_num(d.get('reward_first_quarter', math.nan), 3)} → "
             f"{_num(d.get('reward_last_quarter', math.nan), 3)}" if d else "–",
             f"{_num(d.get('trend_tau', math.nan))}, {_p(d.get('trend_p'))}" if d else "–",
             _pct(d.get("groups_with_variance", math.nan)) if d else "–",
             _num(d.get("mean_abs_advantage", math.nan), 3) if d else "–",
             _num(d.get("grad_norm_median", math.nan), 3) if d else "–",
             _first_last(d.get("validation_curve")),
             _first_last(m.get("loss_curve"), "loss")]
        )  # fmt: skip
    return "Training (what each checkpoint's training logged)", header, lines


def data_table(logged: list[dict[str, Any]]) -> tuple[str, list[str], list[list[str]]]:
    """Per training step and seed: its training tasks, and the near duplicates of evaluation
    tasks excluded, by criterion."""
    header = ["step", "seed", "source", "tasks trained on", "near duplicates excluded"]
    header += [f"by {c}" for c in CRITERIA]
    lines, seen = [], set()
    for item in logged:
        if (item["step"], item["seed"]) in seen:
            continue
        seen.add((item["step"], item["seed"]))
        data = item["manifest"].get("data") or {}
        by = data.get("excluded_by") or {}
        lines.append(
            [item["step"], _seed(item["seed"]), str(data.get("source", "?")),
             str(data.get("tasks", "–")), str(data.get("overlaps_found", "–"))]
            + [str(by.get(c, "–")) for c in CRITERIA]
        )  # fmt: skip
    return "Training data (near duplicates of evaluation tasks excluded)", header, lines


def tables(report: Report) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of each table, shared by the Markdown and the HTML."""
    out = [results_table(report), comparisons_table(report)]
    if report.training:
        out += [training_table(report.training), data_table(report.training)]
    if report.gains:
        out.append(gains_table(report))
    return out


def registration_lines(report: Report) -> list[str]:
    """What the registration record says, and whether the run counts as pre-registered."""
    record = report.registration
    ok, why = evidence.preregistered(record, report.given_sha256)
    lines = [f"Pre-registered: **{'yes' if ok else 'no'}** ({why})."]
    if record:
        commit = (
            f"last changed in commit {record['commit'][:12]} at {record['committed']}"
            if record.get("commit")
            else "not committed"
        )
        starts = len(record.get("starts") or [record])
        resumed = f", resumed {starts - 1} time{'s' * (starts > 2)}" if starts > 1 else ""
        lines.append(
            f"Study file `{record['path']}` as run: sha256 {record['sha256'][:16]}…, {commit}; "
            f"run began {record['started']}{resumed}; scale `{record['scale']}`."
        )
    seeds = report.study.header.seeds
    lines.append(
        f"Primary metric: {report.study.header.primary}; secondary: "
        f"{', '.join(report.study.header.secondary) or 'none'}; training seeds: "
        f"{', '.join(map(str, seeds)) if seeds else 'one run per row'}."
    )
    return lines


DEFINITIONS = """\
- pass@k: the unbiased estimator over each task's samples, averaged over tasks. The pass@1
  interval is 95 % exact Clopper-Pearson over tasks when every task's score is 0 or 1 (one sample
  per task), else Wilson with the task count as n and the sum of per-task pass rates as the
  count (conservative: a rate in [0, 1] varies at most as much as a pass/fail outcome).
- Seed: the training and sampling seed of a row run once per seed ("–": run once, the same for
  every seed: an untrained model decoding greedily).
- Backend; sampling: the backend of each role's model, and the temperature, top-p and token limit.
- Comparisons: a row minus another on the tasks both have, in the mean per-task score. The
  primary metric, declared in the study file before the run, decides: "distinguishable" means a
  Holm-adjusted p below 0.05 within the primary family (the planned comparisons in the primary
  metric, plus the Collaboration Gain comparisons when it is pass@1). Secondary metrics are
  tested and Holm-adjusted in a family of their own and decide nothing.
- Test, one run per row: exact McNemar (two-sided binomial test on the tasks where exactly one
  row passed) when both rows have one sample per task, else the two-sided paired sign-flip
  permutation test of the mean difference (exact over all 2^n sign flips up to 16 tasks, else
  100000 seeded random flips); the 95 % interval inverts the sign-flip test (the shifts d for
  which the differences minus d are not rejected at 0.05).
- Test, several training seeds: the per-(seed, task) differences under a two-way crossed
  random-effects model, d = mu + seed effect + task effect + residual, so that both the tasks
  and the training runs are samples of what could have been; the variance components from the
  ANOVA mean squares (REML's in this balanced design), the standard error of the mean from
  them, a two-sided t-test with Satterthwaite's degrees of freedom, and the t interval. "Per
  seed" lists each seed's own difference; "seeds agree" says whether all have the pooled sign.
- MDE: the minimum detectable effect, the smallest true difference the comparison's test would
  detect with 80 % power at its family's corrected level (0.05 / the family's size, Holm's first
  step): (t quantile at 1 - level/2 + t quantile at 0.8) x the difference's standard error
  (Miller 2024). A null reads "could have detected >= MDE", or "too small to tell" when the MDE
  exceeds every difference possible from the compared-against row's level.
- Test pass rate: passed hidden tests over the task's hidden tests, every test judged (not only
  up to the first failure), averaged over samples.
- Runtime and memory ×ref: medians over passing solutions of their CPU time and peak memory
  against the task's reference solution, the two timed together (their runs alternating on
  one CPU).
- CC: mean cyclomatic complexity of the functions a solution defines; MI: maintainability index
  (0-100), both by radon, over solutions with code.
- Failures: the exception type of a runtime error, else the verdict (timeout, wrong_answer, ...).
- Training: per checkpoint, the mean reward per step over the first and the last quarter of its
  steps, Kendall's tau of the mean reward per step against the step with its two-sided p (a
  rising curve has tau > 0), the share of groups (a prompt's completions) whose rewards differ
  (group-relative advantages are zero in the others, which teach nothing), the mean absolute
  advantage (reward minus its group's mean), the median gradient norm of the updates, the mean
  reward on held-out validation tasks at the first and the last evaluation, and for SFT the
  training loss at the first and the last step.
- Training data: the training tasks used, and those excluded as near duplicates of evaluation
  tasks, by criterion (a task may meet several): id, description (prose similarity), code
  (canonical syntax trees), tests (share of its tests shared), name (same function name and an
  identical test); `corebench decontaminate` lists the pairs.
- Collaboration Gain: a multi-role row's pass@1 minus that of the best row running one of its
  roles alone on the same model, and minus `direct`'s; the same comparisons, p and p (Holm) as in
  the comparisons table.
- Pre-registered: a full-scale run of a study file committed, unchanged, before the run began
  (its sha256, commit and start are recorded in `registration.json` when the run starts).
"""


def command_line(report: Report) -> str:
    return f"corebench study study.toml --scale {report.study.scale} --out ."


def render_markdown(report: Report) -> str:
    study = report.study
    title = study.header.title or study.header.name
    lines = [f"# {title}", ""]
    if study.header.description:
        lines += [study.header.description.strip(), ""]
    lines += [
        f"Scale `{study.scale}`. In this folder, `{command_line(report)}` reproduces it, and with "
        "`--report-only` rewrites this report from the evidence files here.",
        "",
        *registration_lines(report),
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


def render_html(report: Report) -> str:
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
        f"<p>Scale <code>{html.escape(report.study.scale)}</code>; in this folder "
        f"<code>{html.escape(command_line(report))}</code> reproduces it.</p>",
    ]
    parts += [
        f"<p>{html.escape(line.replace('**', ''))}</p>" for line in registration_lines(report)
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
