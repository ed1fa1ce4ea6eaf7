"""The sandbox on small suites of our own: verdicts, containment, limits and measurements taken
from outside the program, and attempts to fake a pass, a time or a memory figure."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import threading
import time

import pytest

from corebench.harness import FunctionalSuite, Verdict
from corebench.harness.comparators import Close, Comparator, Exact
from corebench.harness.config import CALIBRATION_REFERENCE_S, STARTUP_ALLOWANCE_S
from corebench.harness.errors import CorebenchError
from corebench.harness.records import calibrated
from corebench.harness.sandbox import Executor, oracle, protocol
from corebench.harness.sandbox.codec import encode, encode_text, reported_output
from corebench.harness.sandbox.executor import _by_digest, _totals, specs_for
from corebench.harness.sandbox.isolation import isolation_mode
from corebench.harness.sandbox.protocol import SelfTiming
from corebench.harness.sandbox.supervisor import Budget, Child
from corebench.harness.sandbox.timing import TestTiming, Timed
from corebench.harness.sandbox.verdicts import Verdicts

ADD = FunctionalSuite(
    entry_point="add",
    reference_code="def add(a, b):\n    return a + b\n",
    inputs={"base": [[1, 2], [3, 4]], "plus": [[10**30, 1], [-5, 5]]},
    fingerprint="test-add",
)
BWRAP = isolation_mode() == "bwrap"
needs_bwrap = pytest.mark.skipif(
    not BWRAP, reason="only bubblewrap confines this; never tried unconfined"
)


@pytest.fixture(autouse=True, params=["fork", "exec"])
def engine(request, monkeypatch) -> str:
    """Every test here runs under both engines: children forked by a zygote, and children
    exec'd in a fresh bubblewrap each (the measurement phase always execs: its tests run once)."""
    if request.param == "fork" and request.node.get_closest_marker("measurement_phase"):
        pytest.skip("the measurement phase execs its children whatever the engine")
    monkeypatch.setenv("COREBENCH_ENGINE", request.param)
    return request.param


def judge(code: str, suite: FunctionalSuite = ADD):
    return asyncio.run(Executor(workers=2).evaluate("t/add", 0, code, suite))


def test_correct_solution_passes_with_measurements():
    result = judge("def add(a, b):\n    return b + a\n")
    assert result.verdict is Verdict.passed
    assert result.suite_verdicts == {"base": Verdict.passed, "plus": Verdict.passed}
    assert len(result.tests) == 4 and all(t.verdict is Verdict.passed for t in result.tests)
    # totals from the kernel, read by the harness; per-test figures a program could shape are
    # not kept while judging
    assert result.cpu_s is not None and 0 <= result.cpu_s < 1
    assert result.runtime_s is not None and result.peak_memory_bytes is not None
    assert all(t.cpu_s is None for t in result.tests)


def test_an_output_too_large_to_send_is_judged_against_a_stated_expected_value():
    # 70,000 rows travel as a digest; the dataset states the expected value (no reference runs)
    rows = [[i, "x"] for i in range(70_000)]
    suite = FunctionalSuite(
        entry_point="pairs", reference_code="", inputs={"base": [[70_000]]},
        expected={"base": [rows]}, fingerprint="test-stated-large",
    )  # fmt: skip
    right = judge("def pairs(n):\n    return [[i, 'x'] for i in range(n)]\n", suite)
    assert right.verdict is Verdict.passed, right.first_failure
    wrong = judge("def pairs(n):\n    return [[i, 'y'] for i in range(n)]\n", suite)
    assert wrong.verdict is Verdict.wrong_answer and "sha256" in wrong.first_failure


MIXED_NUMBERS = "def numbers(n):\n    return [i if i % 2 else i / 2 for i in range(n)]\n"


def test_an_output_too_large_to_send_is_judged_by_digest_against_the_references():
    # 1.2 million ints and floats (HumanEval/130's shape), 11 MB as text: the reference's output
    # is a digest, so the judging job marks the test and the child digests without the text
    suite = FunctionalSuite(
        entry_point="numbers", reference_code=MIXED_NUMBERS,
        inputs={"base": [[1_200_000], [5]]}, fingerprint="test-large-numbers",
    )  # fmt: skip
    executor = Executor(workers=2)
    try:
        large_output_verdicts(executor, suite)
    finally:
        executor.close()


def large_output_verdicts(executor: Executor, suite: FunctionalSuite) -> None:
    reference = asyncio.run(executor.reference("t/numbers", suite))
    assert reference.outputs.digested("base", 0) and not reference.outputs.digested("base", 1)
    jobs = []
    make_job = executor.job
    executor.job = lambda *args, **kwargs: jobs.append(make_job(*args, **kwargs)) or jobs[-1]

    def verdict(code: str):
        return asyncio.run(executor.evaluate("t/numbers", 0, code, suite))

    right = verdict(
        "def numbers(n):\n    out = []\n    for i in range(n):\n"
        "        out.append(i / 2 if i % 2 == 0 else i)\n    return out\n"
    )
    assert right.verdict is Verdict.passed, right.first_failure
    assert [("large" in t) for t in jobs[0].tests] == [True, False]
    changed = MIXED_NUMBERS.replace("return [", "return [0.5] + [")
    wrong = verdict(changed.replace("range(n)", "range(1, n)"))  # one item differs: 0.5, not 0.0
    assert wrong.verdict is Verdict.wrong_answer and "sha256" in wrong.first_failure
    # 1.0 is not 1 in a digest (EvalPlus's == says it is), as before
    as_floats = (
        "def numbers(n):\n    return [i if i % 2 else i / 2 for i in map(float, range(n))]\n"
    )
    assert verdict(as_floats).verdict is Verdict.wrong_answer


def judged_events(executor: Executor) -> list[list[dict]]:
    """Every judging run's test events from now on (``Judged.tests``), in order."""
    events, run = [], executor.run_judging

    async def spy(*args, **kwargs):
        judged = await run(*args, **kwargs)
        events.append(judged.tests)
        return judged

    executor.run_judging = spy
    return events


