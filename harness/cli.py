"""The `corebench` command line."""

from __future__ import annotations

import contextlib
import json
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import click

from . import config as C
from .errors import CorebenchError
from .records import ExecutionResult, RunConfig, Solution
from .registry import PluginWarning, default_plugins


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    click.echo(f"warning: {message}", err=True)


class CorebenchGroup(click.Group):
    """The core commands plus those plugins add through the ``register_commands`` hook (loaded
    on first use, so the core imports nothing above it); a CorebenchError becomes one line on
    stderr and exit code 1."""

    _plugins_loaded = False

    def _load_plugin_commands(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        try:
            default_plugins().manager.hook.register_commands(cli=self)
        except Exception as exc:  # a broken plugin must not take the core commands with it
            warnings.warn(
                f"a plugin's register_commands failed: {exc!r}", PluginWarning, stacklevel=2
            )

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_plugin_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        self._load_plugin_commands()
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context) -> Any:
        warnings.showwarning = _show_warning
        try:
            return super().invoke(ctx)
        except CorebenchError as exc:
            raise click.ClickException(str(exc)) from None


# Options shared by `run` and `evaluate`, declared once.
data_dir_option = click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    envvar=C.ENV_DATA_DIR,
    help=f"Folder with offline benchmark files (env: {C.ENV_DATA_DIR}).",
)


def _isolation(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """Settle the isolation before anything loads: one line if bubblewrap is missing."""
    import os

    from .sandbox.isolation import isolation_mode

    if value:
        os.environ[C.ENV_ISOLATION] = value  # every executor of this process (training too)
    try:
        return isolation_mode(value)
    except CorebenchError as exc:
        raise click.ClickException(str(exc)) from None


isolation_option = click.option(
    "--isolation",
    type=click.Choice(["auto", "bwrap", "unsafe"]),
    envvar=C.ENV_ISOLATION,
    callback=_isolation,
    is_eager=True,
    help="How generated code is confined: auto (bubblewrap; refuse without it), bwrap, or unsafe "
    "(resource limits only, recorded in the run).",
)
repeats_option = click.option(
    "--repeats",
    type=click.IntRange(min=0),
    default=C.DEFAULT_REPEATS,
    show_default=True,
    help="Efficiency phase: timed calls per test for passing solutions (0: skip).",
)


@click.group(cls=CorebenchGroup)
@click.version_option(package_name="corebench")
def main() -> None:
    """corebench: evaluate code-generation agents (benchmarks x systems x models)."""


def _int_list(_ctx: click.Context, _param: click.Parameter, value: str) -> list[int]:
    try:
        ks = sorted({int(v) for v in value.split(",") if v.strip()})
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None
    if not ks or min(ks) < 1:
        raise click.BadParameter("k values must be positive")
    return ks


def _options(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}")
        try:
            parsed[key] = json.loads(raw)
        except ValueError:
            parsed[key] = raw
    return parsed


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80]


