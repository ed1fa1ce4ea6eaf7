"""Hostile programs against the measurement phase, written as a user trying to look smaller or
faster would write them (``hostile_measurement.py``), through a judging service on loopback and
through ``corebench evaluate``: as root, and as an unprivileged user (created here) with and
without a memory cgroup delegated to it.

Memory is counted by a memory cgroup wherever the harness may make one; where it may not (an
unprivileged user without delegation) the run records ``rss``, and memfd_create is refused."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from corebench.harness.sandbox.cgroups import (
    memory_cgroup_base,
    own_memory_cgroup,
    remove_leftovers,
)
from corebench.harness.sandbox.isolation import isolation_mode
from corebench.harness.store import Store

pytestmark = [
    pytest.mark.measurement_phase,
    pytest.mark.skipif(isolation_mode() != "bwrap", reason="bubblewrap's namespaces"),
]
HERE = Path(__file__).parent
ROOT = HERE.parent
SCRIPT = HERE / "hostile_measurement.py"
TESTER = "corebench-tester"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="creates an unprivileged user")
HIDING = ("memfd", "tmpfs_file", "deleted_file")  # 12 MB kept outside the address space


def hostile(env: dict[str, str] | None = None, user: str | None = None) -> dict:
    command = [sys.executable, str(SCRIPT)]
    if user is not None:
        command = as_user(user, command, env or {})
    ran = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
        cwd="/tmp",
        env={**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)},
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    return json.loads(ran.stdout.strip().splitlines()[-1])


def ensure_user(user: str) -> None:
    if subprocess.run(["id", user], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", user], check=True)


def as_user(user: str, command: list[str], env: dict[str, str]) -> list[str]:
    """``command`` as ``user``, in a mount namespace of its own where the folders this
    interpreter and checkout live in can be traversed (a pyenv under /root, say): each closed
    folder on their paths is a tmpfs there, with what lies on the paths bound into it."""
    ensure_user(user)
    needed = {os.path.realpath(p) for p in (sys.executable, sys.prefix, sys.base_prefix, ROOT)}
    kept: dict[str, set[str]] = {}  # closed folder -> its entries on the needed paths
    for path in needed:
        parts = Path(path).parts
        for depth in range(1, len(parts)):
            folder = Path(*parts[:depth])
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                kept.setdefault(str(folder), set()).add(parts[depth])
                break
    script = ["set -e", "mkdir -p /run/corebench-kept"]
    for n, (folder, entries) in enumerate(sorted(kept.items())):
        for m, entry in enumerate(sorted(entries)):
            hold = f"/run/corebench-kept/{n}-{m}"
            script += [
                f"mkdir -p {hold}",
                f"mount --bind {shlex.quote(f'{folder}/{entry}')} {hold}",
            ]
        script.append(f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(folder)}")
        for m, entry in enumerate(sorted(entries)):
            target = shlex.quote(f"{folder}/{entry}")
            script += [f"mkdir -p {target}", f"mount --move /run/corebench-kept/{n}-{m} {target}"]
    settings = [f"{k}={shlex.quote(v)}" for k, v in {**env, "PYTHONPATH": str(ROOT)}.items()]
    inner = shlex.join(["runuser", "-u", user, "--", "env", "HOME=/tmp"]) + " " + " ".join(settings)
    script.append(f"exec {inner} {shlex.join(command)}")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(script)]


def contained(found: dict) -> None:
    """What holds wherever memory is counted by a cgroup."""
    assert found["holds"]["memory_ratio"] == pytest.approx(1.0, abs=0.05), found["holds"]
    for name in HIDING:  # the same 12 MB, counted (was 0.03-0.14)
        assert found[name]["error"] is None and found[name]["memory_ratio"] > 0.8, found[name]


def stateless_and_unreachable(found: dict) -> None:
    """What holds as root or not: no state carried, no exec, the timing process out of reach."""
    # exec is refused while timed (a fresh interpreter read ~30 MB below the fork it replaced):
    # the program goes on and is measured with its 12 MB
    assert found["execve"]["error"] is None, found["execve"]
    assert found["execve"]["memory_ratio"] > 0.8, found["execve"]
    # answers kept in folder timestamps are never found: each run does the work (the cache
    # would make it ~100 times faster)
    assert found["timestamps"]["error"] is None, found["timestamps"]
    assert found["timestamps"]["runtime_ratio"] > 0.66, found["timestamps"]
    # signals, renicing and affinity aimed at the timing process fail: it measures on
    assert found["reach"]["error"] is None, found["reach"]
    assert found["reach"]["runtime_ratio"] > 0.66, found["reach"]


@pytest.mark.skipif(memory_cgroup_base() is None, reason="no memory cgroup to make")
def test_as_root_memory_is_counted_and_no_run_keeps_state_or_reaches_the_timer():
    if os.geteuid() != 0:
        pytest.skip("runs as root")
    found = hostile()
    assert found["memory_accounting"] == "cgroup"
    contained(found)
    stateless_and_unreachable(found)


@needs_root
def test_unprivileged_without_a_cgroup_records_it_and_refuses_memfd():
    found = hostile(user=TESTER)
    assert found["memory_accounting"] == "rss"  # what the run records: memory is not contained
    assert found["holds"]["memory_ratio"] == pytest.approx(1.0, abs=0.1), found["holds"]
    assert "Operation not permitted" in (found["memfd"]["error"] or ""), found["memfd"]
    stateless_and_unreachable(found)


@needs_root
@pytest.mark.skipif(
    (own_memory_cgroup() or (None, None))[1] != "v1",
    reason="delegation by chown is cgroup v1's (v2 also needs the common ancestor's procs)",
)
def test_unprivileged_with_a_delegated_cgroup_counts_every_page():
    base, _ = own_memory_cgroup()
    delegated = base / f"corebench-delegated-{os.getpid()}"
    delegated.mkdir()
    try:
        ensure_user(TESTER)
        shutil.chown(delegated, TESTER)
        for entry in delegated.iterdir():
            shutil.chown(entry, TESTER)
        found = hostile({"COREBENCH_CGROUP": str(delegated)}, user=TESTER)
    finally:
        for child in delegated.glob("corebench-*"):
            child.rmdir()
        delegated.rmdir()
    assert found["memory_accounting"] == "cgroup"
    contained(found)
    stateless_and_unreachable(found)


@pytest.mark.skipif(memory_cgroup_base() is None, reason="no memory cgroup to make")
def test_corebench_evaluate_counts_memory_a_sample_keeps_in_a_memfd(tmp_path, data_dir):
    if os.geteuid() != 0:
        pytest.skip("runs as root")
    answer = "    return set(a) & set(b)\n"
    honest = "def similar_elements(a, b):\n    held = bytearray(12 << 20)\n"
    honest += "    held[::4096] = b'x' * (3 << 10)\n" + answer
    hiding = "import os\ndef similar_elements(a, b):\n    fd = os.memfd_create('kept')\n"
    hiding += "    for _ in range(12):\n        os.write(fd, b'x' * (1 << 20))\n" + answer
    samples = tmp_path / "samples.jsonl"
    rows = [{"task_id": "Mbpp/2", "solution": code} for code in (honest, hiding)]
    samples.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "ev"
    args = [sys.executable, "-m", "corebench.harness.cli", "evaluate", "--bench", "mbpp"]
    args += ["--samples", str(samples), "--out", str(out), "--repeats", "3"]
    ran = subprocess.run([*args, "--data-dir", str(data_dir)], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr[-3000:]
    store = Store(out)  # the measurement phase's peaks (results.jsonl has judging's)
    peaks = [result.measurement.peak_memory_bytes for _, result in store.samples()]
    store.close()
    # 12 MiB each, known to about 256 KiB (the cgroup charges pages in batches)
    assert peaks[0] > 11 * 1024**2 and peaks[1] > 0.8 * peaks[0], peaks
    summary = json.loads((out / "summary.json").read_text())
    assert summary["memory_accounting"] == "cgroup"


@pytest.mark.skipif(memory_cgroup_base() is None, reason="no memory cgroup to make")
def test_session_cgroups_a_killed_harness_left_are_removed_and_no_others():
    base, _ = memory_cgroup_base()
    ended = subprocess.Popen(["true"])
    ended.wait()
    dead = base / f"corebench-{ended.pid}-0"  # a harness killed before it removed its cgroup
    live = base / f"corebench-{os.getpid()}-99999"  # this process's: in use
    dead.mkdir()
    live.mkdir()
    try:
        assert dead not in remove_leftovers(base)  # just made: perhaps another namespace's, kept
        assert dead in remove_leftovers(base, older_than_s=0)
        assert not dead.exists() and live.exists()
    finally:
        for folder in (dead, live):
            if folder.exists():
                folder.rmdir()
