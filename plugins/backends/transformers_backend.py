"""Local models through Hugging Face transformers: batched generation with left padding."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from corebench.harness import (
    BatchingBackend,
    CorebenchError,
    Generation,
    GenerationRequest,
    hookimpl,
)
from corebench.harness.config import MANIFEST_NAME
from corebench.harness.metadata import file_fingerprint


def pick_device_and_dtype(device: str | None, dtype: str) -> tuple[str, Any]:
    """CUDA when present; bf16 where the GPU or CPU computes it natively, else float32."""
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype != "auto":
        return device, getattr(torch, dtype)
    if device.startswith("cuda"):
        return device, torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    native_bf16 = getattr(torch.backends.cpu, "get_cpu_capability", lambda: "")() in (
        "AVX512",
        "AMX",
    )
    return device, torch.bfloat16 if native_bf16 else torch.float32


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA's OutOfMemoryError, Python's MemoryError, or the CPU allocator's failure."""
    import torch

    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "out of memory" in text or "can't allocate memory" in text
    )


class TransformersBackend(BatchingBackend):
    name = "hf"
    description = "Hugging Face transformers: local checkpoint dir or Hub id, CPU or GPU, batched"

    def __init__(
        self, target: str = "", device: str | None = None, dtype: str = "auto", **options: Any
    ):
        super().__init__(target, **options)
        if not target:
            raise CorebenchError("the hf backend needs a checkpoint: --model hf:PATH_OR_HUB_ID")
        self.path = target
        self.device_name = device
        self.dtype_name = dtype
        self._model: Any = None
        self._tokenizer: Any = None

    # --- loading ---------------------------------------------------------------------------------------
    def _check_path(self) -> None:
        looks_local = self.path.startswith(("/", ".", "~")) or Path(self.path).exists()
        if looks_local and not Path(self.path).expanduser().is_dir():
            raise CorebenchError(f"model path {self.path!r} does not exist or is not a directory")

    def load(self) -> None:
        """Load tokenizer and weights (idempotent)."""
        if self._model is not None:
            return
        self._check_path()
        try:
            import torch  # noqa: F401
            from transformers import AutoModelForCausalLM, AutoTokenizer
            from transformers.utils import logging as hf_logging
        except ImportError as exc:
            raise CorebenchError(
                "the hf backend needs torch and transformers: pip install 'corebench[hf]' "
                "(on CPU first: pip install torch==2.13.0)"
            ) from exc
        hf_logging.disable_progress_bar()  # corebench shows its own progress
        device, dtype = pick_device_and_dtype(self.device_name, self.dtype_name)
        path = (
            str(Path(self.path).expanduser())
            if Path(self.path).expanduser().exists()
            else self.path
        )
        try:
            tokenizer = AutoTokenizer.from_pretrained(path)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        except OSError as exc:
            raise CorebenchError(f"cannot load model {self.path!r}: {exc}".splitlines()[0]) from exc
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self._tokenizer, self._model = tokenizer, model.to(device).eval()
        self.device, self.dtype = device, dtype

    def identity(self) -> dict[str, Any]:
        path = Path(self.path).expanduser()
        info: dict[str, Any] = {"backend": self.name, "target": self.target}
        if path.is_dir():
            info["path"] = str(path.resolve())
            info["files"] = {
                f.name: file_fingerprint(f)
                for f in sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin"))
            }
            manifest = path / MANIFEST_NAME
            if manifest.exists():
                info["manifest"] = json.loads(manifest.read_text())
        if self._model is not None:
            info["dtype"], info["device"] = str(self.dtype), self.device
        return info

    # --- generation ------------------------------------------------------------------------------------
    def generate_batch(self, requests: list[GenerationRequest]) -> list[Generation]:
        """Generate a batch; when it does not fit in memory, the two halves one after the other
        (down to single requests, which get one clear error if even they do not fit)."""
        try:
            return self._generate(requests)
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            self._release_memory()
            if len(requests) == 1:
                raise CorebenchError(
                    f"out of memory on {self.device} ({self.dtype}) generating up to "
                    f"{requests[0].max_new_tokens} tokens for one prompt with {self.path}: use a "
                    "shorter --max-new-tokens, a smaller model, or a device with more memory"
                ) from None
        half = len(requests) // 2
        return self.generate_batch(requests[:half]) + self.generate_batch(requests[half:])

    def _release_memory(self) -> None:
        import gc

        import torch

        gc.collect()
        if str(self.device).startswith("cuda"):
            torch.cuda.empty_cache()

    def _generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        import torch

        self.load()
        tok, model = self._tokenizer, self._model
        first = requests[0]
        prompts = [
            tok.apply_chat_template(
                [m.model_dump() for m in r.messages], add_generation_prompt=True, tokenize=False
            )
            for r in requests
        ]
        encoded = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(
            self.device
        )
        kwargs: dict[str, Any] = {
            "max_new_tokens": max(r.max_new_tokens for r in requests),
            "pad_token_id": tok.pad_token_id,
        }
        # greedy decoding; at temperature > 0 each request samples with its own generator, so its
        # tokens do not depend on which requests share its batch (sampling.py)
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if first.temperature > 0:
            from transformers import LogitsProcessorList

            from corebench.plugins.backends.sampling import PerRequestSampler

            seeds = [r.seed if r.seed is not None else 0 for r in requests]
            sampler = PerRequestSampler(seeds, first.temperature, first.top_p, self.device)
            kwargs["logits_processor"] = LogitsProcessorList([sampler])
        if first.stop:
            kwargs.update(stop_strings=first.stop, tokenizer=tok)
        started = time.perf_counter()
        with torch.inference_mode():
            output = model.generate(**encoded, **kwargs)
        latency = time.perf_counter() - started
        width = encoded["input_ids"].shape[1]
        prompt_lengths = encoded["attention_mask"].sum(dim=1).tolist()
        eos_ids = set(
            model.generation_config.eos_token_id
            if isinstance(model.generation_config.eos_token_id, list)
            else [model.generation_config.eos_token_id]
        )
        eos_ids |= {tok.eos_token_id}
        results = []
        for row, request in enumerate(requests):
            new = output[row, width:].tolist()
            finish = "length"
            for pos, token in enumerate(new):
                if token in eos_ids:
                    new, finish = new[: pos + 1], "stop"
                    break
            text = tok.decode(new, skip_special_tokens=True)
            for stop in request.stop:
                cut = text.find(stop)
                if cut >= 0:
                    text, finish = text[:cut], "stop"
            results.append(
                Generation(
                    text=text,
                    prompt_tokens=int(prompt_lengths[row]),
                    completion_tokens=len(new),
                    finish_reason=finish,
                    latency_s=latency,
                    batch_size=len(requests),
                )
            )
        return results

    def close(self) -> None:
        self._model = self._tokenizer = None


@hookimpl
def register_backends(register):
    register(TransformersBackend)
