"""Sampling where each request draws from its own random generator.

``torch.multinomial`` inside ``generate`` draws every row of a batch from the process's one
generator, so what a request samples would depend on which requests shared its batch and in which
order. Here each request gets a ``torch.Generator`` seeded with its request's seed, and a token is
drawn by the Gumbel-max trick (the arg-max of logits plus Gumbel noise is a sample of their
softmax), after temperature and top-p, computed for its row alone: the same request with the same
seed samples the same tokens alone or in any batch.
"""

from __future__ import annotations

from typing import Any

import torch

NEG_INF = float("-inf")
NUCLEUS_FIRST = 64  # candidates the nucleus search starts with (x4 until they hold top_p)


def nucleus(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """``scores`` with every token outside each row's top-p nucleus set to -inf: its most likely
    tokens, as few as reach ``top_p`` of the row's probability (at least one), and every token
    whose score ties the least likely of them, so the nucleus is a function of the row's values
    alone, not of the order a search or sort leaves tied tokens in.

    The nucleus is searched for among the 64 highest scores, four times as many while some row's
    candidates hold less than ``top_p``: a full sort of the vocabulary per row and token
    (``sorted_nucleus``) cost about a tenth of a sampled evaluation row's wall time (11 % in
    float32, 13 % in bfloat16; ``measurements/sampled_rows.py``). Probabilities are normalized
    over the whole row."""
    if top_p >= 1.0:
        return scores
    probs = torch.softmax(scores, dim=-1)
    size = scores.shape[-1]
    count = min(NUCLEUS_FIRST, size)
    while True:
        top, order = torch.topk(scores, count, dim=-1)  # the highest scores first
        chosen = probs.gather(-1, order)
        before = chosen.cumsum(dim=-1) - chosen  # the mass of the more likely candidates
        if count == size or bool((before[..., -1] >= top_p).all()):
            break  # every row's nucleus ends before its last candidate
        count = min(count * 4, size)
    kept = (before < top_p).sum(dim=-1, keepdim=True).clamp(min=1)  # its mass does not suffice
    least = top.gather(-1, kept - 1)  # the least likely kept score
    return scores.masked_fill(scores < least, NEG_INF)


def sorted_nucleus(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """The nucleus as sampling found it before, by sorting each row's whole vocabulary (of
    tokens tied at its boundary it keeps those the sort puts first): the reference ``nucleus``
    is checked and timed against (``tests/test_rollouts.py``, ``measurements/sampled_rows.py``)."""
    if top_p >= 1.0:
        return scores
    ordered, order = torch.sort(scores, dim=-1, descending=True)
    probs = torch.softmax(ordered, dim=-1)
    outside = probs.cumsum(dim=-1) - probs >= top_p  # the mass before it suffices
    outside[..., 0] = False
    return torch.empty_like(scores).scatter_(-1, order, ordered.masked_fill(outside, NEG_INF))


class RowSampler:
    """Samples one request's tokens from its own generator, whatever batch its logits come in."""

    def __init__(self, seed: int, temperature: float, top_p: float, device: Any = "cpu"):
        self.temperature, self.top_p = temperature, top_p
        self.generator = torch.Generator(device=device).manual_seed(int(seed))

    def sample(self, logits: torch.Tensor) -> int:
        """A token drawn from the softmax of one row of ``logits`` (after temperature, top-p)."""
        return int(sample_rows([self], logits.unsqueeze(0))[0])

    def uniform(self, size: int, device: Any) -> torch.Tensor:
        """The row's next ``size`` uniform draws, from its own generator."""
        return torch.rand(size, generator=self.generator, device=device)


def sample_rows(samplers: list[RowSampler], logits: torch.Tensor) -> torch.Tensor:
    """One token per row of ``logits``, each drawn by its row's sampler (Gumbel-max over the
    tempered, nucleus-filtered scores): the draws come from each row's generator in turn, the
    arithmetic runs on the whole batch at once, with the same result row by row as alone."""
    temperatures = torch.tensor([s.temperature for s in samplers], device=logits.device)
    scores = logits.float() / temperatures.unsqueeze(1)
    filters = {s.top_p for s in samplers}
    if len(filters) == 1:  # the usual case: one top_p for the whole batch
        scores = nucleus(scores, filters.pop())
    else:
        for top_p in filters - {1.0}:  # the rows of each top_p at once
            rows = torch.tensor(
                [i for i, s in enumerate(samplers) if s.top_p == top_p], device=scores.device
            )
            scores[rows] = nucleus(scores[rows], top_p)
    uniform = torch.stack([s.uniform(scores.shape[-1], scores.device) for s in samplers])
    gumbel = -torch.log(-torch.log(uniform.clamp_(min=1e-20)))
    return (scores + gumbel).argmax(dim=-1)
