"""Contamination check: training tasks must not be evaluation tasks, by id or by text.

Two tasks overlap when they share an id, or when a large share of one's word n-grams (prompt
description, or reference solution) appear in the other's. Training refuses overlap unless it
is explicitly allowed, and the report is kept in the checkpoint manifest.
"""

from __future__ import annotations

import re
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
    indexed = [(e.task_id, ngrams(_description(e.prompt)), ngrams(e.solution)) for e in evaluation]
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
            best_id, best = "", 0.0
            for eval_id, prompt_grams, solution_grams in indexed:
                other = prompt_grams if kind == "prompt" else solution_grams
                share = len(grams & other) / len(grams)
                if share > best:
                    best_id, best = eval_id, share
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
