"""A study file (TOML): what a study trains and runs, checked in full before anything starts.

```toml
[study]                      # defaults for every run (any `corebench run` setting)
name = "magrpo-class"
benchmark = "humaneval"
split = "heldout"
model = "vllm:Qwen/Qwen2.5-Coder-3B-Instruct"
n = 10
k = [1, 3, 5, 10]
temperature = 0.8
allow_confounds = []         # differences every comparison may have: "backend", "sampling"

[scale.smoke]                # `--scale smoke`: overrides of [study], and of every [[train]]
model = "embedded"
n = 2
train = { steps = 2 }

[[train]]                    # a checkpoint later entries use as @NAME (one role) or @NAME:ROLE
name = "magrpo"
method = "magrpo"
settings = { benchmark = "humaneval", eval_split = "heldout" }

[[run]]                      # one row of the report
name = "magrpo-pair"
label = "MAGRPO pair"
system = "helper-main"
model = "helper=@magrpo:helper,main=@magrpo:main"

[[gain]]                     # Collaboration Gain: a multi-role row against its roles and direct
pair = "magrpo-pair"
roles = ["helper-alone", "main-alone"]
direct = "single"
allow_confounds = []         # differences these rows may have, besides those of [study]

[[compare]]                  # a planned comparison (without any: every pair of rows)
row = "magrpo-pair"
against = "single"
allow_confounds = []         # differences these two rows may have, besides those of [study]
```

Models name the study's model (at the scale) as ``{model}`` and a training step's checkpoint as
``@STEP`` / ``@STEP:ROLE``. A run serves a checkpoint on the backend family of the study's model,
so that trained and base rows decode alike: ``embedded`` or ``hf:`` -> ``hf:PATH``, ``vllm:ID?opts``
-> ``vllm:PATH?opts``; ``BACKEND:@STEP`` names another (an ``openai:`` study model cannot serve a
local checkpoint, so its runs must). Training steps always get ``hf:PATH`` (trainers need local
weights), and generate at most the study's ``max_new_tokens`` (at the scale) unless a step or the
scale's ``train`` sets ``max_completion_length``.

Compared rows (``[[compare]]`` entries, else every pair of rows, and each ``[[gain]]``'s pair
against its roles and its ``direct``) must not differ in backend family (per role) or sampling
(temperature, top_p, max_new_tokens) unless an ``allow_confounds`` of the entry or ``[study]``
says so: otherwise every difference would measure two things at once.

Everything is checked before anything starts (``load_study``), and every mistake reported at
once in one error, a line each: ``FILE ENTRY KEY: what`` with "did you mean" where there is a
close name, and ``(also ENTRY KEY, ...)`` where one mistake reaches several entries. Checked: the
tables and their keys and values, names and references, each training step's merged settings
(as ``corebench train`` reads them), and, as ``corebench run`` checks them, each run's system and
its options, benchmark, options, split and task ids (its data loaded), and every role's backend
and backend options (built, never loaded); then the comparisons above.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any, Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

from pydantic import Field, ValidationError, model_validator

from corebench.harness import config as C
from corebench.harness.errors import CorebenchError, UnknownNameError
from corebench.harness.modelspec import DEFAULT_ROLE, ModelRef, parse_model_ref, parse_model_spec
from corebench.harness.options import Options, validate_options
from corebench.harness.records import RunConfig
from corebench.harness.registry import Plugins, Registry, default_plugins
from corebench.training.dispatch import roles
from corebench.training.settings import METHODS, TrainSettings

from .checks import Problems, check_components, check_confounds

NAME = re.compile(r"^[A-Za-z0-9][\w.-]*$")
# a checkpoint in a model spec, where a spec or a role's part begins: [BACKEND:]@STEP[:ROLE][?OPTS]
REFERENCE = re.compile(
    r"(?<![^\s=,])(?:(?P<backend>[A-Za-z][\w.-]*):)?@(?P<step>[A-Za-z0-9][\w.-]*)"
    r"(?::(?P<role>[A-Za-z_][\w-]*))?(?P<options>\?[^,\s]*)?"
)
TABLES = ("study", "scale", "train", "run", "gain", "compare")
Confound = Literal["backend", "sampling"]
Metric = Literal["pass@1", "test_pass_rate"]
ALLOW_CONFOUNDS = (
    "differences allowed: backend (family, per role), sampling (temperature, top_p, max_new_tokens)"
)


class RunSettings(Options):
    """What ``[study]`` sets for every run and a ``[[run]]`` may override (``corebench run``'s
    settings)."""

    benchmark: str = "mbpp"
    split: str = "test"
    model: str = "embedded"
    n: int = Field(1, ge=1)
    k: list[int] = [1]
    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(0.95, gt=0, le=1)
    seed: int = 0
    max_new_tokens: int = Field(512, ge=1)
    limit: int | None = Field(None, ge=1)
    tasks: list[str] | None = None
    system_options: dict[str, Any] = {}
    benchmark_options: dict[str, Any] = {}


class StudyHeader(RunSettings):
    name: str
    title: str = ""
    description: str = ""
    repeats: int = Field(3, ge=0, description="measurement phase: timed calls per test")
    allow_confounds: list[Confound] = Field([], description=f"every comparison's {ALLOW_CONFOUNDS}")
    primary: Metric = Field(
        "pass@1",
        description="the metric that decides each comparison (one Holm family): pass@1 (the "
        "mean over a task's samples), test_pass_rate (the share of its hidden tests passed)",
    )
    secondary: list[Metric] = Field(
        [], description="metrics also reported, as secondary (a Holm family of their own)"
    )
    seeds: list[int] = Field(
        [],
        description="train every step and run every trained or sampled row once per seed (the "
        "training and sampling seed); comparisons pool the seeds (tasks and runs both random)",
    )

    @model_validator(mode="after")
    def _metrics_and_seeds(self) -> StudyHeader:
        if self.primary in self.secondary:
            raise ValueError(f"{self.primary} is the primary metric; leave it out of secondary")
        if len(set(self.secondary)) != len(self.secondary):
            raise ValueError("secondary lists a metric twice")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds lists a seed twice")
        return self

    @property
    def metrics(self) -> list[str]:
        """The primary metric, then the secondary ones."""
        return [self.primary, *self.secondary]


class Scale(RunSettings):
    """Overrides for ``--scale NAME``; ``train`` overrides every training step's settings, and
    ``run.NAME`` one run's (e.g. fewer MapCoder rounds on a CPU)."""

    repeats: int = Field(3, ge=0)
    seeds: list[int] = []
    train: dict[str, Any] = {}
    run: dict[str, dict[str, Any]] = {}


