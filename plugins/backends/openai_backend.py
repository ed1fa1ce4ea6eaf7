"""Any OpenAI-compatible chat endpoint: `vllm serve`, llama.cpp's server, `corebench serve`,
hosted APIs. Spec: ``openai:MODEL@BASE_URL`` (``openai:MODEL`` uses $OPENAI_BASE_URL)."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from pydantic import Field

from corebench.harness import Backend, CorebenchError, Generation, GenerationRequest, hookimpl
from corebench.harness.backend import cut_at_stop
from corebench.harness.config import OPENAI_MAX_IN_FLIGHT


def split_target(target: str) -> tuple[str, str | None]:
    """'MODEL@URL' -> (MODEL, URL); the URL is optional."""
    model, sep, url = target.rpartition("@")
    if not sep:
        return target, None
    if not model or not url.startswith(("http://", "https://")):
        raise CorebenchError(
            f"bad openai model spec {target!r}: expected openai:MODEL@http(s)://HOST/v1"
        )
    return model, url


class OpenAIBackend(Backend):
    name = "openai"
    description = "OpenAI-compatible server (vllm serve, llama.cpp, corebench serve, hosted APIs)"

    class Options(Backend.Options):
        max_in_flight: int = Field(OPENAI_MAX_IN_FLIGHT, ge=1, description="requests at once")
        api_key_env: str = Field(
            "OPENAI_API_KEY", description="environment variable holding the API key"
        )
        max_retries: int = Field(4, ge=0, description="retries of a failed request")
        timeout_s: float = Field(600.0, gt=0, description="seconds per request")

    def __init__(self, target: str = "", **options: Any):
        super().__init__(target, **options)
        max_in_flight, api_key_env = self.options.max_in_flight, self.options.api_key_env
        max_retries, timeout_s = self.options.max_retries, self.options.timeout_s
        if not target:
            raise CorebenchError(
                "the openai backend needs a model: --model openai:MODEL@http://HOST:PORT/v1"
            )
        self.model, url = split_target(target)
        self.base_url = url or os.environ.get("OPENAI_BASE_URL")
        # Local servers ignore the key; hosted APIs read it from the environment, never from a spec.
        self.api_key = os.environ.get(api_key_env) or "EMPTY"
        self.max_in_flight = max(1, int(max_in_flight))
        self.max_retries = int(max_retries)
        self.timeout_s = float(timeout_s)
        self._client: Any = None
        self._slots: asyncio.Semaphore | None = None

    def _client_kwargs(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "api_key": self.api_key, "timeout": self.timeout_s}

    def load(self) -> None:
        """Fail early, in one line, when the server cannot be reached or lacks the model."""
        import openai

        client = openai.OpenAI(**{**self._client_kwargs(), "timeout": 10.0}, max_retries=1)
        try:
            served = [m.id for m in client.models.list()]
        except openai.APIConnectionError as exc:
            raise CorebenchError(
                f"cannot reach the OpenAI-compatible server at {self.base_url}: {exc}"
            ) from None
        except openai.APIError as exc:
            raise CorebenchError(
                f"the server at {self.base_url} refused to list models: {exc}"
            ) from None
        finally:
            client.close()
        if served and self.model not in served:
            raise CorebenchError(
                f"the server at {self.base_url} does not serve {self.model!r} (it serves: {', '.join(served)})"
            )

    def label(self) -> str:
        return f"openai:{self.model}"

    def identity(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "model": self.model,
            "base_url": self.base_url,
            "label": self.label(),
        }

    async def generate(self, request: GenerationRequest) -> Generation:
        import openai

        if self._client is None:
            # Retries with exponential backoff are the client library's own (429, 5xx, timeouts).
            self._client = openai.AsyncOpenAI(**self._client_kwargs(), max_retries=self.max_retries)
            self._slots = asyncio.Semaphore(self.max_in_flight)
        assert self._slots is not None
        async with self._slots:
            started = time.perf_counter()
            try:
                response = await self._client.chat.completions.create(
                    model=self.model,
                    messages=[m.model_dump() for m in request.messages],
                    max_tokens=request.max_new_tokens,
                    temperature=request.temperature,
                    top_p=request.top_p if request.temperature > 0 else 1.0,
                    stop=request.stop or None,
                    seed=request.seed,
                )
            except openai.APIError as exc:
                raise CorebenchError(f"openai backend ({self.base_url}): {exc}") from None
            latency = time.perf_counter() - started
        choice = response.choices[0]
        usage = response.usage
        text, stopped = cut_at_stop(choice.message.content or "", request)  # no server stops there
        return Generation(
            text=text,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            finish_reason="length" if choice.finish_reason == "length" and not stopped else "stop",
            latency_s=latency,
        )

    def close(self) -> None:
        self._client = None


@hookimpl
def register_backends(register):
    register(OpenAIBackend)