@main.command()
@click.option("--bench", "benchmark", required=True, help="Benchmark name (see `corebench list`).")
@click.option("--system", required=True, help="Agent system name (see `corebench list`).")
@click.option(
    "--model",
    default=C.DEFAULT_MODEL,
    show_default=True,
    help="Model spec: embedded | hf:PATH_OR_ID | BACKEND:TARGET, or per role: planner=hf:A,coder=hf:B.",
)
@click.option(
    "--n",
    "n",
    type=click.IntRange(min=1),
    default=C.DEFAULT_N,
    show_default=True,
    help="Samples per task.",
)
@click.option(
    "--k",
    "k",
    default=",".join(map(str, C.DEFAULT_K)),
    show_default=True,
    callback=_int_list,
    help="pass@k values, comma-separated.",
)
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N tasks.")
@click.option("--tasks", help="Comma-separated task ids (e.g. Mbpp/2,Mbpp/3).")
@click.option("--split", default="test", show_default=True, help="Benchmark split.")
@click.option(
    "--temperature",
    type=click.FloatRange(min=0),
    default=C.DEFAULT_TEMPERATURE,
    show_default=True,
    help="0 = greedy (deterministic).",
)
@click.option(
    "--top-p",
    type=click.FloatRange(0, 1),
    default=C.DEFAULT_TOP_P,
    show_default=True,
    help="Nucleus sampling (when temperature > 0).",
)
@click.option(
    "--seed",
    type=int,
    default=C.DEFAULT_SEED,
    show_default=True,
    help="Sampling seed (per-sample seeds derive from it).",
)
@click.option(
    "--max-new-tokens",
    type=click.IntRange(min=1),
    default=C.DEFAULT_MAX_NEW_TOKENS,
    show_default=True,
    help="Per model call.",
)
@click.option(
    "-O",
    "--option",
    "system_options",
    multiple=True,
    callback=_options,
    help="System option KEY=VALUE (repeatable).",
)
@click.option(
    "-B",
    "--bench-option",
    "benchmark_options",
    multiple=True,
    callback=_options,
    help="Benchmark option KEY=VALUE (repeatable), e.g. level=introductory for apps.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Run directory (default: runs/BENCH-SYSTEM-MODEL). Re-running resumes.",
)
@data_dir_option
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=C.DEFAULT_CONCURRENCY,
    show_default=True,
    help="Samples in flight (what backends can batch).",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress bar (default: when stderr is a terminal).",
)
@repeats_option
@isolation_option
def run(benchmark: str, system: str, model: str, n: int, k: list[int], limit: int | None, tasks: str | None,
        split: str, temperature: float, top_p: float, seed: int, max_new_tokens: int,
        system_options: dict[str, Any], benchmark_options: dict[str, Any], out: Path | None, data_dir: Path | None, concurrency: int,
        progress: bool | None, repeats: int, isolation: str) -> None:  # fmt: skip
    """Run SYSTEM on BENCH with MODEL, execute every solution in the sandbox, store the results."""
    from .runner import Runner
    from .store import Store
    from .summary import format_summary, summarize

    cfg = RunConfig(
        benchmark=benchmark, system=system, model=model, n=n, k=k, limit=limit,
        tasks=[t.strip() for t in tasks.split(",") if t.strip()] if tasks else None,
        split=split, temperature=temperature, top_p=top_p, seed=seed,
        max_new_tokens=max_new_tokens, system_options=system_options,
        benchmark_options=benchmark_options,
    )  # fmt: skip
    if n > 1 and temperature == 0:
        click.echo(
            "warning: n > 1 with greedy decoding gives identical samples; set --temperature",
            err=True,
        )
    out = out or C.DEFAULT_RUNS_DIR / _slug(f"{benchmark}-{system}-{model}")
    bar = _ProgressBar(enabled=sys.stderr.isatty() if progress is None else progress)

    def start(todo: int, done: int) -> None:
        if todo:
            bar.start(todo)
        else:
            click.echo(f"{out}: all {done} samples already finished; nothing to do", err=True)

    runner = Runner(
        cfg,
        out,
        data_dir=C.data_dir_setting(data_dir),
        concurrency=concurrency,
        on_sample=bar.update,
        on_start=start,
        repeats=repeats,
    )
    try:
        outcome = runner.run()
    finally:
        bar.close()
    if outcome.completed:
        click.echo(
            f"{out}: {outcome.completed} new samples in {outcome.wall_s:.1f} s ({outcome.already_done} already done)",
            err=True,
        )
    store = Store(out, create=False)
    click.echo(format_summary(summarize(store)))


