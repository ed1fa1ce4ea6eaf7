"""The runner: tasks x samples through system -> backend -> sandbox -> store.

Up to ``concurrency`` samples are in flight at once. Each is plain sequential code (a system's
``solve``), but because many await the model at the same moment, local backends receive their
requests together and batch them. Execution happens in sandboxed child processes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .backend import Backend
from .benchmark import Benchmark
from .config import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_CALLS_PER_SAMPLE,
    DEFAULT_MAX_TOKENS_PER_SAMPLE,
    DEFAULT_REPEATS,
)
from .context import BudgetExceeded, Limits, Sampling, SolveContext
from .errors import CorebenchError, UnknownNameError
from .metadata import provenance_changes
from .modelspec import DEFAULT_ROLE, ModelRef, format_model_spec, parse_model_spec
from .recording import Recorder, refuse_changed
from .records import ExecutionResult, RunConfig, Solution, Task
from .registry import Plugins, default_plugins
from .sandbox import SandboxExecutor, isolation_mode
from .system import System

ProgressFn = Callable[[Solution, ExecutionResult], None]


@dataclass
class RunOutcome:
    run_dir: Path
    total: int
    already_done: int
    completed: int
    wall_s: float


def select_tasks(benchmark: Benchmark, config: RunConfig) -> list[Task]:
    return pick_tasks(benchmark.name, benchmark.tasks(config.split), config)


def pick_tasks(benchmark: str, tasks: list[Task], config: RunConfig) -> list[Task]:
    """The tasks ``config`` names (an unknown id: one error with a suggestion), then its limit."""
    if config.tasks:
        by_id = {t.task_id: t for t in tasks}
        missing = [t for t in config.tasks if t not in by_id]
        if missing:
            raise UnknownNameError(f"{benchmark} task", missing[0], by_id)
        tasks = [by_id[t] for t in config.tasks]
    if config.limit is not None:
        tasks = tasks[: config.limit]
    return tasks


def resolve_models(spec: str, system: type[System] | None, plugins: Plugins) -> dict[str, ModelRef]:
    """Check a model spec against the system's roles (unless None) and the registered backends."""
    roles = parse_model_spec(spec)
    if system is not None:
        check_roles(roles, system)
    for ref in roles.values():
        plugins.backends.get(ref.backend)  # unknown backend -> "did you mean"
    return roles


def check_roles(roles: dict[str, ModelRef], system: type[System]) -> None:
    """Every role the spec names is the system's, and every role of the system has a model."""
    unknown = set(roles) - set(system.roles) - {DEFAULT_ROLE}
    if unknown:
        raise CorebenchError(
            f"system {system.name!r} has roles {', '.join(system.roles)}; the model spec names {', '.join(sorted(unknown))}"
        )
    if DEFAULT_ROLE not in roles and set(system.roles) - set(roles):
        missing = ", ".join(sorted(set(system.roles) - set(roles)))
        raise CorebenchError(
            f"no model for role(s) {missing}: give them in --model or add '*=...' as a default"
        )


def build_backends(
    roles: dict[str, ModelRef], plugins: Plugins, **options: object
) -> dict[str, Backend]:
    """One backend instance per distinct model; roles sharing a model share its batcher."""
    instances: dict[ModelRef, Backend] = {}
    for ref in roles.values():
        if ref not in instances:
            instances[ref] = plugins.backends.get(ref.backend).component(
                ref.target, **ref.values(), **options
            )
    return {role: instances[ref] for role, ref in roles.items()}


def single_backend(spec: str, plugins: Plugins | None = None, **options: object) -> Backend:
    """The backend for a one-model spec (``embedded``, ``hf:PATH``, ...), not loaded yet; a
    per-role spec is an error. For tools that serve or train one model."""
    roles = parse_model_spec(spec)
    if set(roles) != {DEFAULT_ROLE}:
        raise CorebenchError(f"one model expected, not per-role models: {spec!r}")
    return build_backends(roles, plugins or default_plugins(), **options)[DEFAULT_ROLE]


def check_run(
    config: RunConfig, plugins: Plugins, data_dir: Path | None = None
) -> list[tuple[str, CorebenchError]]:
    """Every mistake in a run's configuration, each with the field it is in, found as ``Runner``
    finds them but without stopping at the first (checks that depend on a mistaken part are
    skipped) and without loading a model: the benchmark's name and options, its split, its data
    (its tasks are loaded) and the task ids, the system's name and options, and the model spec
    (roles, backends and their options: each backend is built, never loaded)."""
    problems: list[tuple[str, CorebenchError]] = []

    def attempt(field: str, check: Callable[[], Any]) -> Any:
        """What ``check`` returns, or None when it raised (the mistake noted)."""
        try:
            return check()
        except CorebenchError as exc:
            problems.append((field, exc))
            return None

    bench = attempt("benchmark", lambda: plugins.benchmarks.get(config.benchmark).component)
    benchmark = bench and attempt(
        "benchmark_options", lambda: bench(data_dir, **config.benchmark_options)
    )
    if benchmark is not None and attempt(
        "split", lambda: benchmark.check_split(config.split) or True
    ):
        tasks = attempt("benchmark", lambda: benchmark.tasks(config.split))  # its data
        if tasks is not None:
            attempt("tasks", lambda: pick_tasks(benchmark.name, tasks, config))
    system = attempt("system", lambda: plugins.systems.get(config.system).component)
    if system is not None:
        attempt("system_options", lambda: system(**config.system_options))
    attempt("model", lambda: build_backends(resolve_models(config.model, system, plugins), plugins))
    return problems


