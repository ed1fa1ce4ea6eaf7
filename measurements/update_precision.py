"""How much of a trained checkpoint's update survives the dtype its evaluation runs in.

    .venv/bin/python measurements/update_precision.py START TRAINED [TRAINED ...] --dtype bfloat16

START and TRAINED are checkpoint folders (``model.safetensors`` inside, or the file itself). The
update is TRAINED − START in the saved (float32) weights; cast both to ``--dtype`` and the
difference the cast models have is the update rounded to that dtype's grid. Where an element's
update is smaller than half the grid step at its weight, the cast usually erases it and
sometimes moves it by a whole step: on average along the update the rounding keeps it (the
projection), but the cast difference is the update plus rounding noise, and the noise can be
larger. Printed per trained checkpoint:

- ``|update|``: the update's L2 norm over every parameter; ``changed``: the share of elements it
  changes;
- ``changed after cast``: the share of elements whose cast value differs;
- ``|cast difference|`` and its cosine with the update: 1 where the cast keeps the update as it
  is, near 0 where rounding noise dominates it;
- ``projection kept``: the cast difference's component along the update, as a share of it.

The `hf` backend evaluates in bfloat16 where the CPU computes it natively (``dtype=auto``);
``hf:PATH?dtype=float32`` evaluates the saved weights as they are.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file


@dataclass(frozen=True)
class Retention:
    """What of an update (trained − start) is left once both are cast to a dtype."""

    update_norm: float
    changed: float  # share of elements the update changes
    changed_after_cast: float  # share of elements whose cast values differ
    cast_norm: float  # the cast models' difference's norm
    cosine: float  # between the update and the cast difference
    projection_kept: float  # <cast difference, update> / |update|^2


def retention(
    start: dict[str, torch.Tensor], trained: dict[str, torch.Tensor], dtype: torch.dtype
) -> Retention:
    """The update from ``start`` to ``trained`` (the same tensor names and shapes) against the
    difference of the two cast to ``dtype``, over every element of every tensor."""
    if start.keys() != trained.keys():
        raise ValueError(f"different tensors: {sorted(start.keys() ^ trained.keys())[:5]}")
    elements = changed = changed_cast = 0
    dot = update_sq = cast_sq = 0.0
    for name, before in start.items():
        after = trained[name]
        if after.shape != before.shape:
            raise ValueError(f"{name}: shape {tuple(after.shape)} against {tuple(before.shape)}")
        update = (after.double() - before.double()).flatten()
        cast = (after.to(dtype).double() - before.to(dtype).double()).flatten()
        elements += update.numel()
        changed += int((update != 0).sum())
        changed_cast += int((cast != 0).sum())
        dot += float(update @ cast)
        update_sq += float(update @ update)
        cast_sq += float(cast @ cast)
    if update_sq == 0:
        raise ValueError("the trained weights equal the start's: no update to measure")
    return Retention(
        update_norm=update_sq**0.5,
        changed=changed / elements,
        changed_after_cast=changed_cast / elements,
        cast_norm=cast_sq**0.5,
        cosine=dot / (update_sq * cast_sq) ** 0.5 if cast_sq else 0.0,
        projection_kept=dot / update_sq,
    )


def weights(path: Path) -> dict[str, torch.Tensor]:
    """A checkpoint's tensors: ``path/model.safetensors``, or ``path`` itself."""
    file = path / "model.safetensors" if path.is_dir() else path
    if not file.is_file():
        raise SystemExit(f"{path}: no model.safetensors (a sharded checkpoint is not read here)")
    return load_file(str(file))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("start", type=Path, help="the checkpoint training started from")
    parser.add_argument("trained", type=Path, nargs="+", help="checkpoints trained from it")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    start = weights(args.start)
    print(f"update against its {args.dtype} cast, from {args.start}")
    for path in args.trained:
        r = retention(start, weights(path), dtype)
        print(
            f"{path}: |update| {r.update_norm:.4g}, changed {r.changed:.1%}; "
            f"changed after cast {r.changed_after_cast:.1%}, |cast difference| "
            f"{r.cast_norm:.4g}, cosine {r.cosine:.3f}, projection kept {r.projection_kept:.3f}"
        )


if __name__ == "__main__":
    main()
