"""Where a GRPO step's time goes on this machine, before and after corebench's rollouts:
generation, sandbox reward, and the update (the rest of the step), per step, for the same
training run twice: rollouts through TRL's own ``model.generate`` (``rollouts = "trl"``, what
training used before) and through corebench's decode engine (``rollouts = "engine"``).

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python measurements/grpo_step_split.py \\
        [--model embedded] [--steps 4] [--generations 8] [--prompts 2] [--tokens 256] [--float32]
        [--threads [--rounds 3]] [--update [--rounds 3] [--method grpo|magrpo]]

Each run is ``corebench train grpo`` in a process of its own (timings from the run's own
``timing.txt``: wall-clock seconds around TRL's generation call and the reward call, and the
whole step); the first step of each run is left out of the means (it loads and warms up). Also
checks that the engine's rollouts are reproducible: the same call (seeds, weights, prompts)
gives the same tokens; and says how many of a prompt's completions decoded beside another
prompt's match the same completions decoded alone (rounding depends on the batch's shape; these
decode in the CPU's fastest type, ``rollout_dtype = "auto"``), and where the others first differ.

``--threads`` instead decodes one step's rollouts (the first ``--prompts`` MBPP training
prompts, each ``--generations`` times, temperature 1.0) three ways in one process, in float32,
each round in a rotated order: TRL's path (``model.generate``, sampling), the decode engine
driven by the thread that loaded the model (what a trainer's rollouts do), and the same engine
driven by a second thread (what every engine call did before blocking calls drove the loop
themselves). Prints per way the median wall seconds, completion tokens per second and the
process's voluntary context switches during the call (``getrusage``: GNU OpenMP waking sleeping
workers by system call shows there), and whether the engine gave the same tokens from either
thread. Run it alone: it times wall clock.

``--update`` instead trains the same short run (``--method``: GRPO, or MAGRPO's pair on one
prompt a step; rank-1 LoRA at 1e-4, engine rollouts) with the update's log-probabilities
computed over the whole padded batch (``update_scoring = "trl"``: TRL's own; for MAGRPO one
forward pass per group) and a few rows of like length at a time (``"by-length"``,
``training/update_scoring.py``), runs in a rotated order, and prints each step's update time
(the step less generation and reward: forward, backward, optimizer) and the gradient norm of
the first update (MAGRPO's: the helper's), at the first step that updates (GRPO's first,
MAGRPO's second), whose completions are the same in every run (same seed and weights), as are
its gradients if the two ways agree.
"""

from __future__ import annotations

import argparse
import ast
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corebench.training.progress import read_rows

CLI = [sys.executable, "-m", "corebench.harness.cli"]


def train(
    out: Path,
    args: argparse.Namespace,
    rollouts: str,
    steps: int,
    method: str = "grpo",
    **extra: Any,
) -> tuple[list[list[float]], list[dict[str, Any]]]:
    """A ``corebench train METHOD`` run's step timings and its gradient norms per step (TRL's
    logged metrics; MAGRPO's ``grad_norms.txt``)."""
    settings = {
        "model": args.model,
        "steps": steps,
        "num_generations": args.generations,
        # MAGRPO trains on one prompt a step
        **({"prompts_per_step": args.prompts} if method != "magrpo" else {}),
        "max_completion_length": args.tokens,
        "temperature": 1.0,
        "learning_rate": 2e-6,
        "bf16": not args.float32,
        "save_steps": 1000,
        "eval_benchmarks": ["mbpp"],
        "rollouts": rollouts,
        "seed": 0,
        **extra,
    }
    command = [*CLI, "train", method, "--out", str(out)]
    for key, value in settings.items():
        command += ["--set", f"{key}={json.dumps(value)}"]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    if method == "magrpo":
        return read_rows(out / "timing.txt"), [
            {"grad_norm": norm} for _, norm in read_rows(out / "grad_norms.txt")
        ]
    logged = [
        ast.literal_eval(line)
        for line in (done.stdout + done.stderr).splitlines()
        if "'grad_norm'" in line
    ]
    return read_rows(out / "timing.txt"), logged


def means(rows: list[list[float]]) -> dict[str, float]:
    kept = rows[1:] or rows  # the first step loads and warms up
    generation = statistics.fmean(r[1] for r in kept)
    reward = statistics.fmean(r[2] for r in kept)
    total = statistics.fmean(r[3] for r in kept)
    tokens = sum(r[4] for r in kept) / sum(r[1] for r in kept)
    return {"generation": generation, "reward": reward, "update": total - generation - reward,
            "total": total, "tok/s": tokens}  # fmt: skip


