"""Timing sessions: how much CPU time and memory a program that passed uses per test, measured
the same way for it and for its reference. Blocking; one session at a time (the executor
serializes them), the harness thread and the child pinned to the same CPU.

``call`` and ``expr`` suites: the harness drives the child one request at a time. ``prepare``
decodes fresh copies of a test's input (the inputs exist in the child only from then on, so
nothing can be computed ahead); ``call`` runs the program on them, and the harness reads the
child's CPU clock just before sending it and when the answer arrives: that window is the sample.
Fast tests run several times within one sample until it lasts MEASUREMENT_MIN_SAMPLE_S (as
timeit's autorange does). Peak memory comes from single calls: the harness resets the child's
high-water mark before the call and reads it after. Every CPU second the child spends after
loading is accounted for: CPU outside the windows (a thread working between requests) and
inputs that cost far more to prepare than the reference's are reported, and the executor
refuses such a measurement.

``stdio`` suites: each run of a test is a fresh process of the child's, measured by the child
with ``wait4`` (trusted; see ``child.py``).

Calibration: the machine's speed drifts (on this project's VM up to twofold within a tenth of a
second), so the harness thread times a fixed piece of interpreter work just before and just
after each test's samples, and ratios compare CPU times in units of that work.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..config import (
    CALIBRATION_SAMPLE_S,
    MEASUREMENT_FIXED_LAYOUT,
    MEASUREMENT_MIN_SAMPLE_S,
    MEASUREMENT_WARMUP,
    REFERENCE_CPU_LIMIT_S,
    STARTUP_ALLOWANCE_S,
)
from ..errors import CorebenchError
from .judging import wall_budget
from .protocol import Job
from .supervisor import Budget, Child, Stopped

MAX_LOOPS = 10_000  # calls per timed sample at most


def calibration_work() -> int:
    """A fixed piece of interpreter work (a loop, arithmetic, calls, a dict, strings). Timed
    beside a measurement, it says how fast this machine runs Python at that moment."""
    table: dict[int, int] = {}
    parts = []
    for i in range(64):
        table[i % 13] = table.get(i % 13, 0) + i * i
        parts.append(str(i))
    return len("".join(parts)) + sum(table.values())


def calibration_sample(loops: int) -> float:
    """Thread CPU seconds per ``calibration_work`` call, over ``loops`` calls."""
    started = time.thread_time()
    for _ in range(loops):
        calibration_work()
    return (time.thread_time() - started) / loops


@dataclass
class TestTiming:
    """One test of one program."""

    __test__ = False  # not a pytest class

    cpu_s: float  # median CPU seconds per call (all the program's threads)
    wall_s: float  # median wall seconds per call
    peak_kb: int  # peak memory above the child's before the program loaded
    calibration_s: float  # calibration work's CPU seconds per call around the samples
    loops: int  # calls per timed sample
    prepare_s: float | None = None  # CPU seconds per prepared input copy (call/expr)


@dataclass
class Timed:
    tests: list[TestTiming] = field(default_factory=list)
    windows_cpu_s: float = 0.0  # the child's CPU inside the windows the harness measured
    outside_cpu_s: float = 0.0  # ... and outside them, after loading (call/expr)


def pick_cpu() -> int | None:
    """The CPU timing sessions run on: the last one this process may use."""
    try:
        return max(os.sched_getaffinity(0))
    except (AttributeError, OSError, ValueError):
        return None


@contextlib.contextmanager
def pinned(cpu: int | None) -> Iterator[None]:
    """Run the calling thread on ``cpu`` (Linux: pid 0 is the calling thread)."""
    if cpu is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class _Session:
    """The windows of one child, each measured from outside it."""

    def __init__(self, child: Child):
        self.child = child
        self.windows_cpu = 0.0

    def window(
        self, request: dict[str, Any], budget: Budget, kind: str
    ) -> tuple[float, float, dict]:
        """Send ``request``; (CPU seconds, wall seconds, event) until its answer arrived."""
        child = self.child
        child.send(request)
        start = child.marks
        event = child.read_event(budget)
        if event["event"] != kind:
            raise Stopped("violation", f"a {event['event']} report where {kind} was due")
        if start.cpu_s is None or child.marks.cpu_s is None:
            raise Stopped("gone", "it could not be measured")
        cpu = child.marks.cpu_s - start.cpu_s
        self.windows_cpu += cpu
        return cpu, child.marks.wall_s - start.wall_s, event


def _failed(event: dict[str, Any]) -> CorebenchError:
    return CorebenchError(
        "a solution that passed failed during the measurement phase: "
        f"{event.get('error') or event['status']}"
    )


class CallSession(_Session):
    """call/expr: prepare, then call, one request at a time."""

    def __init__(self, child: Child, baseline_kb: int):
        super().__init__(child)
        self.baseline_kb = baseline_kb

    def prepare(self, spec: dict[str, Any], copies: int) -> float:
        budget = Budget(REFERENCE_CPU_LIMIT_S, wall_budget(REFERENCE_CPU_LIMIT_S))
        cpu, _, event = self.window(
            {"op": "prepare", "test": spec, "copies": copies}, budget, "prepared"
        )
        if event["copies"] != copies:
            raise Stopped("violation", "prepared another number of inputs than asked")
        return cpu

    def call(
        self, spec: dict[str, Any], loops: int, memory: bool = False
    ) -> tuple[float, float, int]:
        """(CPU, wall) seconds for ``loops`` calls on fresh inputs, and peak memory (KiB above
        the baseline) when ``memory``."""
        self.prepare(spec, loops)
        if memory and not self.child.meter.reset_peak():
            raise CorebenchError(
                "the program's memory cannot be measured (it made itself unreadable)"
            )
        limit = REFERENCE_CPU_LIMIT_S * loops
        cpu, wall, event = self.window({"op": "call"}, Budget(limit, wall_budget(limit)), "called")
        if event["status"] != "ok":
            raise _failed(event)
        peak = 0
        if memory:
            measured = self.child.meter.memory_kb()
            if measured is None:
                raise CorebenchError("the program's memory could not be read")
            peak = max(0, measured[1] - self.baseline_kb)
        return cpu, wall, peak

    def loops(self, spec: dict[str, Any]) -> int:
        """Calls per timed sample so that a sample lasts MEASUREMENT_MIN_SAMPLE_S: the cost of one
        call from two probe windows (1 call, then n), so that the window's own fixed cost (the
        request and the answer) cancels. The program can only change how many calls a sample
        makes, never what a sample measures."""
        single = self.call(spec, 1)[0]
        if single >= MEASUREMENT_MIN_SAMPLE_S:
            return 1
        n = min(MAX_LOOPS, max(2, math.ceil(MEASUREMENT_MIN_SAMPLE_S / max(single, 1e-9))))
        several = self.call(spec, n)[0]
        per_call = (several - single) / (n - 1)
        if per_call <= 0:
            per_call = several / n
        return max(1, min(MAX_LOOPS, math.ceil(MEASUREMENT_MIN_SAMPLE_S / per_call)))

    def peak(self, spec: dict[str, Any], repeats: int) -> int:
        """Peak memory of single calls on fresh inputs (also the test's warm-up); taken before any
        test is timed, so memory an allocator kept from large timed batches does not count."""
        return max(self.call(spec, 1, memory=True)[2] for _ in range(max(1, repeats)))

    def time(self, spec: dict[str, Any], repeats: int, calibrate) -> TestTiming:
        loops = self.loops(spec)
        prepared = self.prepare_cpu_probe(spec)
        before = calibrate()
        samples = [self.call(spec, loops) for _ in range(repeats)]
        after = calibrate()
        return TestTiming(
            cpu_s=statistics.median(cpu / loops for cpu, _, _ in samples),
            wall_s=statistics.median(wall / loops for _, wall, _ in samples),
            peak_kb=0,
            calibration_s=(before + after) / 2,
            loops=loops,
            prepare_s=prepared,
        )

    def prepare_cpu_probe(self, spec: dict[str, Any], copies: int = 8, probes: int = 3) -> float:
        """CPU seconds per prepared copy of this test's input, the least of ``probes`` windows (one
        window can catch a hiccup of the machine; work a program hides there shows in all).
        Checked against the reference's: an honest program cannot make its inputs slower to
        prepare."""
        return min(self.prepare(spec, copies) for _ in range(probes)) / copies


class ProgramSession(_Session):
    """stdio: one fresh, child-measured process per run."""

    def peak(self, spec: dict[str, Any], repeats: int) -> int:
        return 0  # every run is a fresh process: its peak comes with its timing

    def run(self, spec: dict[str, Any]) -> dict[str, Any]:
        allowance = 2 * spec["wall_limit"] + STARTUP_ALLOWANCE_S
        _, _, event = self.window({"op": "run", "test": spec}, Budget(None, allowance), "ran")
        if event["status"] != "ok":
            raise _failed(event)
        return event

    def time(self, spec: dict[str, Any], repeats: int, calibrate) -> TestTiming:
        for _ in range(MEASUREMENT_WARMUP):
            self.run(spec)
        before = calibrate()
        runs = [self.run(spec) for _ in range(repeats)]
        after = calibrate()
        return TestTiming(
            cpu_s=statistics.median(r["cpu"] for r in runs),
            wall_s=statistics.median(r["wall"] for r in runs),
            peak_kb=max(r["peak_kb"] for r in runs),
            calibration_s=(before + after) / 2,
            loops=1,
        )


def time_program(job: Job, specs: list[dict[str, Any]], repeats: int, *, mode: str) -> Timed:
    """Every test of ``job``'s program (a session job: no tests in it), one after another."""
    cpu = pick_cpu()
    job.cpu = cpu
    with pinned(cpu), Child(job, mode=mode, fixed_layout=MEASUREMENT_FIXED_LAYOUT) as child:
        loops = max(1, math.ceil(CALIBRATION_SAMPLE_S / max(calibration_sample(10), 1e-9)))

        def calibrate() -> float:
            with child.meter.stopped():  # none of the program's threads beside the calibration
                return calibration_sample(loops)

        try:
            child.expect("ready", Budget(None, wall_budget(STARTUP_ALLOWANCE_S)))
            memory = child.meter.memory_kb()
            if memory is None:
                raise CorebenchError("the program's memory could not be read")
            load = child.expect(
                "load", Budget(STARTUP_ALLOWANCE_S, wall_budget(STARTUP_ALLOWANCE_S))
            )
            if load["status"] != "ok":
                raise _failed(load)
            loaded_cpu = child.marks.cpu_s
            session: CallSession | ProgramSession = (
                ProgramSession(child) if job.mode == "stdio" else CallSession(child, memory[0])
            )
            peaks = [session.peak(spec, repeats) for spec in specs]  # before any timing (call/expr)
            timed = Timed([session.time(spec, repeats, calibrate) for spec in specs])
            for test, peak in zip(timed.tests, peaks, strict=True):
                test.peak_kb = max(test.peak_kb, peak)
            if job.mode != "stdio":
                total = child.cpu_s()
                if total is None or loaded_cpu is None:
                    raise CorebenchError("the program could not be measured to the end")
                timed.windows_cpu_s = session.windows_cpu
                timed.outside_cpu_s = max(0.0, total - loaded_cpu - session.windows_cpu)
        except Stopped as stop:
            child.kill()
            raise CorebenchError(
                f"the measurement phase stopped the program: {stop.detail}"
            ) from None
        finally:
            child.finish(grace_s=0)
    return timed
