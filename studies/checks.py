"""What a study is checked against before anything runs, beyond the shape of its file: the
registered systems, benchmarks and backends with their options, the splits, task ids and data
its runs use, its training steps' settings, and its design (compared rows that differ only where
the file allows it). Every mistake is one line of one error (``Problems``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from corebench.harness.errors import CorebenchError
from corebench.harness.modelspec import DEFAULT_ROLE, parse_model_spec
from corebench.harness.options import validate_options
from corebench.harness.registry import Plugins
from corebench.harness.runner import check_run, single_backend
from corebench.training.settings import TrainSettings

if TYPE_CHECKING:
    from .spec import RunEntry, Study, TrainStep

T = TypeVar("T")
SAMPLING = ("temperature", "top_p", "max_new_tokens")
# a training step's settings that are model specs (plan_source: unless "template")
MODEL_SETTINGS = ("model", "planner_model", "coder_model", "plan_source")


class Problems:
    """The mistakes in one study file, raised together as one error with a line each
    (``FILE ENTRY KEY: what``); the same mistake in several entries is one line naming them all."""

    def __init__(self, path: Path | str):
        self.path = path
        self._found: list[tuple[str, list[str]]] = []  # each message with the entries it is in

    def add(self, where: str, error: Exception | str, *, merge: bool = True) -> None:
        """Note a mistake; with ``merge``, a message noted before gains this entry instead."""
        message = str(error)
        same = next((wheres for m, wheres in self._found if merge and m == message), None)
        if same is None:
            self._found.append((message, [where]))
        else:
            same.append(where)

    def check(self, where: str, check: Callable[[], T]) -> T | None:
        """What ``check`` returns, or None when it raised a ``CorebenchError`` (noted)."""
        try:
            return check()
        except CorebenchError as exc:
            self.add(where, exc)
            return None

    def lines(self) -> list[str]:
        return [self._line(message, wheres) for message, wheres in self._found]

    def _line(self, message: str, wheres: list[str]) -> str:
        where = " ".join(filter(None, [str(self.path), wheres[0]]))
        also = f" (also {', '.join(wheres[1:])})" if len(wheres) > 1 else ""
        return f"{where}{also}: {message}"

    def raise_any(self) -> None:
        if self._found:
            raise CorebenchError("\n".join(self.lines()))


class Placeholders(dict):
    """Checkpoints before any exist, for checks: ``[STEP][ROLE]`` is ``@STEP:ROLE``."""

    def __init__(self, step: str | None = None):
        super().__init__()
        self.step = step

    def __missing__(self, key: str) -> Any:
        return Placeholders(key) if self.step is None else Path(f"@{self.step}:{key}")


def check_components(
    study: Study, plugins: Plugins, data_dir: Path | None, problems: Problems
) -> None:
    """Each training step's settings as ``corebench train`` reads them, and the benchmarks and
    models they name; each run as ``corebench run`` checks it (``runner.check_run``: benchmark,
    options, split, data, task ids, system, options, backends and their options), checkpoints
    stood in for by placeholders."""
    for step in study.train:
        check_step(study, step, plugins, problems)
    for run in study.runs:
        config = study.config(run, Placeholders())
        for field, error in check_run(config, plugins, data_dir):
            problems.add(f"[[run]] {run.name!r} {field}", error)


def check_step(study: Study, step: TrainStep, plugins: Plugins, problems: Problems) -> None:
    """A step's merged settings (its own, then the scale's ``train``), ``{model}`` and earlier
    steps' checkpoints stood in for: the keys and values, the model specs' backends and options
    (built, not loaded), the benchmark names and the training benchmark's options."""
    where = f"[[train]] {step.name!r} settings"
    given = {**study.train_settings(step, Placeholders()), "method": step.method}
    settings = problems.check(
        where, lambda: validate_options("training setting", TrainSettings, given)
    )
    if settings is None:
        return
    for key in MODEL_SETTINGS:
        spec = getattr(settings, key)
        if spec is not None and not (key == "plan_source" and spec == "template"):
            problems.check(f"{where}.{key}", lambda spec=spec: single_backend(spec, plugins))
    for key, names in (
        ("benchmark", [settings.benchmark]),
        ("eval_benchmarks", settings.eval_benchmarks),
    ):
        for name in names:
            problems.check(f"{where}.{key}", lambda name=name: plugins.benchmarks.get(name))
    if settings.benchmark in plugins.benchmarks:
        benchmark = plugins.benchmarks.get(settings.benchmark).component
        problems.check(
            f"{where}.benchmark_options", lambda: benchmark(None, **settings.benchmark_options)
        )


