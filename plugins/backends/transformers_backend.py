"""Local models through Hugging Face transformers, decoded with continuous batching."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from corebench.harness import (
    Backend,
    CorebenchError,
    Generation,
    GenerationRequest,
    hookimpl,
)
from corebench.harness.config import DEFAULT_MAX_BATCH, MANIFEST_NAME
from corebench.harness.decoding.precision import cpu_dtype, native_bfloat16
from corebench.harness.metadata import file_fingerprint
from corebench.harness.modelspec import ModelRef, without_paths

if TYPE_CHECKING:  # torch is imported only when a model loads
    from corebench.harness.decoding.engine import DecodeEngine


def pick_device_and_dtype(device: str | None, dtype: str) -> tuple[str, Any]:
    """CUDA when present; on a GPU bfloat16 where it computes it natively, else float16; on the
    CPU the type it decodes fastest (``precision.cpu_dtype``)."""
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype != "auto":
        return device, getattr(torch, dtype)
    if device.startswith("cuda"):
        return device, torch.bfloat16 if native_bfloat16(device) else torch.float16
    return device, getattr(torch, cpu_dtype())


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA's OutOfMemoryError, Python's MemoryError, or the CPU allocator's failure."""
    import torch

    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "out of memory" in text or "can't allocate memory" in text
    )


class TransformersBackend(Backend):
    name = "hf"
    description = "Hugging Face transformers: local checkpoint dir or Hub id, CPU or GPU, batched"

    class Options(Backend.Options):
        device: str | None = Field(None, description="cpu, cuda, cuda:1, mps (default: the best)")
        dtype: str = Field("auto", description="auto, float32, bfloat16 or float16")
        max_batch: int = Field(DEFAULT_MAX_BATCH, ge=1, description="sequences decoded together")

    def __init__(self, target: str = "", **options: Any):
        super().__init__(target, **options)
        self.max_batch = self.options.max_batch
        if not target:
            raise CorebenchError("the hf backend needs a checkpoint: --model hf:PATH_OR_HUB_ID")
        self.path = target
        self.device_name = self.options.device
        self.dtype_name = self.options.dtype
        self._model: Any = None
        self._tokenizer: Any = None
        self._engine: DecodeEngine | None = None

    @classmethod
    def checkpoint_ref(cls, ref: ModelRef, path: str) -> ModelRef:
        return ModelRef(TransformersBackend.name, path, ref.options)

    # --- loading ---------------------------------------------------------------------------------------
    def _check_path(self) -> None:
        looks_local = self.path.startswith(("/", ".", "~")) or Path(self.path).exists()
        if looks_local and not Path(self.path).expanduser().is_dir():
            raise CorebenchError(f"model path {self.path!r} does not exist or is not a directory")

    def local_weights(self) -> Path | None:
        local = Path(self.path).expanduser()
        return local if local.is_dir() else None

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

    def _manifest(self) -> dict[str, Any] | None:
        manifest = Path(self.path).expanduser() / MANIFEST_NAME
        return json.loads(manifest.read_text()) if manifest.exists() else None

    def label(self) -> str:
        """A trained checkpoint by its manifest (``grpo(embedded, 10 steps)``), a Hub id as
        written, another local folder by its name."""
        manifest = self._manifest()
        if manifest:
            base = without_paths(str(manifest.get("base_model", "?")))
            steps = manifest.get("steps", "?")
            return f"{manifest.get('method', '?')}({base}, {steps} step{'' if steps == 1 else 's'})"
        path = Path(self.path).expanduser()
        return f"hf:{path.name}" if path.is_dir() else f"hf:{self.target}"

    def identity(self) -> dict[str, Any]:
        path = Path(self.path).expanduser()
        info: dict[str, Any] = {"backend": self.name, "target": self.target, "label": self.label()}
        if path.is_dir():
            info["path"] = str(path.resolve())
            info["files"] = {
                f.name: file_fingerprint(f)
                for f in sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin"))
            }
            joined = "".join(f"{name}:{digest}" for name, digest in info["files"].items())
            info["weights_sha256"] = hashlib.sha256(joined.encode()).hexdigest()
            manifest = self._manifest()
            if manifest:
                info["manifest"] = manifest
        # the type it decodes in changes its answers: known before loading, so that a run is
        # not continued in another (``metadata.provenance_changes``)
        try:
            device, dtype = (
                (self.device, self.dtype)
                if self._model is not None
                else pick_device_and_dtype(self.device_name, self.dtype_name)
            )
        except ImportError:  # no torch: loading says so, in its own words
            return info
        info["dtype"], info["device"] = str(dtype), device
        return info

    # --- generation ------------------------------------------------------------------------------------
    @property
    def engine(self) -> DecodeEngine:
        """The continuous-batching decode loop over this model (engine.py)."""
        self.load()
        if self._engine is None:
            from corebench.harness.decoding.engine import DecodeEngine

            self._engine = DecodeEngine(self._model, self._tokenizer, self.device, self.max_batch)
        return self._engine

    async def generate(self, request: GenerationRequest) -> Generation:
        engine = self.engine
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Generation] = loop.create_future()

        def settle(result: Generation | BaseException) -> None:
            if future.done():
                return
            if isinstance(result, BaseException):
                future.set_exception(self._explained(result, request))
            else:
                future.set_result(result)

        engine.submit(request, lambda result: loop.call_soon_threadsafe(settle, result))
        return await future

    def generate_batch(self, requests: list[GenerationRequest]) -> list[Generation]:
        """Every request to the end (blocking), through the same decode loop."""
        try:
            return self.engine.run(requests)
        except Exception as exc:
            raise self._explained(exc, requests[0]) from None

    def _explained(self, exc: BaseException, request: GenerationRequest) -> BaseException:
        if not is_out_of_memory(exc):
            return exc
        return CorebenchError(
            f"out of memory on {self.device} ({self.dtype}) generating up to "
            f"{request.max_new_tokens} tokens with {self.path}: use a smaller max_batch "
            "(?max_batch=N), a shorter --max-new-tokens, a smaller model, or more memory"
        )

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
        self._model = self._tokenizer = self._engine = None


@hookimpl
def register_backends(register):
    register(TransformersBackend)
