"""Base weights for training and frozen partners (a coder that turns plans into code)."""

from __future__ import annotations

from pathlib import Path

from corebench.harness.errors import CorebenchError
from corebench.harness.modelspec import parse_model_ref
from corebench.harness.records import GenerationRequest, Message
from corebench.harness.registry import default_plugins
from corebench.harness.runner import build_backends
from corebench.plugins.backends.transformers_backend import TransformersBackend


def local_checkpoint(spec: str) -> Path:
    """A local Hugging Face checkpoint for a model spec (``embedded`` is converted once)."""
    ref = parse_model_ref(spec)
    backend = build_backends({"*": ref}, default_plugins())["*"]
    if not isinstance(backend, TransformersBackend):
        raise CorebenchError(
            f"training needs local weights (embedded or hf:PATH), not a {ref.backend} backend"
        )
    backend.load()  # converts the embedded GGUF on first use
    path = Path(backend.path)
    backend.close()
    return path


class FrozenModel:
    """Greedy generation from a fixed checkpoint, batched: a partner that is not being trained."""

    def __init__(self, path: Path, max_new_tokens: int):
        self.backend = TransformersBackend(str(path), dtype="float32")
        self.max_new_tokens = max_new_tokens

    def answer(self, prompts: list[str]) -> list[str]:
        requests = [
            GenerationRequest(
                messages=[Message(role="user", content=p)],
                max_new_tokens=self.max_new_tokens,
                temperature=0.0,
            )
            for p in prompts
        ]
        out: list[str] = []
        for start in range(0, len(requests), self.backend.max_batch):
            out += [
                g.text
                for g in self.backend.generate_batch(
                    requests[start : start + self.backend.max_batch]
                )
            ]
        return out

    def close(self) -> None:
        self.backend.close()
