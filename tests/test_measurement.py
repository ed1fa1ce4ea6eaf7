"""The measurement phase against programs that try to look faster or smaller than they are, and
against known answers: each timed run is a fresh process, with fresh folders, that cannot keep
state, start a process or reach another, and a worse algorithm or a larger allocation shows."""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import fcntl
import json
import mmap
import os
import platform
import resource
import signal
import socket
import sys
import threading

import pytest

from corebench.harness import FunctionalSuite
from corebench.harness.config import MEASUREMENT_MAX_REPEATS_FACTOR
from corebench.harness.errors import CorebenchError, MeasurementRefused
from corebench.harness.sandbox import Executor, mounts
from corebench.harness.sandbox.child import SYSCALLS, Confinement
from corebench.harness.sandbox.executor import heavy_tests
from corebench.harness.sandbox.isolation import isolation_mode
from corebench.harness.sandbox.timing import REFERENCE, SOLUTION, Session, precise

pytestmark = pytest.mark.measurement_phase
needs_bwrap = pytest.mark.skipif(isolation_mode() != "bwrap", reason="bubblewrap's mounts")

# about 20-40 ms of interpreter work per call on this project's machines: IPC and the fork of a
# timed run are negligible beside it
PLAIN = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i * i\n    return s\n"
SQUARES = FunctionalSuite(
    entry_point="f",
    reference_code=PLAIN,
    inputs={"base": [[3], [300_000], [200_000]], "plus": [[400_000], [10]]},
    fingerprint="test-measurement-squares",
)
MEMOIZED = "_seen = {}\n" + PLAIN.replace(
    "def f(n):\n", "def f(n):\n    if n in _seen:\n        return _seen[n]\n"
).replace("    return s\n", "    _seen[n] = s\n    return s\n")
LRU_CACHED = "import functools\n\n@functools.lru_cache(maxsize=None)\n" + PLAIN
# the first call builds a table that makes every later call cheap (a sum in C over a list)
FIRST_CALL_TABLE = (
    "_squares = []\n"
    "def f(n):\n"
    "    if len(_squares) < n:\n"
    "        _squares.extend(i * i for i in range(len(_squares), n))\n"
    "    return sum(_squares[:n])\n"
)
# an object warmed on first use and kept in a global
LAZY_GLOBAL = (
    "class _Summer:\n"
    "    def __init__(self):\n        self.done = {}\n"
    "    def total(self, n):\n"
    "        if n not in self.done:\n"
    "            self.done[n] = sum(i * i for i in range(n))\n"
    "        return self.done[n]\n"
    "_summer = None\n"
    "def f(n):\n"
    "    global _summer\n"
    "    if _summer is None:\n        _summer = _Summer()\n"
    "    return _summer.total(n)\n"
)
# the work moved to a helper process started at import, fed over pipes (falls back to doing the
# work itself where it may not start one)
OFFLOADED = (
    "import os\n"
    "try:\n"
    "    _requests, _ask = os.pipe()\n"
    "    _answer, _reply = os.pipe()\n"
    "    _helper = os.fork()\n"
    "except OSError:\n"
    "    _helper = None\n"
    "if _helper == 0:\n"
    "    while True:\n"
    "        n = int(os.read(_requests, 64))\n"
    "        s = 0\n"
    "        for i in range(n):\n            s += i * i\n"
    "        os.write(_reply, str(s).encode().ljust(64))\n"
    "def f(n):\n"
    "    if _helper is None:\n"
    "        s = 0\n"
    "        for i in range(n):\n            s += i * i\n"
    "        return s\n"
    "    os.write(_ask, str(n).encode().ljust(64))\n"
    "    return int(os.read(_answer, 64))\n"
)
# the same, started during the call, through subprocess: the helper's CPU is not this process's
SUBPROCESS = (
    "import subprocess, sys\n"
    "def f(n):\n"
    "    code = f's = 0\\nfor i in range({n}):\\n    s += i * i\\nprint(s)'\n"
    "    return int(subprocess.run([sys.executable, '-c', code], capture_output=True).stdout)\n"
)
# answers from a file that an earlier run left behind
FILE_CACHE = (
    "import os\n"
    "def f(n):\n"
    "    path = f'cache-{n}'\n"
    "    if os.path.exists(path):\n"
    "        with open(path) as cached:\n            return int(cached.read())\n"
    "    s = 0\n"
    "    for i in range(n):\n        s += i * i\n"
    "    with open(path, 'w') as cached:\n        cached.write(str(s))\n"
    "    return s\n"
)
# right when judged, a cheap wrong answer when it cannot start a process (as when timed)
TWO_FACED = (
    "import os\n"
    "def f(n):\n"
    "    try:\n"
    "        pid = os.fork()\n"
    "    except OSError:\n"
    "        return 0\n"
    "    if pid == 0:\n        os._exit(0)\n"
    "    os.waitpid(pid, 0)\n" + PLAIN.split("\n", 1)[1]
)