LONG_TEXT = "def text(n):\n    return ' '.join(map(str, range(n)))\n"


def test_a_long_expected_string_is_answered_by_its_digest():
    # HumanEval/15's shape: 20,000 numbers joined, 108,889 characters. The comparator takes only
    # an equal string, so the job marks the test and the child sends the text's sha256 instead
    suite = FunctionalSuite(
        entry_point="text", reference_code=LONG_TEXT, inputs={"base": [[20_000], [5]]},
        fingerprint="test-long-text",
    )  # fmt: skip
    executor = Executor(workers=2)
    jobs, events = [], judged_events(executor)
    make_job = executor.job
    executor.job = lambda *args, **kwargs: jobs.append(make_job(*args, **kwargs)) or jobs[-1]

    def verdict(code: str):
        jobs.clear()
        events.clear()
        return asyncio.run(executor.evaluate("t/text", 0, code, suite))

    try:
        reference = asyncio.run(executor.reference("t/text", suite))
        outputs = reference.outputs
        assert outputs.long_string("base", 0) and not outputs.long_string("base", 1)
        assert not outputs.digested("base", 0)  # 108,891 as JSON: the reference sent its text
        right = verdict("def text(n):\n    return ' '.join(str(i) for i in range(n))\n")
        assert right.verdict is Verdict.passed, right.first_failure
        assert [("large" in t) for t in jobs[0].tests] == [True, False]
        long, short = events[0]
        assert "output" not in long and long["digest"] == outputs.digest("base", 0)
        assert short is protocol.IDENTICAL and outputs.digest("base", 1) is None
        one_off = verdict(LONG_TEXT.replace("range(n)", "range(1, n + 1)"))
        assert one_off.verdict is Verdict.wrong_answer and "sha256" in one_off.first_failure
        # a short wrong answer still travels as text, and the failure shows it
        short_wrong = verdict("def text(n):\n    return 'no'\n")
        assert short_wrong.verdict is Verdict.wrong_answer and "'no'" in short_wrong.first_failure
        # a str subclass is encoded as its text (the codec's generic path) and still passes
        subclass = (
            "class S(str):\n    pass\n\n\ndef text(n):\n"
            "    return S(' '.join(map(str, range(n))))\n"
        )
        assert verdict(subclass).verdict is Verdict.passed
    finally:
        executor.close()
    fresh = Executor(workers=2)  # reads the reference from the cache: the long text stays there
    try:
        right = "def text(n):\n    return ' '.join(str(i) for i in range(n))\n"
        assert asyncio.run(fresh.evaluate("t/text", 0, right, suite)).verdict is Verdict.passed
        cached = asyncio.run(fresh.reference("t/text", suite)).outputs
        assert cached.texts is not None and "output" not in cached.stored["base"][0]
    finally:
        fresh.close()


def test_a_long_string_is_compared_whole_where_the_comparator_is_not_exact_for_strings():
    class SamePrefix(Comparator):  # accepts equal strings, and others too
        accepts_equal = True

        def __call__(self, output, expected, args):
            return output[:1000] == expected[:1000]

    suite = FunctionalSuite(
        entry_point="text", reference_code=LONG_TEXT, inputs={"base": [[20_000]]},
        comparator=SamePrefix(), fingerprint="test-long-text-prefix",
    )  # fmt: skip
    executor = Executor(workers=2)
    jobs = []
    make_job = executor.job
    executor.job = lambda *args, **kwargs: jobs.append(make_job(*args, **kwargs)) or jobs[-1]
    try:
        changed_end = LONG_TEXT.replace("range(n)", "range(n - 1)")
        result = asyncio.run(executor.evaluate("t/text", 0, changed_end, suite))
        assert result.verdict is Verdict.passed, result.first_failure
        assert not any("large" in t for t in protocol.Job.from_line(jobs[0].to_line()).tests)
    finally:
        executor.close()


def test_long_strings_are_marked_only_where_the_comparator_takes_equal_strings_and_only_them():
    stored = {"base": [{"output": json.dumps("x" * 70_000).encode()}, {"output": b'"short"'}]}
    expected = oracle.Expected(stored=stored)
    plan = [("base", 0, [1]), ("base", 1, [2])]

    class StrictButNotEqual(Comparator):  # exact for strings, but an equal output may fail
        exact_for_strings = True

        def __call__(self, output, expected, args):
            return output == expected

    def marked(comparator, mode="call"):
        suite = FunctionalSuite(
            entry_point="f", reference_code="", inputs={"base": [[1], [2]]},
            comparator=comparator, mode=mode,
        )  # fmt: skip
        return _by_digest(plan, expected, suite)

    assert marked(Exact()) == [0] and marked(Close(atol=0.1)) == [0]
    assert marked(StrictButNotEqual()) == []  # its digest would never be compared
    assert marked(Exact(), mode="stdio") == []  # a program's stdout is compared as text
    # an output digest that is not the reference's is refused without decoding the expected one
    verdicts = Verdicts(plan, expected, Exact())
    event = {"event": "test", "i": 0, "status": "ok", "digest": "0" * 64}
    assert verdicts.compare(0, event)[1] is False and "base" not in expected._decoded


