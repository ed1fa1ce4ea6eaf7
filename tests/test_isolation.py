"""Generated code never runs without isolation unless the user asks for it, and a run made that
way says so wherever its numbers appear."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from corebench.harness.errors import CorebenchError
from corebench.harness.sandbox import isolation

CLI = [sys.executable, "-m", "corebench.harness.cli"]


def without_bwrap(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has no bubblewrap (the interpreter's own folder only)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for tool in ("git", "setarch"):
        found = shutil.which(tool)
        if found:
            (folder / tool).symlink_to(found)
    env = {**os.environ, "PATH": str(folder)}
    env.pop("COREBENCH_ISOLATION", None)
    return env


def test_without_bubblewrap_a_run_is_refused_with_one_line(tmp_path, data_dir):
    done = subprocess.run(
        [*CLI, "run", "--system", "direct", "--bench", "mbpp", "--limit", "1",
         "--data-dir", str(data_dir), "--out", str(tmp_path / "run")],
        env=without_bwrap(tmp_path), capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "bubblewrap is not available" in lines[0], done.stderr
    assert "apt-get install bubblewrap" in lines[0] and "--isolation unsafe" in lines[0]
    assert not (tmp_path / "run").exists()  # nothing started, nothing written


def test_isolation_mode_refuses_or_obeys(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    isolation.isolation_mode.cache_clear()
    try:
        with pytest.raises(CorebenchError, match="bubblewrap is not available"):
            isolation.isolation_mode("auto")
        with pytest.raises(CorebenchError, match="bubblewrap is not available"):
            isolation.isolation_mode("bwrap")
        with pytest.warns(isolation.IsolationWarning, match="unsafe"):
            assert isolation.isolation_mode("unsafe") == "unsafe"
    finally:
        isolation.isolation_mode.cache_clear()


def test_an_unsafe_run_is_recorded_and_shown(tmp_path, data_dir):
    from corebench.plugins.benchmarks.evalplus_tasks import MbppPlus

    problem = MbppPlus(data_dir).problems["Mbpp/2"]
    samples = tmp_path / "samples.jsonl"
    samples.write_text(
        json.dumps(
            {"task_id": "Mbpp/2", "solution": problem["prompt"] + problem["canonical_solution"]}
        )
        + "\n"
    )
    env = without_bwrap(tmp_path)
    out = tmp_path / "unsafe-run"
    done = subprocess.run(
        [*CLI, "evaluate", "--bench", "mbpp", "--samples", str(samples), "--out", str(out),
         "--data-dir", str(data_dir), "--repeats", "0", "--isolation", "unsafe"],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "isolation is unsafe" in done.stderr and "UNSAFE" in done.stdout
    from corebench.harness.store import Store

    assert Store(out, create=False).metadata()["isolation"] == "unsafe"
    shown = subprocess.run([*CLI, "show", str(out)], env=env, capture_output=True, text=True)
    assert "UNSAFE" in shown.stdout
    csv = tmp_path / "board.csv"
    subprocess.run(
        [*CLI, "leaderboard", str(out), "--csv", str(csv)], env=env, check=True, capture_output=True
    )
    header, row = csv.read_text().splitlines()[:2]
    assert dict(zip(header.split(","), row.split(","), strict=False))["isolation"] == "unsafe"