def measure(
    code: str,
    suite: FunctionalSuite = SQUARES,
    repeats: int = 5,
    executor: Executor | None = None,
):
    executor = executor or Executor(workers=1)
    assert asyncio.run(executor.evaluate("t/measure", 0, code, suite)).passed
    return asyncio.run(executor.measure("t/measure", code, suite, repeats))


# work 4x apart: this VM's speed swings up to 1.7x between one test's runs and the next's (the
# same 300k loop measured 14.2 and 21.7 ms minutes apart), enough to reorder 300k and 400k
SPREAD = FunctionalSuite(
    entry_point="f",
    reference_code=PLAIN,
    inputs={"base": [[3], [400_000], [100_000]], "plus": [[1_600_000], [10]]},
    fingerprint="test-measurement-spread",
)


def test_the_heaviest_tests_for_the_reference_are_measured():
    spread = measure(PLAIN, SPREAD)
    assert spread.tests == [1, 2, 3]  # 400k, 100k and 1.6M, not 3 and 10
    assert len(spread.test_cpu_s) == len(spread.runs) == 3 and min(spread.runs) >= 5
    assert spread.test_cpu_s[2] > spread.test_cpu_s[0] > spread.test_cpu_s[1] > 0.002, spread
    plain = measure(PLAIN)
    assert plain.tests == [1, 2, 3]  # 300k, 200k and 400k, not 3 and 10
    assert 0.8 < plain.runtime_ratio < 1.25, plain  # the reference against itself


@pytest.mark.parametrize(
    ("code", "same_work"),
    [(MEMOIZED, True), (LRU_CACHED, True), (LAZY_GLOBAL, True), (FIRST_CALL_TABLE, False)],
    ids=["memoized", "lru_cache", "lazy-global", "first-call-table"],
)
def test_what_a_program_keeps_between_calls_does_not_make_it_faster(code, same_work):
    plain, kept = measure(PLAIN), measure(code)
    assert kept.runtime_ratio > plain.runtime_ratio / 1.5, (kept, plain)
    if same_work:  # the first call does what the plain function does, plus a dictionary entry
        assert kept.runtime_ratio < plain.runtime_ratio * 1.5, (kept, plain)
    else:  # building the table costs more than the plain loop: it measures slower, as it is
        assert kept.peak_memory_bytes > 5 * 1024**2, kept  # the table, up to 400,000 squares


def test_a_helper_process_started_at_import_does_not_take_the_work_off_the_clock():
    # judged, its helper does the work (judging allows processes)...
    executor = Executor(workers=1)
    assert asyncio.run(executor.evaluate("t/measure", 0, OFFLOADED, SQUARES)).passed
    # ... timed, the helper cannot start, so the program does the work itself, on the clock
    offloaded, plain = measure(OFFLOADED), measure(PLAIN)
    assert offloaded.runtime_ratio > plain.runtime_ratio / 1.5, (offloaded, plain)
    assert offloaded.runtime_ratio < plain.runtime_ratio * 1.5, (offloaded, plain)


def test_a_run_that_starts_a_process_is_refused():
    with pytest.raises(MeasurementRefused, match="Resource temporarily unavailable"):
        measure(SUBPROCESS)


@needs_bwrap
def test_files_a_run_leaves_are_gone_before_the_next_run():
    # every timed run gets its folders fresh and empty: the cache a run writes is never found,
    # so each run does the work, as the plain program does
    executor = Executor(workers=1)
    cached, plain = measure(FILE_CACHE, executor=executor), measure(PLAIN, executor=executor)
    assert cached.runtime_ratio > plain.runtime_ratio / 1.5, (cached, plain)


