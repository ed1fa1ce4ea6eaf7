"""End to end with the real embedded model: the CLI, metadata, and resume after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

CLI = [sys.executable, "-m", "corebench.harness.cli"]


def corebench(*args: str, data_dir: Path) -> list[str]:
    return [*CLI, *args, "--data-dir", str(data_dir)] if args[0] == "run" else [*CLI, *args]


def finished(run_dir: Path) -> list[tuple[str, int, str]]:
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        return db.execute(
            "SELECT r.task_id, r.sample_index, s.solution FROM results r JOIN solutions s USING (task_id, sample_index)"
        ).fetchall()


def verdicts(run_dir: Path) -> list[tuple[str, int, str]]:
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        return db.execute(
            "SELECT task_id, sample_index, verdict FROM results ORDER BY task_id, sample_index"
        ).fetchall()


def test_corecode_cli_run_show_and_metadata(tmp_path, data_dir):
    run_dir = tmp_path / "run"
    # the run's settings from a file (typed system options in a table); a flag given wins
    settings = tmp_path / "run.toml"
    settings.write_text(
        '[run]\nsystem = "corecode"\nbench = "mbpp"\nlimit = 2\nmax_new_tokens = 64\n'
        "k = [1]\n[run.system_options]\nplan_max_new_tokens = 40\n"
    )
    args = ["run", "--config", str(settings), "--max-new-tokens", "48", "--out", str(run_dir)]
    first = subprocess.run(
        corebench(*args, data_dir=data_dir), capture_output=True, text=True, timeout=900
    )
    assert first.returncode == 0, first.stderr
    assert "mbpp · corecode · embedded" in first.stdout and "pass@1" in first.stdout

    rows = finished(run_dir)
    assert len(rows) == 2
    for _, _, solution in rows:
        trace = json.loads(solution)["trace"]
        assert [c["role"] for c in trace] == ["planner", "coder"]
        assert all(c["completion_tokens"] > 0 and c["latency_s"] > 0 for c in trace)

    with sqlite3.connect(run_dir / "results.sqlite") as db:
        metadata = json.loads(db.execute("SELECT metadata FROM run").fetchone()[0])
    assert metadata["packages"]["corebench"] and metadata["packages"]["transformers"]
    assert metadata["python"] == sys.version.split()[0]
    assert metadata["machine"]["cores"] == os.cpu_count() and metadata["machine"]["ram_bytes"] > 0
    assert (
        metadata["dataset"]["sha256"]
        == "af43697e8791c4c149bdfd6b489d8b5412507551ac20e28a439f650b8225db63"
    )
    model = metadata["models"]["*"]
    assert len(model["gguf_sha256"]) == 64 and model["files"]["model.safetensors"]
    assert metadata["sampling"] == {
        "temperature": 0.0,
        "top_p": 0.95,
        "max_new_tokens": 48,
        "seed": 0,
        "n": 1,
    }
    assert metadata["isolation"] == "bwrap"
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        config = json.loads(db.execute("SELECT config FROM run").fetchone()[0])
    assert config["system_options"] == {"plan_max_new_tokens": 40} and config["k"] == [1]

    again = subprocess.run(
        corebench(*args, data_dir=data_dir), capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0 and "nothing to do" in again.stderr

    shown = subprocess.run(
        corebench("show", str(run_dir), "--json", data_dir=data_dir), capture_output=True, text=True
    )
    summary = json.loads(shown.stdout)
    assert (
        summary["samples"] == 2
        and summary["per_task"]["calls"] == 2.0
        and "1" in summary["pass@k_base"]
    )

    out = tmp_path / "samples.jsonl"
    subprocess.run(
        corebench("export", str(run_dir), "--jsonl", str(out), data_dir=data_dir), check=True
    )
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 2 and {"solution", "result"} == set(lines[0])

    # as an EvalPlus samples file: re-judged from the file alone, the same verdicts
    samples = tmp_path / "evalplus.jsonl"
    subprocess.run(
        corebench("export", str(run_dir), "--jsonl", str(samples), "--format", "evalplus",
                  data_dir=data_dir),
        check=True,
    )  # fmt: skip
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert [set(row) for row in rows] == [{"task_id", "solution"}] * 2
    assert {row["task_id"]: row["solution"] for row in rows} == {
        line["solution"]["task_id"]: line["solution"]["code"] for line in lines
    }
    judged = tmp_path / "rejudged"
    subprocess.run(
        corebench("evaluate", "--bench", "mbpp", "--samples", str(samples), "--out", str(judged),
                  "--repeats", "0", data_dir=data_dir),
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    assert verdicts(judged) == verdicts(run_dir)


def test_resume_after_sigkill_matches_an_uninterrupted_run(tmp_path, data_dir):
    args = [
        "run",
        "--system",
        "direct",
        "--bench",
        "mbpp",
        "--limit",
        "5",
        "--max-new-tokens",
        "40",
        "--concurrency",
        "1",
    ]
    straight = tmp_path / "straight"
    subprocess.run(
        corebench(*args, "--out", str(straight), data_dir=data_dir),
        check=True,
        capture_output=True,
        timeout=900,
    )

    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        corebench(*args, "--out", str(killed), data_dir=data_dir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 600
    while time.time() < deadline:  # kill after the first sample is stored, mid-run
        try:
            if (killed / "results.sqlite").exists() and len(finished(killed)) >= 1:
                break
        except sqlite3.OperationalError:  # the run is still creating its tables
            pass
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = len(finished(killed))
    assert 1 <= partial < 5, "the kill should land mid-run"

    subprocess.run(
        corebench(*args, "--out", str(killed), data_dir=data_dir),
        check=True,
        capture_output=True,
        timeout=900,
    )
    a, b = finished(straight), finished(killed)
    assert len(b) == len({(t, i) for t, i, _ in b}) == 5  # none lost, none duplicated
    key = lambda rows: sorted((t, i, json.loads(s)["code"]) for t, i, s in rows)  # noqa: E731
    assert key(a) == key(b)  # greedy decoding: the same programs


def test_a_model_per_role_with_two_different_checkpoints(tmp_path, data_dir):
    """planner = the embedded model (float32), coder = a bfloat16 copy saved as its own checkpoint."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from corebench.plugins.backends.embedded import EmbeddedBackend

    embedded = EmbeddedBackend()
    embedded.load()
    coder_dir = tmp_path / "coder-bf16"
    AutoModelForCausalLM.from_pretrained(embedded.path, dtype=torch.bfloat16).save_pretrained(
        coder_dir
    )
    AutoTokenizer.from_pretrained(embedded.path).save_pretrained(coder_dir)

    run_dir = tmp_path / "run"
    spec = f"planner=embedded,coder=hf:{coder_dir}"
    args = ["run", "--system", "corecode", "--bench", "mbpp", "--limit", "2", "--max-new-tokens", "32",
            "--model", spec, "--out", str(run_dir)]  # fmt: skip
    proc = subprocess.run(
        corebench(*args, data_dir=data_dir), capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr
    for _, _, solution in finished(run_dir):
        trace = json.loads(solution)["trace"]
        assert [(c["role"], c["model"]) for c in trace] == [
            ("planner", "embedded:SmolLM2-135M-Instruct"),
            ("coder", f"hf:{coder_dir}"),
        ]
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        metadata = json.loads(db.execute("SELECT metadata FROM run").fetchone()[0])
    assert metadata["models"]["planner"]["backend"] == "embedded"
    assert metadata["models"]["coder"]["path"] == str(coder_dir.resolve())
    planner_files = metadata["models"]["planner"]["files"]
    coder_files = metadata["models"]["coder"]["files"]
    assert planner_files["model.safetensors"] != coder_files["model.safetensors"]  # two checkpoints
