"""The prompt filter (settings ``filter_samples``, ``filter_keeps``): a group-relative method
learns nothing from a group whose rewards all tie, so the training tasks are filtered before
training, as DAPO and small-model RL practice do.

Each examined task gets ``filter_samples`` completions from the start checkpoint, through the
single-model (``direct``) prompt at the training temperature, sampled through the decode engine
in the run's ``rollout_dtype`` (as its rollouts) with seeds that do not depend on the training
seed (every seed and every method trained from the same checkpoint sees the same filtered
tasks), judged on the task's rewarded tests in the sandbox. Setting ``filter_keeps`` says which
tasks stay:

- ``"sometimes_solved"`` (the default): some but not all completions pass every test.
- ``"scores_differ"``: the completions' shares of tests passed differ (the partial credit the
  ``"tests"`` reward gives), which keeps every sometimes-solved task and also those no
  completion solves whole but some solve further than others.

Each completion's share of tests passed is cached by the checkpoint's weights, the tasks, and
the sampling settings, so both rules read the same samples.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from corebench.harness import config as C
from corebench.harness.errors import CorebenchError
from corebench.harness.metadata import file_fingerprint

from .data import TrainData, TrainTask
from .rewards import run_tests
from .rollouts import ROLLOUT_BATCH, chat_ids, rollout_dtype, row_seed
from .settings import SINGLE_MODEL_SYSTEM, FilterRule, TrainSettings
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


def sample_scores(
    model_path: Path, tasks: list[TrainTask], settings: TrainSettings
) -> dict[str, list[float]]:
    """Per task, each of ``filter_samples`` sampled completions' share of tests passed (1.0:
    it passes every test)."""
    dtype = rollout_dtype(settings)
    key = hashlib.sha256(
        json.dumps(
            ["scores", _weights_key(model_path), [t.task.task_id for t in tasks],
             settings.filter_samples, settings.temperature, settings.top_p,
             settings.max_completion_length, FILTER_SEED, [t.suite.content_key for t in tasks],
             dtype]
        ).encode()
    ).hexdigest()[:24]  # fmt: skip
    cache = C.cache_dir() / "filter-scores" / f"{key}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from corebench.harness.decoding.engine import DecodeEngine

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, dtype)).eval()
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
    scores = {
        task.task.task_id: [r.pass_rate for r in runs[i * k : (i + 1) * k]]
        for i, task in enumerate(tasks)
    }
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(scores))
    return scores


def solved(scores: list[float]) -> int:
    """How many of a task's samples pass every test."""
    return sum(score == 1.0 for score in scores)


# per filter_keeps rule: whether a task whose samples scored so stays, and what no task did
RULES: dict[FilterRule, tuple[Callable[[list[float]], bool], str]] = {
    "sometimes_solved": (
        lambda scores: 0 < solved(scores) < len(scores),
        "solves none of {n} training tasks sometimes but not always",
    ),
    "scores_differ": (
        lambda scores: len(set(scores)) > 1,
        "passes different shares of tests on none of {n} training tasks",
    ),
}


def filtered_tasks(model_path: Path, data: TrainData, settings: TrainSettings) -> TrainData:
    """``data`` with only the tasks to train on (``filter_samples`` 0: unchanged), and what the
    filter saw in ``data.filtered``: tasks examined, never solved, always solved, kept (under
    ``"scores_differ"`` the kept tasks may include never-solved ones)."""
    if settings.filter_samples <= 0:
        return data
    looked = examined(data.tasks, settings.filter_tasks)
    scores = sample_scores(model_path, looked, settings)
    keeps, none_kept = RULES[settings.filter_keeps]
    kept = [t for t in looked if keeps(scores[t.task.task_id])]
    counts = [solved(scores[t.task.task_id]) for t in looked]
    summary = {
        "examined": len(looked),
        "never_solved": counts.count(0),
        "always_solved": counts.count(settings.filter_samples),
        "kept": len(kept),
    }
    if not kept:
        raise CorebenchError(
            f"the start checkpoint {none_kept.format(n=len(looked))} in "
            f"{settings.filter_samples} samples ({summary}); train without the filter "
            "(filter_samples = 0), with more samples, another filter_keeps, or at another "
            "temperature"
        )
    return replace(data, tasks=kept, filtered=summary)
