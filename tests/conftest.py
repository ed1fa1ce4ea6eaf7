"""Shared fixtures: offline settings, the shared data folder, a scripted backend for unit tests."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("COREBENCH_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()

# subprocesses (the `corebench` CLI) find the data where the tests do, as CI's shell sets it
os.environ.setdefault("COREBENCH_DATA_DIR", str(DATA_DIR))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One cache per test session run: the embedded model is converted once and shared by all tests.
os.environ.setdefault("COREBENCH_CACHE_DIR", str(ROOT / ".pytest_cache" / "corebench-cache"))
# Without bubblewrap the harness refuses to run generated code unless told otherwise: the suite
# then runs its own benign programs unconfined and skips every test that needs the sandbox.
if not shutil.which("bwrap"):
    os.environ.setdefault("COREBENCH_ISOLATION", "unsafe")

from corebench.harness import Generation, GenerationRequest, hookimpl  # noqa: E402
from corebench.harness.backend import BatchingBackend  # noqa: E402
from corebench.harness.registry import Origin, Plugins, load_plugins  # noqa: E402


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA_DIR / "MbppPlus-v0.2.0.jsonl.gz").exists():
        pytest.fail(
            f"benchmark data not found in {DATA_DIR}: set COREBENCH_DATA_DIR to ../shared/data"
        )
    return DATA_DIR


class ScriptedBackend(BatchingBackend):
    """Answers from a Python function: for control-flow tests, never for reported numbers."""

    name = "scripted"
    description = "test double: answers come from a function set by the test"
    respond: Callable[[GenerationRequest], str] = staticmethod(lambda request: "")
    requests: list[GenerationRequest] = []

    def generate_batch(self, requests: list[GenerationRequest]) -> list[Generation]:
        out = []
        for request in requests:
            ScriptedBackend.requests.append(request)
            text = ScriptedBackend.respond(request)
            out.append(
                Generation(
                    text=text,
                    prompt_tokens=sum(len(m.content.split()) for m in request.messages),
                    completion_tokens=len(text.split()),
                    finish_reason="stop",
                    latency_s=0.0,
                    batch_size=len(requests),
                )
            )
        return out


class _ScriptedPlugin:
    @hookimpl
    def register_backends(self, register):
        register(ScriptedBackend)


@pytest.fixture
def scripted() -> type[ScriptedBackend]:
    ScriptedBackend.requests = []
    ScriptedBackend.respond = staticmethod(lambda request: "")
    return ScriptedBackend


def scripted_plugins() -> Plugins:
    """The installed plugins plus the scripted backend."""
    return load_plugins(extra=[(_ScriptedPlugin(), Origin("scripted-test", "tests", "0"))])


@pytest.fixture
def plugins_with_scripted() -> Plugins:
    return scripted_plugins()
