"""Timing sessions: how much CPU time and memory a program that passed uses on its task's
heaviest tests, measured the same way for it and for its reference. Blocking; each session has a
CPU of its own (the executor runs one per timing CPU at a time, and no judging beside them), its
harness thread and its children pinned to it.

A session's children (one per program: the solution's and its reference's, so that a solution's
runs never fork from a process holding its reference's code) never run program code
(``child.serve_timing``): each compiles its program, decodes a test's input once, and for every
timed run forks a fresh process that confines itself (no new processes, no kernel state that
outlives it), runs the program's module code and one call, and answers once. The child measures
that process from outside it: CPU from the moment it was let go to the moment its answer
arrived, and its peak memory above its memory at that moment. So

- nothing the program keeps between calls (a cache, a table, a lazy global) reaches the next
  run: every run starts from the state before the program loaded, and a run that changes the
  file system is refused (and the session's children replaced, so that nothing it wrote reaches
  another program);
- every process counts: a timed run cannot start one (a seccomp filter; RLIMIT_NPROC where
  that is missing), and the CPU clock counts all its threads;
- module code counts: a program that precomputes at import pays for it in every run.

The harness checks each run's answer against the expected output (a program that answers
differently when timed, or more than once, gets no measurement), and takes the median over runs.
The solution's and the reference's runs alternate: the machine's speed drifts (on this
project's VM up to twofold within a tenth of a second), and so it reaches both alike.

Calibration: for absolute CPU times, the harness thread times a fixed piece of interpreter work
just before and just after each test's runs (``records.calibrated``).
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..config import (
    CALIBRATION_SAMPLE_S,
    ENV_TIMING_SESSIONS,
    MEASUREMENT_EXTRA_BUDGET_S,
    MEASUREMENT_FIXED_LAYOUT,
    MEASUREMENT_MAX_REPEATS_FACTOR,
    MEASUREMENT_PRECISION,
    MEASUREMENT_RESOLUTION_S,
    MEASUREMENT_WARMUP,
    STARTUP_ALLOWANCE_S,
)
from ..errors import CorebenchError, MeasurementRefused
from .judging import wall_budget
from .protocol import NOT_THE_PROGRAMS, Job
from .supervisor import Budget, Child, Stopped

# (index of the test in run order, the timed event) -> whether its answer is acceptable
Check = Callable[[int, dict[str, Any]], bool]


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

    index: int  # the test, in the suite's run order
    cpu_s: float  # median CPU seconds of a run (module code and one call; all threads)
    wall_s: float  # median wall seconds of a run
    peak_kb: int  # the largest peak memory of a run, above its memory when it was let go
    calibration_s: float  # calibration work's CPU seconds per call around the runs
    runs: int = 0  # timed runs


@dataclass
class Timed:
    tests: list[TestTiming] = field(default_factory=list)


def timing_sessions_setting(workers: int, setting: int | None = None) -> int:
    """Timing sessions asked for: ``setting``, else ``$COREBENCH_TIMING_SESSIONS``, else
    ``workers``; never more than ``workers`` (the slots they take from judging). There are never
    more than CPUs to run them on (:func:`timing_cpus`)."""
    if setting is None:
        raw = os.environ.get(ENV_TIMING_SESSIONS, "").strip()
        if raw:
            try:
                setting = int(raw)
            except ValueError:
                raise CorebenchError(
                    f"{ENV_TIMING_SESSIONS} must be a whole number of sessions, not {raw!r}"
                ) from None
    if setting is not None and setting < 1:
        raise CorebenchError(f"timing sessions must be at least 1, not {setting}")
    return max(1, min(workers, setting or workers))


def timing_cpus(most: int) -> list[int | None]:
    """The CPUs timing sessions run on, one session each: the last ``most`` this process may
    use (``[None]``, one session unpinned, where the platform does not say)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return [None]
    return cpus[-max(1, most) :] or [None]


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


