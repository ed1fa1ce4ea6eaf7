"""A study file (TOML): what a study trains and runs, checked in full before anything starts.

```toml
[study]                      # defaults for every run (any `corebench run` setting)
name = "magrpo-class"
benchmark = "humaneval"
split = "heldout"
n = 10
k = [1, 3, 5, 10]
temperature = 0.8

[scale.smoke]                # `--scale smoke`: overrides of [study], and of every [[train]]
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
```

Every mistake is one line naming the file, the entry and the key.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

from pydantic import Field

from corebench.harness.errors import CorebenchError, UnknownNameError
from corebench.harness.modelspec import parse_model_spec
from corebench.harness.options import Options, validate_options
from corebench.harness.records import RunConfig
from corebench.training.dispatch import roles
from corebench.training.settings import METHODS, TrainSettings

NAME = re.compile(r"^[A-Za-z0-9][\w.-]*$")
REFERENCE = re.compile(r"@([A-Za-z0-9][\w.-]*)(?::([A-Za-z_][\w-]*))?")


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


class Scale(RunSettings):
    """Overrides for ``--scale NAME``; ``train`` overrides every training step's settings, and
    ``run.NAME`` one run's (e.g. fewer MapCoder rounds on a CPU)."""

    repeats: int = Field(3, ge=0)
    train: dict[str, Any] = {}
    run: dict[str, dict[str, Any]] = {}


class TrainStep(Options):
    name: str
    method: str
    settings: dict[str, Any] = {}


class RunEntry(RunSettings):
    name: str
    system: str
    label: str = ""


class Gain(Options):
    pair: str
    roles: list[str]
    direct: str | None = None


class Study(Options):
    """A study resolved for one scale: every run's full configuration and training settings."""

    path: str
    scale: str
    header: StudyHeader
    train: list[TrainStep]
    runs: list[RunEntry]
    gains: list[Gain]

    def config(self, run: RunEntry, checkpoints: dict[str, dict[str, Path]]) -> RunConfig:
        """The run's configuration, its ``@STEP[:ROLE]`` references replaced by checkpoints."""

        def replace(match: re.Match[str]) -> str:
            step, role = match.group(1), match.group(2) or "model"
            return f"hf:{checkpoints[step][role]}"

        fields = run.model_dump(exclude={"name", "label"})
        fields["model"] = REFERENCE.sub(replace, self.base(run.model))
        return RunConfig(**fields)

    def base(self, text: str) -> str:
        """``{model}`` in a model spec is the study's model (at this scale)."""
        return text.replace("{model}", self.header.model)

    def train_settings(self, step: TrainStep, checkpoints: dict[str, dict[str, Path]]) -> dict:
        """A step's settings with ``{model}`` and earlier steps' ``@STEP:ROLE`` resolved."""

        def replace(match: re.Match[str]) -> str:
            return f"hf:{checkpoints[match.group(1)][match.group(2) or 'model']}"

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
        return REFERENCE.sub(
            lambda m: f"@{self.train_key(steps[m.group(1)])}:{m.group(2) or 'model'}",
            self.base(text),
        )


def step_roles(step: TrainStep) -> tuple[str, ...]:
    """The checkpoints a training step leaves, one per role."""
    given = {k: v for k, v in step.settings.items() if k == "sft_roles"}
    return roles(TrainSettings(method=step.method, **given))


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:10]


def _table(path: Path, where: str, model: type[Options], values: Any) -> Any:
    if not isinstance(values, dict):
        raise CorebenchError(f"{path}: {where} must be a table")
    return validate_options(f"key in {path} {where}", model, values)


