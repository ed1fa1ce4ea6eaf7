"""Reproducibility metadata recorded with every run."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import importlib.metadata as md
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

from .modelspec import DEFAULT_ROLE

KEY_PACKAGES = (
    "corebench", "torch", "transformers", "accelerate", "vllm", "trl", "evalplus",
    "datasets", "pluggy", "pandas", "numpy", "pydantic",
)  # fmt: skip


@functools.cache
def _fingerprint(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def file_fingerprint(path: str | os.PathLike[str]) -> str:
    """sha256 of a file, computed once per process for an unchanged file."""
    st = os.stat(path)
    return _fingerprint(os.fspath(path), st.st_size, st.st_mtime_ns)


def package_versions() -> dict[str, str]:
    versions = {}
    for name in KEY_PACKAGES:
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return versions


def git_commit() -> str | None:
    """The commit of the corebench source tree, when it is a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "ram_bytes": psutil.virtual_memory().total,
        "platform": platform.platform(),
        "hostname_hash": hashlib.sha256(platform.node().encode()).hexdigest()[:12],
    }


def environment_metadata() -> dict[str, Any]:
    """Everything about the software and machine that a result depends on."""
    return {
        "corebench_version": package_versions().get("corebench"),
        "git_commit": git_commit(),
        "python": sys.version.split()[0],
        "packages": package_versions(),
        "machine": machine(),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


# What identifies a model's weights in a backend's identity (paths and devices may change between
# machines without changing the weights; the type they decode in is compared on its own).
WEIGHT_KEYS = ("backend", "target", "files", "gguf_sha256")


def _content(dataset: dict[str, Any]) -> dict[str, Any]:
    """What identifies a dataset's content: its hash when known (the data folder may move)."""
    if "sha256" in dataset:
        return {"sha256": dataset["sha256"], "options": dataset.get("options")}
    return {k: v for k, v in dataset.items() if k not in ("path", "source")}


def provenance_changes(
    stored: dict[str, Any],
    dataset: dict[str, Any] | None = None,
    models: dict[str, dict[str, Any]] | None = None,
) -> list[str]:
    """How the data or the model weights differ from what a stored run recorded (empty: none).
    Only what both sides record is compared."""
    changes = []
    recorded = stored.get("dataset")
    if dataset is not None and recorded is not None and _content(recorded) != _content(dataset):
        before, now = str(recorded.get("sha256", "?")), str(dataset.get("sha256", "?"))
        options = (recorded.get("options") or {}, dataset.get("options") or {})
        same_data = "sha256" in recorded and before == now
        if same_data and options[0] != options[1]:  # the same data, judged or chosen otherwise
            changed = sorted(
                k for k in {*options[0], *options[1]} if options[0].get(k) != options[1].get(k)
            )
            said = ", ".join(
                f"{k}: {options[0].get(k)!r} now {options[1].get(k)!r}" for k in changed
            )
            changes.append(f"the benchmark's options changed ({said})")
        else:
            changes.append(f"the dataset changed (sha256 {before[:12]}… now {now[:12]}…)")
    for role, now in (models or {}).items():
        before = (stored.get("models") or {}).get(role)
        if before is None:
            continue
        # a converted checkpoint is identified by the file it was converted from
        keys = ("backend", "gguf_sha256") if "gguf_sha256" in before else WEIGHT_KEYS
        label = "" if role == DEFAULT_ROLE else f"{role}'s "
        for key in keys:
            if key in before and key in now and before[key] != now[key]:
                changes.append(f"{label}model weights changed ({key})")
                break
        # the same weights decoded in another type answer otherwise (bfloat16 against float32:
        # different greedy code on 39 of 60 tasks); dtype=auto resolves by the machine
        if "dtype" in before and "dtype" in now and before["dtype"] != now["dtype"]:
            was = before["dtype"].removeprefix("torch.")
            changes.append(
                f"{label}model decodes in {now['dtype'].removeprefix('torch.')} here, the run "
                f"began in {was} (dtype=auto resolves by the machine: continue it where it "
                f"resolves to {was})"
            )
    return changes