def precise(cpus: list[float]) -> bool:
    """Whether the median of ``cpus`` is known well enough: half the interquartile range is at
    most MEASUREMENT_PRECISION of the median, or at most MEASUREMENT_RESOLUTION_S (a run's own
    noise: a test of a few microseconds cannot be timed to 3 % of itself, and need not be)."""
    if len(cpus) < 3:
        return False
    q1, middle, q3 = statistics.quantiles(cpus, n=4, method="inclusive")
    return (q3 - q1) / 2 <= max(MEASUREMENT_PRECISION * middle, MEASUREMENT_RESOLUTION_S)


class Timer:
    """The measurement phase's children, one per slot (a solution and its reference each have
    their own: a solution's runs never fork from a process that holds its reference's code),
    started once (pinned to ``cpu``, without address-space randomization) and kept: they time
    every program the executor measures, one request at a time. Blocking and not thread-safe:
    the executor drives it from one thread at a time."""

    def __init__(self, job: Job, mode: str, cpu: int | None):
        self.job, self.mode, self.cpu = job, mode, cpu
        self.job.cpu = cpu
        self.children: dict[str, Child] = {}
        self.loops = 1

    def _started(self, slot: str) -> Child:
        if slot not in self.children:
            child = Child(
                self.job, mode=self.mode, fixed_layout=MEASUREMENT_FIXED_LAYOUT, timing=True
            )
            try:
                child.expect("ready", Budget(None, wall_budget(STARTUP_ALLOWANCE_S)))
            except Stopped as stop:
                child.kill()
                child.finish(grace_s=0)
                raise CorebenchError(
                    f"the measurement phase could not start: {stop.detail}"
                ) from None
            self.children[slot] = child
            self.loops = max(1, math.ceil(CALIBRATION_SAMPLE_S / max(calibration_sample(10), 1e-9)))
        return self.children[slot]

    def close(self) -> None:
        children, self.children = self.children, {}
        for child in children.values():
            child.kill()
        for child in children.values():
            child.finish(grace_s=0)

    def _calibrate(self) -> float:
        """The calibration work's CPU seconds per call, with the session's children stopped."""
        with contextlib.ExitStack() as stack:
            for child in self.children.values():
                assert child.meter is not None
                stack.enter_context(child.meter.stopped())
            return calibration_sample(self.loops)

    def time(
        self,
        programs: dict[str, dict[str, Any]],
        specs: dict[str, dict[int, dict[str, Any]]],
        repeats: int,
        check: Check,
    ) -> dict[str, Timed]:
        """The tests ``specs[slot]`` (run-order index -> test, the same tests under each slot's
        limits) of each program in ``programs`` (slot -> its code, setup, mode and entry point),
        test after test, the programs' runs alternating, each program in its slot's child. A
        failure is a MeasurementRefused only when the ``SOLUTION`` slot's program caused it."""
        with pinned(self.cpu):
            try:
                children = {slot: self._started(slot) for slot in programs}
                for slot, program in programs.items():
                    children[slot].send({"op": "program", **program})
                    load = _expect(slot, children[slot], "load")
                    if load["status"] != "ok":
                        why = load.get("error") or load["status"]
                        raise _failure(slot, f"it failed to load while timed: {why}")
                session = Session(children, check)
                tests = sorted(next(iter(specs.values())))
                timed = [
                    session.time(i, {s: specs[s][i] for s in programs}, repeats, self._calibrate)
                    for i in tests
                ]
                return {slot: Timed([t[slot] for t in timed]) for slot in programs}
            except Stopped as stop:  # not a broken rule (``_expect`` blames those): gone, or slow
                self.close()
                raise CorebenchError(f"the measurement phase stopped: {stop.detail}") from None
            except CorebenchError:
                # whatever a refused run left (a file it wrote, the session's state) must not
                # reach the next program: the next one gets fresh children, folders and /tmp
                self.close()
                raise


SOLUTION = "solution"  # the slot whose failures are the program's own (MeasurementRefused)
REFERENCE = "reference"  # the slot of the solution's reference, timed beside it