@needs_bwrap
def test_what_a_run_left_behind_never_reaches_the_next_program():
    # the first program leaves each answer in a file (in its folder, in /tmp and in /dev/shm);
    # the next one, timed by the same executor, only reads such files: it must do the work
    leaver = (
        "def answer(n):\n"
        "    s = 0\n"
        "    for i in range(n):\n        s += i * i\n"
        "    return s\n"
        "def f(n):\n"
        "    for m in (200_000, 300_000, 400_000):  # the heavy inputs, all at once\n"
        "        for folder in ('.', '/tmp', '/dev/shm'):\n"
        "            try:\n"
        "                with open(f'{folder}/cache-{m}', 'w') as kept:\n"
        "                    kept.write(str(answer(m)))\n"
        "            except OSError:\n                pass\n"
        "    return answer(n)\n"
    )
    reader = (
        "import os\n"
        "def f(n):\n"
        "    for path in (f'cache-{n}', f'/tmp/cache-{n}', f'/dev/shm/cache-{n}'):\n"
        "        if os.path.exists(path):\n"
        "            with open(path) as cached:\n                return int(cached.read())\n"
        + PLAIN.split("\n", 1)[1]
    )
    executor = Executor(workers=1)
    left = measure(leaver, executor=executor)
    read, plain = measure(reader, executor=executor), measure(PLAIN, executor=executor)
    assert left.runtime_ratio > 2 * plain.runtime_ratio, (left, plain)  # it did all three
    assert read.runtime_ratio > plain.runtime_ratio / 1.5, (read, plain)


def test_memory_the_timing_process_held_cannot_hide_an_allocation():
    # the input's JSON form (100,000 tagged tuples: dicts and lists, about 30 MB) stayed in the
    # process every timed run is forked from; a run that emptied it reused its pages for free
    suite = FunctionalSuite(
        entry_point="f",
        reference_code="def f(pairs):\n    return len([a + b for a, b in pairs] * 10)\n",
        inputs={"base": [[[(i, i) for i in range(100_000)]], [[(1, 2)]]]},
        fingerprint="test-measurement-inherited",
    )
    emptying = (
        "import gc\n"
        "def f(pairs):\n"
        "    for held in gc.get_objects():  # the test as the process got it, already decoded\n"
        "        if type(held) is dict and type(held.get('args')) is list:\n"
        "            for arg in held['args']:\n"
        "                if type(arg) is list and len(arg) == len(pairs):\n"
        "                    arg.clear()\n"
        "    return len([a + b for a, b in pairs] * 10)\n"
    )
    honest, emptied = measure(suite.reference_code, suite), measure(emptying, suite)
    assert honest.peak_memory_bytes > 6 * 1024**2, honest  # 100,000 new ints, 1 M list slots
    assert emptied.peak_memory_bytes > 0.8 * honest.peak_memory_bytes, (emptied, honest)


@needs_bwrap
def test_only_the_fresh_folders_are_writable_mounts():
    # the sandbox's root and /dev are mounted read-only (in a user namespace they would be the
    # program's to write); /sandbox, /tmp and /dev/shm are writable, and fresh in each timed run
    suite = FunctionalSuite(
        entry_point="f",
        reference_code="def f(n):\n    return ['ro', 'ro', 'rw', 'rw', 'rw', n]\n",
        inputs={"base": [[1], [2], [3]]},
        fingerprint="test-measurement-mounts",
    )
    mounts = (
        "def f(n):\n"
        "    flags = {}\n"
        "    for line in open('/proc/self/mountinfo'):\n"
        "        fields = line.split()\n"
        "        flags[fields[4]] = fields[5].split(',')[0]\n"
        "    return [flags[m] for m in ('/', '/dev', '/sandbox', '/tmp', '/dev/shm')] + [n]\n"
    )
    assert measure(mounts, suite).tests == [0, 1, 2]  # judged and timed: the same mounts


def test_a_whole_program_that_ends_with_os_exit_after_a_flush_is_measured():
    reference = "n = int(input())\ns = 0\nfor i in range(n):\n    s += i * i\nprint(s)\n"
    suite = FunctionalSuite(
        entry_point="", reference_code=reference, mode="stdio",
        inputs={"base": [["300000\n"], ["5\n"]]}, fingerprint="test-measurement-os-exit",
    )  # fmt: skip
    ending = "import os, sys\n" + reference + "sys.stdout.flush()\nos._exit(0)\n"
    measured = measure(ending, suite)
    assert 0.7 < measured.runtime_ratio < 1.4, measured


