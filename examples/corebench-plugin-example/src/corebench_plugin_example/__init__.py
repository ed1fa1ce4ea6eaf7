"""An example corebench plugin: one benchmark, one system and one backend.

corebench imports this module through the ``corebench`` entry point declared in pyproject.toml
and calls the hooks below; each hook registers classes that subclass corebench's base classes.
"""

from __future__ import annotations

import json
import time
from functools import cached_property
from importlib.resources import files
from pathlib import Path
from typing import Any

from pydantic import Field

from corebench.harness import (
    Backend,
    Benchmark,
    FunctionalSuite,
    Generation,
    GenerationRequest,
    SolveContext,
    System,
    Task,
    UnknownNameError,
    docstring_examples,
    hookimpl,
    render,
)
from corebench.harness.errors import CorebenchError
from corebench.harness.store import Store


class Strings5(Benchmark):
    """Five string tasks shipped with the package; hidden tests are differential."""

    name = "strings5"
    description = "five string-manipulation tasks (example plugin)"

    @cached_property
    def problems(self) -> dict[str, dict[str, Any]]:
        rows = json.loads(files(__package__).joinpath("tasks.json").read_text())
        return {row["task_id"]: row for row in rows}

    def tasks(self, split: str = "test") -> list[Task]:
        if split != "test":
            raise CorebenchError(f"{self.name} has no {split!r} split (splits: test)")
        return [
            Task(
                task_id=p["task_id"],
                benchmark=self.name,
                prompt=p["prompt"],
                entry_point=p["entry_point"],
                examples=docstring_examples(p["prompt"], p["entry_point"]),
            )
            for p in self.problems.values()
        ]

    def test_suite(self, task_id: str) -> FunctionalSuite:
        if task_id not in self.problems:
            raise UnknownNameError(f"{self.name} task", task_id, self.problems)
        p = self.problems[task_id]
        return FunctionalSuite(
            entry_point=p["entry_point"],
            reference_code=p["reference"],
            inputs={"tests": p["inputs"]},
            fingerprint="strings5-v1",
        )

    def dataset_info(self) -> dict[str, Any]:
        return {"name": self.name, "version": "1", "path": "corebench_plugin_example/tasks.json"}


class BestOfN(System):
    """Sample up to ``n`` programs; keep the first that passes the visible examples."""

    name = "best-of-n"
    description = "up to n samples, the first passing the visible examples wins (example plugin)"

    class Options(System.Options):
        n: int = Field(3, ge=1, description="programs sampled at most")
        temperature: float = Field(0.8, ge=0, description="temperature after the first (greedy)")

    async def solve(self, task: Task, ctx: SolveContext) -> str:
        prompt = render(__name__, "prompt.txt", prompt=task.prompt, entry_point=task.entry_point)
        code = ""
        for attempt in range(self.options.n):
            temperature = 0.0 if attempt == 0 else self.options.temperature
            code = ctx.code_from(await ctx.generate("model", prompt, temperature=temperature))
            check = await ctx.run_examples(code)
            ctx.note(f"attempt_{attempt}", {"passed_examples": check.passed})
            if code and check.passed:
                break
        return code


class ReplayBackend(Backend):
    """Answers from a stored run (``replay:RUN_DIR``: the completion recorded for the same
    prompt) or from a JSON file mapping an entry-point name to an answer (``replay:FILE.json``)."""

    name = "replay"
    description = "replays recorded answers: a run directory or a JSON file (example plugin)"

    def __init__(self, target: str = "", **options: Any):
        super().__init__(target, **options)
        if not target:
            raise CorebenchError("the replay backend needs a source: --model replay:RUN_DIR")
        self.source = Path(target)
        self.answers: dict[str, str] = {}

    def load(self) -> None:
        if self.answers:
            return
        if self.source.is_dir():
            store = Store(self.source, create=False)
            for solution, _ in store.samples():
                for call in solution.trace:
                    self.answers[call.messages[-1].content] = call.completion
            store.close()
        elif self.source.is_file():
            self.answers = json.loads(self.source.read_text())
        else:
            raise CorebenchError(f"replay source {self.source} does not exist")

    async def generate(self, request: GenerationRequest) -> Generation:
        self.load()
        started = time.perf_counter()
        prompt = request.messages[-1].content
        text = self.answers.get(prompt)
        if text is None:  # a JSON file keyed by the function the prompt asks for
            text = next((a for key, a in self.answers.items() if f"`{key}`" in prompt), "")
        return Generation(
            text=text,
            prompt_tokens=len(prompt.split()),
            completion_tokens=len(text.split()),
            finish_reason="stop",
            latency_s=time.perf_counter() - started,
        )


@hookimpl
def register_benchmarks(register):
    register(Strings5)


@hookimpl
def register_systems(register):
    register(BestOfN)


@hookimpl
def register_backends(register):
    register(ReplayBackend)
