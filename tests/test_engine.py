"""The fork engine: children forked by a pre-started zygote are confined like fresh sandboxes,
nothing one program leaves reaches the next one in the same zygote, and without a working zygote
programs start exec'd, with a warning. (Every test of test_sandbox.py runs under both engines.)"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import warnings
from pathlib import Path

import psutil
import pytest

from corebench.harness import FunctionalSuite, Verdict
from corebench.harness.sandbox import Executor, launch
from corebench.harness.sandbox.isolation import isolation_mode

pytestmark = pytest.mark.skipif(
    isolation_mode() != "bwrap", reason="the fork engine needs bubblewrap"
)

ADD = FunctionalSuite(
    entry_point="add",
    reference_code="def add(a, b):\n    return a + b\n",
    inputs={"base": [[1, 2], [3, 4]]},
    fingerprint="test-engine-add",
)


def judge_all(executor: Executor, programs: list[str]):
    """Judge ``programs`` one after another on one executor (with one worker: one zygote)."""

    async def run():
        return [await executor.evaluate("t/add", i, code, ADD) for i, code in enumerate(programs)]

    return asyncio.run(run())


def test_a_zygote_serves_every_program_of_a_one_worker_executor():
    wrong = "def add(a, b):\n    return a - b\n"
    spin = "def add(a, b):\n    while True:\n        pass\n"
    executor = Executor(workers=1, engine="fork")
    results = judge_all(executor, [ADD.reference_code, wrong, spin, ADD.reference_code, wrong])
    assert [r.verdict for r in results] == [
        Verdict.passed,
        Verdict.wrong_answer,  # stopped at its first failure
        Verdict.timeout,  # killed by the harness
        Verdict.passed,
        Verdict.wrong_answer,
    ]
    assert executor.zygotes is not None and executor.zygotes.available
    # one zygote forked them all (and the reference's run, unless its outputs were cached)
    assert len(executor.zygotes._all) == 1 and executor.zygotes._all[0].count in (5, 6)


LEAVE_FILES = (
    "import os\n"
    "def add(a, b):\n"
    "    for path in ('/sandbox/left', '/tmp/left', '/dev/shm/left', '/left', '/dev/left'):\n"
    "        try:\n"
    "            open(path, 'w').write('x')\n"
    "        except OSError:\n"
    "            pass\n"
    "    return a + b\n"
)
FIND_FILES = (
    "import os\n"
    "def add(a, b):\n"
    "    paths = ('/sandbox/left', '/tmp/left', '/dev/shm/left', '/left', '/dev/left')\n"
    "    found = [p for p in paths if os.path.exists(p)]\n"
    "    return a + b if not found else found\n"
)


def test_files_a_program_leaves_are_gone_for_the_next_one():
    results = judge_all(Executor(workers=1, engine="fork"), [LEAVE_FILES, FIND_FILES])
    assert results[0].verdict is Verdict.passed
    assert results[1].verdict is Verdict.passed, results[1].first_failure


def test_a_folder_bound_below_tmp_is_seen_read_only_by_every_fork(monkeypatch):
    # a checkout or venv under /tmp: bubblewrap binds it read-only below the zygote's /tmp, and
    # each fork's fresh /tmp must bind it again, read-only (the zygote works out where once)
    folder = Path(tempfile.mkdtemp(dir="/tmp"))  # pytest's own is closed to `nobody`
    try:
        folder.chmod(0o777)  # only the mount can refuse the program a write
        (folder / "marker.txt").write_text("here")
        monkeypatch.syspath_prepend(str(folder))  # what the sandbox binds: every sys.path folder
        probe = (
            "import errno, os\n"
            f"FOLDER = {str(folder)!r}\n"
            "def add(a, b):\n"
            "    seen = open(os.path.join(FOLDER, 'marker.txt')).read()\n"
            "    try:\n"
            "        open(os.path.join(FOLDER, 'written.txt'), 'w').close()\n"
            "        return 'writable'\n"
            "    except OSError as exc:\n"
            "        if exc.errno != errno.EROFS:\n"
            "            return repr(exc)\n"
            "    return a + b if seen == 'here' and not os.path.exists('/tmp/left') else seen\n"
        )
        executor = Executor(workers=1, engine="fork")
        results = judge_all(executor, [LEAVE_FILES, probe, probe])
        assert [r.verdict for r in results] == [Verdict.passed] * 3, [
            r.first_failure for r in results
        ]
        assert not (folder / "written.txt").exists()
        # forked, not exec'd (a zygote that cannot start falls back to exec'd children)
        assert executor.zygotes.available and len(executor.zygotes._all) == 1
        assert executor.zygotes._all[0].count in (3, 4)  # (and the reference, unless cached)
    finally:
        shutil.rmtree(folder)


def test_processes_a_program_leaves_die_with_it():
    daemon = (
        "import os, time\n"
        "def add(a, b):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"  # out of its process group, as a daemon would
        "        if os.fork() == 0:\n"
        "            while True:\n"
        "                time.sleep(0.05)\n"
        "        os._exit(0)\n"
        "    return a + b\n"
    )
    executor = Executor(workers=1, engine="fork")
    assert judge_all(executor, [daemon])[0].verdict is Verdict.passed
    (zygote,) = executor.zygotes._all
    left = psutil.Process(zygote.proc.pid).children(recursive=True)
    # bubblewrap's own processes and the zygote: nothing of the program
    assert len(left) <= 2 and all("zygote.py" in " ".join(p.cmdline()) or p.name() == "bwrap"
                                  for p in left), [p.cmdline() for p in left]  # fmt: skip


def test_shared_memory_of_one_program_is_invisible_to_the_next():
    create = (
        "import ctypes\n"
        "def add(a, b):\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    assert libc.shmget(4242, 4096, 0o1666) >= 0\n"  # IPC_CREAT | 0666
        "    return a + b\n"
    )
    find = (
        "import ctypes\n"
        "def add(a, b):\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    return a + b if libc.shmget(4242, 0, 0) < 0 else 'found'\n"
    )
    results = judge_all(Executor(workers=1, engine="fork"), [create, find])
    assert [r.verdict for r in results] == [Verdict.passed, Verdict.passed], results[
        1
    ].first_failure


def test_a_fork_runs_without_capabilities():
    code = (
        "def add(a, b):\n"
        "    status = open('/proc/self/status').read()\n"
        "    caps = [line.split()[1] for line in status.splitlines() if line.startswith('Cap')]\n"
        "    return a + b if all(int(c, 16) == 0 for c in caps[:3]) else caps\n"  # Inh, Prm, Eff
    )
    result = judge_all(Executor(workers=1, engine="fork"), [code])[0]
    assert result.verdict is Verdict.passed, result.first_failure


def test_a_zygote_that_cannot_start_leaves_programs_to_exec_with_a_warning(monkeypatch):
    real = launch.child_command

    def broken(workdir, mode, zygote=False, **options):
        argv, home = real(workdir, mode, zygote=zygote, **options)
        return (["/bin/false"] if zygote else argv), home

    monkeypatch.setattr(launch, "child_command", broken)
    executor = Executor(workers=1, engine="fork")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = judge_all(executor, [ADD.reference_code, "def add(a, b):\n    return a - b\n"])
    assert [r.verdict for r in results] == [Verdict.passed, Verdict.wrong_answer]
    assert not executor.zygotes.available
    assert [str(w.message) for w in caught if w.category is launch.EngineWarning][:1], caught


def test_a_program_gone_at_once_keeps_its_zygote():
    executor = Executor(workers=1, engine="fork")
    results = judge_all(executor, ["import os\nos._exit(0)\n", ADD.reference_code])
    assert [r.verdict for r in results] == [Verdict.runtime_error, Verdict.passed]
    assert "code 0" in results[0].first_failure  # the exit status, as its zygote reported it
    assert len(executor.zygotes._all) == 1
