"""Whether this CPU computes bfloat16 natively, and what that is worth: the embedded model's
decoding through corebench's decode engine and one training forward and backward pass, each in
float32 and in bfloat16, and the type corebench picks here (``precision.cpu_dtype``: the hf
backend's ``dtype=auto``, training's rollouts and the prompt filter).

    .venv/bin/python measurements/cpu_precision.py [--batch 32] [--tokens 128] [--repeats 2]

Prints the CPU's bfloat16 features (AVX512-BF16, AMX), then per type: decode tokens per second
at ``--batch`` rows of ``--tokens`` sampled tokens, and seconds per forward and backward pass of
8 sequences of 300 tokens (float32 weights; bfloat16 as ``bf16 = true`` trains, under
autocast). Each is the best of ``--repeats`` after a warm-up. Run it alone: it times wall
clock, and anything beside it slows both types.
"""

from __future__ import annotations

import argparse
import time

import torch

from corebench.harness.decoding.engine import DecodeEngine
from corebench.harness.decoding.precision import cpu_dtype
from corebench.training.models import local_checkpoint
from corebench.training.rollouts import chat_ids

PROMPT = "Write a Python function to find the shared elements from the given two lists."


def best_of(repeats: int, run) -> float:
    run()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def decode_rate(path, tokenizer, dtype: torch.dtype, batch: int, tokens: int, repeats: int):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()
    engine = DecodeEngine(model, tokenizer, "cpu", batch)
    ids = chat_ids(tokenizer, PROMPT)
    made: list[int] = []

    def run() -> None:
        outs = engine.complete([ids] * batch, max_new_tokens=tokens, temperature=1.0,
                               seeds=list(range(batch)))  # fmt: skip
        made.append(sum(map(len, outs)))

    seconds = best_of(repeats, run)
    engine.close()
    return made[-1] / seconds


def update_seconds(path, autocast: bool, repeats: int) -> float:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    ids = torch.randint(
        0, model.config.vocab_size, (8, 300), generator=torch.Generator().manual_seed(0)
    )

    def run() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(ids, labels=ids).loss
        loss.backward()
        model.zero_grad()

    return best_of(repeats, run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    path = local_checkpoint("embedded")
    tokenizer = AutoTokenizer.from_pretrained(path)
    print(f"AVX512-BF16 {torch.cpu._is_avx512_bf16_supported()}, AMX "
          f"{torch.cpu._is_amx_tile_supported()}, {torch.get_num_threads()} threads: "
          f"corebench decodes in {cpu_dtype()} here")  # fmt: skip
    rows = {}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        rate = decode_rate(path, tokenizer, dtype, args.batch, args.tokens, args.repeats)
        step = update_seconds(path, dtype is torch.bfloat16, args.repeats)
        rows[name] = (rate, step)
        print(f"{name:>9}: decode {rate:6.1f} tok/s at batch {args.batch}; forward and backward "
              f"of 8 × 300 tokens {step:5.1f} s")  # fmt: skip
    (fr, fs), (br, bs) = rows["float32"], rows["bfloat16"]
    print(f"bfloat16 against float32: decode {br / fr:.2f}x the rate, a training pass "
          f"{bs / fs:.2f}x the time")  # fmt: skip


if __name__ == "__main__":
    main()
