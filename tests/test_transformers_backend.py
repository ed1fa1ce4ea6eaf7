"""The transformers backend on the real embedded model: batched greedy outputs in float32, and
out-of-memory handling (a batch that does not fit is split; one request that does not fit is one
clear error)."""

from __future__ import annotations

import pytest

from corebench.harness import GenerationRequest
from corebench.harness.errors import CorebenchError
from corebench.harness.records import Message

pytestmark = pytest.mark.model

PROMPTS = [
    "Write a Python function that reverses a string.",
    "Write a Python function is_even(n).",
    "What is a list comprehension? Answer with code.",
]


def requests(max_new_tokens: int = 24) -> list[GenerationRequest]:
    return [
        GenerationRequest(messages=[Message(role="user", content=p)], max_new_tokens=max_new_tokens)
        for p in PROMPTS
    ]


@pytest.fixture(scope="module")
def float32_backend():
    from corebench.plugins.backends.embedded import EmbeddedBackend

    backend = EmbeddedBackend(dtype="float32")
    backend.load()
    return backend


def test_batched_greedy_outputs_equal_one_at_a_time_in_float32(float32_backend):
    batched = float32_backend.generate_batch(requests())
    assert [g.batch_size for g in batched] == [3, 3, 3]
    single = [float32_backend.generate_batch([r])[0] for r in requests()]
    assert [g.text for g in batched] == [g.text for g in single]


def test_a_batch_that_does_not_fit_is_split_and_a_single_request_is_one_error(
    float32_backend, monkeypatch
):
    import torch

    model = float32_backend._model
    real_generate = model.generate
    seen: list[int] = []

    def generate_with_room_for_one(**kwargs):
        rows = kwargs["input_ids"].shape[0]
        seen.append(rows)
        if rows > 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_generate(**kwargs)

    monkeypatch.setattr(model, "generate", generate_with_room_for_one)
    split = float32_backend.generate_batch(requests())
    assert seen == [3, 1, 2, 1, 1]  # 3 -> 1 + 2 -> 1 + (1 + 1)
    assert [g.batch_size for g in split] == [1, 1, 1] and all(g.text for g in split)

    def no_room(**kwargs):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 GB")

    monkeypatch.setattr(model, "generate", no_room)
    with pytest.raises(CorebenchError, match=r"out of memory on cpu .* shorter --max-new-tokens"):
        float32_backend.generate_batch(requests()[:2])


def test_a_sample_does_not_depend_on_the_batch_it_was_drawn_in(float32_backend):
    # temperature > 0: each request samples with its own generator, seeded by the request
    def sampled(prompt: str, seed: int) -> GenerationRequest:
        return GenerationRequest(
            messages=[Message(role="user", content=prompt)],
            max_new_tokens=24,
            temperature=1.0,
            top_p=0.95,
            seed=seed,
        )

    alone = float32_backend.generate_batch([sampled(PROMPTS[0], 7)])[0].text
    in_batch = float32_backend.generate_batch(
        [sampled(PROMPTS[1], 3), sampled(PROMPTS[0], 7), sampled(PROMPTS[2], 11)]
    )
    reordered = float32_backend.generate_batch([sampled(PROMPTS[0], 7), sampled(PROMPTS[2], 5)])
    assert in_batch[1].text == alone == reordered[0].text
    other_seed = float32_backend.generate_batch([sampled(PROMPTS[0], 8)])[0].text
    assert other_seed != alone  # it does sample: another seed, another text
