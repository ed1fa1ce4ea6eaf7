"""Rollouts on the CPU through corebench's decode engine instead of ``transformers``' generate.

A trainer's policy keeps float32 weights (the optimizer's). ``Rollouts`` keeps a copy of them in
the run's ``rollout_dtype`` (by default the type the CPU decodes fastest,
``precision.cpu_dtype``: bfloat16 where the CPU computes it natively, AVX512-BF16 or AMX;
float32 elsewhere, 2.7x faster there than emulated bfloat16; float32 for validation, below),
refreshed in place before every batch of rollouts (a copy
of 135M weights takes a few tens of milliseconds), and samples through ``DecodeEngine``:
continuous batching, the CPU decode attention, and a generator per row seeded from the
trainer's seed, its step and the row. A call's rows are queued together, so the same seeds and
weights give the same tokens every time (the trainer makes one call at a time). A prompt's
rows decoded beside other prompts' agree with the same rows decoded alone only until bfloat16
rounding, which follows the batch's shape, flips a token (7 of 8 rows of 256 tokens identical,
one after 124 identical tokens). TRL's own path (``model.generate`` in float32, or under
bfloat16 autocast, which casts every weight at every forward) generates about a third as many
tokens per second on a CPU with AVX512-BF16 (2.82x fewer with the SFT checkpoint):
``measurements/grpo_step_split.py`` times both inside real GRPO steps. On a CPU without native
bfloat16, training in float32, the engine makes 124.5 tokens/s against TRL's float32
``generate``'s 77.0 (``--float32``), since the trainer's own thread drives the engine's loop
(``engine.py``); driven from a second thread, as before, it made 79.8 against 74.3.

Sampling from bfloat16 weights while the loss uses the float32 ones is the same small mismatch
as vLLM rollouts in bfloat16 with float32 training. Validation decodes greedily from a float32
copy instead (``dtype="float32"``): a few dozen steps at a small learning rate move few weights
by half a bfloat16 grid step, so a bfloat16 copy shows rounding noise rather than the update
(``measurements/update_precision.py``), and a checkpoint compared with its start is evaluated in
float32 (``hf:PATH?dtype=float32``) for the same reason.

A policy that trains LoRA adapters (``lora_rank``) keeps its base weights frozen; its copy is a
plain model, refreshed with each adapted layer's base weight plus the adapters' update
(``policy_weights``), so the engine decodes what the merged checkpoint will hold.
"""

from __future__ import annotations

import copy
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast, get_args

from corebench.harness.decoding.precision import Dtype, cpu_dtype
from corebench.harness.errors import CorebenchError

if TYPE_CHECKING:
    from .settings import TrainSettings

ROLLOUT_BATCH = 32  # sequences decoded together
DTYPE_RECORD = "rollout_dtype.txt"  # in a training run's folder: the type its rollouts decode in


def rollout_dtype(settings: TrainSettings) -> Dtype:
    """The type a training run's rollouts and prompt filter decode in on the CPU: its setting,
    ``auto`` resolved by the CPU (``precision.cpu_dtype``). The first call records it in the
    run's folder (``settings.out``); a run continued there, on this CPU or another, keeps that
    type, so a run's samples are never some in one type and some in the other (a run begun
    before types were recorded, resume states and no record, decoded in bfloat16). An explicit
    setting that contradicts the record is refused."""
    out = Path(settings.out)
    recorded = recorded_rollout_dtype(out)
    if recorded is None and _has_resume_states(out):
        recorded = "bfloat16"  # what every run decoded in before the type was a setting
    if recorded is not None and settings.rollout_dtype not in ("auto", recorded):
        raise CorebenchError(
            f"{settings.out} holds a run whose rollouts decoded in {recorded}, not "
            f"rollout_dtype = {settings.rollout_dtype}: give that type or another out"
        )
    chosen: Dtype = recorded or (
        cpu_dtype() if settings.rollout_dtype == "auto" else settings.rollout_dtype
    )
    record = out / DTYPE_RECORD
    if not record.exists():  # written whole, then renamed: no process reads half a record
        out.mkdir(parents=True, exist_ok=True)
        partial = out / f".{DTYPE_RECORD}.{os.getpid()}"
        partial.write_text(chosen + "\n")
        os.replace(partial, record)
    return chosen