class TrainStep(Options):
    name: str
    method: str
    settings: dict[str, Any] = {}
    seeded: bool = Field(
        True,
        description="trained once per study seed; false: once, shared by every seed (a cold "
        "start the seeded steps begin from)",
    )


class RunEntry(RunSettings):
    name: str
    system: str
    label: str = ""


class Gain(Options):
    pair: str
    roles: list[str]
    direct: str | None = None
    allow_confounds: list[Confound] = Field([], description=ALLOW_CONFOUNDS)


class Compare(Options):
    """A planned comparison: ``row`` minus ``against`` on their shared tasks."""

    row: str
    against: str
    allow_confounds: list[Confound] = Field([], description=ALLOW_CONFOUNDS)


def referenced_steps(run: RunEntry) -> list[str]:
    """The training steps whose checkpoints a row's model names (``@STEP``)."""
    return [m["step"] for m in REFERENCE.finditer(run.model)]


class Study(Options):
    """A study resolved for one scale: every run's full configuration and training settings."""

    path: str
    scale: str
    header: StudyHeader
    train: list[TrainStep]
    runs: list[RunEntry]  # checkpoint references with their backend: BACKEND:@STEP:ROLE[?OPTS]
    gains: list[Gain]
    compares: list[Compare] = []

    def seeded_step(self, name: str) -> bool:
        """Whether a training step is trained once per seed: the study has seeds, and the step
        is seeded itself or starts from a seeded step."""
        if not self.header.seeds:
            return False
        step = next(t for t in self.train if t.name == name)
        if step.seeded:
            return True
        return any(self.seeded_step(u) for u in self.steps_used(name))

    def steps_used(self, name: str) -> list[str]:
        """The steps whose checkpoints a training step starts from (``@STEP`` in its settings)."""
        step = next(t for t in self.train if t.name == name)
        return [m["step"] for v in step.settings.values() if isinstance(v, str)
                for m in REFERENCE.finditer(self.base(v))]  # fmt: skip

    def steps_behind(self, run: RunEntry) -> set[str]:
        """Every step a row's checkpoints come from, directly or through the steps they start
        from."""
        found, todo = set(), referenced_steps(run)
        while todo:
            name = todo.pop()
            if name not in found:
                found.add(name)
                todo += self.steps_used(name)
        return found

    def seeded(self, run: RunEntry) -> bool:
        """Whether a row is run once per seed: the study has seeds and the row uses a seeded
        step's checkpoint or samples (temperature > 0); a greedy row of an untrained model, or
        of steps trained once, is run once."""
        if not self.header.seeds:
            return False
        return run.temperature > 0 or any(self.seeded_step(s) for s in referenced_steps(run))

    def for_seed(self, seed: int) -> Study:
        """The study as run for one seed: every seeded training step with ``seed = SEED``, every
        seeded row with ``seed = SEED`` (its checkpoints those of the same seed); other steps and
        rows as they are."""
        steps = [
            t.model_copy(update={"settings": {**t.settings, "seed": seed}})
            if self.seeded_step(t.name)
            else t
            for t in self.train
        ]
        runs = [r.model_copy(update={"seed": seed}) if self.seeded(r) else r for r in self.runs]
        return self.model_copy(update={"train": steps, "runs": runs})

    def seeds_of(self, run: RunEntry) -> list[int | None]:
        """The seeds a row is run with (``[None]``: once)."""
        return list(self.header.seeds) if self.seeded(run) else [None]

    def comparisons(self) -> list[tuple[str, str]]:
        """The (row, against) pairs the report tests, one family for the multiple-comparison
        correction: the planned ``[[compare]]`` entries, or without any every pair of rows in
        file order."""
        if self.compares:
            return [(c.row, c.against) for c in self.compares]
        names = [r.name for r in self.runs]
        return [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]

    def config(self, run: RunEntry, checkpoints: dict[str, dict[str, Path]]) -> RunConfig:
        """The run's configuration, its checkpoint references replaced by the checkpoints, on
        the backend the study chose for them (see ``serve_checkpoints``)."""

        def replace(match: re.Match[str]) -> str:
            path = checkpoints[match["step"]][match["role"] or "model"]
            return f"{match['backend']}:{path}{match['options'] or ''}"

        fields = run.model_dump(exclude={"name", "label"})
        fields["model"] = REFERENCE.sub(replace, self.base(run.model))
        return RunConfig(**fields)

    def base(self, text: str) -> str:
        """``{model}`` in a model spec is the study's model (at this scale)."""
        return text.replace("{model}", self.header.model)

    def train_settings(self, step: TrainStep, checkpoints: dict[str, dict[str, Path]]) -> dict:
        """A step's settings with ``{model}`` and earlier steps' ``@STEP:ROLE`` resolved (as
        ``hf:PATH``, unless a backend is written: trainers load local weights)."""

        def replace(match: re.Match[str]) -> str:
            path = checkpoints[match["step"]][match["role"] or "model"]
            return f"{match['backend'] or 'hf'}:{path}{match['options'] or ''}"

        return {
            key: REFERENCE.sub(replace, self.base(v)) if isinstance(v, str) else v
            for key, v in step.settings.items()
        }

    def run_key(self, run: RunEntry) -> str:
        """A short hash of what decides the run's samples (references by their step's key): a
        changed entry gets a new folder instead of being mixed with the old samples."""
        fields = {**run.model_dump(exclude={"name", "label", "k"}), "model": self._keyed(run.model)}
        return _digest(fields)

    def train_key(self, step: TrainStep) -> str:
        settings = {
            k: self._keyed(v) if isinstance(v, str) else v for k, v in step.settings.items()
        }
        return _digest({"method": step.method, **settings})

    def _keyed(self, text: str) -> str:
        """References replaced by the referenced step's key (its checkpoints' identity)."""
        steps = {t.name: t for t in self.train}

        def replace(match: re.Match[str]) -> str:
            backend = f"{match['backend']}:" if match["backend"] else ""
            key = self.train_key(steps[match["step"]])
            return f"{backend}@{key}:{match['role'] or 'model'}{match['options'] or ''}"

        return REFERENCE.sub(replace, self.base(text))


