"""How fast any decoder can go on this CPU: a decode step against the matrix products every
decoder computes in it.

    .venv/bin/python measurements/decode_step_floor.py [--dtype float32] [--context 300]

A decode step feeds each row one token through every linear layer of the model (the output head
included): products of a ``[rows, in]`` activation with each weight. Any decoder computes them,
``model.generate`` and corebench's decode engine alike; what a decoder can save is the rest
(attention over the cache, copies, rows that already ended). For the embedded SmolLM2-135M,
per number of rows, this prints the engine's whole decode step over a ``--context``-token cache
(the model's forward with the engine's in-place cache and CPU decode attention, as in its
loop, sampling left out) and its linear layers' products alone (the same weights, random
activations), best of 3 repetitions of 10 steps after a warm-up, and how many rows a second
each is worth. A rollout of R rows that all run T tokens takes at least T times the products'
time at R rows in any decoder: the floor the engine's speedup over ``model.generate`` is
bounded by at that batch.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

from corebench.harness.decoding.attention import use_decode_attention
from corebench.harness.decoding.engine import growing_cache, pairs_of
from corebench.harness.decoding.precision import cpu_dtype, native_bfloat16
from corebench.training.models import local_checkpoint

ROWS = (1, 8, 16, 32, 64)


def best_ms(work, repeats: int = 3, steps: int = 10) -> float:
    """The fastest of ``repeats`` means of ``steps`` calls, after one warm-up call, in ms."""
    work()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(steps):
            work()
        times.append((time.perf_counter() - started) / steps)
    return 1000 * min(times)


def linear_products(model: torch.nn.Module, rows: int, dtype: torch.dtype):
    """One step's products of every linear layer's weight with ``rows`` random activations."""
    layers = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    inputs = [torch.randn(rows, m.in_features, dtype=dtype) for m in layers]

    def work() -> None:
        for layer, x in zip(layers, inputs, strict=True):
            F.linear(x, layer.weight, layer.bias)

    return work, sum(m.weight.numel() for m in layers)


def decode_step(model: torch.nn.Module, rows: int, context: int):
    """The engine's decode step (its cache and attention) for ``rows`` rows over ``context``
    cached tokens; the cache is cut back to ``context`` before every step."""
    ids = torch.randint(0, 1000, (rows, context))
    mask = torch.ones(rows, context + 1, dtype=torch.long)
    out = model(input_ids=ids, attention_mask=mask[:, :context], use_cache=True)
    cache = growing_cache(pairs_of(out.past_key_values))
    token = torch.randint(0, 1000, (rows, 1))
    positions = torch.full((rows, 1), context)

    def work() -> None:
        for layer in cache.layers:
            layer.length = context
            layer._view()
        model(input_ids=token, attention_mask=mask, position_ids=positions,
              past_key_values=cache, use_cache=True)  # fmt: skip

    return work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--context", type=int, default=300)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    model = AutoModelForCausalLM.from_pretrained(local_checkpoint("embedded"), dtype=dtype).eval()
    use_decode_attention(model)
    print(f"{torch.get_num_threads()} threads; native bfloat16: {native_bfloat16('cpu')} "
          f"(the CPU's type: {cpu_dtype()}); {args.dtype}, {args.context} cached tokens")  # fmt: skip
    print("| rows | decode step ms | linear products ms | share | rows/s at the step | "
          "rows/s at the products | products GFLOP/s |\n|---|---|---|---|---|---|---|")  # fmt: skip
    with torch.inference_mode():
        for rows in ROWS:
            step = best_ms(decode_step(model, rows, args.context))
            work, weights = linear_products(model, rows, dtype)
            products = best_ms(work)
            print(f"| {rows} | {step:.1f} | {products:.1f} | {products / step:.0%} | "
                  f"{1000 * rows / step:.0f} | {1000 * rows / products:.0f} | "
                  f"{2 * rows * weights / products / 1e6:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
