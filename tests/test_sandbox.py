"""The sandbox on small suites of our own: verdicts, containment, and attempts to fake a pass."""

from __future__ import annotations

import asyncio
import os

import pytest

from corebench.harness import FunctionalSuite, Verdict
from corebench.harness.config import CALIBRATION_REFERENCE_S
from corebench.harness.records import calibrated
from corebench.harness.sandbox import Executor
from corebench.harness.sandbox.child import reported_output
from corebench.harness.sandbox.executor import child_job
from corebench.harness.sandbox.executor import test_spec as spec_of
from corebench.harness.sandbox.isolation import isolation_mode
from corebench.harness.sandbox.process import ChildReport

ADD = FunctionalSuite(
    entry_point="add",
    reference_code="def add(a, b):\n    return a + b\n",
    inputs={"base": [[1, 2], [3, 4]], "plus": [[10**30, 1], [-5, 5]]},
    fingerprint="test-add",
)


def judge(code: str, suite: FunctionalSuite = ADD):
    return asyncio.run(Executor(workers=2).evaluate("t/add", 0, code, suite))


def test_correct_solution_passes_with_measurements():
    result = judge("def add(a, b):\n    return b + a\n")
    assert result.verdict is Verdict.passed
    assert result.suite_verdicts == {"base": Verdict.passed, "plus": Verdict.passed}
    assert len(result.tests) == 4 and all(
        t.wall_s is not None and t.wall_s >= 0 for t in result.tests
    )
    assert result.runtime_s is not None and result.peak_memory_bytes is not None


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
            "import os, signal\ndef add(a, b):\n    os.kill(os.getppid(), signal.SIGKILL)\n    return a + b\n",
            None,
        ),
        (
            "import os, signal\ndef add(a, b):\n    os.killpg(0, signal.SIGKILL)\n    return a + b\n",
            Verdict.runtime_error,
        ),
    ],
)
def test_hostile_and_broken_programs_get_the_right_verdict(code, verdict):
    result = judge(code)
    if verdict is None:  # its parent is out of reach: the harness lives, the output is judged
        assert result.verdict in (Verdict.passed, Verdict.runtime_error, Verdict.sandbox_violation)
    else:
        assert result.verdict is verdict, result.first_failure


def test_a_custom_eq_cannot_fake_a_pass():
    code = (
        "class Anything:\n"
        "    def __eq__(self, other):\n        return True\n"
        "    __hash__ = object.__hash__\n"
        "def add(a, b):\n    return Anything()\n"
    )
    assert judge(code).verdict is Verdict.wrong_answer


def test_writing_a_fake_report_cannot_fake_a_pass():
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


def test_fork_bomb_is_contained():
    code = "import os\ndef add(a, b):\n    while True:\n        os.fork()\n"
    result = judge(code)
    assert result.verdict is not Verdict.passed
    assert (
        judge("def add(a, b):\n    return a + b\n").verdict is Verdict.passed
    )  # the machine still works


@pytest.mark.skipif(os.environ.get("COREBENCH_ISOLATION") == "rlimits", reason="needs bubblewrap")
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
        "os.kill(1, 9)",
    ],
)
@pytest.mark.skipif(
    isolation_mode() != "bwrap", reason="only bubblewrap blocks these; never try them unconfined"
)
def test_an_escape_the_sandbox_blocks_is_a_sandbox_violation(escape):
    code = f"import os, socket\ndef add(a, b):\n    {escape}\n    return a + b\n"
    result = judge(code)
    assert result.verdict is Verdict.sandbox_violation, result.first_failure


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


def test_efficiency_is_measured_against_the_reference():
    executor = Executor(workers=2)
    suite = FunctionalSuite(
        entry_point="total",
        reference_code="def total(n):\n    return n * (n - 1) // 2\n",
        inputs={"base": [[200_000], [300_000]]},
        fingerprint="test-total",
    )
    slow = "def total(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n"
    fast = asyncio.run(executor.measure("t/total", suite.reference_code, suite, repeats=3))
    measured = asyncio.run(executor.measure("t/total", slow, suite, repeats=3))
    assert measured.repeats == 3 and measured.reference_runtime_s == fast.reference_runtime_s
    assert 0.2 < fast.runtime_ratio < 5  # the reference against itself
    assert measured.runtime_ratio > 20  # a loop of 300k additions against a formula
    assert measured.peak_memory_bytes >= 0 and measured.memory_ratio > 0


