"""vLLM's offline engine (GPU machines): ``--model vllm:PATH_OR_HUB_ID``.

vLLM batches continuously inside one ``LLM.chat`` call; corebench's batcher hands it every request
that is ready. Install with ``pip install 'corebench[vllm]'`` on a CUDA machine. The request and
option mapping below is plain Python so that it is tested on CPU, where vLLM cannot be installed.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field

from corebench.harness import (
    BatchingBackend,
    CorebenchError,
    Generation,
    GenerationRequest,
    hookimpl,
)
from corebench.harness.backend import cut_at_stop
from corebench.harness.modelspec import ModelRef, without_paths


class VllmOptions(BatchingBackend.Options):
    """The backend's batch size plus the ``vllm.LLM`` engine arguments corebench passes on (only
    those given: vLLM's own defaults apply to the rest)."""

    max_batch: int = Field(256, ge=1, description="requests handed to one LLM.chat call")
    tensor_parallel_size: int | None = Field(None, ge=1, description="GPUs per model replica")
    pipeline_parallel_size: int | None = Field(None, ge=1, description="pipeline stages")
    dtype: str | None = Field(None, description="auto, bfloat16, float16, float32")
    gpu_memory_utilization: float | None = Field(
        None, gt=0, le=1, description="share of GPU memory vLLM may take"
    )
    max_model_len: int | None = Field(None, ge=1, description="context length")
    seed: int | None = Field(None, description="engine seed")
    enforce_eager: bool | None = Field(None, description="no CUDA graphs")


def engine_kwargs(target: str, options: VllmOptions) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM``: the model plus the engine options given."""
    given = options.model_dump(exclude_unset=True, exclude={"max_batch"})
    return {"model": target, **given}


def sampling_kwargs(request: GenerationRequest) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams`` from one corebench request."""
    greedy = request.temperature == 0
    return {
        "temperature": request.temperature,
        "top_p": 1.0 if greedy else request.top_p,
        "max_tokens": request.max_new_tokens,
        "stop": list(request.stop) or None,
        "seed": None if greedy else request.seed,
    }


def to_generation(
    output: Any, request: GenerationRequest, latency_s: float, batch_size: int
) -> Generation:
    """A corebench Generation from a vLLM ``RequestOutput`` (cut at the request's stop pattern,
    which vLLM cannot stop at)."""
    completion = output.outputs[0]
    text, stopped = cut_at_stop(completion.text, request)
    return Generation(
        text=text,
        prompt_tokens=len(output.prompt_token_ids or []),
        completion_tokens=len(completion.token_ids),
        finish_reason="length" if completion.finish_reason == "length" and not stopped else "stop",
        latency_s=latency_s,
        batch_size=batch_size,
    )


class VllmBackend(BatchingBackend):
    name = "vllm"
    description = "vLLM offline engine on GPUs (continuous batching, tensor parallel)"

    Options = VllmOptions

    def __init__(self, target: str = "", **options: Any):
        super().__init__(target, **options)
        if not target:
            raise CorebenchError("the vllm backend needs a model: --model vllm:PATH_OR_HUB_ID")
        self.engine = engine_kwargs(target, self.options)
        self._llm: Any = None

    @classmethod
    def checkpoint_ref(cls, ref: ModelRef, path: str) -> ModelRef:
        return ModelRef(VllmBackend.name, path, ref.options)

    def load(self) -> None:
        if self._llm is not None:
            return
        try:
            import vllm
        except ImportError:
            raise CorebenchError(
                "the vllm backend needs vLLM on a CUDA machine: pip install 'corebench[vllm]' "
                "(or serve the model with `vllm serve` and use --model openai:NAME@URL)"
            ) from None
        self._llm = vllm.LLM(**self.engine)

    def label(self) -> str:
        return without_paths(f"vllm:{self.target}")

    def identity(self) -> dict[str, Any]:
        return {"backend": self.name, "label": self.label(), **self.engine}

    def generate_batch(self, requests: list[GenerationRequest]) -> list[Generation]:
        import vllm

        self.load()
        conversations = [[m.model_dump() for m in r.messages] for r in requests]
        params = [vllm.SamplingParams(**sampling_kwargs(r)) for r in requests]
        started = time.perf_counter()
        outputs = self._llm.chat(conversations, params, use_tqdm=False)
        latency = time.perf_counter() - started
        return [
            to_generation(o, r, latency, len(requests))
            for o, r in zip(outputs, requests, strict=True)
        ]

    def close(self) -> None:
        self._llm = None


@hookimpl
def register_backends(register):
    register(VllmBackend)
