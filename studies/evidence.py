"""A study's folder as evidence anyone can recompute: what each row and training step left,
written as small portable files beside the study's working folders, and read back by the report.

```
<study folder>/
  study.toml                  the study file as run
  registration.json           per start (a resume is a start): its sha256, the commit that
                              last changed it and that commit's (self-attested) committer time,
                              whether the file as run was that commit's bytes, when it began
  report.md, report.html
  <row>.jsonl                 EvalPlus samples (task_id, solution) of a row run once
  <row>.results.jsonl         per sample: verdict, failure kind, every hidden test's outcome
  <row>.run.json              the row's settings (model spec as the study writes it), labels
  <row>/seed-<S>.*            the same three for a row run once per training seed
  training/<step>[/seed-<S>].json   per role: what its training logged (manifest, rewards,
                              gradient norms, validation rewards), paths made relative
  training/<step>.earlier-<k>.json  a step trained once for all seeds, as an earlier start
                              trained it, where a later start (its checkpoints gone) trained
                              it again; that start's seeds whose rows were all exported are
                              not run again
  runs/, checkpoints/         run databases and weights: the working folders (not evidence)
```

``corebench study FILE --out FOLDER --report-only`` builds the report from these files alone:
no run database, checkpoint or dataset answer is read, and no machine path is written, so the
report of a committed folder is rewritten byte for byte on any machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Iterator
from datetime import datetime, timezone
from itertools import count, takewhile
from pathlib import Path
from typing import Any

from corebench.harness.config import MANIFEST_NAME
from corebench.harness.errors import CorebenchError
from corebench.harness.records import ExecutionResult, RunConfig, Verdict
from corebench.harness.registry import default_plugins
from corebench.harness.store import Store
from corebench.harness.summary import measurement_columns
from corebench.leaderboards.collect import model_name, sampling_label
from corebench.leaderboards.table import training_lineage

from .metrics import failure_kind

REGISTRATION = "registration.json"
STUDY_FILE = "study.toml"
WORKING = ("runs", "checkpoints")  # what a committed folder leaves out
# one character per hidden test, in the suite's order; "." for a test that never ran
OUTCOME = {
    Verdict.passed: "P",
    Verdict.wrong_answer: "W",
    Verdict.runtime_error: "E",
    Verdict.timeout: "T",
    Verdict.memory_exceeded: "M",
    Verdict.syntax_error: "S",
    Verdict.sandbox_violation: "V",
    Verdict.no_code: "N",
}
NOT_RUN = "."
# an absolute path (possibly after "hf:" or "="): kept as its last part, as model specs show it
# (not a URL's path: "scheme://host/..." is left alone)
ABSOLUTE_PATH = re.compile(r"(?<![\w.~/-])/(?:[^\s/\"',=]+/)*([^\s/\"',=]+)/?")


def row_stem(root: Path, name: str, seed: int | None) -> Path:
    """``<row>`` or ``<row>/seed-<S>``: the stem of a row's three files."""
    return root / name if seed is None else root / name / f"seed-{seed}"


def training_file(root: Path, step: str, seed: int | None) -> Path:
    base = root / "training"
    return base / f"{step}.json" if seed is None else base / step / f"seed-{seed}.json"