def test_a_cached_reference_leaves_long_strings_in_its_file_until_a_comparison_needs_them(
    tmp_path,
):
    long = json.dumps("7 " * 40_000).encode()
    data = {
        "cpu_s": {"base": [0.5, None, 0.25], "plus": [0.125]},
        "outputs": {
            "base": [{"output": long}, {}, {"output": b"[1, 2]"}],
            "plus": [{"digest": "ab" * 32}],
        },
    }
    path = tmp_path / "r.ref"
    path.write_bytes(oracle._dump(data))
    read = oracle._read(path)
    assert read["cpu_s"] == data["cpu_s"]
    entries = read["outputs"]
    assert entries["base"][1:] == [{}, {"output": b"[1, 2]"}] and entries["plus"] == [
        {"digest": "ab" * 32}
    ]
    expected = oracle.Expected(None, entries, read["texts"])
    assert "output" not in entries["base"][0]  # left in the file
    assert expected.long_string("base", 0) and not expected.long_string("base", 2)
    assert expected.digest("base", 0) == hashlib.sha256(long).hexdigest()
    assert expected.identical_lines()[0] is None and "output" not in entries["base"][0]
    path.unlink()  # the open file still serves it
    assert expected.stored_output("base", 0)["output"] == long
    assert expected["base"][0] == "7 " * 40_000
    # a torn file is computed again; a damaged long text is one clear error
    path.write_bytes(oracle._dump(data)[:-1])
    assert oracle._read(path) is None
    whole = bytearray(oracle._dump(data))
    whole[-3:-2] = b"8"
    path.write_bytes(bytes(whole))
    damaged = oracle._read(path)
    with pytest.raises(CorebenchError, match="damaged"):
        oracle.Expected(None, damaged["outputs"], damaged["texts"]).stored_output("base", 0)

    # a reference without long strings keeps no file open; one with them, until it is dropped
    def open_files() -> int:
        return sum(
            os.path.realpath(f"/proc/self/fd/{fd}") == str(path.resolve())
            for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")
        )

    del damaged
    path.write_bytes(oracle._dump(data))
    kept = oracle._read(path)
    assert open_files() == 1
    del kept
    assert open_files() == 0
    del data["outputs"]["base"][0]
    data["cpu_s"]["base"].pop(0)
    path.write_bytes(oracle._dump(data))
    without = oracle._read(path)
    assert "texts" not in without and open_files() == 0


def test_a_digest_on_one_side_is_compared_with_the_digest_of_the_other():
    # more than 65,536 rows are digested whatever their size: the same rows sent as text (as a
    # numpy array's were) are judged by their digest once decoded
    rows = [[i, 1] for i in range(70_000)]
    digest = encode_text(rows)[1]
    plan, stored = [("base", 0, [])], {"base": [{"digest": digest}]}

    def event(**fields):
        return {"event": "test", "i": 0, "status": "ok", **fields}

    exact = Verdicts(plan, oracle.Expected(stored=stored), Exact())
    assert exact.compare(0, event(output=json.dumps(rows).encode()))[1]
    assert not exact.compare(0, event(output=json.dumps([*rows[:-1], [0, 1]]).encode()))[1]

    class AnyOrder(Comparator):  # like EvalPlus's any-order oracles: set() of a Digest raises
        accepts_equal = True

        def __call__(self, output, expected, args):
            return set(map(tuple, output)) == set(map(tuple, expected))

    any_order = Verdicts(plan, oracle.Expected(stored=stored), AnyOrder())
    assert any_order.compare(0, event(digest=digest))[1]  # the reference's digest: accepted
    assert not any_order.compare(0, event(digest="0" * 64))[1]


def test_wrong_answer_names_the_failing_input():
    result = judge("def add(a, b):\n    return a + b if a < 100 else 0\n")
    assert result.verdict is Verdict.wrong_answer
    assert result.suite_verdicts == {"base": Verdict.passed, "plus": Verdict.wrong_answer}
    assert "plus test 0" in result.first_failure and "expected" in result.first_failure


@pytest.mark.parametrize(
    "code, verdict",
    [
        ("def add(a, b) return a", Verdict.syntax_error),
        ("def plus(a, b):\n    return a + b\n", Verdict.runtime_error),  # wrong entry point
        ("def add(a, b):\n    raise ValueError('no')\n", Verdict.runtime_error),
        ("def add(a, b):\n    while True:\n        pass\n", Verdict.timeout),
        ("import time\ndef add(a, b):\n    time.sleep(60)\n", Verdict.timeout),
        (
            "def add(a, b):\n    x = bytearray(8 * 1024**3)\n    return a + b\n",
            Verdict.memory_exceeded,
        ),
        ("def add(a, b):\n    return add(a, b)\n", Verdict.runtime_error),  # RecursionError
        ("import os\ndef add(a, b):\n    os._exit(0)\n", Verdict.runtime_error),  # exits early
        (
            "import ctypes\ndef add(a, b):\n    ctypes.string_at(0)\n",
            Verdict.runtime_error,
        ),  # segfault
        (
            "import os, signal\ndef add(a, b):\n    os.killpg(0, signal.SIGKILL)\n    return a + b\n",
            Verdict.runtime_error,
        ),
        ("import os\nos._exit(5)\n", Verdict.runtime_error),  # leaves while being imported
        ("import os\nos._exit(0)\n", Verdict.runtime_error),
    ],
)
def test_hostile_and_broken_programs_get_the_right_verdict(code, verdict):
    result = judge(code)
    assert result.verdict is verdict, result.first_failure


@needs_bwrap
def test_killing_its_parent_leaves_the_harness_alone():
    code = "import os, signal\ndef add(a, b):\n    os.kill(os.getppid(), signal.SIGKILL)\n    return a + b\n"
    result = judge(code)  # its parent is the sandbox's init: out of reach, or a violation
    assert result.verdict in (Verdict.passed, Verdict.sandbox_violation), result.first_failure


SPIN_ON_SECOND_TEST = (
    "import signal\n"
    "for number in range(1, signal.NSIG):\n"
    "    try:\n        signal.signal(number, signal.SIG_IGN)\n"
    "    except (OSError, ValueError, RuntimeError):\n        pass\n"
    "def add(a, b):\n"
    "    if a == 3:\n"
    "        while True:\n"
    "            try:\n                sum(range(1000))\n"
    "            except:  # noqa: E722 - a bare except around the loop\n                pass\n"
    "    return a + b\n"
)