def distinct(backends: dict[str, Backend]) -> list[Backend]:
    """Each backend once, though several roles may share it."""
    return list({id(b): b for b in backends.values()}.values())


class Runner:
    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        *,
        data_dir: Path | None = None,
        plugins: Plugins | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        limits: Limits | None = None,
        on_sample: ProgressFn | None = None,
        on_start: Callable[[int, int], None] | None = None,
        repeats: int = DEFAULT_REPEATS,
        all_tests: bool = False,
    ):
        self.config = config
        self.run_dir = Path(run_dir)
        self.plugins = plugins or default_plugins()
        self.concurrency = max(1, concurrency)
        self.limits = limits or Limits(DEFAULT_MAX_CALLS_PER_SAMPLE, DEFAULT_MAX_TOKENS_PER_SAMPLE)
        self.on_sample = on_sample
        self.on_start = on_start  # called with (samples to do, samples already done)
        self.all_tests = all_tests  # every test judged, past the first failure
        self.repeats = repeats  # measurement phase: timed calls per test (0: no measurement phase)
        # Resolve every name first: a typo fails before any data or model is loaded.
        self.benchmark_cls = self.plugins.benchmarks.get(config.benchmark).component
        self.system_cls = self.plugins.systems.get(config.system).component
        self.roles = resolve_models(config.model, self.system_cls, self.plugins)
        self.config = config.model_copy(update={"model": format_model_spec(self.roles)})
        self.isolation = isolation_mode()  # no bubblewrap: refused here, before any model loads
        self.benchmark: Benchmark = self.benchmark_cls(data_dir, **config.benchmark_options)
        self.system: System = self.system_cls(**config.system_options)

    def run(self) -> RunOutcome:
        return asyncio.run(self.run_async())

    async def run_async(self) -> RunOutcome:
        started = time.perf_counter()
        sampling = Sampling(
            self.config.temperature,
            self.config.top_p,
            self.config.max_new_tokens,
            self.config.seed,
        )
        metadata = {"sampling": {**dataclasses.asdict(sampling), "n": self.config.n}}
        with Recorder(
            self.run_dir,
            self.benchmark,
            self.config,
            metadata,
            isolation=self.isolation,
            on_sample=self.on_sample,
            all_tests=self.all_tests,
        ) as recorder:
            store = recorder.store
            tasks = {t.task_id: t for t in select_tasks(self.benchmark, self.config)}
            keys = [(t, i) for t in tasks for i in range(self.config.n)]
            todo = recorder.pending(keys)
            already = len(keys) - len(todo)
            if self.on_start:
                self.on_start(len(todo), already)
            if not todo:
                await recorder.measure(self.repeats)
                return RunOutcome(self.run_dir, already, already, 0, time.perf_counter() - started)
            needs_model = any(store.solution(t, i) is None for t, i in todo)
            backends = build_backends(self.roles, self.plugins) if needs_model else {}
            identities = {role: b.identity() for role, b in backends.items()}
            refuse_changed(store, provenance_changes(store.metadata(), models=identities))
            for backend in distinct(backends):
                await asyncio.to_thread(backend.load)
            store.update_metadata(
                models={role: b.identity() for role, b in backends.items()}
                or store.metadata().get("models")
            )
            slots = asyncio.Semaphore(self.concurrency)

            async def one(task: Task, index: int) -> None:
                async with slots:
                    solution = store.solution(task.task_id, index)
                    if solution is None:
                        solution = await self.solve(
                            task, index, backends, sampling, recorder.executor
                        )
                    await recorder.judge(solution)

            jobs = [asyncio.ensure_future(one(tasks[t], i)) for t, i in todo]
            try:
                await asyncio.gather(*jobs)
            finally:
                for job in jobs:
                    job.cancel()
                for backend in distinct(backends):
                    backend.close()
            wall = time.perf_counter() - started
            store.update_metadata(wall_s=store.metadata().get("wall_s", 0.0) + wall)
            await recorder.measure(self.repeats)
            return RunOutcome(self.run_dir, already + len(todo), already, len(todo), wall)

    async def solve(
        self,
        task: Task,
        index: int,
        backends: dict[str, Backend],
        sampling: Sampling,
        executor: SandboxExecutor | None = None,
    ) -> Solution:
        ctx = SolveContext(task, index, backends, sampling, self.limits, executor)
        started = time.perf_counter()
        error = None
        try:
            code = await self.system.solve(task, ctx)
        except BudgetExceeded as exc:
            code, error = "", str(exc)
        if not code.strip() and error is None:
            error = "no code found"
        return Solution(
            task_id=task.task_id,
            sample_index=index,
            code=code,
            trace=ctx.trace,
            artifacts=ctx.artifacts,
            error=error,
            wall_time_s=time.perf_counter() - started,
        )
