"""Reward functions for other trainers, backed by the judging service (``corebench sandbox serve``).

TRL::

    from corebench.training.service_rewards import JudgeReward
    reward = JudgeReward("http://127.0.0.1:8100", benchmark="mbpp")  # rows carry a task_id column
    GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=rows, ...)

Each row names its tests by a ``task_id`` column (a task of ``benchmark``) or a ``tests`` column (a
suite as data, see ``harness/service/wire.py``; a dict or its JSON). Completions, plain or
conversational, go to the service whole: it extracts the code as ``corebench run`` does.

verl (``custom_reward_function.path=<this file's path>``, ``custom_reward_function.name=compute_score``,
``$COREBENCH_JUDGE_URL`` set): :func:`compute_score` takes the row's ``reward_model.ground_truth``
as tests (or ``{"task": {"benchmark": ..., "task_id": ...}}``).
"""

from __future__ import annotations

import json
from typing import Any

from corebench.harness.errors import CorebenchError
from corebench.harness.records import TestOutcome
from corebench.harness.service.client import JudgeClient

from .rewards import TestRun, pass_reward

SCORES = ("tests", "pass_rate", "passed")


def score_of(answer: dict[str, Any], score: str) -> float:
    """A service answer as a reward: corebench's training reward (``tests``: the share of tests
    passed, +1 for passing them all), the share alone, or 1/0 for passing them all."""
    if score == "passed":
        return 1.0 if answer["passed"] else 0.0
    run = TestRun(
        [TestOutcome.model_validate(t) for t in answer["result"]["tests"]], answer["tests_total"]
    )
    return run.pass_rate if score == "pass_rate" else pass_reward(run)


def _text(completion: Any) -> str:
    """A completion's text: a string, or the last message of a conversational completion."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content") or "")
    raise CorebenchError(f"cannot read a completion of type {type(completion).__name__}")


def _tests(value: Any) -> dict[str, Any]:
    data = json.loads(value) if isinstance(value, str) else value
    if not isinstance(data, dict):
        raise CorebenchError("a row's tests must be a dict (or its JSON)")
    return data


class JudgeReward:
    """A TRL ``GRPOTrainer`` reward function: one batch request per call (all completions of
    the step), every test run; ``score`` is one of ``SCORES``."""

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        benchmark: str | None = None,
        options: dict[str, Any] | None = None,
        score: str = "tests",
    ):
        if score not in SCORES:
            raise CorebenchError(f"unknown score {score!r}; one of {', '.join(SCORES)}")
        self.client = JudgeClient(url, token)
        self.benchmark, self.options = benchmark, options or {}
        self.score = score
        self.__name__ = f"corebench_{score}"  # TRL logs rewards under this name

    def item(self, completion: Any, task_id: Any = None, tests: Any = None) -> dict[str, Any]:
        item: dict[str, Any] = {"completion": _text(completion), "all_tests": True}
        if tests is not None:
            item["tests"] = _tests(tests)
        elif task_id is not None and self.benchmark:
            item["task"] = {"benchmark": self.benchmark, "task_id": str(task_id)}
            if self.options:
                item["task"]["options"] = self.options
        else:
            raise CorebenchError("each row needs a tests column, or a task_id column and benchmark")
        return item

    def __call__(self, prompts: Any = None, completions: Any = None, **columns: Any) -> list[float]:
        task_ids = columns.get("task_id") or [None] * len(completions)
        tests = columns.get("tests") or [None] * len(completions)
        items = [self.item(c, t, s) for c, t, s in zip(completions, task_ids, tests, strict=True)]
        return [score_of(a, self.score) for a in self.client.judge_batch(items)]


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None, **_: Any
) -> float:
    """verl's custom reward hook: corebench's ``tests`` reward on ``ground_truth``'s tests (the
    share passed, +1 for passing them all), over the whole suite the service judges (not the
    subset ``rewarded_suite`` picks for ``corebench train``)."""
    truth = _tests(ground_truth)
    item: dict[str, Any] = {"completion": solution_str, "all_tests": True}
    if "task" in truth:
        item["task"] = truth["task"]
    else:
        item["tests"] = truth
    return score_of(JudgeClient().judge(item), "tests")
