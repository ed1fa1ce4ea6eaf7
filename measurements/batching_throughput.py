"""Embedded-model generation on this machine: the ceiling, a real corecode run, and wasted slots,
before (static batches through ``model.generate``, as corebench decoded until the decode engine
came) and after (continuous batching, ``harness/decoding/engine.py``).

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python measurements/batching_throughput.py \
        [--tasks 20] [--skip-before] [--ceiling-only]

Prints:
1. raw decode throughput at batch 1, 8, 16 and 32 (one decode step over a 600-token context),
   with transformers' ``DynamicCache`` (which concatenates the whole cache every step), with
   the engine's in-place cache, and with that cache and the engine's CPU decode attention
   (``attention.py``) instead of ``sdpa``: the ceiling a run can approach; and the products of
   the model's linear layers alone (every weight, the output head's too, times that many random
   activation rows): the part of a decode step that ``model.generate`` and the engine both
   compute with these float32 (or bfloat16) products, so a rollout of R rows and T tokens takes
   at least T times their time at R rows through either (``--ceiling-only``: this part only);
2. the README's first command (corecode, MBPP+, ``--limit`` tasks) both ways: wall time, useful
   completion tokens per second, pass rates;
3. the share of batch slots wasted: row-steps computed for rows that had already finished (a
   static batch runs until its longest member ends) over all row-steps computed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from corebench.harness import Generation, GenerationRequest, RunConfig, hookimpl
from corebench.harness.backend import cut_at_stop
from corebench.harness.batching import Batcher
from corebench.harness.config import data_dir_setting
from corebench.harness.registry import Origin, load_plugins
from corebench.harness.runner import Runner
from corebench.harness.store import Store
from corebench.harness.summary import summarize
from corebench.plugins.backends.embedded import EmbeddedBackend

CONTEXT = 600


class StaticEmbedded(EmbeddedBackend):
    """Before: requests coalesced into static batches of 16, each decoded by ``model.generate``
    until its longest member ends."""

    name = "embedded-static"
    computed = useful = 0

    def __init__(self, target: str = "", **options):
        super().__init__(target, **{"max_batch": 16, **options})
        self._batcher: Batcher | None = None

    async def generate(self, request: GenerationRequest) -> Generation:
        if self._batcher is None:
            self._batcher = Batcher(self.generate_batch, self.max_batch)
        return await self._batcher.submit(request)

    def generate_batch(self, requests: list[GenerationRequest]) -> list[Generation]:
        import torch

        self.load()
        tok, model = self._tokenizer, self._model
        prompts = [
            tok.apply_chat_template(
                [m.model_dump() for m in r.messages], add_generation_prompt=True, tokenize=False
            )
            for r in requests
        ]
        encoded = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        started = time.perf_counter()
        with torch.inference_mode():
            output = model.generate(
                **encoded,
                max_new_tokens=max(r.max_new_tokens for r in requests),
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=tok.pad_token_id,
            )
        latency = time.perf_counter() - started
        width = encoded["input_ids"].shape[1]
        eos = model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos]) | {tok.eos_token_id}
        StaticEmbedded.computed += len(requests) * (output.shape[1] - width)
        results = []
        for row, request in enumerate(requests):
            new, finish = output[row, width:].tolist(), "length"
            for pos, token in enumerate(new):
                if token in eos_ids:
                    new, finish = new[: pos + 1], "stop"
                    break
            new = new[: request.max_new_tokens]
            text, stopped = cut_at_stop(tok.decode(new, skip_special_tokens=True), request)
            StaticEmbedded.useful += len(new)
            results.append(
                Generation(
                    text=text,
                    prompt_tokens=int(encoded["attention_mask"][row].sum()),
                    completion_tokens=len(new),
                    finish_reason="stop" if stopped or finish == "stop" else "length",
                    latency_s=latency,
                    batch_size=len(requests),
                )
            )
        return results


class CountedEmbedded(EmbeddedBackend):
    """After: the default backend, keeping its engine's counts when it closes."""

    name = "embedded-counted"
    stats = None

    def close(self) -> None:
        if self._engine is not None:
            CountedEmbedded.stats = self._engine.stats
        super().close()


class _Plugin:
    @hookimpl
    def register_backends(self, register):
        register(StaticEmbedded)
        register(CountedEmbedded)