def test_a_reference_that_cannot_be_timed_is_not_the_solutions_refusal():
    # the reference starts a process when run: judging works, timing refuses it; that says
    # nothing about the solution, so it is a plain error (the recorder keeps no refusal for it)
    suite = dataclasses.replace(
        SQUARES,
        reference_code=SUBPROCESS,
        fingerprint="test-measurement-reference-refused",
    )
    with pytest.raises(
        CorebenchError, match="measuring t/measure: the reference solution could not be measured"
    ) as raised:
        measure(PLAIN, suite)
    assert not isinstance(raised.value, MeasurementRefused)


def test_a_program_that_answers_differently_when_timed_gets_no_measurement():
    with pytest.raises(MeasurementRefused, match="wrong answer on test 1 while timed"):
        measure(TWO_FACED)


def test_a_worse_complexity_class_measures_clearly_slower():
    # duplicates among 3,000 numbers: a set (O(n)) against every pair (O(n^2), 4.5 M comparisons)
    suite = FunctionalSuite(
        entry_point="has_duplicate",
        reference_code="def has_duplicate(xs):\n    return len(set(xs)) < len(xs)\n",
        inputs={"base": [[list(range(3000))], [[1, 2, 1]]]},
        fingerprint="test-measurement-duplicates",
    )
    quadratic = (
        "def has_duplicate(xs):\n"
        "    for i in range(len(xs)):\n"
        "        for j in range(i + 1, len(xs)):\n"
        "            if xs[i] == xs[j]:\n                return True\n"
        "    return False\n"
    )
    same = measure(suite.reference_code, suite)
    slow = measure(quadratic, suite)
    assert 0.7 < same.runtime_ratio < 1.4, same
    assert slow.runtime_ratio > 20, slow


def test_ten_times_the_memory_measures_about_ten_times():
    suite = FunctionalSuite(
        entry_point="spread",
        reference_code="def spread(n):\n    return len(list(range(n)))\n",
        inputs={"base": [[100_000], [5]]},
        fingerprint="test-measurement-memory",
    )
    tenfold = "def spread(n):\n    return len(list(range(10 * n))) // 10\n"
    same = measure(suite.reference_code, suite)
    large = measure(tenfold, suite)
    assert 0.8 < same.memory_ratio < 1.25, same
    assert 8 < large.memory_ratio < 12, large
    assert large.peak_memory_bytes > 30 * 1024**2, large  # 1 M list entries: 8 MB + 28 MB of ints
    assert large.reference_peak_memory_bytes > 3 * 1024**2, large


def test_threads_are_counted_in_a_run():
    # four threads do the work; the main thread only waits
    threaded = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "def part(lo, hi):\n    s = 0\n    for i in range(lo, hi):\n        s += i * i\n"
        "    return s\n"
        "def f(n):\n"
        "    with ThreadPoolExecutor(4) as pool:\n"
        "        return sum(pool.map(lambda k: part(k * n // 4, (k + 1) * n // 4), range(4)))\n"
    )
    measured = measure(threaded)
    assert 0.7 < measured.runtime_ratio < 3, measured


def test_module_code_is_part_of_every_run():
    # a table computed at import: every run pays for it
    at_import = "_table = [0]\nfor _i in range(400_000):\n    _table.append(_table[-1] + _i * _i)\n"
    measured = measure(at_import + "def f(n):\n    return _table[n]\n")
    assert measured.runtime_ratio > 1.0, measured


def test_heavy_tests_are_the_costliest_for_the_reference_in_run_order():
    assert heavy_tests([0.1, None, 0.3, 0.2, 0.05], count=3) == [0, 2, 3]
    assert heavy_tests([None, None], count=3) == [0, 1]
    assert heavy_tests([0.2, 0.2, 0.2, 0.2], count=2) == [0, 1]  # ties: the first


def test_more_runs_until_the_median_is_precise():
    assert not precise([1.0, 1.0])  # too few to say
    assert precise([1.0, 1.01, 0.99, 1.02, 1.0])
    assert not precise([1.0, 1.3, 0.7, 1.2, 0.8])


