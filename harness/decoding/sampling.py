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
    if any(s.top_p < 1.0 for s in samplers):
        scores = torch.stack(
            [nucleus(row, s.top_p) for row, s in zip(scores, samplers, strict=True)]
        )
    uniform = torch.stack([s.uniform(scores.shape[-1], scores.device) for s in samplers])
    gumbel = -torch.log(-torch.log(uniform.clamp_(min=1e-20)))
    return (scores + gumbel).argmax(dim=-1)
