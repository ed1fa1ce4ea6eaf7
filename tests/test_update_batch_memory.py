"""measurements/update_batch_memory.py: a child's peak memory is the kernel's, read from outside
the child, and a run's logs are read phase by phase, in the order the phases trained."""

from __future__ import annotations

import sys
from pathlib import Path

import measurement_scripts

memory = measurement_scripts.load("update_batch_memory")


def holding(mib: int) -> list[str]:
    """A Python child that touches ``mib`` MiB, then frees it before it exits."""
    return [
        sys.executable,
        "-c",
        f"b = bytearray({mib} << 20); b[::4096] = b'x' * len(b[::4096]); del b",
    ]


def test_a_child_s_peak_is_its_high_water_mark_even_after_it_freed_it(tmp_path: Path) -> None:
    status, small = memory.peak_rss_kb(holding(1), tmp_path / "small.log")
    assert status == 0
    status, large = memory.peak_rss_kb(holding(400), tmp_path / "large.log")
    assert status == 0
    assert large - small > 350 * 1024  # KiB: the 400 MiB it held, freed before it ended


def test_the_peak_is_the_child_s_not_the_size_of_the_process_measuring_it(tmp_path: Path) -> None:
    held = bytearray(600 << 20)  # this process grows by 600 MiB before it starts the child
    held[::4096] = b"x" * len(held[::4096])
    status, peak = memory.peak_rss_kb(holding(1), tmp_path / "small.log")
    del held
    assert status == 0
    assert peak < 200 * 1024  # KiB: a small Python child, not this process's 600 MiB and more


def test_a_failing_child_s_status_is_given(tmp_path: Path) -> None:
    status, _ = memory.peak_rss_kb(
        [sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "x.log"
    )
    assert status == 3


def test_a_run_s_phases_are_read_in_the_order_they_trained(tmp_path: Path) -> None:
    for folder in ("round1/coder", "round1/planner", "round10/planner", "round2/coder"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "timing.txt").write_text("1 1.0 0.5 4.0 80\n")
        (tmp_path / folder / "rewards.txt").write_text(f"{folder}\n")
    order = ["round1/planner", "round1/coder", "round2/coder", "round10/planner"]
    assert [str(p.relative_to(tmp_path)) for p in memory.phases(tmp_path)] == order
    assert memory.logged(tmp_path) == "\n".join(f"{folder}\n" for folder in order)


def test_a_one_phase_run_is_its_own_folder(tmp_path: Path) -> None:
    (tmp_path / "timing.txt").write_text("1 2.0 3.0 10.0 100\n2 1.0 1.0 5.0 90\n")
    assert memory.phases(tmp_path) == [tmp_path]


def test_a_phase_s_gradient_norm_comes_from_its_record_or_its_model_s_manifest(
    tmp_path: Path,
) -> None:
    phase, run = tmp_path / "round1" / "coder", tmp_path / "grpo"
    (phase).mkdir(parents=True)
    (phase / "phase.json").write_text('{"diagnostics": {"grad_norm_median": 0.75}}')
    (run / "model").mkdir(parents=True)
    (run / "model" / "corebench_manifest.json").write_text(
        '{"diagnostics": {"grad_norm_median": 0.5}}'
    )
    assert memory.grad_norm(phase) == 0.75
    assert memory.grad_norm(run) == 0.5
    assert memory.grad_norm(tmp_path) is None