def test_a_test_of_microseconds_is_precise_within_a_runs_own_noise():
    # three runs of a 0.1 ms test as this machine times them, one from its slow tail: half the
    # (inclusive) IQR is (154.5 - 100.5) / 2 = 27 µs, far above 3 % of the median (3.45 µs)
    # and within MEASUREMENT_RESOLUTION_S
    assert precise([86e-6, 194e-6, 115e-6])
    assert not precise([86e-6, 500e-6, 115e-6])  # 103.5 µs: a run that far off is noise to see
    # the same 0.2 ms steps around a millisecond median: 100 µs, more than 3 % of 1.2 ms
    assert not precise([1.0e-3, 1.2e-3, 1.4e-3])
    assert precise([1.19e-3, 1.2e-3, 1.21e-3])


@pytest.mark.parametrize("mode", ["stdio", "expr"])
def test_whole_programs_and_assert_style_tests_are_timed_the_same_way(mode):
    loop = "s = 0\nfor i in range(n):\n    s += i * i\n"
    if mode == "stdio":
        reference = "n = int(input())\n" + loop + "print(s)\n"
        indented = "".join(f"    {line}\n" for line in loop.splitlines())
        fourfold = "n = int(input())\nfor _ in range(4):\n" + indented + "print(s)\n"
        inputs = {"base": [["300000\n"], ["5\n"], ["200000\n"]]}
    else:
        reference = (
            "def f(n):\n    s = 0\n    for i in range(n):\n        s += i * i\n    return s\n"
        )
        fourfold = reference.replace("def f(n):", "def f(n, again=3):").replace(
            "return s\n", "return s if not again else f(n, again - 1)\n"
        )
        inputs = {"base": [["f(300000)"], ["f(5)"], ["f(200000)"]]}
    suite = FunctionalSuite(
        entry_point="", reference_code=reference, inputs=inputs, mode=mode,
        fingerprint=f"test-measurement-{mode}",
    )  # fmt: skip
    same, slow = measure(reference, suite), measure(fourfold, suite)
    assert same.tests == [0, 1, 2], same  # the three heaviest of three
    assert 0.7 < same.runtime_ratio < 1.4, same
    assert 2.5 < slow.runtime_ratio < 6, slow  # four times the work


class _DriftingChild:
    """A slot's timing child on a machine that gets 3 % slower with every run (of either slot):
    each run takes as long whichever program it is."""

    def __init__(self, slot: str, log: list[tuple[str, dict]], extra: bool = False) -> None:
        self.slot, self.log, self.received = slot, log, 0
        self.extra = extra  # a second line arrived with every answer

    def send(self, request: dict) -> None:
        self.log.append((self.slot, request))

    def expect(self, event: str, budget) -> dict:
        if event == "prepared":
            return {"event": event}
        slower = 1 + 0.03 * sum(r["op"] == "time" for _, r in self.log)
        return {"event": event, "status": "ok", "cpu": 1e-3 * slower, "wall": 1e-3, "peak_kb": 0}

    def pending(self) -> bool:
        return self.extra


def test_a_solution_and_its_reference_alternate_so_drift_reaches_both_alike():
    log: list[tuple[str, dict]] = []
    children = {slot: _DriftingChild(slot, log) for slot in (SOLUTION, REFERENCE)}
    specs = {SOLUTION: {"cpu_limit": 1.0}, REFERENCE: {"cpu_limit": 60.0}}
    timed = Session(children, lambda index, event: True).time(7, specs, 5, lambda: 1e-5)
    # each child decoded the test under its own program's limits
    assert [(slot, r["test"]) for slot, r in log if r["op"] == "prepare"] == list(specs.items())
    runs = [slot for slot, r in log if r["op"] == "time"]
    # the order flips every round: neither program always runs first
    first, second = [REFERENCE, SOLUTION], [SOLUTION, REFERENCE]
    assert runs[:6] == first + second + first
    # never precise on this machine: rounds until MEASUREMENT_MAX_REPEATS_FACTOR x 5, both alike
    rounds = MEASUREMENT_MAX_REPEATS_FACTOR * 5
    assert timed[SOLUTION].runs == timed[REFERENCE].runs == rounds and len(runs) == 2 * rounds
    # two programs of the same speed: the same medians, though the last run took 1.9x the first
    # (timed one after the other instead, the ratio would be about 1.4)
    assert timed[SOLUTION].cpu_s / timed[REFERENCE].cpu_s == pytest.approx(1.0, abs=0.03)


