"""Sampling where each request draws from its own random generator.

``torch.multinomial`` inside ``generate`` draws every row of a batch from the process's one
generator, so what a request samples depends on which requests shared its batch and in which
order. Here each row gets a ``torch.Generator`` seeded with its request's seed, and a token is
drawn by the Gumbel-max trick (the arg-max of logits plus Gumbel noise is a sample of their
softmax), after temperature and top-p, all computed row by row: the same request with the same
seed samples the same tokens alone or in any batch.
"""

from __future__ import annotations

from typing import Any

import torch

NEG_INF = float("-inf")


def nucleus(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """``scores`` with every token outside each row's top-p nucleus set to -inf (the nucleus is
    the smallest set of most likely tokens whose probability reaches ``top_p``)."""
    if top_p >= 1.0:
        return scores
    ordered, order = torch.sort(scores, dim=-1, descending=True)
    cumulative = torch.softmax(ordered, dim=-1).cumsum(dim=-1)
    outside = cumulative - torch.softmax(ordered, dim=-1) >= top_p  # the mass before it suffices
    outside[..., 0] = False
    masked = ordered.masked_fill(outside, NEG_INF)
    return torch.empty_like(scores).scatter_(-1, order, masked)


class PerRequestSampler:
    """A logits processor for greedy decoding that turns it into sampling, row by row."""

    def __init__(self, seeds: list[int], temperature: float, top_p: float, device: Any = "cpu"):
        self.temperature, self.top_p = temperature, top_p
        self.generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]

    def noise(self, rows: int, vocabulary: int, device: Any) -> torch.Tensor:
        uniform = torch.stack(
            [torch.rand(vocabulary, generator=g, device=device) for g in self.generators[:rows]]
        )
        return -torch.log(-torch.log(uniform.clamp_(min=1e-20)))

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        scores = nucleus(scores.float() / self.temperature, self.top_p)
        return scores + self.noise(scores.shape[0], scores.shape[1], scores.device)
