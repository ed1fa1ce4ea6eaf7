"""Cross-task batching on the embedded model: the same corecode run one task at a time and with
all tasks in flight. Prints wall time, completion tokens per second, batch sizes, and whether the
programs are identical (greedy decoding).

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python benchmarks/batching_throughput.py \
        [TASKS] [MAX_NEW_TOKENS] [MODEL_SPEC]

MODEL_SPEC defaults to ``embedded`` (bf16 on CPUs with AVX512/AMX); ``embedded?dtype=float32``
trades speed for batched outputs identical to one-at-a-time ones.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from corebench.harness import RunConfig
from corebench.harness.config import data_dir_setting
from corebench.harness.runner import Runner
from corebench.harness.store import Store


def run(
    tasks: int, max_new_tokens: int, concurrency: int, out: Path, model: str = "embedded"
) -> tuple[float, dict, list[int]]:
    config = RunConfig(
        benchmark="mbpp",
        system="corecode",
        model=model,
        limit=tasks,
        max_new_tokens=max_new_tokens,
    )
    runner = Runner(config, out, data_dir=data_dir_setting(), concurrency=concurrency)
    started = time.perf_counter()
    runner.run()
    wall = time.perf_counter() - started
    samples = list(Store(out, create=False).samples())
    programs = {s.task_id: s.code for s, _ in samples}
    tokens = sum(s.completion_tokens for s, _ in samples)
    sizes = sorted({c.batch_size for s, _ in samples for c in s.trace})
    print(
        f"concurrency {concurrency:>2}: {wall:7.1f} s, {tokens} completion tokens, {tokens / wall:6.1f} tok/s, batch sizes {sizes}"
    )
    return wall, programs, sizes


def main() -> None:
    tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    max_new_tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    model = sys.argv[3] if len(sys.argv) > 3 else "embedded"
    print(f"corecode on {tasks} MBPP+ tasks, {max_new_tokens} tokens per call, model {model}")
    with tempfile.TemporaryDirectory() as tmp:
        sequential, programs_1, _ = run(tasks, max_new_tokens, 1, Path(tmp, "sequential"), model)
        batched, programs_n, _ = run(tasks, max_new_tokens, tasks, Path(tmp, "batched"), model)
    same = sum(programs_1[t] == programs_n[t] for t in programs_1)
    print(f"speed-up {sequential / batched:.2f}x; identical programs {same}/{len(programs_1)}")


if __name__ == "__main__":
    main()