def loaded(args: argparse.Namespace, dtype: str | None = None):
    """The float32 model, its tokenizer, the model's ``Rollouts`` (in ``dtype``; the CPU's
    fastest type by default) and the first ``--prompts`` MBPP training prompts as token ids."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from corebench.harness.config import data_dir_setting
    from corebench.harness.registry import default_plugins
    from corebench.training.models import local_checkpoint
    from corebench.training.rollouts import Rollouts, chat_ids
    from corebench.training.systems import system

    path = local_checkpoint(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32").eval()
    tasks = default_plugins().benchmarks.get("mbpp").component(data_dir_setting()).tasks("train")
    prompt = system("direct").role_prompt
    ids = [chat_ids(tokenizer, prompt("model", t)) for t in tasks[: args.prompts]]
    return model, tokenizer, Rollouts(model, tokenizer, dtype=dtype), ids


def step_rows(ids: list[list[int]], generations: int) -> tuple[list[list[int]], list[int]]:
    """One GRPO step's rows (each prompt ``generations`` times, side by side) and their seeds."""
    from corebench.training.rollouts import row_seed

    rows = [row for row in ids for _ in range(generations)]
    return rows, [row_seed(0, 0, 0, i) for i in range(len(rows))]


def reproducible(args: argparse.Namespace) -> str:
    """The same call twice, then the first prompt's completions alone, with the same seeds."""
    _, _, rollouts, ids = loaded(args)
    g = args.generations
    rows, seeds = step_rows(ids, g)
    options = {"max_new_tokens": args.tokens, "temperature": 1.0}
    together = rollouts.sample(rows, seeds=seeds, **options)
    again = rollouts.sample(rows, seeds=seeds, **options)
    alone = rollouts.sample(rows[:g], seeds=seeds[:g], **options)
    rollouts.close()
    differ = [
        next((i for i, (a, b) in enumerate(zip(x, y, strict=False)) if a != b), min(len(x), len(y)))
        for x, y in zip(together[:g], alone, strict=True)
        if x != y
    ]
    return (
        f"the same call twice: {'the same tokens' if again == together else 'DIFFERENT tokens'};"
        f" beside the other prompts against alone: {g - len(differ)} of {g} completions identical"
        + (f", the others first differ at tokens {sorted(differ)}" if differ else "")
    )


def on_second_thread(call: Callable[[], list[list[int]]]) -> Callable[[], list[list[int]]]:
    """``call``, made from a thread of its own."""

    def run() -> list[list[int]]:
        result: list[list[list[int]] | BaseException] = []

        def target() -> None:
            try:
                result.append(call())
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller
                result.append(exc)

        thread = threading.Thread(target=target, name="second")
        thread.start()
        thread.join()
        if isinstance(result[0], BaseException):
            raise result[0]
        return result[0]

    return run


def threads(args: argparse.Namespace) -> None:
    """``--threads``: one step's rollouts through TRL's path and the engine from two threads."""
    import torch

    model, tokenizer, rollouts, ids = loaded(args, dtype="float32")
    rows, seeds = step_rows(ids, args.generations)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    width, eos = max(map(len, rows)), tokenizer.eos_token_id
    input_ids = torch.tensor([[pad] * (width - len(row)) + row for row in rows])
    mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in rows])

    def trl() -> list[list[int]]:  # TRL's GRPO generates with model.generate, left-padded
        with torch.inference_mode():
            out = model.generate(
                input_ids=input_ids, attention_mask=mask, max_new_tokens=args.tokens,
                do_sample=True, temperature=1.0, top_p=1.0, pad_token_id=pad,
            )[:, width:].tolist()  # fmt: skip
        return [row[: row.index(eos) + 1] if eos in row else row for row in out]

    def engine() -> list[list[int]]:
        return rollouts.sample(rows, max_new_tokens=args.tokens, temperature=1.0, seeds=seeds)

    ways = {"TRL model.generate": trl, "engine, loading thread": engine,
            "engine, second thread": on_second_thread(engine)}  # fmt: skip
    names = list(ways)
    runs: dict[str, list[tuple[float, int, int, list[list[int]]]]] = {w: [] for w in ways}
    for round_ in range(args.rounds):
        first = round_ % len(names)  # each way goes first in some round
        for way in names[first:] + names[:first]:
            switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
            started = time.perf_counter()
            completions = ways[way]()
            wall = time.perf_counter() - started
            switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - switches
            runs[way].append((wall, sum(map(len, completions)), switches, completions))
            print(f"round {round_ + 1} {way:<24} {wall:6.1f} s {runs[way][-1][1]:5d} tokens "
                  f"{switches:7d} switches", flush=True)  # fmt: skip
    rollouts.close()
    print(f"{len(rows)} rows ({args.prompts} prompts x {args.generations}), at most "
          f"{args.tokens} tokens, float32, {torch.get_num_threads()} threads; medians over "
          f"{args.rounds} rounds")  # fmt: skip
    print(f"{'way':<24}{'wall s':>9}{'tok/s':>9}{'switches':>10}")
    rate = {}
    for way, done in runs.items():
        rate[way] = statistics.median(tokens / wall for wall, tokens, _, _ in done)
        print(f"{way:<24}{statistics.median(r[0] for r in done):>9.1f}{rate[way]:>9.1f}"
              f"{statistics.median(r[2] for r in done):>10.0f}")  # fmt: skip
    same = all(
        a[3] == b[3]
        for a, b in zip(runs["engine, loading thread"], runs["engine, second thread"], strict=True)
    )
    print(f"engine from the loading thread: "
          f"{rate['engine, loading thread'] / rate['TRL model.generate']:.2f}x TRL's tokens per "
          f"second, {rate['engine, loading thread'] / rate['engine, second thread']:.2f}x the "
          f"second thread's; the same tokens from either thread: {'yes' if same else 'NO'}")  # fmt: skip


