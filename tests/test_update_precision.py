"""measurements/update_precision.py: what of an update survives a cast, on tensors whose bfloat16
roundings are known (bfloat16 steps by 2**-7 between 1 and 2)."""

from __future__ import annotations

import measurement_scripts
import pytest
import torch
from safetensors.torch import save_file

precision = measurement_scripts.load("update_precision")
STEP = 2**-7  # bfloat16's grid step in [1, 2)


def test_an_update_below_half_a_step_is_erased_by_the_cast() -> None:
    start = {"w": torch.ones(4)}
    r = precision.retention(start, {"w": torch.ones(4) + 1e-4}, torch.bfloat16)
    assert r.changed == 1.0
    assert r.update_norm == pytest.approx(2e-4, rel=1e-2)
    assert (r.changed_after_cast, r.cast_norm, r.cosine, r.projection_kept) == (0, 0, 0, 0)


def test_an_update_on_the_grid_is_kept_whole() -> None:
    start = {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor([1.5])}
    trained = {"w": torch.tensor([1.0 + STEP, 2.0]), "b": torch.tensor([1.5])}
    r = precision.retention(start, trained, torch.bfloat16)
    assert r.changed == r.changed_after_cast == pytest.approx(1 / 3)
    assert r.cast_norm == pytest.approx(r.update_norm) == pytest.approx(STEP)
    assert r.cosine == pytest.approx(1.0)
    assert r.projection_kept == pytest.approx(1.0)


def test_rounding_across_a_midpoint_adds_noise_larger_than_the_update() -> None:
    # 1.003 casts to 1.0 and 1.004 to 1 + STEP (the midpoint is 1 + STEP/2 = 1.0039...); the
    # second element's update stays on the same side of its midpoint and is erased
    start = {"w": torch.tensor([1.003, 1.0])}
    trained = {"w": torch.tensor([1.004, 1.001])}
    r = precision.retention(start, trained, torch.bfloat16)
    update = torch.tensor([1.004, 1.001]).double() - torch.tensor([1.003, 1.0]).double()
    assert r.changed_after_cast == 0.5
    assert r.cast_norm == pytest.approx(STEP)
    assert r.cosine == pytest.approx(float(update[0]) / float(update.norm()), rel=1e-6)
    assert r.projection_kept == pytest.approx(STEP * float(update[0]) / float(update @ update))
    assert r.projection_kept > 3  # one element moved a whole step for a thousandth


def test_mismatched_or_identical_checkpoints_are_refused() -> None:
    start = {"w": torch.ones(2)}
    with pytest.raises(ValueError, match="different tensors"):
        precision.retention(start, {"v": torch.ones(2)}, torch.bfloat16)
    with pytest.raises(ValueError, match="shape"):
        precision.retention(start, {"w": torch.ones(3)}, torch.bfloat16)
    with pytest.raises(ValueError, match="no update"):
        precision.retention(start, {"w": torch.ones(2)}, torch.bfloat16)


def test_weights_are_read_from_a_checkpoint_folder(tmp_path) -> None:
    save_file({"w": torch.arange(3.0)}, str(tmp_path / "model.safetensors"))
    assert torch.equal(precision.weights(tmp_path)["w"], torch.arange(3.0))
    with pytest.raises(SystemExit, match="no model.safetensors"):
        precision.weights(tmp_path / "missing")
