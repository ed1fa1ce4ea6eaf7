"""What a system gets while solving one sample: models by role, a budget, and a trace."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .backend import Backend
from .errors import CorebenchError
from .extract import extract_code
from .records import GenerationRequest, Message, ModelCall, Task


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


def derive_seed(*parts: object) -> int:
    """A seed that depends only on its parts (not on scheduling order)."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "little")


class SolveContext:
    def __init__(
        self,
        task: Task,
        sample_index: int,
        models: Mapping[str, Backend],
        sampling: Sampling,
        limits: Limits,
    ):
        self.task = task
        self.sample_index = sample_index
        self.models = models
        self.sampling = sampling
        self.limits = limits
        self.trace: list[ModelCall] = []
        self.artifacts: dict[str, Any] = {}

    def model(self, role: str) -> Backend:
        """The backend serving ``role`` (per-role spec), else the default model."""
        backend = self.models.get(role) or self.models.get("*")
        if backend is None:
            raise CorebenchError(
                f"no model given for role {role!r} (roles given: {', '.join(self.models)})"
            )
        return backend

    def note(self, key: str, value: Any) -> None:
        """Keep an intermediate artifact (a plan, a debug round) with the solution."""
        self.artifacts[key] = value

    def code_from(self, answer: str) -> str:
        """The program in a model's answer (empty if none); how it was found goes in the artifacts."""
        extracted = extract_code(answer, self.task.entry_point)
        self.note("extraction", extracted.note)
        return extracted.code

    @property
    def completion_tokens(self) -> int:
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
            max_new_tokens=min(max_new_tokens or self.sampling.max_new_tokens, left),
            temperature=self.sampling.temperature if temperature is None else temperature,
            top_p=self.sampling.top_p,
            stop=stop or [],
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