def update(args: argparse.Namespace) -> None:
    """``--update``: the same run with the update scored whole and by corebench (by_length)."""
    ways = ("trl", "by-length")
    recipe = {"lora_rank": 1, "lora_alpha": 32, "learning_rate": 1e-4}
    # the first step that updates, whose completions are the same in every run: GRPO's first;
    # MAGRPO's second (comlrl updates an agent once its buffer holds rollout_buffer_size = 2
    # samples, one a step)
    first_update = 1 if args.method == "magrpo" else 0
    if args.steps <= first_update:
        raise SystemExit(
            f"--update --method {args.method} needs --steps {first_update + 1} or more"
        )
    runs: dict[str, list[tuple[list[list[float]], list[dict[str, Any]]]]] = {w: [] for w in ways}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            for way in ways[round_ % 2 :] + ways[: round_ % 2]:
                out = Path(folder, f"{way}-{round_}")
                runs[way].append(
                    train(
                        out, args, "engine", args.steps, args.method, update_scoring=way, **recipe
                    )  # fmt: skip
                )
                rows, logged = runs[way][-1]
                norm = logged[0]["grad_norm"] if logged else "none (no update)"
                print(f"round {round_ + 1} {way:<10} update s per step: "
                      + " ".join(f"{r[3] - r[1] - r[2]:.1f}" for r in rows)
                      + f"; first update's grad norm {norm} (MAGRPO: the helper's), step "
                      f"{first_update + 1}: {int(rows[first_update][4])} tokens",
                      flush=True)  # fmt: skip
    precision = "float32" if args.float32 else "bf16 autocast"
    prompts = 1 if args.method == "magrpo" else args.prompts
    print(f"{args.method} update, {prompts} prompts x {args.generations} completions, at most "
          f"{args.tokens} tokens, rank-1 LoRA at 1e-4, {precision}, {args.steps} steps a run, "
          f"{args.rounds} rounds in a rotated order; update = step - generation - reward")  # fmt: skip
    first, every = {}, {}
    for way in ways:
        first[way] = statistics.median(
            rows[first_update][3] - rows[first_update][1] - rows[first_update][2]
            for rows, _ in runs[way]
        )
        every[way] = statistics.fmean(r[3] - r[1] - r[2] for rows, _ in runs[way] for r in rows)
        print(f"{way:<10} step {first_update + 1} (the first update, the same completions in "
              f"every run): median {first[way]:.1f} s; every step: mean {every[way]:.1f} s")  # fmt: skip
    print(f"whole batch's update time over by-length's: step {first_update + 1} "
          f"{first['trl'] / first['by-length']:.2f}x, every step "
          f"{every['trl'] / every['by-length']:.2f}x")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--float32", action="store_true",
                        help="train in float32 (bf16 = false), as on a CPU that emulates bfloat16")  # fmt: skip
    parser.add_argument("--threads", action="store_true",
                        help="instead: rollouts through TRL's path and the engine from two threads")  # fmt: skip
    parser.add_argument("--update", action="store_true",
                        help="instead: the update scored by TRL and by corebench (by_length)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3, help="with --threads or --update")
    parser.add_argument("--method", choices=("grpo", "magrpo"), default="grpo",
                        help="with --update: the trainer timed (magrpo: one prompt a step, "
                        "both agents' updates)")  # fmt: skip
    args = parser.parse_args()
    if args.threads:
        threads(args)
        return
    if args.update:
        update(args)
        return
    if args.prompts < 2:
        parser.error("--prompts must be at least 2: the check decodes a prompt beside another")
    from corebench.harness.decoding.precision import cpu_dtype

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        split = {
            path: means(train(root / path, args, path, args.steps)[0]) for path in ("trl", "engine")
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