def _failure(slot: str, why: str) -> CorebenchError:
    if slot == SOLUTION:
        return MeasurementRefused(why)
    return CorebenchError(f"the {slot} solution could not be measured: {why}")


def _expect(slot: str, child: Child, kind: str, wall_s: float | None = None) -> dict[str, Any]:
    """``child.expect``, a broken channel rule blamed on the slot whose child broke it."""
    try:
        return child.expect(kind, Budget(None, wall_s or wall_budget(STARTUP_ALLOWANCE_S)))
    except Stopped as stop:
        if stop.kind != "violation":
            raise
        raise _failure(slot, f"the measurement phase stopped it: {stop.detail}") from None


class Session:
    """The timed runs of the programs a session's children hold (slot -> child), one request at
    a time."""

    def __init__(self, children: dict[str, Child], check: Check):
        self.children, self.check = children, check

    def prepare(self, specs: dict[str, dict[str, Any]]) -> None:
        """Each child decodes the test's input once; every run gets a copy-on-write copy."""
        for slot, spec in specs.items():
            self.children[slot].send({"op": "prepare", "test": spec})
            _expect(slot, self.children[slot], "prepared")

    def run(self, slot: str, index: int, spec: dict[str, Any]) -> dict[str, Any]:
        """One timed run of the program in ``slot``, under ``spec``'s limits, its answer checked."""
        child = self.children[slot]
        limit = float(spec["cpu_limit"])
        allowance = 2 * (spec.get("wall_limit") or wall_budget(limit)) + STARTUP_ALLOWANCE_S
        # the report limit bounds each run's answer: the session's children outlive many runs
        child.received = 0
        child.send({"op": "time"})
        event = _expect(slot, child, "timed", allowance)
        if child.pending():  # one request, one answer: more would answer the next request
            raise _failure(slot, f"more than one answer on test {index} while timed")
        if event["status"] != "ok":
            why = event.get("error") or event["status"]
            # a wall-clock overrun (a loaded machine) or a run that could not be confined says
            # nothing about the program: not a refusal to keep
            if why in NOT_THE_PROGRAMS:
                raise CorebenchError(f"a run failed while timed on test {index}: {why}")
            raise _failure(slot, f"it failed while timed on test {index}: {why}")
        if not self.check(index, event):
            raise _failure(slot, f"a wrong answer on test {index} while timed")
        return event

    def time(
        self, index: int, specs: dict[str, dict[str, Any]], repeats: int, calibrate
    ) -> dict[str, TestTiming]:
        """``repeats`` timed runs of each slot's program, alternating (the order flips every
        round, so that neither always runs first), and more rounds (up to
        MEASUREMENT_MAX_REPEATS_FACTOR times as many, within MEASUREMENT_EXTRA_BUDGET_S of CPU
        for the programs together) until every median is precise."""
        self.prepare(specs)
        order = list(specs)
        runs: dict[str, list[dict[str, Any]]] = {slot: [] for slot in order}

        def one_round() -> float:
            order.reverse()
            for slot in order:
                runs[slot].append(self.run(slot, index, specs[slot]))
            return sum(runs[slot][-1]["cpu"] for slot in order)

        for _ in range(MEASUREMENT_WARMUP):
            one_round()
        runs = {slot: [] for slot in order}
        before = calibrate()
        rounds, most, extra = 0, MEASUREMENT_MAX_REPEATS_FACTOR * repeats, 0.0
        while rounds < repeats or (
            rounds < most
            and extra < MEASUREMENT_EXTRA_BUDGET_S
            and not all(precise([r["cpu"] for r in done]) for done in runs.values())
        ):
            spent = one_round()
            if rounds >= repeats:
                extra += spent
            rounds += 1
        after = calibrate()
        return {
            slot: TestTiming(
                index=index,
                cpu_s=statistics.median(r["cpu"] for r in done),
                wall_s=statistics.median(r["wall"] for r in done),
                peak_kb=max(r["peak_kb"] for r in done),
                calibration_s=(before + after) / 2,
                runs=len(done),
            )
            for slot, done in runs.items()
        }
