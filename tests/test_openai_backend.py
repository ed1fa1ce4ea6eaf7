"""The `openai` backend against a real OpenAI-compatible server (`corebench serve`) on loopback."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time

import pytest

from corebench.harness.errors import CorebenchError
from corebench.plugins.backends.openai_backend import OpenAIBackend, split_target

CLI = [sys.executable, "-m", "corebench.harness.cli"]


def test_target_parsing():
    assert split_target("qwen@http://127.0.0.1:8000/v1") == ("qwen", "http://127.0.0.1:8000/v1")
    assert split_target("org/model@name@https://h/v1") == ("org/model@name", "https://h/v1")
    assert split_target("gpt-x") == ("gpt-x", None)
    with pytest.raises(CorebenchError):
        split_target("m@ftp://x")


def test_unreachable_server_is_one_clear_error():
    backend = OpenAIBackend("m@http://127.0.0.1:9/v1")
    with pytest.raises(
        CorebenchError, match="cannot reach the OpenAI-compatible server at http://127.0.0.1:9/v1"
    ):
        backend.load()


@pytest.fixture(scope="module")
def server():
    proc = subprocess.Popen(
        [*CLI, "serve", "--model", "embedded", "--name", "smol", "--port", "0"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.time() + 300
    url = None
    while time.time() < deadline and url is None:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            raise RuntimeError("corebench serve exited")
        match = re.search(r"serving smol at (http://\S+)", line)
        url = match.group(1) if match else None
    yield url
    proc.terminate()
    proc.wait(timeout=30)


@pytest.mark.model
def test_corecode_end_to_end_through_a_real_server(server, tmp_path, data_dir):
    run_dir = tmp_path / "run"
    args = [*CLI, "run", "--system", "corecode", "--bench", "mbpp", "--limit", "3", "--max-new-tokens", "48",
            "--model", f"openai:smol@{server}", "--out", str(run_dir), "--data-dir", str(data_dir)]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert f"mbpp · corecode · openai:smol@{server}" in proc.stdout
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        solutions = [json.loads(row[0]) for row in db.execute("SELECT solution FROM solutions")]
        metadata = json.loads(db.execute("SELECT metadata FROM run").fetchone()[0])
    assert len(solutions) == 3
    for solution in solutions:
        assert [c["role"] for c in solution["trace"]] == ["planner", "coder"]
        assert all(c["model"] == f"openai:smol@{server}" for c in solution["trace"])
        assert all(
            0 < c["completion_tokens"] <= 48 and c["prompt_tokens"] > 50 for c in solution["trace"]
        )
    assert metadata["models"]["*"] == {
        "backend": "openai",
        "model": "smol",
        "base_url": server,
        "label": "openai:smol",  # how leaderboards name it: the model, not the address
    }


@pytest.mark.model
def test_server_answers_like_openai_and_rejects_bad_requests(server):
    import openai

    client = openai.OpenAI(base_url=server, api_key="EMPTY")
    assert [m.id for m in client.models.list()] == ["smol"]
    reply = client.chat.completions.create(
        model="smol", messages=[{"role": "user", "content": "Say hi"}], max_tokens=8, temperature=0
    )
    assert reply.usage.completion_tokens <= 8 and reply.choices[0].finish_reason in (
        "stop",
        "length",
    )
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(
            model="other", messages=[{"role": "user", "content": "x"}], max_tokens=4
        )
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model="smol", messages=[{"role": "robot", "content": "x"}], max_tokens=4
        )