def step_roles(step: TrainStep) -> tuple[str, ...]:
    """The checkpoints a training step leaves, one per role."""
    given = {k: v for k, v in step.settings.items() if k == "sft_roles"}
    return roles(
        validate_options("training setting", TrainSettings, {"method": step.method, **given})
    )


def serve_checkpoints(spec: str, study_model: str, backends: Registry) -> str:
    """``spec`` with each ``@STEP[:ROLE]`` written as ``BACKEND:@STEP:ROLE[?OPTS]``: on the
    backend family of the study's model for that role, with its options (``embedded``/``hf:``
    -> ``hf:``, ``vllm:ID?opts`` -> ``vllm:`` with ``opts``), so that trained rows decode as the
    base rows do; a backend written before ``@`` is kept. An error where the study's model cannot
    serve a local checkpoint (``openai:``) and the spec names no backend."""
    models = parse_model_spec(study_model)

    def explicit(match: re.Match[str]) -> str:
        step, role = match["step"], match["role"] or "model"
        written = parse_model_ref(
            f"{match['backend'] or 'x'}:@{step}:{role}{match['options'] or ''}"
        )
        if match["backend"]:
            return str(written)
        base = models.get(_role_at(spec, match.start())) or models.get(DEFAULT_ROLE)
        served = base and backends.get(base.backend).component.checkpoint_ref(base, written.target)
        if served is None:
            raise CorebenchError(
                f"the study's model {study_model!r} cannot serve the checkpoint @{step} for this "
                f"role; write the backend that serves it, e.g. hf:@{step} (compared with rows on "
                "the study's model, that is a confound to allow)"
            )
        options = {**dict(served.options), **dict(written.options)}
        return str(ModelRef(served.backend, served.target, tuple(options.items())))

    return REFERENCE.sub(explicit, spec)