@pytest.mark.parametrize("slot", [SOLUTION, REFERENCE])
def test_more_than_one_answer_is_the_answering_programs_refusal(slot):
    # the harness's own check, behind the timing child's: whichever child's answer came with
    # another line, that program is to blame (the solution's refusal is stored; the other not)
    log: list[tuple[str, dict]] = []
    children = {s: _DriftingChild(s, log, extra=s == slot) for s in (SOLUTION, REFERENCE)}
    specs = {SOLUTION: {"cpu_limit": 1.0}, REFERENCE: {"cpu_limit": 60.0}}
    with pytest.raises(CorebenchError, match="more than one answer on test 7") as raised:
        Session(children, lambda index, event: True).time(7, specs, 5, lambda: 1e-5)
    assert isinstance(raised.value, MeasurementRefused) == (slot == SOLUTION)


def test_the_report_limit_bounds_each_timed_answer_not_a_sessions_total(monkeypatch):
    # a 200 KB answer per run, 2 programs x 3 tests x 5 or more runs: over 6 MB in one session
    import corebench.harness.sandbox.supervisor as supervisor_module

    monkeypatch.setattr(supervisor_module, "MAX_RESULT_BYTES", 1024**2)
    suite = FunctionalSuite(
        entry_point="f",
        reference_code="def f(n):\n    return 'x' * n\n",
        inputs={"base": [[200_000], [200_001], [200_002]]},
        fingerprint="test-measurement-large-answers",
    )
    measured = measure(suite.reference_code, suite)
    assert measured.tests == [0, 1, 2] and min(measured.runs) >= 5


def test_a_violation_during_the_references_run_is_not_the_solutions_refusal(monkeypatch):
    # the reference runs first: its 200 KB answer breaks a 100 KB report limit before the
    # solution (the same code) has run once
    import corebench.harness.sandbox.supervisor as supervisor_module

    suite = FunctionalSuite(
        entry_point="f",
        reference_code="def f(n):\n    return 'x' * n\n",
        inputs={"base": [[200_000]]},
        fingerprint="test-measurement-reference-violation",
    )
    executor = Executor(workers=1)
    asyncio.run(executor.reference("t/measure", suite))
    monkeypatch.setattr(supervisor_module, "MAX_RESULT_BYTES", 100 * 1024)
    with pytest.raises(
        CorebenchError, match="the reference solution could not be measured"
    ) as raised:
        asyncio.run(executor.measure("t/measure", suite.reference_code, suite, 3))
    assert not isinstance(raised.value, MeasurementRefused)


# a slow solution (ten times the reference's loop) that, when timed, looks among the timing
# process's live objects for another program's compiled code (its reference's) and runs that
PEEKING = (
    "import gc\n"
    "_MARK = 'the peeking solution'\n"
    "def _other():\n"
    "    for o in gc.get_objects():\n"
    "        if type(o).__name__ == 'Program' and _MARK not in o.code.co_consts:\n"
    "            namespace = {}\n"
    "            exec(o.code, namespace)\n"
    "            return namespace.get('f')\n"
    "def f(n):\n"
    "    other = _other()\n"
    "    if other is not None:\n"
    "        return other(n)\n"
    "    for _ in range(10):\n"
    "        s = 0\n"
    "        for i in range(n):\n"
    "            s += i * i\n"
    "    return s\n"
)


def test_a_solution_cannot_run_its_references_code_when_timed():
    # each program has a timing child of its own: the solution's runs fork from a process that
    # never held the reference
    measured = measure(PEEKING)
    assert measured.runtime_ratio > 5, measured