@dataclass(frozen=True)
class Pair:
    """Two rows the report sets against each other, the entry that asks for it, and the
    differences it allows."""

    row: str
    against: str
    where: str
    allowed: frozenset[str]
    fix: str  # where an allow_confounds would go


def compared_pairs(study: Study) -> list[Pair]:
    """``Study.comparisons()`` (the planned ones or every pair of rows), then each gain's pair
    against each of its roles and its direct."""
    everywhere = frozenset(study.header.allow_confounds)
    here = "in this entry or in [study]"
    if study.compares:
        pairs = [
            Pair(c.row, c.against, f"[[compare]] {c.row!r} against {c.against!r}",
                 everywhere | set(c.allow_confounds), here)
            for c in study.compares
        ]  # fmt: skip
    else:
        pairs = [
            Pair(a, b, f"[[run]] {a!r} against {b!r} (without [[compare]], every pair of rows)",
                 everywhere, "in [study] (or plan the comparisons with [[compare]])")
            for a, b in study.comparisons()
        ]  # fmt: skip
    for gain in study.gains:
        for other in [*gain.roles, *([gain.direct] if gain.direct else [])]:
            where = f"[[gain]] {gain.pair!r} against {other!r}"
            pairs.append(
                Pair(gain.pair, other, where, everywhere | set(gain.allow_confounds), here)
            )
    return pairs


def check_confounds(study: Study, plugins: Plugins, problems: Problems) -> None:
    """One line per comparison whose rows differ in backend family (per role) or in sampling
    (temperature, top_p, max_new_tokens) where its entry and ``[study]`` do not allow it."""
    runs = {run.name: run for run in study.runs}
    families = {name: backend_families(study, run, plugins) for name, run in runs.items()}
    reported: set[frozenset[str]] = set()
    for pair in compared_pairs(study):
        rows = frozenset((pair.row, pair.against))
        if pair.row not in runs or pair.against not in runs or rows in reported:
            continue  # a row that did not load, or a pair already named
        differences = {
            **_backend_difference(families[pair.row], families[pair.against]),
            **_sampling_difference(runs[pair.row], runs[pair.against]),
        }
        refused = {kind: text for kind, text in differences.items() if kind not in pair.allowed}
        if refused:
            reported.add(rows)
            what = " and ".join(f"{kind} ({text})" for kind, text in refused.items())
            allow = ", ".join(f'"{kind}"' for kind in refused)
            problems.add(
                pair.where,
                f"the rows differ in {what}; if that is meant, "
                f"allow_confounds = [{allow}] {pair.fix}",
                merge=False,  # one line per comparison
            )


def backend_families(study: Study, run: RunEntry, plugins: Plugins) -> dict[str, str] | None:
    """Each of the run's roles -> the family of the backend it runs on (``embedded`` and
    ``hf:`` are one family); None where that is unknown (a mistake reported elsewhere)."""
    try:
        roles = parse_model_spec(study.config(run, Placeholders()).model)
        system = plugins.systems.get(run.system).component
        family = {
            r: plugins.backends.get(ref.backend).component.family() for r, ref in roles.items()
        }
    except CorebenchError:
        return None
    if not all(role in family or DEFAULT_ROLE in family for role in system.roles):
        return None
    return {role: family.get(role) or family[DEFAULT_ROLE] for role in system.roles}


def _backend_difference(a: dict[str, str] | None, b: dict[str, str] | None) -> dict[str, str]:
    if a is None or b is None:
        return {}
    if set(a.values()) == set(b.values()) and all(a[r] == b[r] for r in a.keys() & b.keys()):
        return {}
    return {"backend": f"{_families_text(a)} vs {_families_text(b)}"}


def _families_text(families: dict[str, str]) -> str:
    if len(set(families.values())) == 1:
        return next(iter(families.values()))
    return ",".join(f"{role}={family}" for role, family in families.items())


def _sampling_difference(a: RunEntry, b: RunEntry) -> dict[str, str]:
    differ = [
        f"{key} {getattr(a, key)} vs {getattr(b, key)}"
        for key in SAMPLING
        if getattr(a, key) != getattr(b, key)
    ]
    return {"sampling": ", ".join(differ)} if differ else {}