def test_calibration_cancels_an_interpreter_that_runs_everything_slower():
    # A tracer installed at import slows every Python line in the child about threefold, as a VM
    # whose host got busy slows everything: raw CPU time triples, calibrated CPU time does not.
    suite = FunctionalSuite(
        entry_point="total",
        reference_code=(
            "def total(n):\n    s = 0\n    for i in range(n):\n        s += i * i % 7\n    return s\n"
        ),
        inputs={"base": [[2000], [5000]]},
        fingerprint="test-calibration",
    )
    slowed = "import sys\ndef _t(frame, event, arg):\n    return _t\nsys.settrace(_t)\n"
    executor = Executor(workers=1)
    plain = asyncio.run(executor.measure("t/cal", suite.reference_code, suite, repeats=3))
    traced = asyncio.run(executor.measure("t/cal", slowed + suite.reference_code, suite, 3))
    assert plain.calibration_s and traced.calibration_s and plain.reference_calibration_s
    assert traced.cpu_s > 2 * plain.cpu_s, (traced, plain)
    assert 0.7 < traced.calibrated_cpu_s / plain.calibrated_cpu_s < 1.4, (traced, plain)
    assert 0.7 < traced.runtime_ratio < 1.4  # against the untraced reference


def test_calibrated_totals_weigh_each_test_by_the_calibration_around_it():
    report = ChildReport(isolation="test")
    report.events = [
        {"event": "test", "i": 0, "wall": 1.0, "cpu": 1.0, "peak_kb": 1, "calibration": 2e-5},
        {"event": "test", "i": 1, "wall": 3.0, "cpu": 2.0, "peak_kb": 5, "calibration": 4e-5},
    ]
    wall, cpu, peak, calibration = Executor._totals(report)
    assert (wall, cpu, peak) == (4.0, 3.0, 5 * 1024)
    # 1 s at 20 µs per unit of work and 2 s at 40 µs: 100,000 units in all
    assert calibrated(cpu, calibration) == pytest.approx(1e5 * CALIBRATION_REFERENCE_S)
    report.events[1].pop("calibration")  # one uncalibrated test: raw times only
    assert Executor._totals(report)[3] is None


def test_timed_children_run_without_address_space_randomization():
    # the address of a function object: the same in every timed child, random when judging
    suite = FunctionalSuite(
        entry_point="where",
        reference_code="def where():\n    return id(where)\n",
        inputs={"base": [[]]},
    )
    executor = Executor(workers=1)

    judging = child_job(suite, suite.reference_code, [spec_of(suite, [], 5.0)])
    timed = [asyncio.run(executor._timed(suite.reference_code, suite, 1)) for _ in range(3)]
    judged = [asyncio.run(executor.run(judging, 30)) for _ in range(3)]
    assert len({reported_output(r.tests()[0]) for r in timed}) == 1
    assert len({reported_output(r.tests()[0]) for r in judged}) == 3


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
    tests = [spec_of(suite, args, 60.0) for args in suite.inputs["base"]]
    job = child_job(suite, suite.reference_code, tests, warmup=1, repeats=3, repeat_budget_s=0.02)
    report = asyncio.run(executor.run(job, deadline_s=60))
    fast, slow = report.tests()[0], report.tests()[1]
    assert len(fast["walls"]) == 3 and len(slow["walls"]) == 1, (fast, slow)
    assert slow["status"] == "ok", slow


def test_fast_tests_are_repeated_within_a_timed_sample_and_slow_ones_are_not():
    executor = Executor(workers=1)
    suite = FunctionalSuite(
        entry_point="work",
        reference_code="def work(n):\n    return sum(range(n))\n",
        inputs={"base": [[10], [3_000_000]]},
    )
    report = asyncio.run(executor._timed(suite.reference_code, suite, repeats=3))
    fast, slow = report.tests()[0], report.tests()[1]
    assert fast["loops"] > 10 and slow["loops"] == 1
    assert (
        len(fast["walls"]) == 3 and fast["wall"] < 1e-4 < slow["wall"]
    )  # per call, not per sample


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