def ceiling() -> None:
    import torch
    from transformers import DynamicCache

    from corebench.harness.decoding.attention import DECODE
    from corebench.harness.decoding.engine import pairs_of, slot_cache

    backend = EmbeddedBackend()
    backend.load()
    model = backend._model
    print(
        f"1. decode throughput, {CONTEXT}-token context, {backend.dtype}, {torch.get_num_threads()} threads"
    )
    for batch in (1, 8, 16, 32):
        with torch.inference_mode():
            products = linear_products(model, batch)
            products()  # warm-up
            started = time.perf_counter()
            for _ in range(8):
                products()
            product_ms = 1000 * (time.perf_counter() - started) / 8
            model.set_attn_implementation("sdpa")
            prefill = model(input_ids=torch.randint(100, 1000, (batch, CONTEXT)), use_cache=True)
            pairs = pairs_of(prefill.past_key_values)
            token = torch.randint(100, 1000, (batch, 1))
            rates = []
            for grow, attention in ((False, "sdpa"), (True, "sdpa"), (True, DECODE)):
                model.set_attn_implementation(attention)
                cache = slot_cache(pairs) if grow else DynamicCache(ddp_cache_data=pairs)
                mask = torch.ones(batch, CONTEXT, dtype=torch.long)
                steps, started = 8, time.perf_counter()
                for _ in range(steps):
                    mask = torch.cat([mask, mask.new_ones(batch, 1)], dim=1)
                    model(
                        input_ids=token,
                        attention_mask=mask,
                        position_ids=mask.sum(-1, keepdim=True) - 1,
                        past_key_values=cache,
                        use_cache=True,
                    )
                rates.append(batch * steps / (time.perf_counter() - started))
        print(
            f"   batch {batch:>2}: {rates[0]:6.1f} tok/s with DynamicCache and sdpa, "
            f"{rates[1]:6.1f} with the engine's cache and sdpa, "
            f"{rates[2]:6.1f} with the engine's cache and its decode attention "
            f"({1000 * batch / rates[2]:.1f} ms a step); the linear products alone "
            f"{product_ms:.1f} ms a step ({1000 * batch / product_ms:.1f} rows/s)"
        )
    backend.close()


def linear_products(model, rows: int):
    """One decode step's products of every linear layer's weight (the output head's too) with
    ``rows`` random activation rows, as a callable."""
    import torch
    import torch.nn.functional as F

    layers = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    inputs = [torch.randn(rows, m.in_features, dtype=m.weight.dtype) for m in layers]

    def run() -> None:
        for layer, x in zip(layers, inputs, strict=True):
            F.linear(x, layer.weight, layer.bias)

    return run


def corecode(model: str, tasks: int, out: Path, concurrency: int, options: dict) -> None:
    plugins = load_plugins(extra=[(_Plugin(), Origin("batching-benchmark", "benchmarks", "0"))])
    config = RunConfig(
        benchmark="mbpp", system="corecode", model=model, limit=tasks, system_options=options
    )
    runner = Runner(
        config, out, data_dir=data_dir_setting(), concurrency=concurrency, plugins=plugins
    )
    started = time.perf_counter()
    runner.run()
    wall = time.perf_counter() - started
    store = Store(out, create=False)
    tokens = sum(s.completion_tokens for s, _ in store.samples())
    summary = summarize(store)
    print(
        f"   {model:<16} {wall:6.1f} s, {tokens} completion tokens, {tokens / wall:5.1f} useful "
        f"tok/s, pass@1 base {100 * summary['pass@k_base'][1]:.1f}%, "
        f"all {100 * summary['pass@k'][1]:.1f}%"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--skip-before", action="store_true")
    parser.add_argument("--ceiling-only", action="store_true", help="part 1 only")
    args = parser.parse_args()
    ceiling()
    if args.ceiling_only:
        return
    print(f"2. corecode on {args.tasks} MBPP+ tasks (README command 1)")
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_before:  # 512-token caps for both roles, 16 in flight: as before
            old = {"plan_max_new_tokens": 512, "code_max_new_tokens": 512}
            corecode("embedded-static", args.tasks, Path(tmp, "before"), 16, old)
        corecode("embedded-counted", args.tasks, Path(tmp, "after"), 32, {})
    stats = CountedEmbedded.stats
    print("3. batch slots wasted (row-steps computed for rows that had finished / all row-steps)")
    if not args.skip_before:
        wasted = 1 - StaticEmbedded.useful / max(StaticEmbedded.computed, 1)
        print(f"   before: {100 * wasted:4.1f}% of {StaticEmbedded.computed} row-steps")
    computed = stats.row_steps + stats.first_tokens
    print(
        f"   after:  {100 * (1 - stats.completion_tokens / max(computed, 1)):4.1f}% of {computed} "
        f"row-steps ({stats.steps} decode steps, {stats.prefill_tokens} prompt tokens prefilled)"
    )


if __name__ == "__main__":
    main()
