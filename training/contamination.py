"""Contamination check: training tasks must not be evaluation tasks, by id or by text.

Two tasks overlap when they share an id, or when a large share of one's word n-grams (prompt
description, or reference solution) appear in the other's. Training refuses overlap unless it
is explicitly allowed, and the report is kept in the checkpoint manifest.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from corebench.harness.config import CONTAMINATION_NGRAM, CONTAMINATION_THRESHOLD
from corebench.harness.errors import CorebenchError


@dataclass(frozen=True)
class Text:
    task_id: str
    prompt: str
    solution: str = ""


@dataclass(frozen=True)
class Overlap:
    train_id: str
    eval_id: str
    reason: str  # "id", "prompt" or "solution"
    share: float


class ContaminationError(CorebenchError):
    """Training data overlaps the evaluation tasks."""


def ngrams(text: str, n: int = CONTAMINATION_NGRAM) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _description(prompt: str) -> str:
    """The prose of a prompt: docstring quotes and example asserts removed."""
    return "\n".join(
        line
        for line in prompt.splitlines()
        if not line.strip().startswith(("assert", '"""', ">>>"))
    )


def find_overlaps(
    train: Iterable[Text], evaluation: Iterable[Text], threshold: float = CONTAMINATION_THRESHOLD
) -> list[Overlap]:
    evaluation = list(evaluation)
    eval_ids = {e.task_id for e in evaluation}
    order = {e.task_id: i for i, e in enumerate(evaluation)}  # ties: the first, as before
    # inverted indexes, n-gram -> evaluation tasks holding it: one pass over a training task's
    # n-grams counts what it shares with every evaluation task (thousands of tasks stay fast)
    index: dict[str, dict[tuple[str, ...], list[str]]] = {"prompt": {}, "solution": {}}
    for e in evaluation:
        for kind, text in (("prompt", _description(e.prompt)), ("solution", e.solution)):
            for gram in ngrams(text):
                index[kind].setdefault(gram, []).append(e.task_id)
    found = []
    for item in train:
        if item.task_id in eval_ids:
            found.append(Overlap(item.task_id, item.task_id, "id", 1.0))
            continue
        for kind, grams in (
            ("prompt", ngrams(_description(item.prompt))),
            ("solution", ngrams(item.solution)),
        ):
            if not grams:
                continue
            shared = Counter(
                eval_id for gram in grams for eval_id in dict.fromkeys(index[kind].get(gram, ()))
            )
            if not shared:
                continue
            best_id, count = max(shared.items(), key=lambda kv: (kv[1], -order[kv[0]]))
            best = count / len(grams)
            if best >= threshold:
                found.append(Overlap(item.task_id, best_id, kind, round(best, 3)))
                break
    return found


def check(train: list[Text], evaluation: list[Text], allow: bool = False) -> list[Overlap]:
    """The overlaps; raises unless ``allow`` when there are any."""
    overlaps = find_overlaps(train, evaluation)
    if overlaps and not allow:
        shown = ", ".join(
            f"{o.train_id}~{o.eval_id} ({o.reason} {o.share:.0%})" for o in overlaps[:5]
        )
        raise ContaminationError(
            f"{len(overlaps)} training tasks overlap the evaluation tasks: {shown}"
            + (" ..." if len(overlaps) > 5 else "")
            + "; drop them (training.exclude_overlaps) or allow with allow_overlap=true"
        )
    return overlaps