def portable(value: Any, root: Path) -> Any:
    """``value`` with paths inside ``root`` made relative to it and any other absolute path
    reduced to its last part (no machine's folders in evidence)."""
    if isinstance(value, dict):
        return {k: portable(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [portable(v, root) for v in value]
    if isinstance(value, str):
        text = value
        for form in _root_forms(root):
            text = re.sub(form + "/", "", text)
            text = re.sub(form + r"(?=[\s\"',]|$)", ".", text)  # the root itself, not a sibling
        return ABSOLUTE_PATH.sub(lambda m: m.group(1), text)
    return value


def _root_forms(root: Path) -> list[str]:
    """Patterns for ``root`` as a path in text: absolute, and relative to the working folder
    (how a relative ``--out`` reaches checkpoint paths), the latter only as a whole path."""
    resolved = Path(root).resolve()
    forms = [re.escape(str(resolved))]
    relative = os.path.relpath(resolved)
    if relative != "." and not relative.startswith(".."):
        forms.append(r"(?<![\w./~-])" + re.escape(relative))
    return forms


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")


def _write_lines(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


# --- rows --------------------------------------------------------------------------------------------
def planned_tests(config: RunConfig, data_dir: Path | None) -> dict[str, list[tuple[str, int]]]:
    """Each task the run covers, with its hidden suites as (suite name, tests), in the order the
    tests run."""
    from corebench.harness.runner import select_tasks

    benchmark = (
        default_plugins()
        .benchmarks.get(config.benchmark)
        .component(data_dir, **config.benchmark_options)
    )
    return {
        task.task_id: [
            (name, len(tests)) for name, tests in benchmark.test_suite(task.task_id).inputs.items()
        ]
        for task in select_tasks(benchmark, config)
    }


def outcomes(result: ExecutionResult, suites: list[tuple[str, int]]) -> str:
    """Every planned test's outcome as one character (``OUTCOME``), in run order."""
    offsets, total = {}, 0
    for name, size in suites:
        offsets[name], total = total, total + size
    chars = [NOT_RUN] * total
    for test in result.tests:
        if test.suite in offsets and 0 <= test.index < dict(suites)[test.suite]:
            chars[offsets[test.suite] + test.index] = OUTCOME[test.verdict]
    return "".join(chars)


class UnfinishedRow(CorebenchError):
    """A row's run holds fewer samples than it plans: there is no evidence of it yet."""


def export_run(
    root: Path,
    name: str,
    seed: int | None,
    run_dir: Path,
    entry: dict[str, Any],
    data_dir: Path | None,
    key: str,
) -> None:
    """Write a finished row's samples, results and settings (``entry``: the row as the study
    file writes it, its checkpoint references unresolved; ``key``: the study's ``run_key`` of
    the row, so evidence from an older version of the study is told apart) under ``root``."""
    store = Store(run_dir, create=False)
    try:
        samples = list(store.samples())
        config, metadata = store.config(), store.metadata()
    finally:
        store.close()
    suites = planned_tests(config, data_dir)
    if len(samples) < len(suites) * config.n:  # an interrupted run: no evidence of it yet
        raise UnfinishedRow(
            f"{run_dir}: {len(samples)} of {len(suites) * config.n} samples, the row has not finished"
        )
    stem = row_stem(root, name, seed)
    _write_lines(
        stem.with_name(stem.name + ".jsonl"),
        [{"task_id": s.task_id, "solution": s.code} for s, _ in samples],
    )
    results = []
    for solution, result in samples:
        line = {
            "task_id": solution.task_id,
            "sample_index": solution.sample_index,
            "verdict": result.verdict.value,
            "failure": failure_kind(result),
            "tests": outcomes(result, suites.get(solution.task_id, [])),
        }
        measured = measurement_columns(result)
        if measured["runtime_ratio"] is not None:
            line["measurement"] = measured
        results.append(line)
    _write_lines(stem.with_name(stem.name + ".results.jsonl"), results)
    settings = {
        "label": entry.get("label") or name,
        "run_key": key,
        "seed": seed,
        "model": model_name(metadata.get("models"), config.model),
        "training": training_lineage(metadata.get("models")),
        "sampling": sampling_label(config),
        "backend": backend_label(config.model),
        "config": {**config.model_dump(exclude={"model"}), "model": entry.get("model")},
        "dataset": metadata.get("dataset"),
        "corebench_version": metadata.get("corebench_version"),
    }
    _write_json(stem.with_name(stem.name + ".run.json"), portable(settings, root))


def backend_label(spec: str) -> str:
    """The backend behind each role of a stored model spec (``hf``, ``planner=hf,coder=vllm``)."""
    from corebench.harness.modelspec import DEFAULT_ROLE, parse_model_spec

    roles = parse_model_spec(spec)
    if set(roles) == {DEFAULT_ROLE}:
        return roles[DEFAULT_ROLE].backend
    return ",".join(f"{role}={ref.backend}" for role, ref in roles.items())


def read_row(root: Path, name: str, seed: int | None) -> dict[str, Any] | None:
    """A row's exported files (``samples``, ``results``, ``settings``), or None if missing."""
    stem = row_stem(root, name, seed)
    paths = [
        stem.with_name(stem.name + suffix) for suffix in (".jsonl", ".results.jsonl", ".run.json")
    ]
    if not all(p.exists() for p in paths):
        return None
    try:
        samples, results = ([json.loads(x) for x in p.read_text().splitlines()] for p in paths[:2])
        settings = json.loads(paths[2].read_text())
    except (OSError, ValueError) as exc:
        raise CorebenchError(f"unreadable study evidence {stem}: {exc}") from None
    if len(samples) != len(results):
        raise CorebenchError(f"{stem}: {len(samples)} samples but {len(results)} results")
    return {"samples": samples, "results": results, "settings": settings}


# --- training ---------------------------------------------------------------------------------------
def export_training(
    root: Path,
    step: str,
    seed: int | None,
    checkpoints: dict[str, Path],
    *,
    keep_earlier: bool = False,
) -> None:
    """Write what a finished step's training logged, per role: its manifest and its logs (reward
    per completion, gradient norms, validation rewards), paths made portable. A record of
    another training of the same step (same key) already there is kept as the first free
    ``earlier_training_files`` with ``keep_earlier`` (rows it made stand), else replaced; one
    of another version of the step is stale, and goes with its earlier records."""
    roles = {}
    for role, folder in checkpoints.items():
        manifest = json.loads((Path(folder) / MANIFEST_NAME).read_text())
        logs = {}
        for log in ("rewards.txt", "grad_norms.txt", "validation.txt"):
            path = Path(folder).parent / log
            if path.exists():  # one number per line, or "STEP NUMBER"
                lines = [line.split() for line in path.read_text().splitlines() if line.strip()]
                logs[log.removesuffix(".txt")] = [
                    float(x[0]) if len(x) == 1 else [float(v) for v in x] for x in lines
                ]
        roles[role] = {"manifest": manifest, "logs": logs}
    path, found = training_file(root, step, seed), json.loads(json.dumps(portable(roles, root)))
    before = _read_evidence(path) if path.exists() else found
    earlier = earlier_training_files(root, step, seed)
    if _step_keys(before) != _step_keys(found):
        for stale in takewhile(Path.exists, earlier):
            stale.unlink()
    elif before != found and keep_earlier:
        path.rename(next(f for f in earlier if not f.exists()))
    _write_json(path, found)


def _step_keys(record: dict[str, Any]) -> dict[str, str]:
    """Per role, the step's key (its checkpoint folder ``NAME-KEY``, a hash of what decides the
    training): equal for two trainings of one version of the step on any machine."""
    return {
        role: Path(str((logged["manifest"].get("settings") or {}).get("out", ""))).name
        for role, logged in record.items()
    }


def earlier_training_files(root: Path, step: str, seed: int | None) -> Iterator[Path]:
    """``<step>.earlier-1.json``, ``-2``, …: where earlier trainings of a step are kept."""
    path = training_file(root, step, seed)
    for k in count(1):
        yield path.with_name(f"{path.stem}.earlier-{k}.json")


def read_earlier_trainings(root: Path, step: str, seed: int | None) -> list[dict[str, Any]]:
    """What earlier trainings of a step logged, oldest first (``export_training``)."""
    return [
        _read_evidence(f) for f in takewhile(Path.exists, earlier_training_files(root, step, seed))
    ]


def read_training(root: Path, step: str, seed: int | None) -> dict[str, Any] | None:
    path = training_file(root, step, seed)
    return _read_evidence(path) if path.exists() else None


def _read_evidence(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CorebenchError(f"unreadable study evidence {path}: {exc}") from None


# --- registration -------------------------------------------------------------------------------------
def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _git(folder: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit_of(path: Path) -> dict[str, Any]:
    """The commit that last changed ``path``, its committer time, the file's path in the
    repository, and whether the file's bytes on disk are that commit's (same blob id; no
    repository, or never committed: None)."""
    path = Path(path).resolve()
    folder = path.parent
    name = _git(folder, "ls-files", "--full-name", "--", path.name)
    log = _git(folder, "log", "-1", "--format=%H %cI", "--", path.name) if name else None
    if not name or not log:
        return {"path": path.name, "commit": None, "committed": None, "matches_commit": False}
    commit, when = log.split(" ", 1)
    blob = _git(folder, "rev-parse", f"{commit}:{name}")
    on_disk = _git(folder, "hash-object", "--no-filters", "--", path.name)
    matches = blob is not None and blob == on_disk
    return {"path": name, "commit": commit, "committed": when, "matches_commit": matches}


def register(study_file: Path, root: Path, scale: str) -> dict[str, Any]:
    """Record, each time a study's run starts or resumes, which file it ran and whether that
    file was committed before; the first start is the run's start, and every start is kept in
    ``starts`` (a run resumed from an edited file is then not pre-registered; a run at another
    scale in the same folder starts a new record). The study file is copied into the folder as
    ``study.toml``."""
    path = root / REGISTRATION
    earlier = json.loads(path.read_text()) if path.exists() else {}
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    start = {"scale": scale, "sha256": sha256(study_file), **commit_of(study_file), "started": now}
    before = earlier.get("starts") or ([earlier] if earlier else [])
    if any(s.get("scale") != scale for s in before):  # another scale's run: a new registration
        before = []
    starts = [*before, start]
    record = {**starts[0], "starts": starts}
    root.mkdir(parents=True, exist_ok=True)
    if Path(study_file).resolve() != (root / STUDY_FILE).resolve():
        (root / STUDY_FILE).write_bytes(Path(study_file).read_bytes())
    _write_json(path, record)
    (root / ".gitignore").write_text("".join(f"/{name}/\n" for name in WORKING))
    return record


def read_registration(root: Path) -> dict[str, Any] | None:
    path = root / REGISTRATION
    return json.loads(path.read_text()) if path.exists() else None


def preregistered(record: dict[str, Any] | None, given_sha: str) -> tuple[bool, str]:
    """Whether the run counts as pre-registered, and why not: a full-scale run of a study file
    that was committed, unchanged, before the run began, and is the file given now."""
    if record is None:
        return False, "no registration recorded (the folder predates it)"
    starts = record.get("starts") or [record]
    scales = sorted({s["scale"] for s in starts} - {"full"})
    if scales:
        return False, f"scale {scales[0]}: only full-scale runs are registered results"
    if record["sha256"] != given_sha:
        return False, "the study file given differs from the one run"
    if any(s["sha256"] != record["sha256"] or s["commit"] != record["commit"] for s in starts):
        return False, "the study file changed between the run's starts"
    if not record.get("commit"):
        return False, "the study file was not committed when the run began"
    if not all(s.get("matches_commit") for s in starts):
        return False, "the study file as run differs from its last commit"
    committed = datetime.fromisoformat(record["committed"])
    if committed > datetime.fromisoformat(record["started"]):
        return False, "the study file's last commit is later than the run's start"
    return True, "committed before the run began, and run as committed"
