"""How an update scores its completions on the CPU: rows of like length together (GRPO's
through TRL, ``CorebenchGRPOTrainer``; MAGRPO's, ``magrpo.group_loss``).

TRL pads a step's completions to the longest and computes the update's per-token
log-probabilities over the whole padded batch; on a CPU, TRL 1.16's fused output head also
scores every position, prompts and padding included (only labelled ones where Triton runs, on
CUDA or XPU: elsewhere it keeps tile shapes fixed for compilers). ``by_length`` sorts the rows
by where their completions end, computes them a few at a time, each group cut after the last
column its rows use, and has the head score only the tokens that carry a label (what it does
where Triton runs). Each row's log-probabilities are the same to rounding: a causal model's
scores of a position do not depend on the columns after it, and no row's positions move (only
columns on the right are cut).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

UPDATE_ROWS = 4  # rows scored together (measurements/grpo_step_split.py --update: by_length at 4)

# score(input_ids, attention_mask, logits_to_keep) -> (log-probabilities, entropies or None,
# aux loss or None), as TRL's GRPOTrainer._get_per_token_logps_and_entropies returns them
Score = Callable[[Any, Any, int], tuple[Any, Any, Any]]


def update_rows(settings: Any) -> int | None:
    """The rows an update scores together under ``settings``: ``UPDATE_ROWS`` on a CPU with
    ``update_scoring = "by-length"``, else None (the whole batch at once)."""
    return UPDATE_ROWS if settings.use_cpu and settings.update_scoring == "by-length" else None


@contextlib.contextmanager
def labelled_tokens_only() -> Iterator[None]:
    """TRL's fused output head scoring only the positions with a label on the CPU too.

    It chooses by ``trl.trainer.utils._use_triton(device)``; where TRL has no such name (an
    older or newer release), nothing changes."""
    try:
        from trl.trainer import utils
    except ImportError:
        yield
        return
    original = getattr(utils, "_use_triton", None)
    if original is None:
        yield
        return
    utils._use_triton = lambda device: device.type == "cpu" or original(device)
    try:
        yield
    finally:
        utils._use_triton = original


def by_length(score: Score, input_ids: Any, attention_mask: Any, logits_to_keep: int,
              rows: int = UPDATE_ROWS) -> tuple[Any, Any, None]:  # fmt: skip
    """``score`` over groups of ``rows`` rows whose completions end near each other, each group
    cut after the last column any of its rows uses; the results put back in the batch's order
    and width (zeros where a group was cut: positions without a token, which the loss masks)."""
    import torch
    import torch.nn.functional as F

    width = input_ids.size(1)
    prompt_end = width - logits_to_keep
    # one past each row's last token (prompts are padded on the left, completions on the right)
    ends = width - attention_mask.bool().flip(1).int().argmax(1)
    order = torch.argsort(ends, descending=True, stable=True)
    logps, entropies = [], []
    with labelled_tokens_only():
        for start in range(0, len(order), rows):
            group = order[start : start + rows]
            keep = max(int(ends[group].max()) - prompt_end, 1)  # completion columns it uses
            columns = prompt_end + keep
            lp, entropy, _ = score(
                input_ids[group, :columns], attention_mask[group, :columns], keep
            )
            logps.append(F.pad(lp, (0, logits_to_keep - keep)))
            if entropy is not None:
                entropies.append(F.pad(entropy, (0, logits_to_keep - keep)))
    back = torch.argsort(order)
    return torch.cat(logps)[back], torch.cat(entropies)[back] if entropies else None, None