def _role_at(spec: str, start: int) -> str:
    """The role whose part of a model spec begins at ``start`` (``*`` for a spec without)."""
    part = spec[:start].rsplit(",", 1)[-1]
    return part.split("=", 1)[0].strip() if "=" in part else DEFAULT_ROLE


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:10]


def _table(model: type[Options], values: Any) -> Any:
    if not isinstance(values, dict):
        raise CorebenchError("must be a table")
    return validate_options("key", model, values)


def _salvaged_header(values: Any) -> StudyHeader:
    """A ``[study]`` from the keys that validate alone (defaults for the rest), so that a
    mistake in ``[study]`` does not hide the mistakes in the entries checked against it."""
    keys = values if isinstance(values, dict) else {}
    kept = {"name": "study"}
    for key, value in keys.items():
        try:
            StudyHeader.model_validate({**kept, key: value})
        except ValidationError:
            continue
        kept[key] = value
    return StudyHeader.model_validate(kept)


def _where(kind: str, values: Any, index: int) -> str:
    name = values.get("name") if isinstance(values, dict) else None
    return f"{kind} {name!r}" if isinstance(name, str) else f"{kind} #{index}"


def load_study(
    path: Path,
    scale: str = "full",
    plugins: Plugins | None = None,
    data_dir: Path | None = None,
) -> Study:
    """Read a study file for ``scale`` (``full``: the file as written) and check all of it
    against ``plugins`` (default: the installed ones) and the data in ``data_dir`` (default:
    $COREBENCH_DATA_DIR) before anything runs: one ``CorebenchError`` with a line per mistake."""
    plugins = plugins or default_plugins()
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CorebenchError(f"cannot read study {path}: {exc}") from None
    problems = Problems(path)
    study = _read(path, scale, data, plugins, problems)
    check_components(study, plugins, C.data_dir_setting(data_dir), problems)
    check_confounds(study, plugins, problems)
    problems.raise_any()
    return study