class _ProgressBar:
    """tqdm bar: samples done/total, pass rate so far, completion tokens per second, ETA."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bar = None
        self.passed = self.done = self.tokens = 0
        self.started = time.perf_counter()

    def start(self, total: int) -> None:
        self.started = time.perf_counter()
        if self.enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="sample", dynamic_ncols=True)
            self.started = time.perf_counter()

    def update(self, solution: Solution, result: ExecutionResult) -> None:
        self.done += 1
        self.passed += result.passed
        self.tokens += solution.completion_tokens
        if self.bar is not None:
            elapsed = max(time.perf_counter() - self.started, 1e-9)
            self.bar.set_postfix(
                passed=f"{100 * self.passed / self.done:.0f}%", tok_s=f"{self.tokens / elapsed:.0f}"
            )
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.done:  # no terminal: the same figures once, in one line
            elapsed = max(time.perf_counter() - self.started, 1e-9)
            click.echo(
                f"{self.done} samples, {100 * self.passed / self.done:.0f}% passed, "
                f"{self.tokens} completion tokens in {elapsed:.1f} s ({self.tokens / elapsed:.1f} tok/s)",
                err=True,
            )


@main.command()
@click.option("--bench", "benchmark", required=True, help="Benchmark the samples are for.")
@click.option(
    "--samples",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="JSONL: task_id plus solution or completion.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="Run directory for the results (re-running resumes).",
)
@click.option(
    "--k", "k", default="1,10,100", show_default=True, callback=_int_list, help="pass@k values."
)
@data_dir_option
@repeats_option
@isolation_option
def evaluate(
    benchmark: str,
    samples: Path,
    out: Path,
    k: list[int],
    data_dir: Path | None,
    repeats: int,
    isolation: str,
) -> None:
    """Judge an EvalPlus-style samples file in the sandbox (a drop-in for `evalplus.evaluate`)."""
    import asyncio

    from .evaluate import evaluate_samples, write_reports
    from .store import Store
    from .summary import format_summary, summarize

    bench = default_plugins().benchmarks.get(benchmark).component(C.data_dir_setting(data_dir))
    started = time.perf_counter()
    judged = asyncio.run(evaluate_samples(bench, samples, out, k, repeats=repeats))
    click.echo(f"{out}: judged {judged} samples in {time.perf_counter() - started:.1f} s", err=True)
    results, summary = write_reports(out)
    click.echo(f"wrote {results} and {summary}", err=True)
    click.echo(format_summary(summarize(Store(out, create=False))))


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def show(run_dir: Path, as_json: bool) -> None:
    """Print the summary of a run: pass@k, verdicts, runtime, memory, calls and tokens."""
    from .store import Store
    from .summary import format_summary, summarize

    summary = summarize(Store(run_dir, create=False))
    click.echo(json.dumps(summary, indent=2) if as_json else format_summary(summary))


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--jsonl",
    "output",
    type=click.Path(path_type=Path),
    required=True,
    help="Output file ('-' for stdout).",
)
def export(run_dir: Path, output: Path) -> None:
    """Export every finished sample (solution, trace, execution result) as JSON lines."""
    from .store import Store

    store = Store(run_dir, create=False)
    lines = (
        json.dumps({"solution": s.model_dump(mode="json"), "result": r.model_dump(mode="json")})
        for s, r in store.samples()
    )
    if str(output) == "-":
        for line in lines:
            click.echo(line)
    else:
        count = 0
        with open(output, "w") as f:
            for line in lines:
                f.write(line + "\n")
                count += 1
        click.echo(f"wrote {count} samples to {output}", err=True)


@main.command()
@click.option(
    "--model",
    default=C.DEFAULT_MODEL,
    show_default=True,
    help="Model spec of the backend to serve (no roles).",
)
@click.option("--name", help="Model name clients ask for (default: the spec).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8000, show_default=True, help="Port (0: any free port).")
def serve(model: str, name: str | None, host: str, port: int) -> None:
    """Serve a backend as an OpenAI-compatible endpoint (/v1/chat/completions, /v1/models)."""
    from .runner import single_backend
    from .server import ModelServer

    backend = single_backend(model)
    backend.load()
    server = ModelServer(backend, name or model, host, port)
    click.echo(f"serving {name or model} at {server.url}", err=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


@main.command("list")
def list_plugins() -> None:
    """List every benchmark, system and backend, with the plugin and distribution it came from."""
    plugins = default_plugins()
    for kind, registry in plugins.kinds().items():
        click.echo(f"{kind}s:")
        for entry in registry:
            origin = entry.origin
            click.echo(
                f"  {entry.name:<14} {entry.description}  [{origin.distribution} {origin.version}]"
            )


if __name__ == "__main__":  # pragma: no cover
    warnings.simplefilter("default", PluginWarning)
    main()