# when timed, it sends its answer followed by forged answers (a microsecond each) meant for the
# requests to come, then waits to be stopped
FORGING = PLAIN.replace("def f(n):\n", "def _f(n):\n") + (
    "import os, sys\n"
    "def f(n):\n"
    "    s = _f(n)\n"
    "    frame = sys._getframe()\n"
    "    while frame is not None and frame.f_code.co_name != 'timed_process':\n"
    "        frame = frame.f_back\n"
    "    if frame is not None:\n"
    '        head = b\'{"event": "timed", "status": "ok", \'\n'
    '        forged = head + b\'"cpu": 1e-06, "wall": 1e-06, "peak_kb": 0, "output": %d}\\n\' % s\n'
    "        os.write(5, head + b'\"output\": %d}\\n' % s + forged * 5)\n"
    "        os.read(6, 1)\n"
    "    return s\n"
)


def test_a_timed_run_that_answers_more_than_once_gets_no_measurement():
    with pytest.raises(MeasurementRefused, match="more than one answer"):
        measure(FORGING)


@pytest.mark.skipif(platform.machine() not in SYSCALLS, reason="the filter's architectures")
def test_the_timed_runs_filter_lets_a_call_name_no_process_but_the_run():
    # in a fork, as a timed run confines itself: the run may signal, renice and pin itself
    # (by its pid or 0); the process that times it (here, this one) it may not reach at all
    confinement = Confinement(memfd=False)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the fork reports through the pipe
        found: dict = {}
        try:
            os.setpgid(0, 0)
            found["filter"] = confinement.apply().decode()
            timer, nice = os.getppid(), os.getpriority(os.PRIO_PROCESS, 0)
            cpus = os.sched_getaffinity(0)
            attempts = {
                "kill itself": lambda: os.kill(os.getpid(), 0),
                "kill its group": lambda: os.kill(0, 0),
                "pin itself": lambda: os.sched_setaffinity(0, cpus),
                "renice itself": lambda: os.setpriority(os.PRIO_PROCESS, 0, nice),
                "start a thread": lambda: threading.Thread(target=int).start(),
                "SIGIO to itself": lambda: fcntl.fcntl(read, fcntl.F_SETOWN, os.getpid()),
                "kill the timer": lambda: os.kill(timer, 0),
                "kill every process": lambda: os.kill(-1, 0),
                "pin the timer": lambda: os.sched_setaffinity(timer, cpus),
                "renice a group": lambda: os.setpriority(os.PRIO_PGRP, 0, nice),
                "renice a user": lambda: os.setpriority(os.PRIO_USER, 0, nice),
                "limits of the timer": lambda: resource.prlimit(timer, resource.RLIMIT_NOFILE),
                "pidfd of the timer": lambda: os.pidfd_open(timer),
                "signal through /proc": lambda: signal.pidfd_send_signal(
                    os.open(f"/proc/{timer}", os.O_RDONLY | os.O_DIRECTORY), 0
                ),
                "join the timer's group": lambda: os.setpgid(0, os.getpgid(timer)),
                "SIGIO to the timer": lambda: fcntl.fcntl(read, fcntl.F_SETOWN, timer),
                "SIGIO to the timer, ioctl": lambda: fcntl.ioctl(
                    read,
                    0x8901,
                    timer.to_bytes(4, sys.byteorder),  # FIOSETOWN
                ),
                "a user namespace": lambda: mounts.unshare(0x10000000),  # CLONE_NEWUSER
                "a TCP socket": lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM),
                "pages out": lambda: mmap.mmap(-1, 1 << 16).madvise(21),  # MADV_PAGEOUT
                "page cache dropped": lambda: os.posix_fadvise(read, 0, 0, os.POSIX_FADV_DONTNEED),
                "memfd": lambda: os.memfd_create("kept"),
                "exec": lambda: os.execv("/bin/true", ["true"]),
            }
            for name, attempt in attempts.items():
                try:
                    attempt()
                    found[name] = "ok"
                except OSError as exc:
                    found[name] = errno.errorcode.get(exc.errno, str(exc.errno))
        finally:
            os.write(write, json.dumps(found).encode())
            os._exit(0)
    os.close(write)
    found = json.loads(os.read(read, 1 << 16) or b"{}")
    os.waitpid(pid, 0)
    allowed = ["kill itself", "kill its group", "pin itself", "renice itself", "start a thread"]
    allowed.append("SIGIO to itself")
    assert found.pop("filter") == "s", found
    assert {name: found.pop(name) for name in allowed} == dict.fromkeys(allowed, "ok")
    assert found.pop("a TCP socket") == "EACCES", found
    assert found == dict.fromkeys(found, "EPERM") and len(found) == 16, found