def _read(
    path: Path, scale: str, data: dict[str, Any], plugins: Plugins, problems: Problems
) -> Study:
    """The study's entries that are well-formed (the others noted)."""
    for table in sorted(set(data) - set(TABLES)):
        problems.add("", UnknownNameError("table", table, TABLES))
    if "study" not in data:
        raise CorebenchError(f"{path}: no [study] table (it needs at least name = ...)")
    overrides = _scale_overrides(path, scale, data.get("scale", {}), problems)
    train_overrides, run_overrides = overrides.pop("train", {}), overrides.pop("run", {})
    values = data["study"]
    merged = {**values, **overrides} if isinstance(values, dict) else values
    header = problems.check("[study]", lambda: _table(StudyHeader, merged))
    if header is None:  # noted; check the rest against [study]'s well-formed keys
        header = _salvaged_header(merged)
    limit = header.max_new_tokens
    entries = {table: _array(data, table, problems) for table in TABLES[2:]}
    steps = _steps(entries["train"], train_overrides, limit, problems)
    runs = _runs(entries["run"], header, overrides, run_overrides, problems)
    gains = _entries(entries["gain"], "gain", Gain, problems)
    compares = _entries(entries["compare"], "compare", Compare, problems)
    names = {table: _names(entries[table]) for table in ("train", "run")}
    _check_names(names, scale, steps, runs, gains, compares, run_overrides, problems)
    runs = [
        run.model_copy(update={"model": model})
        for run in runs
        if (model := _served(run, header.model, plugins, problems)) is not None
    ]
    return Study(
        path=str(path), scale=scale, header=header, train=steps, runs=runs, gains=gains,
        compares=compares,
    )  # fmt: skip


def _scale_overrides(path: Path, scale: str, scales: Any, problems: Problems) -> dict[str, Any]:
    """The scale's overrides (none for ``full``); an unknown scale stops the check at once."""
    if scale == "full":
        return {}
    if not isinstance(scales, dict) or scale not in scales:
        known = ["full", *scales] if isinstance(scales, dict) else ["full"]
        raise UnknownNameError(f"scale of {path}", scale, known)
    values = problems.check(f"[scale.{scale}]", lambda: _table(Scale, scales[scale]))
    return values.model_dump(exclude_unset=True) if values else {}


def _steps(
    entries: list[Any], overrides: dict[str, Any], limit: int, problems: Problems
) -> list[TrainStep]:
    """The well-formed ``[[train]]`` steps, each with the scale's ``train`` settings and, unless
    set, ``max_completion_length`` = ``limit`` (the evaluation's ``max_new_tokens``)."""
    steps = []
    for index, values in enumerate(entries, 1):
        where = _where("[[train]]", values, index)
        step = problems.check(where, lambda values=values: _table(TrainStep, values))
        if step is None:
            continue
        if step.method not in METHODS:
            problems.add(
                f"{where} method", UnknownNameError("training method", step.method, METHODS)
            )
            continue
        settings = {"max_completion_length": limit, **step.settings, **overrides}
        steps.append(step.model_copy(update={"settings": settings}))
    return steps


def _runs(
    entries: list[Any],
    header: StudyHeader,
    overrides: dict[str, Any],
    run_overrides: dict[str, dict[str, Any]],
    problems: Problems,
) -> list[RunEntry]:
    """The well-formed ``[[run]]`` entries: ``[study]``, then the entry's own values, then the
    scale's (except where the entry sets a key itself) and the scale's ``run.NAME``."""
    defaults = header.model_dump(include=set(RunSettings.model_fields))
    scaled = {k: v for k, v in overrides.items() if k in RunSettings.model_fields}
    runs = []
    for index, values in enumerate(entries, 1):
        where = _where("[[run]]", values, index)
        if not isinstance(values, dict):
            problems.add(where, "must be a table")
            continue
        merged = {**defaults, **values, **{k: v for k, v in scaled.items() if k not in values}}
        merged.update(run_overrides.get(values.get("name"), {}))
        run = problems.check(where, lambda merged=merged: _table(RunEntry, merged))
        if run is not None:
            runs.append(run)
    return runs


