"""Base weights for training and frozen partners (a coder that turns plans into code)."""

from __future__ import annotations

from pathlib import Path

from corebench.harness.errors import CorebenchError
from corebench.harness.records import GenerationRequest, Message
from corebench.harness.runner import single_backend


def local_checkpoint(spec: str) -> Path:
    """A local Hugging Face checkpoint for a model spec (``embedded`` is converted once)."""
    backend = single_backend(spec)
    if backend.name not in ("embedded", "hf"):
        raise CorebenchError(
            f"training needs local weights (embedded or hf:PATH), not {spec!r} ({backend.name})"
        )
    path = backend.local_weights()  # the embedded GGUF is converted here on first use
    if path is None or not (path / "config.json").is_file():
        raise CorebenchError(
            f"training needs local weights: {spec!r} is no checkpoint folder on this machine"
        )
    return path


class FrozenModel:
    """Greedy generation from a fixed checkpoint, batched: a partner that is not being trained."""

    def __init__(self, path: Path, max_new_tokens: int):
        self.backend = single_backend(f"hf:{path}?dtype=float32")  # batched: generate_batch
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


def pad_outside_prompts(tokenizer, prompt: str) -> str | None:
    """Make the pad token one that never occurs in a prompt; returns the pad token it replaced.

    comlrl finds where a prompt ends by the first pad token in it. SmolLM2 pads with
    ``<|im_end|>``, which also closes the chat template's system turn, so every completion came
    back empty (and every reward 0). A special token the prompt does not contain (``unk``, e.g.
    ``<|endoftext|>``) is used instead; generation still stops at the model's own EOS.
    """
    old = tokenizer.pad_token
    if old is None:
        tokenizer.pad_token = old = tokenizer.eos_token
    ids = set(tokenizer(prompt, add_special_tokens=False).input_ids)
    if tokenizer.pad_token_id not in ids:
        return None
    for token in [tokenizer.unk_token, *tokenizer.all_special_tokens]:
        token_id = tokenizer.convert_tokens_to_ids(token) if token else None
        if token_id is not None and token_id not in ids and token_id != tokenizer.eos_token_id:
            tokenizer.pad_token = token
            return old
    raise CorebenchError(
        f"every special token of this tokenizer occurs in the chat prompt; MAGRPO needs a pad "
        f"token outside it (comlrl ends a prompt at its first pad): {tokenizer.all_special_tokens}"
    )
