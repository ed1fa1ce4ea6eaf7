"""What a system gets while solving one sample: models by role, a budget, and a trace."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .backend import Backend
from .errors import CorebenchError
from .examples import Example, parse_example
from .extract import CLOSED_CODE_BLOCK, extract_code
from .modelspec import DEFAULT_ROLE
from .records import GenerationRequest, Message, ModelCall, Task, TestOutcome, Verdict

if TYPE_CHECKING:
    from .sandbox import SandboxExecutor


class BudgetExceeded(CorebenchError):
    """A system asked for more calls or tokens than a sample may use."""


@dataclass(frozen=True)
class Sampling:
    temperature: float
    top_p: float
    max_new_tokens: int
    seed: int


@dataclass(frozen=True)
class Limits:
    max_calls: int
    max_completion_tokens: int


@dataclass(frozen=True)
class ExampleCheck:
    """How a program did on the task's visible examples."""

    outcomes: list[TestOutcome]
    examples: list[Example]

    @property
    def passed(self) -> bool:
        return all(o.verdict is Verdict.passed for o in self.outcomes)

    @property
    def feedback(self) -> str:
        """One line per example, failures with what the code gave: what a debugging prompt shows."""
        lines = []
        for example, outcome in zip(self.examples, self.outcomes, strict=True):
            if outcome.verdict is Verdict.passed:
                lines.append(f"passed: {example.source}")
            else:
                lines.append(
                    f"failed: {example.source}  # {outcome.verdict.value}: {outcome.detail}"
                )
        return "\n".join(lines)


def derive_seed(*parts: object) -> int:
    """A seed that depends only on its parts (not on scheduling order)."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "little")


class SolveContext:
    """What a system gets for one sample: models by role, the sandbox for visible examples, a
    budget of calls and tokens, and the trace and artifacts stored with the solution."""

    def __init__(
        self,
        task: Task,
        sample_index: int,
        models: Mapping[str, Backend],
        sampling: Sampling,
        limits: Limits,
        executor: SandboxExecutor | None = None,
    ):
        self.task = task
        self.executor = executor
        self.sample_index = sample_index
        self.models = models
        self.sampling = sampling
        self.limits = limits
        self.trace: list[ModelCall] = []
        self.artifacts: dict[str, Any] = {}

    def model(self, role: str) -> Backend:
        """The backend serving ``role`` (per-role spec), else the default model."""
        backend = self.models.get(role) or self.models.get(DEFAULT_ROLE)
        if backend is None:
            raise CorebenchError(
                f"no model given for role {role!r} (roles given: {', '.join(self.models)})"
            )
        return backend

    def note(self, key: str, value: Any) -> None:
        """Keep an intermediate artifact (a plan, a debug round) with the solution."""
        self.artifacts[key] = value

    def code_from(self, answer: str, *, entry_point: bool = True) -> str:
        """The program in a model's answer (empty if none); how it was found goes in the artifacts.

        With ``entry_point=False`` every definition is kept (e.g. a helper agent's functions).
        """
        extracted = extract_code(
            answer,
            self.task.entry_point if entry_point else None,
            program=entry_point and self.task.entry_point is None,
        )
        self.note("extraction", extracted.note)
        return extracted.code

    async def write_code(
        self,
        role: str,
        prompt: str | list[Message],
        *,
        entry_point: bool = True,
        max_new_tokens: int | None = None,
    ) -> str:
        """Ask ``role`` for code: its answer ends after its first complete Python code block
        (nothing after it is read), and the program in it is returned (see ``code_from``)."""
        answer = await self.generate(
            role, prompt, max_new_tokens=max_new_tokens, stop_pattern=CLOSED_CODE_BLOCK
        )
        return self.code_from(answer, entry_point=entry_point)

    @property
    def calls_left(self) -> int:
        """Model calls this sample may still make (a system can stop before the budget error)."""
        return max(0, self.limits.max_calls - len(self.trace))

    @property
    def examples(self) -> list[Example]:
        """The task's visible examples that can be run (what the prompt shows, never hidden tests)."""
        parsed = []
        for source in self.task.examples:
            try:
                parsed.append(parse_example(source))
            except ValueError:
                continue
        return parsed

    async def run_examples(self, code: str) -> ExampleCheck:
        """Run ``code`` on the visible examples in the sandbox; counted in the artifacts."""
        examples = self.examples
        if self.executor is None:
            from .sandbox import executor_for

            self.executor = executor_for()
        outcomes = await self.executor.run_examples(code, examples) if examples else []
        self.artifacts["example_runs"] = self.artifacts.get("example_runs", 0) + 1
        return ExampleCheck(outcomes, examples)

    @property
    def completion_tokens(self) -> int:
        """Completion tokens used so far (all calls of this sample)."""
        return sum(c.completion_tokens for c in self.trace)

    async def generate(
        self,
        role: str,
        prompt: str | list[Message],
        *,
        system: str | None = None,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        stop: list[str] | None = None,
        stop_pattern: str | None = None,
    ) -> str:
        """Ask the model of ``role``; the call is recorded in the trace and counted in the budget."""
        if len(self.trace) >= self.limits.max_calls:
            raise BudgetExceeded(f"call budget of {self.limits.max_calls} per sample exceeded")
        left = self.limits.max_completion_tokens - self.completion_tokens
        if left <= 0:
            raise BudgetExceeded(
                f"token budget of {self.limits.max_completion_tokens} per sample exceeded"
            )
        messages = (
            [Message(role="user", content=prompt)] if isinstance(prompt, str) else list(prompt)
        )
        if system:
            messages.insert(0, Message(role="system", content=system))
        backend = self.model(role)
        request = GenerationRequest(
            messages=messages,
            # a role's own cap never exceeds the run's (--max-new-tokens caps every call)
            max_new_tokens=min(max_new_tokens or left, self.sampling.max_new_tokens, left),
            temperature=self.sampling.temperature if temperature is None else temperature,
            top_p=self.sampling.top_p,
            stop=stop or [],
            stop_pattern=stop_pattern,
            seed=derive_seed(
                self.sampling.seed, self.task.task_id, self.sample_index, len(self.trace)
            ),
        )
        result = await backend.generate(request)
        self.trace.append(
            ModelCall(
                role=role,
                model=backend.model_id,
                messages=messages,
                completion=result.text,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                finish_reason=result.finish_reason,
                latency_s=result.latency_s,
                batch_size=result.batch_size,
            )
        )
        return result.text