def _array(data: dict[str, Any], table: str, problems: Problems) -> list[Any]:
    """A ``[[TABLE]]`` array (``[TABLE]``, a single table, is a mistake)."""
    entries = data.get(table, [])
    if isinstance(entries, list):
        return entries
    problems.add(f"[{table}]", f"write [[{table}]] (an array of tables), one per entry")
    return []


def _entries(entries: list[Any], table: str, model: type[Options], problems: Problems) -> list:
    """The well-formed entries of a ``[[TABLE]]``."""
    checked = (
        problems.check(f"[[{table}]] #{index}", lambda values=values: _table(model, values))
        for index, values in enumerate(entries, 1)
    )
    return [entry for entry in checked if entry is not None]


def _served(run: RunEntry, study_model: str, plugins: Plugins, problems: Problems) -> str | None:
    """The run's model with its checkpoints' backends written out (``serve_checkpoints``)."""
    return problems.check(
        f"[[run]] {run.name!r} model",
        lambda: serve_checkpoints(run.model, study_model, plugins.backends),
    )


def _check_names(
    names: dict[str, list[str]],
    scale: str,
    steps: list[TrainStep],
    runs: list[RunEntry],
    gains: list[Gain],
    compares: list[Compare],
    run_overrides: dict[str, Any],
    problems: Problems,
) -> None:
    """Entry names, and every reference to a step, a step's role or a run. ``names`` are those
    of every entry, well-formed or not, so that one mistake is not reported twice."""
    _check_unique(names, problems)
    if not names["run"]:
        problems.add("", "no [[run]] entries")
    for run in runs:
        _check_references(run.model, f"[[run]] {run.name!r} model", names["train"], steps, problems)
    for step in steps:
        earlier = names["train"][: names["train"].index(step.name)]
        for key, value in step.settings.items():
            if isinstance(value, str):
                where = f"[[train]] {step.name!r} settings.{key}"
                _check_references(value, where, earlier, steps, problems)
    for gain in gains:
        where = f"[[gain]] {gain.pair!r}"
        for key, values in (
            ("pair", [gain.pair]),
            ("roles", gain.roles),
            ("direct", [gain.direct]),
        ):
            _check_runs(values, f"{where} {key}", names["run"], problems)
    for compare in compares:
        where = f"[[compare]] {compare.row!r}"
        _check_runs([compare.row, compare.against], where, names["run"], problems)
        if compare.row == compare.against:
            problems.add(where, "compares a row with itself")
    _check_runs(sorted(run_overrides), f"[scale.{scale}] run", names["run"], problems)


def _names(entries: list[Any]) -> list[str]:
    """The names of a table's entries, well-formed or not (a missing one: the entry's mistake)."""
    names = [values.get("name") if isinstance(values, dict) else None for values in entries]
    return [name for name in names if isinstance(name, str)]


def _check_unique(names: dict[str, list[str]], problems: Problems) -> None:
    for kind, known in names.items():
        for index, name in enumerate(known):
            where = f"[[{kind}]] {name!r} name"
            if not NAME.match(name):
                problems.add(where, "letters, digits, '.', '-', '_'")
            elif name in known[:index]:
                problems.add(where, f"two [[{kind}]] entries have this name")


def _check_references(
    spec: str, where: str, known: list[str], steps: list[TrainStep], problems: Problems
) -> None:
    """Each ``@STEP[:ROLE]`` in ``spec`` names a step in ``known`` and a role it leaves."""
    loaded = {s.name: s for s in steps}
    for match in REFERENCE.finditer(spec):
        step, role = match["step"], match["role"] or "model"
        if step not in known:
            problems.add(where, UnknownNameError("training step", step, known))
        elif step in loaded:
            available = _roles_or_none(loaded[step])
            if available is not None and role not in available:
                problems.add(where, UnknownNameError(f"role of @{step}", role, available))


def _roles_or_none(step: TrainStep) -> tuple[str, ...] | None:
    """``step_roles``, or None where the step's settings are mistaken (reported with them)."""
    try:
        return step_roles(step)
    except CorebenchError:
        return None


def _check_runs(names: list[str | None], where: str, known: list[str], problems: Problems) -> None:
    for name in names:
        if name is not None and name not in known:
            problems.add(where, UnknownNameError("run", name, known))