def recorded_rollout_dtype(out: str | Path) -> Dtype | None:
    """The type recorded in a training run's folder, or None where none is (reading only)."""
    record = Path(out) / DTYPE_RECORD
    if not record.exists():
        return None
    text = record.read_text().strip()
    if text not in get_args(Dtype):
        raise CorebenchError(f"{record} says {text!r}, not {' or '.join(get_args(Dtype))}")
    return cast(Dtype, text)


def _has_resume_states(out: Path) -> bool:
    from .dispatch import RESUME_STATES

    return any(
        state.is_dir() for folder in RESUME_STATES for state in out.glob(f"{folder}/checkpoint-*")
    )


def chat_ids(tokenizer: Any, prompt: str) -> list[int]:
    """A user turn's ``prompt`` as the model sees it: the chat template with the assistant's turn
    opened, as token ids."""
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
    )
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def row_seed(*parts: int) -> int:
    """A 63-bit seed from integers (trainer seed, step, call, row): stable across processes."""
    digest = hashlib.sha256(",".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def is_lora(model: Any) -> bool:
    """Whether ``model`` trains LoRA adapters (a PEFT model) rather than its own weights."""
    try:
        from peft import PeftModel
    except ImportError:
        return False
    return isinstance(model, PeftModel)


def policy_weights(model: Any) -> dict[str, Any]:
    """The policy's weights by a plain model's parameter names. With LoRA, an adapted layer's
    weight is its frozen base weight plus its active adapters' update: what merging them gives,
    computed without touching the policy."""
    if not is_lora(model):
        return dict(model.named_parameters())
    from peft.tuners.lora import LoraLayer

    base, weights = model.get_base_model(), {}
    for name, module in base.named_modules():
        if isinstance(module, LoraLayer):
            weight = module.get_base_layer().weight
            for adapter in module.active_adapters:
                if adapter in module.lora_A:
                    weight = weight + module.get_delta_weight(adapter)
            weights[f"{name}.weight"] = weight
    for name, parameter in base.named_parameters():
        if ".lora_" not in name:  # the rest (biases, norms, embeddings) as they are
            weights.setdefault(name.replace(".base_layer.", "."), parameter)
    return weights


class Rollouts:
    """Samples completions of tokenized prompts from the current weights of ``model``, through a
    copy of them in ``dtype`` (training's rollouts: ``rollout_dtype(settings)``, by default the
    CPU's fastest; float32 for validation)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_batch: int = ROLLOUT_BATCH,
        dtype: Dtype | None = None,
    ):
        import torch

        from corebench.harness.decoding.engine import DecodeEngine

        dtype = dtype or cpu_dtype()

        self.model = model
        # a LoRA policy's buffers are read under its base model's names, as the copy has them
        self.policy = model.get_base_model() if is_lora(model) else model
        plain = copy.deepcopy(model)
        if self.policy is not model:  # the copy is a plain model; refresh merges the adapters
            plain = plain.merge_and_unload()
        self.shadow = plain.to(getattr(torch, dtype)).eval()
        # accelerate's mixed precision wraps a prepared model's forward in autocast and casts
        # every output (the key/value cache too) to float32: the copy runs its own forward
        self.shadow.__dict__.pop("forward", None)
        self.shadow.__dict__.pop("_original_forward", None)
        for parameter in self.shadow.parameters():
            parameter.requires_grad_(False)
        self.engine = DecodeEngine(self.shadow, tokenizer, "cpu", max_batch)

    def refresh(self) -> None:
        """Copy the policy's current weights into the copy."""
        import torch

        with torch.no_grad():
            source = policy_weights(self.model)
            for name, target in self.shadow.named_parameters():
                target.copy_(source[name])
            buffers = dict(self.policy.named_buffers())
            for name, target in self.shadow.named_buffers():
                if name in buffers:
                    target.copy_(buffers[name])

    def sample(
        self,
        prompt_ids: list[list[int]],
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float = 1.0,
        seeds: list[int] | None = None,
    ) -> list[list[int]]:
        """Each prompt's completion token ids (ending with the end of sequence token where it
        stopped); temperature 0 decodes greedily."""
        self.refresh()
        return self.engine.complete(
            prompt_ids, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
            seeds=seeds,
        )  # fmt: skip

    def close(self) -> None:
        self.engine.close()
