"""Where a GRPO step's time goes on this machine, before and after corebench's rollouts:
generation, sandbox reward, and the update (the rest of the step), per step, for the same
training run twice: rollouts through TRL's own ``model.generate`` (``rollouts = "trl"``, what
training used before) and through corebench's decode engine (``rollouts = "engine"``).

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python measurements/grpo_step_split.py \\
        [--model embedded] [--steps 4] [--generations 8] [--prompts 2] [--tokens 256] [--float32]

Each run is ``corebench train grpo`` in a process of its own (timings from the run's own
``timing.txt``: wall-clock seconds around TRL's generation call and the reward call, and the
whole step); the first step of each run is left out of the means (it loads and warms up). Also
checks that the engine's rollouts are reproducible: the same call (seeds, weights, prompts)
gives the same tokens; and says how many of a prompt's completions decoded beside another
prompt's match the same completions decoded alone (rounding depends on the batch's shape; these
decode in the CPU's fastest type, ``rollout_dtype = "auto"``), and where the others first differ.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from corebench.training.progress import read_rows

CLI = [sys.executable, "-m", "corebench.harness.cli"]


def train(out: Path, args: argparse.Namespace, rollouts: str, steps: int) -> list[list[float]]:
    settings = {
        "model": args.model,
        "steps": steps,
        "num_generations": args.generations,
        "prompts_per_step": args.prompts,
        "max_completion_length": args.tokens,
        "temperature": 1.0,
        "learning_rate": 2e-6,
        "bf16": not args.float32,
        "save_steps": 1000,
        "eval_benchmarks": ["mbpp"],
        "rollouts": rollouts,
        "seed": 0,
    }
    command = [*CLI, "train", "grpo", "--out", str(out)]
    for key, value in settings.items():
        command += ["--set", f"{key}={json.dumps(value)}"]
    subprocess.run(command, check=True, capture_output=True, text=True)
    return read_rows(out / "timing.txt")


def means(rows: list[list[float]]) -> dict[str, float]:
    kept = rows[1:] or rows  # the first step loads and warms up
    generation = statistics.fmean(r[1] for r in kept)
    reward = statistics.fmean(r[2] for r in kept)
    total = statistics.fmean(r[3] for r in kept)
    tokens = sum(r[4] for r in kept) / sum(r[1] for r in kept)
    return {"generation": generation, "reward": reward, "update": total - generation - reward,
            "total": total, "tok/s": tokens}  # fmt: skip


def reproducible(args: argparse.Namespace) -> str:
    """The same call twice, then one prompt's completions alone, with the same seeds."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from corebench.harness.config import data_dir_setting
    from corebench.harness.registry import default_plugins
    from corebench.training.models import local_checkpoint
    from corebench.training.rollouts import Rollouts, chat_ids, row_seed
    from corebench.training.systems import system

    path = local_checkpoint(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    rollouts = Rollouts(AutoModelForCausalLM.from_pretrained(path, dtype="float32"), tokenizer)
    tasks = default_plugins().benchmarks.get("mbpp").component(data_dir_setting()).tasks("train")
    prompt = system("direct").role_prompt
    ids = [chat_ids(tokenizer, prompt("model", t)) for t in tasks[:2]]
    g = args.generations
    seeds = [row_seed(0, 0, 0, i) for i in range(2 * g)]
    options = {"max_new_tokens": args.tokens, "temperature": 1.0}
    together = rollouts.sample([ids[0]] * g + [ids[1]] * g, seeds=seeds, **options)
    again = rollouts.sample([ids[0]] * g + [ids[1]] * g, seeds=seeds, **options)
    alone = rollouts.sample([ids[0]] * g, seeds=seeds[:g], **options)
    rollouts.close()
    differ = [
        next((i for i, (a, b) in enumerate(zip(x, y, strict=False)) if a != b), min(len(x), len(y)))
        for x, y in zip(together[:g], alone, strict=True)
        if x != y
    ]
    return (
        f"the same call twice: {'the same tokens' if again == together else 'DIFFERENT tokens'};"
        f" beside the other prompt against alone: {g - len(differ)} of {g} completions identical"
        + (f", the others first differ at tokens {sorted(differ)}" if differ else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--float32", action="store_true",
                        help="train in float32 (bf16 = false), as on a CPU that emulates bfloat16")  # fmt: skip
    args = parser.parse_args()
    from corebench.harness.decoding.precision import cpu_dtype

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        split = {
            path: means(train(root / path, args, path, args.steps)) for path in ("trl", "engine")
        }
        precision = "float32" if args.float32 else "bf16 autocast"
        print(f"GRPO step, {args.prompts} prompts x {args.generations} completions, at most "
              f"{args.tokens} tokens, T=1.0, {precision}, engine rollouts in {cpu_dtype()}; mean "
              f"seconds per step over steps 2-{args.steps}")  # fmt: skip
        print(f"{'rollouts':<10}{'generation':>12}{'reward':>10}{'update':>10}{'total':>10}"
              f"{'tok/s':>10}")  # fmt: skip
        for path, parts in split.items():
            times = "".join(
                f"{parts[k]:>10.2f}s" for k in ("generation", "reward", "update", "total")
            )
            print(f"{path:<10}{times}{parts['tok/s']:>10.1f}")
        speedup = split["engine"]["tok/s"] / split["trl"]["tok/s"]
        print(f"generation: {speedup:.2f}x the tokens per second through the engine; "
              f"{split['trl']['generation'] / split['engine']['generation']:.2f}x less time per "
              f"step; whole step: {split['trl']['total'] / split['engine']['total']:.2f}x")  # fmt: skip
    print(f"engine rollouts, same seeds and weights: {reproducible(args)}")


if __name__ == "__main__":
    main()
