"""Training tasks the start checkpoint solves sometimes but not always (setting
``filter_samples``): a group-relative method learns nothing from a task whose completions all
pass or all fail (their rewards tie), so the tasks are filtered before training, as DAPO and
small-model RL practice do.

Each examined task gets ``filter_samples`` completions from the start checkpoint, through the
single-model (``direct``) prompt at the training temperature, sampled through the decode engine
with seeds that do not depend on the training seed (every seed and every method trained from the
same checkpoint sees the same filtered tasks), judged on the task's rewarded tests in the
sandbox; a task is kept when some but not all of them pass every test. The rates are cached by
the checkpoint's weights, the tasks, and the sampling settings.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import replace
from pathlib import Path

from corebench.harness import config as C
from corebench.harness.errors import CorebenchError
from corebench.harness.metadata import file_fingerprint

from .data import TrainData, TrainTask
from .rewards import run_tests
from .rollouts import ROLLOUT_BATCH, chat_ids, row_seed
from .settings import SINGLE_MODEL_SYSTEM, TrainSettings
from .systems import system

FILTER_SEED = 1  # the examined sample of tasks and the filter's sampling seeds


def examined(tasks: list[TrainTask], count: int | None) -> list[TrainTask]:
    """The tasks the filter looks at: all, or a fixed random sample of ``count`` of them (in
    their original order)."""
    if count is None or count >= len(tasks):
        return list(tasks)
    chosen = set(random.Random(FILTER_SEED).sample(range(len(tasks)), count))
    return [t for i, t in enumerate(tasks) if i in chosen]


def _weights_key(model_path: Path) -> str:
    files = sorted(Path(model_path).glob("*.safetensors"))
    return ",".join(file_fingerprint(f) for f in files) or str(Path(model_path).resolve())


def solve_rates(
    model_path: Path, tasks: list[TrainTask], settings: TrainSettings
) -> dict[str, float]:
    """Per task, the share of ``filter_samples`` sampled completions that pass every test."""
    key = hashlib.sha256(
        json.dumps(
            [_weights_key(model_path), [t.task.task_id for t in tasks], settings.filter_samples,
             settings.temperature, settings.top_p, settings.max_completion_length, FILTER_SEED,
             [t.suite.content_key for t in tasks]]
        ).encode()
    ).hexdigest()[:24]  # fmt: skip
    cache = C.cache_dir() / "solve-rates" / f"{key}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from corebench.harness.decoding.engine import DecodeEngine

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.bfloat16).eval()
    engine = DecodeEngine(model, tokenizer, "cpu", ROLLOUT_BATCH)
    prompt = system(SINGLE_MODEL_SYSTEM).role_prompt
    k = settings.filter_samples
    try:
        ids, seeds = [], []
        for index, task in enumerate(tasks):
            ids += [chat_ids(tokenizer, prompt("model", task.task))] * k
            seeds += [row_seed(FILTER_SEED, index, j) for j in range(k)]
        completions = engine.complete(
            ids, max_new_tokens=settings.max_completion_length, temperature=settings.temperature,
            top_p=settings.top_p, seeds=seeds,
        )  # fmt: skip
    finally:
        engine.close()
    texts = [tokenizer.decode(c, skip_special_tokens=True) for c in completions]
    programs = [(tasks[i // k].code_from(text), tasks[i // k]) for i, text in enumerate(texts)]
    runs = run_tests(programs)
    rates = {
        task.task.task_id: sum(r.all_passed for r in runs[i * k : (i + 1) * k]) / k
        for i, task in enumerate(tasks)
    }
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(rates))
    return rates


def solved_sometimes(model_path: Path, data: TrainData, settings: TrainSettings) -> TrainData:
    """``data`` with only the tasks to train on (``filter_samples`` 0: unchanged), and what the
    filter saw in ``data.filtered``: tasks examined, never solved, always solved, kept."""
    if settings.filter_samples <= 0:
        return data
    looked = examined(data.tasks, settings.filter_tasks)
    rates = solve_rates(model_path, looked, settings)
    kept = [t for t in looked if 0 < rates[t.task.task_id] < 1]
    summary = {
        "examined": len(looked),
        "never_solved": sum(rates[t.task.task_id] == 0 for t in looked),
        "always_solved": sum(rates[t.task.task_id] == 1 for t in looked),
        "kept": len(kept),
    }
    if not kept:
        raise CorebenchError(
            f"the start checkpoint solves none of {len(looked)} training tasks sometimes but not "
            f"always in {settings.filter_samples} samples ({summary}); train without the filter "
            "(filter_samples = 0), with more samples, or at another temperature"
        )
    return replace(data, tasks=kept, filtered=summary)
