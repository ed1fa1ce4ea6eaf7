"""Attention for one new token per row on the CPU, registered with transformers as ``DECODE``.

transformers' ``sdpa`` attention, given a padding mask on the CPU, first copies every key and
value head once per query head that shares it (``repeat_kv``: 3x for SmolLM2's 9 query and 3
key/value heads), then runs the fused kernel on the copies. A decode step is one query token
per row, so that copy and the kernel's own passes over the cache are the whole cost. Here each
query head group is multiplied with its shared key/value head directly (at batch 32 over 800
cached positions, bf16 on 2 cores: 3.2 ms per layer against 18.1 ms; whole decode steps are
compared by ``measurements/batching_throughput.py``). Prefill (more than one query token) and
anything else goes to ``sdpa`` unchanged, and masks are built exactly as for ``sdpa``.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

DECODE = "corebench_decode"


def decode_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """``[batch, 1, heads, dim]`` for one query token per row; otherwise ``sdpa``'s answer."""
    batch, heads, length, dim = query.shape
    kv_heads = key.shape[1]
    if length != 1 or dropout or heads % kv_heads or kwargs.get("position_bias") is not None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    group = heads // kv_heads
    scale = dim**-0.5 if scaling is None else scaling
    # [batch, kv_heads, group, dim] @ [batch, kv_heads, dim, cached] -> one score per position
    scores = torch.matmul(query.view(batch, kv_heads, group, dim), key.transpose(-1, -2)) * scale
    scores = scores.float()
    if attention_mask is not None:
        mask = attention_mask.reshape(batch, 1, 1, -1)
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask.float()
    weights = torch.softmax(scores, dim=-1).to(value.dtype)
    out = torch.matmul(weights, value)  # [batch, kv_heads, group, dim]
    return out.reshape(batch, heads, 1, dim).transpose(1, 2).contiguous(), None


AttentionInterface.register(DECODE, decode_attention)
AttentionMaskInterface.register(DECODE, sdpa_mask)


def use_decode_attention(model: Any) -> bool:
    """Switch a CPU model that uses ``sdpa`` to ``DECODE``; False when it cannot be switched."""
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    if not getattr(model, "_can_set_attn_implementation", lambda: False)():
        return False
    model.set_attn_implementation(DECODE)
    return model.config._attn_implementation == DECODE
