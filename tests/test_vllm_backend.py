"""The vllm backend's request and option mapping (vLLM itself cannot be installed on CPU machines)."""

from types import SimpleNamespace

import pytest

from corebench.harness import GenerationRequest, Message
from corebench.harness.errors import CorebenchError
from corebench.harness.extract import CLOSED_CODE_BLOCK
from corebench.harness.modelspec import parse_model_ref
from corebench.plugins.backends.vllm_backend import (
    VllmBackend,
    sampling_kwargs,
    to_generation,
)


def request(**kw):
    return GenerationRequest(messages=[Message(role="user", content="hi")], max_new_tokens=64, **kw)


def test_engine_options_are_typed_and_checked():
    # as a model spec gives them: text after '?', decoded, then checked by the backend's Options
    ref = parse_model_ref("vllm:Qwen/Qwen2.5-Coder-7B?tensor_parallel_size=4&dtype=bfloat16")
    backend = VllmBackend(ref.target, **ref.values())
    assert backend.engine == {
        "model": "Qwen/Qwen2.5-Coder-7B",
        "tensor_parallel_size": 4,
        "dtype": "bfloat16",
    }
    assert backend.max_batch == 256
    eager = parse_model_ref("vllm:m?enforce_eager=false")
    assert VllmBackend(eager.target, **eager.values()).engine["enforce_eager"] is False
    with pytest.raises(CorebenchError, match="Did you mean 'tensor_parallel_size'"):
        VllmBackend("m", tensor_paralel_size=2)
    with pytest.raises(CorebenchError, match="gpu_memory_utilization: input should be"):
        VllmBackend("m", gpu_memory_utilization="lots")
    with pytest.raises(CorebenchError, match="tensor_parallel_size: input should be a valid int"):
        VllmBackend("m", tensor_parallel_size="4")  # text: only a model spec's is decoded


def test_greedy_and_sampled_requests_map_to_sampling_params():
    greedy = sampling_kwargs(request(temperature=0.0, top_p=0.9, seed=7, stop=["```\n"]))
    assert greedy == {
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 64,
        "stop": ["```\n"],
        "seed": None,
    }
    sampled = sampling_kwargs(request(temperature=0.8, top_p=0.95, seed=7))
    assert sampled == {"temperature": 0.8, "top_p": 0.95, "max_tokens": 64, "stop": None, "seed": 7}


def test_request_output_becomes_a_generation():
    output = SimpleNamespace(
        prompt_token_ids=[1, 2, 3],
        outputs=[SimpleNamespace(text="def f(): pass", token_ids=[5, 6], finish_reason="length")],
    )
    generation = to_generation(output, request(), latency_s=0.5, batch_size=8)
    assert (generation.prompt_tokens, generation.completion_tokens, generation.finish_reason) == (
        3,
        2,
        "length",
    )
    assert generation.batch_size == 8


def test_a_stop_pattern_cuts_the_text_vllm_could_not_stop():
    answer = "```python\ndef f(): pass\n```\nMore text ```python\nx\n```"
    output = SimpleNamespace(
        prompt_token_ids=[1],
        outputs=[SimpleNamespace(text=answer, token_ids=[5] * 30, finish_reason="length")],
    )
    wanted = request(stop_pattern=CLOSED_CODE_BLOCK)
    generation = to_generation(output, wanted, latency_s=0.1, batch_size=1)
    assert generation.text == "```python\ndef f(): pass\n```"
    assert generation.finish_reason == "stop"


def test_without_vllm_the_error_says_what_to_do():
    backend = VllmBackend("some/model")
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(CorebenchError, match=r"corebench\[vllm\].*vllm serve"):
            backend.load()
    else:  # pragma: no cover - only on machines with vLLM
        pytest.skip("vLLM is installed here")