def test_a_program_that_ignores_every_signal_and_spins_times_out_on_that_test():
    result = judge(SPIN_ON_SECOND_TEST)
    assert result.verdict is Verdict.timeout, result.first_failure
    assert [t.verdict for t in result.tests] == [Verdict.passed, Verdict.timeout]
    assert "base test 1" in result.first_failure and "CPU" in result.first_failure


def test_a_program_that_stops_its_own_clocks_still_times_out():
    code = (
        "import time\n"
        "for name in ('thread_time', 'process_time', 'perf_counter', 'monotonic', 'time'):\n"
        "    setattr(time, name, lambda: 0.0)\n"
        "def add(a, b):\n    while True:\n        pass\n"
    )
    result = judge(code)
    assert result.verdict is Verdict.timeout and "CPU-time limit" in result.first_failure


def _hold_the_gil(seconds: float) -> None:
    """Hold the harness's GIL for about ``seconds`` in one C call (sum over a range never lets
    go), as digesting a huge output does."""
    started = time.perf_counter()
    sum(range(1_000_000))
    per_million = time.perf_counter() - started
    time.sleep(0.01)  # let the supervising thread go back to waiting for the child first
    sum(range(int(seconds / per_million * 1_000_000)))


def test_a_test_that_ends_while_the_harness_is_held_up_is_not_charged_the_next_ones_cpu(
    monkeypatch,
):
    # Test 0 spins 0.3 s of CPU (limit 1 s), test 1 spins 2 s (limit 10 s). While test 0 runs,
    # another harness thread holds the GIL for 1.5 s: test 0 ends and test 1 starts meanwhile,
    # and the supervisor's next look at the child's clock already counts 1.5 s. The report of
    # test 0 is in the channel by then: that test ended within its limit.
    code = (
        "import time\n"
        "def spin(seconds):\n"
        "    start = time.process_time()\n"
        "    while time.process_time() - start < seconds:\n"
        "        pass\n"
        "    return seconds\n"
    )
    suite = FunctionalSuite(
        entry_point="spin", reference_code=code, inputs={"base": [[0.3], [2.0]]}
    )
    expect = Child.expect

    def expect_then_hold_the_gil(self, kind, budget):
        event = expect(self, kind, budget)
        if kind == "load":
            threading.Thread(target=_hold_the_gil, args=(1.5,)).start()
        return event

    monkeypatch.setattr(Child, "expect", expect_then_hold_the_gil)
    executor = Executor(workers=1)
    job = executor.job(suite, code, [1.0, 10.0])
    judged = asyncio.run(executor.run_judging(job, [Budget(1.0, 60), Budget(10.0, 60)]))
    assert judged.stop is None, judged.stop.detail
    assert [t["status"] for t in judged.tests] == ["ok", "ok"]


THREADED_WORK = (
    "from concurrent.futures import ThreadPoolExecutor\n"
    "def work(lo, hi):\n    s = 0\n    for i in range(lo, hi):\n        s += i * i % 7\n    return s\n"
    "def total(n):\n"
    "    with ThreadPoolExecutor(4) as pool:\n"
    "        return sum(pool.map(lambda k: work(k * n // 4, (k + 1) * n // 4), range(4)))\n"
)
SERIAL_WORK = (
    "def total(n):\n    s = 0\n    for i in range(n):\n        s += i * i % 7\n    return s\n"
)
WORK = FunctionalSuite(
    entry_point="total",
    reference_code=SERIAL_WORK,
    inputs={"base": [[400_000], [400_000]]},
    fingerprint="test-threads",
)


def test_work_done_in_a_thread_pool_is_counted():
    # the threads do all the work: the main thread only waits
    executor = Executor(workers=1)
    threaded = asyncio.run(executor.evaluate("t/threads", 0, THREADED_WORK, WORK))
    serial = asyncio.run(executor.evaluate("t/threads", 0, SERIAL_WORK, WORK))
    assert threaded.verdict is Verdict.passed and serial.verdict is Verdict.passed
    assert threaded.cpu_s > 0.5 * serial.cpu_s > 0.01, (threaded.cpu_s, serial.cpu_s)
    timed = asyncio.run(executor.measure("t/threads", THREADED_WORK, WORK, repeats=3))
    assert timed.cpu_s > 0.5 * timed.reference_cpu_s, timed
    assert 0.5 < timed.runtime_ratio < 3, timed


@pytest.mark.measurement_phase
def test_each_test_has_its_own_peak_memory():
    suite = FunctionalSuite(
        entry_point="grab",
        reference_code="def grab(mb):\n    return len(bytearray(mb * 1024 * 1024))\n",
        inputs={"base": [[300], [1]]},
        fingerprint="test-memory",
    )
    measured = asyncio.run(
        Executor(workers=1).measure("t/grab", suite.reference_code, suite, repeats=2)
    )
    first, second = measured.test_peak_memory_bytes
    assert first > 280 * 1024**2, measured
    assert second < 20 * 1024**2, measured  # not the first test's peak carried over


def test_a_custom_eq_cannot_fake_a_pass():
    code = (
        "class Anything:\n"
        "    def __eq__(self, other):\n        return True\n"
        "    __hash__ = object.__hash__\n"
        "def add(a, b):\n    return Anything()\n"
    )
    assert judge(code).verdict is Verdict.wrong_answer


FORGE = "import os, json\n{setup}\ndef add(a, b):\n    {action}\n    return a + b\n"


