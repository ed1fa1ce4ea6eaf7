"""`corebench run`: a system on a benchmark with a model, every solution judged and stored."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

import click

from .. import config as C
from ..records import ExecutionResult, RunConfig, Solution
from .group import (
    assignments,
    config_option,
    data_dir_option,
    executor_option,
    file_table,
    int_list,
    isolation_option,
    main,
    repeats_option,
)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80]


@main.command()
@config_option("run")
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
    callback=int_list,
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
    callback=assignments,
    help="System option KEY=VALUE (repeatable).",
)
@click.option(
    "-B",
    "--bench-option",
    "benchmark_options",
    multiple=True,
    callback=assignments,
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
@executor_option
@isolation_option
def run(benchmark: str, system: str, model: str, n: int, k: list[int], limit: int | None, tasks: str | None,
        split: str, temperature: float, top_p: float, seed: int, max_new_tokens: int,
        system_options: dict[str, Any], benchmark_options: dict[str, Any], out: Path | None, data_dir: Path | None, concurrency: int,
        progress: bool | None, repeats: int, isolation: str) -> None:  # fmt: skip
    """Run SYSTEM on BENCH with MODEL, execute every solution in the sandbox, store the results."""
    from ..runner import Runner
    from ..store import Store
    from ..summary import format_summary, summarize

    system_options = file_table("system_options", system_options)
    benchmark_options = file_table("benchmark_options", benchmark_options)
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
