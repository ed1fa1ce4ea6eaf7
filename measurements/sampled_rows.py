"""A sampled evaluation row's generation, two ways, each round in a rotated order.

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python measurements/sampled_rows.py \\
        [--compare top-p|prompts|batch] [--model 'embedded?dtype=float32'] [--tasks 20] \\
        [--samples 4] [--rounds 2]

``--compare top-p`` (the default): top-p filtered by a full sort of the vocabulary
(``sorted_nucleus``: the sort sampling did before, here over the batch's rows at once where it
sorted them one by one) and by the nucleus search (``nucleus``, ``harness/decoding/sampling.py``).
``--compare prompts``: every admission's prompts computed, with the output head's scores at
every prompt position (how the engine prefilled before), and prompts kept for the rows that come
later with the scores of the last position only (``PromptStore``, ``harness/decoding/engine.py``).
``--compare batch``: 32 rows decoded together and 32 samples in flight (the defaults before),
and 128 of each (``DEFAULT_MAX_BATCH``, ``DEFAULT_CONCURRENCY``).

Runs ``corebench run``'s row (system ``direct``, the first ``--tasks`` MBPP+ tasks, ``--samples``
a task, temperature 0.6, top-p 0.95, at most 384 new tokens, seed 3, no timed repeats: how the
studies' sampled rows are generated) in this process, each round both ways in a rotated order,
and prints each row's wall seconds and completion tokens, per way the median wall seconds and
completion tokens per second, and for how many samples every run wrote the same completion
(where a row's nucleus has tied scores at its boundary, the sort kept some of them, the search
keeps all). Run it alone: it times wall clock, sandbox judging included.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from corebench.harness import RunConfig
from corebench.harness.config import DEFAULT_MAX_BATCH, data_dir_setting
from corebench.harness.decoding import engine, sampling
from corebench.harness.runner import Runner
from corebench.harness.store import Store

Run = tuple[float, int, dict[tuple[str, int], str]]  # wall seconds, tokens, completions
# per comparison, its two ways: the module attributes each sets (the first way is the old one)
COMPARISONS: dict[str, dict[str, list[tuple[Any, str, Any]]]] = {
    "top-p": {
        "full sort": [(sampling, "nucleus", sampling.sorted_nucleus)],  # what sample_rows calls
        "nucleus search": [],
    },
    "prompts": {
        "computed": [(engine, "PROMPT_BYTES", 0), (engine, "accepts_argument", lambda *_: False)],
        "kept": [],
    },
    "batch": {"batch 32": [], "batch 128": []},  # the rows decoded together: BATCHES
}
BATCHES = {"batch 32": 32, "batch 128": 128}  # max_batch and concurrency, per way of "batch"


@contextlib.contextmanager
def patched(changes: list[tuple[Any, str, Any]]) -> Iterator[None]:
    """``changes`` (module, attribute, value) in place, the old values back afterwards."""
    old = [(module, name, getattr(module, name)) for module, name, _ in changes]
    try:
        for module, name, value in changes:
            setattr(module, name, value)
        yield
    finally:
        for module, name, value in old:
            setattr(module, name, value)


def row(args: argparse.Namespace, out: Path, batch: int = DEFAULT_MAX_BATCH) -> Run:
    """One row, ``batch`` rows decoded together and samples in flight: its wall seconds,
    completion tokens and completions by (task, sample)."""
    model = f"{args.model}{'&' if '?' in args.model else '?'}max_batch={batch}"
    config = RunConfig(
        benchmark="mbpp", system="direct", model=model, limit=args.tasks, n=args.samples,
        temperature=0.6, top_p=0.95, max_new_tokens=384, seed=3,
    )  # fmt: skip
    started = time.perf_counter()
    Runner(config, out, data_dir=data_dir_setting(), repeats=0, concurrency=batch).run()
    wall = time.perf_counter() - started
    samples = list(Store(out, create=False).samples())
    tokens = sum(s.completion_tokens for s, _ in samples)
    texts = {(s.task_id, s.sample_index): s.trace[0].completion for s, _ in samples}
    return wall, tokens, texts


def add_row_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="embedded?dtype=float32")
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)


def compare(args: argparse.Namespace, names: list[str], run: Callable[[str, int], Run]) -> None:
    """``run(name, round)`` for both ``names`` each round, in a rotated order, and the report:
    each row, then per name the median wall seconds and tokens per second, and for how many
    samples every run wrote the same completion."""
    runs: dict[str, list[Run]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        first = round_ % len(names)  # each goes first in some round
        for name in names[first:] + names[:first]:
            runs[name].append(run(name, round_))
            wall, tokens, _ = runs[name][-1]
            print(f"round {round_ + 1} {name:<15} {wall:6.1f} s {tokens:6d} tokens", flush=True)
    print(f"{args.model}, {args.tasks} MBPP+ tasks x {args.samples} samples, T=0.6, top-p 0.95; "
          f"medians over {args.rounds} rounds")  # fmt: skip
    rate = {}
    for name, done in runs.items():
        rate[name] = statistics.median(tokens / wall for wall, tokens, _ in done)
        print(f"{name:<15} {statistics.median(w for w, _, _ in done):7.1f} s "
              f"{rate[name]:7.1f} tok/s")  # fmt: skip
    texts = [texts for done in runs.values() for _, _, texts in done]
    same = sum(all(t[key] == texts[0][key] for t in texts) for key in texts[0])
    old, new = names
    print(f"{new}: {rate[new] / rate[old]:.2f}x {old}'s tokens per second; the same completion "
          f"in every run for {same} of {len(texts[0])} samples")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="top-p")
    add_row_options(parser)
    args = parser.parse_args()
    ways = COMPARISONS[args.compare]
    with tempfile.TemporaryDirectory() as folder:

        def run(way: str, round_: int) -> Run:
            with patched(ways[way]):
                return row(
                    args, Path(folder, f"{way}-{round_}"), BATCHES.get(way, DEFAULT_MAX_BATCH)
                )

        compare(args, list(ways), run)


if __name__ == "__main__":
    main()