def load_study(path: Path, scale: str = "full", systems: Any = None) -> Study:
    """Read and check a study file for ``scale`` (``full``: the file as written). ``systems`` (a
    registry) checks system names; training methods and references are always checked."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CorebenchError(f"cannot read study {path}: {exc}") from None
    unknown = set(data) - {"study", "scale", "train", "run", "gain"}
    if unknown:
        raise UnknownNameError(
            f"table in {path}:", sorted(unknown)[0], ["study", "scale", "train", "run", "gain"]
        )
    header_values = data.get("study")
    if header_values is None:
        raise CorebenchError(f"{path}: no [study] table (it needs at least name = ...)")
    scales = data.get("scale", {})
    overrides: dict[str, Any] = {}
    if scale != "full":
        if scale not in scales:
            raise UnknownNameError(f"scale of {path}", scale, ["full", *scales])
        overrides = _table(path, f"[scale.{scale}]", Scale, scales[scale]).model_dump(
            exclude_unset=True
        )
    train_overrides = overrides.pop("train", {})
    run_overrides = overrides.pop("run", {})
    header = _table(path, "[study]", StudyHeader, {**header_values, **overrides})
    defaults = header.model_dump(include=set(RunSettings.model_fields))

    steps = []
    for index, values in enumerate(data.get("train", []), 1):
        step = _table(path, f"[[train]] #{index}", TrainStep, values)
        if step.method not in METHODS:
            raise UnknownNameError(
                f"training method in {path} [[train]] {step.name!r}:", step.method, METHODS
            )
        steps.append(step.model_copy(update={"settings": {**step.settings, **train_overrides}}))
    runs = []
    for index, values in enumerate(data.get("run", []), 1):
        where = (
            f"[[run]] {values.get('name', f'#{index}')!r}"
            if isinstance(values, dict)
            else f"[[run]] #{index}"
        )
        # the entry's own values win over [study]; the scale's over both, except where the
        # entry sets n, k, limit or tasks itself (a study-wide size is the scale's business)
        scaled = {k: v for k, v in overrides.items() if k in RunSettings.model_fields}
        merged = {**defaults, **values, **{k: v for k, v in scaled.items() if k not in values}}
        if isinstance(values, dict):
            merged.update(run_overrides.get(values.get("name"), {}))
        runs.append(_table(path, where, RunEntry, merged))
    gains = [_table(path, f"[[gain]] #{i}", Gain, v) for i, v in enumerate(data.get("gain", []), 1)]
    unknown_runs = set(run_overrides) - {r.name for r in runs}
    if unknown_runs:
        where = f"run (in {path} [scale.{scale}.run])"
        raise UnknownNameError(where, sorted(unknown_runs)[0], [r.name for r in runs])
    study = Study(path=str(path), scale=scale, header=header, train=steps, runs=runs, gains=gains)
    _check_names(study, systems)
    return study


def _check_names(study: Study, systems: Any) -> None:
    path = study.path
    for kind, entries in (("[[train]]", study.train), ("[[run]]", study.runs)):
        names: set[str] = set()
        for entry in entries:
            if not NAME.match(entry.name):
                raise CorebenchError(
                    f"{path}: {kind} name {entry.name!r}: letters, digits, '.', '-', '_'"
                )
            if entry.name in names:
                raise CorebenchError(f"{path}: two {kind} entries are named {entry.name!r}")
            names.add(entry.name)
    if not study.runs:
        raise CorebenchError(f"{path}: no [[run]] entries")
    steps = {t.name: t for t in study.train}
    for run in study.runs:
        where = f"{path} [[run]] {run.name!r}"
        if systems is not None:
            system = systems.get(run.system).component  # unknown system: "did you mean"
            roles = set(parse_model_spec(REFERENCE.sub("hf:x", study.base(run.model))))
            extra = roles - set(system.roles) - {"*"}
            if extra:
                raise CorebenchError(
                    f"{where}: model names role(s) {', '.join(sorted(extra))} that {run.system} does not have ({', '.join(system.roles)})"
                )
        for match in REFERENCE.finditer(run.model):
            step = match.group(1)
            if step not in steps:
                raise UnknownNameError(f"training step (in {where} model)", step, steps)
            role = match.group(2) or "model"
            available = step_roles(steps[step])
            if role not in available:
                raise UnknownNameError(f"role of @{step} (in {where} model)", role, available)
    for index, step in enumerate(study.train):
        earlier = {t.name: t for t in study.train[:index]}
        for key, value in step.settings.items():
            for match in REFERENCE.finditer(value if isinstance(value, str) else ""):
                where = f"{path} [[train]] {step.name!r} {key}"
                if match.group(1) not in earlier:
                    raise UnknownNameError(
                        f"earlier training step (in {where})", match.group(1), earlier
                    )
                role = match.group(2) or "model"
                if role not in step_roles(earlier[match.group(1)]):
                    raise UnknownNameError(
                        f"role of @{match.group(1)} (in {where})",
                        role,
                        step_roles(earlier[match.group(1)]),
                    )
    runs = {r.name for r in study.runs}
    for gain in study.gains:
        for name in [gain.pair, *gain.roles, *([gain.direct] if gain.direct else [])]:
            if name not in runs:
                raise UnknownNameError(f"run (in {path} [[gain]] {gain.pair!r})", name, runs)
