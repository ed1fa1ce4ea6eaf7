"""What a checkpoint writes when CoRe-Code's planner prompt asks it for a plan: outlines, or code.

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python measurements/plans_written.py \\
        --model docs/studies/grpo-from-sft/checkpoints/sft-46394c0eed/model

The first validation tasks of the training data (the 60 held out from training, never MBPP+)
get the planner's prompt, as training gives it, and one completion each through the decode
engine, greedy and at temperature 1.0 (seeded), 256 new tokens, the planner phase's budget.
Prints per temperature how many completions hold code (the outline parser finds lines of code
or a code block), how many have every section of the outline, and how many stopped before the
token limit, then the first completion.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from corebench.harness import config as C
from corebench.plugins.systems.corecode.outline import parse_plan
from corebench.training.data import load_train_data
from corebench.training.plans import planner_prompt
from corebench.training.rollouts import chat_ids
from corebench.training.settings import TrainSettings

BUDGET = 256  # the planner phase's max_completion_length in the studies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="a local checkpoint folder")
    parser.add_argument("--tasks", type=int, default=12)
    args = parser.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from corebench.harness.decoding.engine import DecodeEngine
    from corebench.harness.decoding.precision import cpu_dtype

    settings = TrainSettings(
        model=f"hf:{args.model}",
        benchmark_options={"train_from": ["train", "validation", "test", "prompt"]},
        validation_tasks=60,
        data_dir=str(C.data_dir_setting()),
    )
    tasks = load_train_data(settings).validation[: args.tasks]
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=getattr(torch, cpu_dtype()))
    model.eval()
    engine = DecodeEngine(model, tokenizer, "cpu", 32)
    ids = [chat_ids(tokenizer, planner_prompt(t)) for t in tasks]
    try:
        for temperature in (0.0, 1.0):
            outs = engine.complete(
                ids, max_new_tokens=BUDGET, temperature=temperature, seeds=list(range(len(ids)))
            )
            texts = [tokenizer.decode(o, skip_special_tokens=True) for o in outs]
            outlines = [parse_plan(t) for t in texts]
            code = sum(
                bool(o.code_lines) or "```" in t for o, t in zip(outlines, texts, strict=True)
            )
            whole = sum(not o.missing for o in outlines)
            stopped = sum(len(o) < BUDGET for o in outs)
            print(
                f"temperature {temperature}: {len(texts)} completions; hold code {code}, every "
                f"outline section {whole}, stopped before {BUDGET} tokens {stopped}"
            )
        print(f"\nthe first, at temperature 1.0:\n{texts[0]}")
    finally:
        engine.close()


if __name__ == "__main__":
    main()
