"""Base classes of model-backend plugins."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from . import options as opts
from .batching import Batcher
from .config import DEFAULT_MAX_BATCH
from .modelspec import ModelRef
from .records import Generation, GenerationRequest


class Backend(ABC):
    """Answers chat requests. ``target`` is the part of the model spec after ``name:``."""

    name: ClassVar[str]
    description: ClassVar[str] = ""

    class Options(opts.Options):
        """A backend's options: a model spec's ``?KEY=VALUE&...`` (``vllm:ID?dtype=bfloat16``)."""

    def __init__(self, target: str = "", **options: Any):
        self.target = target
        self.options = opts.validate_options(f"backend {self.name!r} option", self.Options, options)

    @property
    def model_id(self) -> str:
        """How traces and leaderboards name the model."""
        return f"{self.name}:{self.target}" if self.target else self.name

    @classmethod
    def family(cls) -> str:
        """Backends of one family decode alike (one engine, one sampler): the name of the first
        class in its lineage that has one (``embedded`` is a converted model on ``hf``)."""
        return next(c.name for c in reversed(cls.__mro__) if "name" in vars(c))

    @classmethod
    def checkpoint_ref(cls, ref: ModelRef, path: str) -> ModelRef | None:
        """How this backend's family serves the local checkpoint at ``path``, with ``ref``'s
        options (``vllm:ID?dtype=bfloat16`` -> ``vllm:PATH?dtype=bfloat16``); None: it cannot
        (a remote server). Studies evaluate trained checkpoints this way."""
        return None

    def load(self) -> None:  # noqa: B027 - optional hook
        """Load weights or check the connection, so that errors surface before a run starts."""

    def local_weights(self) -> Path | None:
        """The local checkpoint folder the weights load from, found without loading them (None:
        a remote or not file-based model). Training starts from it."""
        return None

    def label(self) -> str:
        """How leaderboards and reports name the model: a name and its provenance (a trained
        checkpoint's method, base model and steps), never a machine path."""
        return self.model_id

    def identity(self) -> dict[str, Any]:
        """Model identity for run metadata (label, path, file hashes, manifest)."""
        return {"backend": self.name, "target": self.target, "label": self.label()}

    @abstractmethod
    async def generate(self, request: GenerationRequest) -> Generation:
        """Answer one request. Many calls may be awaited concurrently."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (models, connections)."""


class BatchingBackend(Backend):
    """A local backend: concurrent ``generate`` calls are coalesced into ``generate_batch``."""

    class Options(Backend.Options):
        max_batch: int = Field(DEFAULT_MAX_BATCH, ge=1, description="requests per forward pass")

    def __init__(self, target: str = "", **options: Any):
        super().__init__(target, **options)
        self.max_batch = self.options.max_batch
        self._batcher: Batcher | None = None

    async def generate(self, request: GenerationRequest) -> Generation:
        if self._batcher is None:
            self._batcher = Batcher(self.generate_batch, self.max_batch)
        return await self._batcher.submit(request)

    @abstractmethod
    def generate_batch(self, requests: list[GenerationRequest]) -> list[Generation]:
        """Answer requests that share sampling settings, in one forward pass where possible."""


def cut_at_stop(text: str, request: GenerationRequest) -> tuple[str, bool]:
    """``text`` ended where ``request`` says its answer ends: before the earliest of its stop
    strings, or after the first match of its ``stop_pattern``; True when it was cut."""
    cut = min((i for i in (text.find(stop) for stop in request.stop) if i >= 0), default=-1)
    if cut >= 0:
        text = text[:cut]
    if request.stop_pattern:
        match = re.search(request.stop_pattern, text)
        if match:
            return text[: match.end()], True
    return text, cut >= 0