@pytest.mark.parametrize(
    "setup, action, why",
    [
        # a report for a later test, before it ran: reports are taken in order only
        (
            "",
            "os.write(1000, (json.dumps({'event': 'test', 'i': 3, 'status': 'ok', 'output': 0}) + '\\n').encode())",
            "report 3 where test 0 was due",
        ),
        # text that is not a report at all, deeply nested (once crashed the parser)
        ("", "os.write(1000, b'[' * 200000 + b'\\n')", "unreadable report (RecursionError)"),
        # a well-formed report whose output is not our encoding
        (
            "",
            "os.write(1000, (json.dumps({'event': 'test', 'i': 0, 'status': 'ok', 'output': {'$': 'nope'}}) + '\\n').encode())",
            "an undecodable output",
        ),
        # a report whose output is not where the child puts it (last)
        (
            "",
            "os.write(1000, (json.dumps({'output': 3, 'event': 'test', 'i': 0, 'status': 'ok'}) + '\\n').encode())",
            "a report whose output is not its last field",
        ),
        # a report sent by another process (a fork of the program)
        (
            "",
            'pid = os.fork()\n    if pid == 0:\n        os.write(1000, b\'{"event": "done"}\\n\'); os._exit(0)\n    os.waitpid(pid, 0)',
            "a report from another process",
        ),
    ],
    ids=["early-report", "garbage", "bad-output", "output-not-last", "other-process"],
)
def test_a_forged_or_unreadable_report_is_a_violation_not_a_crash(setup, action, why):
    result = judge(FORGE.format(setup=setup, action=action))
    assert result.verdict is Verdict.sandbox_violation, result.first_failure
    assert f"report channel: {why}" in result.first_failure


def test_writing_a_fake_report_elsewhere_cannot_fake_a_pass():
    code = (
        "import os, json\n"
        "def add(a, b):\n"
        "    for fd in range(3, 10):\n"
        "        try:\n"
        "            os.write(fd, (json.dumps({'event': 'test', 'i': 0, 'status': 'ok', 'output': 3}) + '\\n').encode())\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 0\n"
    )
    assert judge(code).verdict is Verdict.wrong_answer


def test_harness_environment_and_home_are_not_visible(monkeypatch):
    monkeypatch.setenv("COREBENCH_TEST_SECRET", "hunter2")
    code = (
        "import os\n"
        "def add(a, b):\n"
        "    if 'COREBENCH_TEST_SECRET' in os.environ:\n        return a + b\n"
        "    return -1\n"
    )
    assert judge(code).verdict is Verdict.wrong_answer


def test_printed_output_is_captured_with_a_cap():
    code = "import sys\ndef add(a, b):\n    sys.stdout.write('x' * 10_000_000)\n    return a + b\n"
    result = judge(code)
    assert result.verdict is Verdict.passed  # printing is allowed; only the first 64 KiB are kept
    assert result.stdout == "x" * 64 * 1024


def test_writing_past_the_file_size_limit_fails_the_program():
    code = "import os\ndef add(a, b):\n    os.write(1, b'x' * 100_000_000)\n    return a + b\n"
    result = judge(code)
    assert result.verdict is Verdict.runtime_error and "File too large" in result.first_failure


@needs_bwrap  # unconfined as root, RLIMIT_NPROC would not apply
def test_fork_bomb_is_contained():
    code = "import os\ndef add(a, b):\n    while True:\n        os.fork()\n"
    result = judge(code)
    assert result.verdict is not Verdict.passed
    assert (
        judge("def add(a, b):\n    return a + b\n").verdict is Verdict.passed
    )  # the machine still works


