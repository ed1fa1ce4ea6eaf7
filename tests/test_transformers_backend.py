"""The transformers backend on the real embedded model: its continuous-batching decode loop
against transformers' own ``generate``, slots refilled mid-flight, stop patterns, per-request
sampling, and out-of-memory errors."""

from __future__ import annotations

import re

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


def test_greedy_decoding_matches_transformers_generate(float32_backend):
    # the engine's own loop (cache, positions, masks) and its CPU decode attention against
    # transformers' reference decode with transformers' own sdpa attention
    import torch

    from corebench.harness.decoding.attention import DECODE

    tok, model = float32_backend._tokenizer, float32_backend._model
    ours = [float32_backend.generate_batch([r])[0].text for r in requests()]
    assert model.config._attn_implementation == DECODE
    model.set_attn_implementation("sdpa")
    try:
        for request, text_ours in zip(requests(), ours, strict=True):
            text = tok.apply_chat_template(
                [m.model_dump() for m in request.messages],
                add_generation_prompt=True,
                tokenize=False,
            )
            ids = tok(text, return_tensors="pt", add_special_tokens=False)
            with torch.inference_mode():
                out = model.generate(**ids, max_new_tokens=24, do_sample=False)
            expected = tok.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
            assert text_ours == expected
    finally:
        model.set_attn_implementation(DECODE)


@pytest.mark.parametrize("mask_kind", ["bool", "float", "none"])
def test_decode_attention_equals_sdpa_with_padding_and_shared_heads(mask_kind):
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from corebench.harness.decoding.attention import decode_attention

    torch.manual_seed(0)
    module = torch.nn.Module()
    module.num_key_value_groups, module.is_causal = 3, True
    batch, heads, kv_heads, cached, dim = 4, 9, 3, 37, 16
    key = torch.randn(batch, kv_heads, cached + 5, dim)[:, :, :cached]  # a view, as the engine's
    value = torch.randn(batch, kv_heads, cached, dim)
    allowed = torch.ones(batch, 1, 1, cached, dtype=torch.bool)
    allowed[1, ..., :10] = False  # left padding of different widths
    allowed[3, ..., :36] = False
    mask = {
        "bool": allowed,
        "float": torch.zeros(batch, 1, 1, cached).masked_fill(~allowed, float("-inf")),
        "none": None,
    }[mask_kind]
    query = torch.randn(batch, heads, 1, dim)
    ours, _ = decode_attention(module, query, key, value, mask, scaling=0.3)
    theirs, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=0.3)
    assert ours.shape == theirs.shape == (batch, 1, heads, dim)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    if mask is not None:  # a padded position changes nothing
        poked = value.clone()
        poked[3, :, :36] += 100.0
        again, _ = decode_attention(module, query, key, poked, mask, scaling=0.3)
        torch.testing.assert_close(again[3], ours[3])
    prefill = torch.randn(batch, heads, 5, dim)  # more than one query token: sdpa itself
    causal = torch.ones(batch, 1, 5, cached, dtype=torch.bool).tril(cached - 5)
    torch.testing.assert_close(
        decode_attention(module, prefill, key, value, causal)[0],
        sdpa_attention_forward(module, prefill, key, value, causal)[0],
    )


def test_batched_greedy_outputs_equal_one_at_a_time_in_float32(float32_backend):
    batched = float32_backend.generate_batch(requests())
    assert [g.batch_size for g in batched] == [3, 3, 3]
    single = [float32_backend.generate_batch([r])[0] for r in requests()]
    assert [g.text for g in batched] == [g.text for g in single]


def test_a_finished_request_frees_its_slot_for_a_waiting_one(float32_backend):
    from corebench.harness.decoding.engine import DecodeEngine

    engine = DecodeEngine(float32_backend._model, float32_backend._tokenizer, "cpu", max_batch=2)
    short, long_a, long_b = requests(24)
    short = short.model_copy(update={"max_new_tokens": 4})
    results = engine.run([short, long_a, long_b])
    # the third request joined the running batch when the short one left: 3 + 23 decode steps
    # (each first token comes from the prefill), where static batches of two take 23 + 23; and
    # never three rows at once
    assert 26 <= engine.stats.steps <= 30, engine.stats
    assert [g.batch_size for g in results] == [2, 2, 2]
    assert [g.completion_tokens for g in results] == [4, 24, 24]
    # joining mid-flight (left-padded into the running cache) changes nothing it decodes
    alone = [float32_backend.generate_batch([r])[0].text for r in (short, long_a, long_b)]
    assert [g.text for g in results] == alone
    engine.close()


def test_an_answer_stops_where_its_stop_pattern_matches(float32_backend):
    request = requests(48)[0]
    free = float32_backend.generate_batch([request])[0]
    assert len(free.text) > 20
    word = free.text.split()[2]
    cut = float32_backend.generate_batch(
        [request.model_copy(update={"stop_pattern": re.escape(word)})]
    )[0]
    assert cut.finish_reason == "stop" and cut.text.endswith(word)
    assert free.text.startswith(cut.text) and cut.completion_tokens < free.completion_tokens


def test_out_of_memory_is_one_clear_error(float32_backend, monkeypatch):
    from corebench.harness.decoding.engine import DecodeEngine

    engine = DecodeEngine(float32_backend._model, float32_backend._tokenizer, "cpu", max_batch=4)

    class NoRoom:
        generation_config = float32_backend._model.generation_config

        def parameters(self):
            return float32_backend._model.parameters()

        def __call__(self, **kwargs):
            raise RuntimeError(
                "DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 GB"
            )

    engine.model = NoRoom()
    monkeypatch.setattr(float32_backend, "_engine", engine)
    with pytest.raises(CorebenchError, match=r"out of memory on cpu .* smaller max_batch"):
        float32_backend.generate_batch(requests()[:2])
    monkeypatch.undo()
    engine.close()
    assert float32_backend.generate_batch(requests(4)[:1])[0].completion_tokens == 4


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


def test_rows_sharing_a_prompt_are_prefilled_once_and_decode_as_if_alone(float32_backend):
    """A trainer's group repeats one prompt: the engine prefills it once and hands its keys
    and values to every row; greedy rows then equal the prompt decoded alone, and sampled rows
    equal the same seeds drawn one at a time."""
    engine = float32_backend.engine
    tok = float32_backend._tokenizer
    chats = [
        tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                tokenize=False)
        for p in PROMPTS[:2]
    ]  # fmt: skip
    ids = [tok(c, add_special_tokens=False)["input_ids"] for c in chats]
    alone = engine.complete([ids[0]], max_new_tokens=12)
    before = engine.stats.prefill_tokens
    grouped = engine.complete([ids[0]] * 3 + [ids[1]] * 2, max_new_tokens=12)
    assert engine.stats.prefill_tokens - before == len(ids[0]) + len(ids[1])  # once each
    assert grouped[:3] == alone * 3
    seeds = [11, 12, 13]
    drawn = engine.complete([ids[0]] * 3, max_new_tokens=12, temperature=1.0, seeds=seeds)
    one_by_one = [
        engine.complete([ids[0]], max_new_tokens=12, temperature=1.0, seeds=[s])[0] for s in seeds
    ]
    assert drawn == one_by_one and len({tuple(d) for d in drawn}) > 1