@needs_bwrap
def test_files_outside_the_sandbox_and_network_are_out_of_reach(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    code = (
        "import os, socket\n"
        "def add(a, b):\n"
        f"    try:\n        os.remove({str(victim)!r})\n    except OSError:\n        pass\n"
        "    try:\n        socket.create_connection(('127.0.0.1', 22), timeout=1)\n        return -1\n"
        "    except OSError:\n        return a + b\n"
    )
    result = judge(code)
    assert victim.read_text() == "keep me"
    assert result.verdict is Verdict.passed  # the connection failed, so it returned a + b


@pytest.mark.parametrize(
    "escape",
    [
        "os.remove(os.__file__)",  # the standard library, bound read-only
        "open('/usr/lib/corebench-was-here', 'w')",
        "socket.create_connection(('127.0.0.1', 22), timeout=1)",
        "socket.create_connection(('pypi.org', 443), timeout=1)",
        "open('/proc/self/clear_refs', 'w').write('5')",  # hiding its memory peak
    ],
)
@needs_bwrap
def test_an_escape_the_sandbox_blocks_is_a_sandbox_violation(escape):
    code = f"import os, socket\ndef add(a, b):\n    {escape}\n    return a + b\n"
    result = judge(code)
    assert result.verdict is Verdict.sandbox_violation, result.first_failure


@needs_bwrap
def test_signalling_the_sandbox_init_ends_neither_the_sandbox_nor_the_run():
    # pid 1 is the sandbox's own init: a root harness's program (nobody) may not signal it; an
    # unprivileged one may, and the init ignores it, as every namespace's init does
    code = "import os\ndef add(a, b):\n    os.kill(1, 9)\n    return a + b\n"
    assert judge(code).verdict in (Verdict.passed, Verdict.sandbox_violation)
    assert judge(ADD.reference_code).verdict is Verdict.passed


def test_an_exception_of_the_program_itself_stays_a_runtime_error():
    result = judge("def add(a, b):\n    raise OSError('disk full, says the program')\n")
    assert result.verdict is Verdict.runtime_error


def test_installed_packages_are_importable_by_solutions():
    suite = FunctionalSuite(
        entry_point="mean",
        reference_code="def mean(xs):\n    return sum(xs) / len(xs)\n",
        inputs={"base": [[[1.0, 2.0, 6.0]]]},
        fingerprint="test-mean",
    )
    assert (
        judge("import numpy\ndef mean(xs):\n    return float(numpy.mean(xs))\n", suite).verdict
        is Verdict.passed
    )


@pytest.mark.measurement_phase
def test_efficiency_is_measured_against_the_reference():
    executor = Executor(workers=2)
    suite = FunctionalSuite(
        entry_point="total",
        reference_code="def total(n):\n    return n * (n - 1) // 2\n",
        inputs={"base": [[100_000], [400_000]]},  # 4x apart: no noise reorders their times
        fingerprint="test-total",
    )
    slow = "def total(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n"
    fast = asyncio.run(executor.measure("t/total", suite.reference_code, suite, repeats=3))
    measured = asyncio.run(executor.measure("t/total", slow, suite, repeats=3))
    assert measured.repeats == 3
    # the reference is timed beside each solution: the same formula both times
    assert 0.5 < measured.reference_cpu_s / fast.reference_cpu_s < 2
    assert 0.5 < fast.runtime_ratio < 2  # the reference against itself
    assert measured.runtime_ratio > 20  # loops of 100k and 400k additions against a formula
    assert measured.peak_memory_bytes >= 0 and measured.memory_ratio > 0
    assert len(measured.test_cpu_s) == 2 and measured.test_cpu_s[1] > measured.test_cpu_s[0]


@pytest.mark.measurement_phase
def test_a_program_that_stops_its_clocks_is_timed_all_the_same():
    # its own clocks read zero; the harness reads the kernel's
    suite = WORK
    frozen = "import time\ntime.thread_time = time.perf_counter = lambda: 0.0\n" + SERIAL_WORK
    executor = Executor(workers=1)
    measured = asyncio.run(executor.measure("t/frozen", frozen, suite, repeats=3))
    assert 0.5 < measured.runtime_ratio < 2 and measured.cpu_s > 0.005, measured


@pytest.mark.measurement_phase
def test_a_patched_decoder_changes_nothing():
    # a timed run's input is decoded before the program loads: work the program adds to the
    # child's decoder never runs while it could hide there
    cheat = (
        "import sys\n_codec = sys.modules['_corebench_codec']\n_decode = _codec.decode\n"
        "def _slow(data):\n    sum(range(200000))\n    return _decode(data)\n"
        "_codec.decode = _slow\n"
    )
    measured = asyncio.run(
        Executor(workers=1).measure("t/cheat", cheat + SERIAL_WORK, WORK, repeats=3)
    )
    assert 0.7 < measured.runtime_ratio < 1.5, measured


@pytest.mark.measurement_phase
def test_a_background_thread_cannot_hide_its_work():
    # a thread that never stops, started at import: its CPU is the run's (the run's process
    # clock counts every thread), so the same function measures about twice as slow or more
    busy = (
        "import threading\n"
        "def _busy():\n    while True:\n        sum(range(10000))\n"
        "threading.Thread(target=_busy, daemon=True).start()\n"
    )
    measured = asyncio.run(
        Executor(workers=1).measure("t/busy", busy + SERIAL_WORK, WORK, repeats=3)
    )
    assert measured.runtime_ratio > 1.3, measured


def test_calibrated_totals_weigh_each_test_by_the_calibration_around_it():
    timed = Timed(
        [
            TestTiming(index=0, cpu_s=1.0, wall_s=1.0, peak_kb=1, calibration_s=2e-5),
            TestTiming(index=3, cpu_s=2.0, wall_s=3.0, peak_kb=5, calibration_s=4e-5),
        ]
    )
    wall, cpu, peak, calibration = _totals(timed)
    assert (wall, cpu, peak) == (4.0, 3.0, 5 * 1024)
    # 1 s at 20 µs per unit of work and 2 s at 40 µs: 100,000 units in all
    assert calibrated(cpu, calibration) == pytest.approx(1e5 * CALIBRATION_REFERENCE_S)


def test_timed_children_run_without_address_space_randomization():
    # the address of a function object: the same in every timed child, random when judging
    executor = Executor(workers=1)
    suite = FunctionalSuite(
        entry_point="where",
        reference_code="def where():\n    return id(where)\n",
        inputs={"base": [[]]},
    )

    def address(fixed_layout: bool) -> int:
        job = executor.job(suite, suite.reference_code, None, cpu_budget=30)
        with Child(job, mode=executor.mode, fixed_layout=fixed_layout) as child:
            child.expect("ready", Budget(None, 30))
            program = {"code": suite.reference_code, "mode": "call", "entry_point": "where"}
            child.send({"op": "program", **program})
            child.expect("load", Budget(None, 30))
            child.send({"op": "prepare", "test": specs_for(suite, [(0, 5.0)])[0]})
            child.read_event(Budget(None, 30))
            child.send({"op": "time"})
            output = child.read_event(Budget(None, 30))["output"]
            child.finish(grace_s=0)
            return output

    assert len({address(True) for _ in range(3)}) == 1
    assert len({address(False) for _ in range(3)}) == 3


def test_reference_times_for_time_limits_come_after_a_warm_up_call():
    # the first call fills a cache (about 0.1 s of CPU); later calls take microseconds
    suite = FunctionalSuite(
        entry_point="lookup",
        reference_code=(
            "_table = {}\n"
            "def lookup(n):\n"
            "    if not _table:\n"
            "        _table.update((i, i * i) for i in range(1_000_000))\n"
            "    return _table[n]\n"
        ),
        inputs={"base": [[3], [4]]},
        fingerprint=f"test-warm-{os.getpid()}",
    )
    reference = asyncio.run(Executor(workers=1).reference("t/lookup", suite))
    assert reference.outputs["base"] == [9, 16]
    assert all(cpu is not None and cpu < 0.01 for cpu in reference.cpu_s["base"]), reference.cpu_s


def test_a_slow_reference_test_stops_repeating_once_it_used_its_cpu_budget():
    executor = Executor(workers=1)
    suite = FunctionalSuite(
        entry_point="work",
        reference_code="def work(n):\n    return sum(range(n))\n",
        inputs={"base": [[10], [5_000_000]]},  # microseconds; about 0.1 s of CPU
    )
    job = executor.job(
        suite,
        suite.reference_code,
        [60.0, 60.0],
        self_timing=SelfTiming(warmup=1, repeats=3, budget_s=0.02),
    )
    judged = asyncio.run(executor.run_judging(job, [Budget(60, 200)] * 2))
    fast, slow = judged.tests
    assert fast["calls"] == 3 and slow["calls"] == 1, (fast, slow)
    assert slow["status"] == "ok", slow


@pytest.mark.measurement_phase
def test_a_run_is_one_call_and_a_fast_test_needs_no_more_runs_than_asked():
    executor = Executor(workers=1)
    suite = FunctionalSuite(
        entry_point="work",
        reference_code="def work(n):\n    return sum(range(n))\n",
        inputs={"base": [[10], [3_000_000]]},
    )
    measured = asyncio.run(executor.measure("t/work", suite.reference_code, suite, repeats=3))
    fast, slow = measured.test_cpu_s
    # a run of the fast test is the module code, one call and the answer: well under a
    # millisecond; its runs vary by tens of microseconds, within the resolution the phase asks
    # for (the slow test's must come within 3 %)
    assert fast < 5e-4 < 0.005 < slow, measured
    assert measured.runs[0] == 3, measured


def test_a_wrong_huge_integer_is_reported_without_breaking_the_harness():
    suite = FunctionalSuite(
        entry_point="power",
        reference_code="def power(n):\n    return 7 ** n\n",
        inputs={"base": [[20_000]]},
        fingerprint="test-power",
    )
    result = judge("def power(n):\n    return 7 ** n + 1\n", suite)
    assert result.verdict is Verdict.wrong_answer and "too large to print" in result.first_failure
    assert judge("def power(n):\n    return pow(7, n)\n", suite).verdict is Verdict.passed


def test_solutions_are_compiled_as_plain_python_without_our_future_imports():
    # EvalPlus semantics: annotations are evaluated, so a missing `from typing import List` fails.
    result = judge("def add(a: List[int], b):\n    return a + b\n")
    assert result.verdict is Verdict.runtime_error and "NameError" in result.first_failure


def test_judging_stops_at_the_first_failing_test_unless_asked_for_all():
    code = "def add(a, b):\n    return 0 if a < 5 else a + b\n"
    stopped = judge(code)
    assert [t.verdict for t in stopped.tests] == [Verdict.wrong_answer]
    full = asyncio.run(Executor(workers=2).evaluate("t/add", 0, code, ADD, stop_on_failure=False))
    assert [t.verdict.value for t in full.tests] == [
        "wrong_answer",
        "wrong_answer",
        "passed",
        "passed",
    ]


def test_a_program_that_ends_at_once_gets_a_verdict_not_a_sandbox_error():
    """A program can be gone before the harness starts measuring it (``os._exit`` right after
    ``ready``): it started, so it gets a verdict. Before the fix, 7 of 80 such judgings here
    raised "the sandbox could not start"."""
    codes = ["import os\nos._exit(0)\n", "import os\ndef add(a, b):\n    os._exit(0)\n"] * 30

    async def judge_all():
        executor = Executor(workers=2)
        suite = FunctionalSuite(
            entry_point="add",
            reference_code="def add(a, b):\n    return a + b\n",
            inputs={"base": [[1, 2]]},
            fingerprint="ends-at-once",
        )
        return await asyncio.gather(*(executor.evaluate("t/add", 0, c, suite) for c in codes))

    results = asyncio.run(judge_all())
    assert {r.verdict for r in results} == {Verdict.runtime_error}


@pytest.fixture
def decodings(monkeypatch) -> list[dict]:
    """Every test event whose output the harness decodes, in order."""
    from corebench.harness.sandbox import verdicts

    real, calls = verdicts.decoded, []
    monkeypatch.setattr(verdicts, "decoded", lambda event: calls.append(event) or real(event))
    return calls


def test_an_output_identical_to_the_reference_is_accepted_without_decoding(decodings):
    calls = decodings
    assert judge("def add(a, b):\n    return b + a\n").verdict is Verdict.passed
    # the same text as the reference's, the tagged big integer (10**30 + 1) included: compared
    # as bytes, never decoded
    assert calls == []
    wrong = judge("def add(a, b):\n    return a + b + 1\n")
    assert wrong.verdict is Verdict.wrong_answer and len(calls) == 1
    assert reported_output(calls[0]) == 4  # kept as the child's JSON text, decoded on demand
    pairs = FunctionalSuite(
        entry_point="pair",
        reference_code="def pair(a):\n    return (a, {a: [a]})\n",
        inputs={"base": [[1], [2]]},
        fingerprint="test-pair",
    )
    assert judge("def pair(a):\n    return (a, {a: [a]})\n", pairs).verdict is Verdict.passed
    assert len(calls) == 1  # tuples and dicts alike


def test_a_report_identical_to_the_expected_line_passes_on_arrival_and_no_other_does():
    # the harness knows the line a correct output makes (the reference's text in
    # passed_test_line): that line passes its test unparsed; any other line is parsed and
    # compared, so a wrong value, or an equal one encoded differently, is judged as before
    suite = FunctionalSuite(
        entry_point="f", reference_code="def f(a):\n    return [a, a / 2]\n",
        inputs={"base": [[1], [2]], "plus": [[3], [4]]}, fingerprint="test-identical",
    )  # fmt: skip
    executor = Executor(workers=2)
    events = judged_events(executor)

    def judged(code: str):
        events.clear()
        return asyncio.run(executor.evaluate("t/identical", 0, code, suite)), events[0]

    try:
        result, tests = judged("def f(a):\n    return [a, a * 0.5]\n")
        assert result.verdict is Verdict.passed and len(result.tests) == 4
        assert all(t is protocol.IDENTICAL for t in tests)
        result, tests = judged("def f(a):\n    return [a, a / 2] if a < 3 else (a, a / 2)\n")
        assert [t is protocol.IDENTICAL for t in tests] == [True, True, False]
        assert tests[2]["output"] == b'{"$": "tuple", "v": [3, 1.5]}'
        assert result.verdict is Verdict.wrong_answer and result.first_failure.startswith("plus")
        result, tests = judged("def f(a):\n    return [a, a // 2]\n")  # 1 // 2 == 0
        assert tests[0]["output"] == b"[1, 0]" and result.verdict is Verdict.wrong_answer
    finally:
        executor.close()


def test_only_outputs_equal_to_themselves_and_of_bounded_size_have_an_identical_line():
    from corebench.harness.sandbox.codec import LONG_STRING_CHARS
    from corebench.harness.sandbox.protocol import parse_event, passed_test_line

    long = json.dumps("x" * LONG_STRING_CHARS).encode()
    nan = b'[1, {"$": "float", "v": "nan"}]'
    stored = {
        "base": [{"output": b"[1, 2]"}, {"output": nan}, {"digest": "ab" * 32}],
        "plus": [{"output": long}, {"output": b'"NaN"'}, {"output": b"7"}],
    }
    plan = [(name, i, []) for name in stored for i in range(3)]
    lines = Verdicts(plan, oracle.Expected(None, stored), Exact()).identical_lines()
    assert lines == [b'{"event": "test", "i": 0, "status": "ok", "output": [1, 2]}'] + [
        None
    ] * 4 + [passed_test_line(5, b"7")[:-1]]
    assert parse_event(lines[5]) == {"event": "test", "i": 5, "status": "ok", "output": b"7"}

    # "NaN" as a string is equal to itself, but the rule is kept simple: decoded, still passes
    class Loose(Comparator):  # may refuse equal outputs: every output is compared
        def __call__(self, output, expected, args):
            return True

    assert Verdicts(plan, oracle.Expected(None, stored), Loose()).identical_lines() == []
    assert Verdicts(plan[:5], oracle.Expected(None, stored), Exact()).identical_lines() == []
    # tests in another order than the reference ran them: no line is trusted, even where every
    # suite keeps its size (plan index 1 would otherwise take base 1's line for plus 0)
    for other in ([plan[0], plan[3], *plan[1:3], *plan[4:]], [plan[1], plan[0], *plan[2:]]):
        assert Verdicts(other, oracle.Expected(None, stored), Exact()).identical_lines() == []


def test_nan_is_never_accepted_by_its_text(decodings):
    """NaN is the one encoded value unequal to itself: an identical text holding it is decoded
    and compared, and (as EvalPlus judges NaN against NaN) fails."""
    nan = FunctionalSuite(
        entry_point="f",
        reference_code="def f(a):\n    return [a, float('nan')]\n",
        inputs={"base": [[1]]},
        fingerprint="test-nan",
    )
    result = judge("def f(a):\n    return [a, float('nan')]\n", nan)
    assert result.verdict is Verdict.wrong_answer and len(decodings) == 1


def test_a_comparator_that_may_refuse_equal_outputs_is_always_asked():
    from corebench.harness.comparators import Comparator

    class Never(Comparator):
        name = "never"

        def __call__(self, output, expected, args):
            return False

    suite = FunctionalSuite(
        entry_point="add",
        reference_code=ADD.reference_code,
        inputs={"base": [[1, 2]]},
        comparator=Never(),
        fingerprint="test-never",
    )
    assert judge(ADD.reference_code, suite).verdict is Verdict.wrong_answer


def test_a_nan_output_equal_in_json_is_still_compared_as_a_float():
    suite = FunctionalSuite(
        entry_point="f",
        reference_code="def f(x):\n    return float('nan')\n",
        inputs={"base": [[1]]},
        comparator=Close(),
        fingerprint="test-nan",
    )
    # NaN equals nothing, as in EvalPlus: the identical report must not pass by its JSON
    assert judge(suite.reference_code, suite).verdict is Verdict.wrong_answer


def test_a_cost_left_by_an_older_reference_is_renewed_when_the_reference_loads():
    # the cost's key leaves out how outputs are digested: after a new codec format the
    # reference is computed again, and its cost must follow (it only orders work)
    executor = Executor(workers=1)
    reference = asyncio.run(executor.reference("t/add", ADD))
    stale = oracle._path(oracle.cost_key("t/add", ADD), ".cost")
    stale.write_text("123.0")
    asyncio.run(Executor(workers=1).reference("t/add", dataclasses.replace(ADD)))
    total = sum(c or 0.0 for times in reference.cpu_s.values() for c in times)
    assert float(stale.read_text()) == pytest.approx(total)


def test_a_call_job_carries_the_suites_inputs_as_the_text_made_once_and_the_child_reads_them():
    executor = Executor(workers=1)
    suite = dataclasses.replace(ADD)
    plain = executor.job(suite, suite.reference_code, [1.0] * 4)
    assert plain.tests is suite.inputs_text  # spliced as it is: no input encoded per job
    assert protocol.Job.from_line(plain.to_line()).tests == [
        {"args": args} for args in map(encode, suite.flat_inputs)
    ]
    marked = executor.job(suite, suite.reference_code, [1.0] * 4, large=[2])
    assert [("large" in t) for t in protocol.Job.from_line(marked.to_line()).tests] == [
        False, False, True, False
    ]  # fmt: skip
    # the kernel's CPU backstop comes from the limits, which the job no longer lists
    assert plain.limits.cpu == int(4 * 1.0 * 5 + STARTUP_ALLOWANCE_S) + 2
    judged = asyncio.run(executor.run_judging(plain, [Budget(1.0, 60)] * 4))
    assert [reported_output(t) for t in judged.tests] == [3, 7, 10**30 + 1, 0]


def test_a_reference_cost_is_read_without_loading_the_reference_or_encoding_inputs():
    asyncio.run(Executor(workers=1).reference("t/add", ADD))
    fresh, suite = Executor(workers=1), dataclasses.replace(ADD)
    cost = asyncio.run(fresh.reference_cost("t/add", suite))
    assert cost > 0 and fresh.oracle._memory == {}
    assert not {"sent_inputs", "inputs_text", "content_key"} & set(vars(suite))
    reference = asyncio.run(fresh.reference("t/add", ADD))
    total = sum(c or 0.0 for times in reference.cpu_s.values() for c in times)
    assert cost == pytest.approx(total)
