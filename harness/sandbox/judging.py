"""One judging run: a program on a suite's tests, every test once, in order, each output handed to
the harness's comparison as it arrives. Blocking; runs in a harness thread.

Limits and measurements are the harness's (``supervisor.Child``): in ``call`` and ``expr`` suites
the per-test CPU and wall-clock limits are enforced from outside the program's process, and its
CPU time and peak memory over the tests are read from the kernel; the per-test figures a program
could influence are not kept. In ``stdio`` suites each test ran in its own process and the child,
which the program cannot reach, reports that process's kernel accounting per test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import STARTUP_ALLOWANCE_S, WALL_SLACK_FACTOR
from .launch import ZygotePool
from .protocol import IDENTICAL, Job
from .supervisor import Budget, Child, Ending, Stopped, checked_event

KeepGoing = Callable[[int, dict[str, Any]], bool]  # (test index, event) -> judge the next one?


@dataclass
class Judged:
    """What one judging run produced."""

    started: bool = False  # the child reported ready: the sandbox itself worked
    load: dict[str, Any] | None = None  # the load event (None: the program never got that far)
    tests: list[dict[str, Any]] = field(default_factory=list)  # test events, index = position
    stop: Stopped | None = None  # why the harness stopped the child before it finished
    stopped_early: bool = False  # the harness had seen enough (a failing test)
    cpu_s: float | None = None  # over the tests, from the kernel
    wall_s: float | None = None
    peak_kb: int | None = None  # above the child's memory before the program loaded
    trusted: bool = False  # the events' own measurements are the kernel's (stdio, references)
    ending: Ending = field(default_factory=Ending)
    isolation: str = ""


def wall_budget(cpu_s: float) -> float:
    """Wall-clock allowance for work allowed ``cpu_s`` of CPU (a loaded machine, sleeping)."""
    return WALL_SLACK_FACTOR * cpu_s + 1.0


def run_judging(
    job: Job,
    budgets: list[Budget],
    *,
    mode: str,
    keep_going: KeepGoing | None = None,
    identical: Sequence[bytes | None] = (),
    fixed_layout: bool = False,
    zygotes: ZygotePool | None = None,
) -> Judged:
    """Run ``job`` (which lists its tests) with one budget per test; the child is forked by one
    of ``zygotes`` when given, else exec'd. ``identical``: per test, the line whose arrival
    passes it (``Verdicts.identical_lines``): kept as ``protocol.IDENTICAL``, with no parsing
    and no call to ``keep_going`` (a correct program's thousand tests cost a comparison each)."""
    judged = Judged(trusted=job.mode == "stdio" or job.self_timing is not None, isolation=mode)
    with Child(job, mode=mode, fixed_layout=fixed_layout, zygotes=zygotes) as child:
        baseline_kb = None
        try:
            child.expect("ready", Budget(None, wall_budget(STARTUP_ALLOWANCE_S)))
            judged.started = True
            memory = child.meter.memory_kb() if child.meter else None
            if memory is not None and child.meter.reset_peak():
                baseline_kb = memory[0]  # before any program code: the interpreter's own
            load_cpu = job.load_cpu_limit
            judged.load = child.expect("load", Budget(load_cpu, wall_budget(load_cpu)))
            if judged.load["status"] != "ok":
                return _finished(judged, child)
            start = child.marks
            known = 0 if judged.trusted else len(identical)  # trusted lines carry measurements
            for index, budget in enumerate(budgets):
                line = child.read_line(budget)
                if index < known and line == identical[index]:
                    judged.tests.append(IDENTICAL)
                    continue
                event = checked_event(line)
                if event["event"] == "done":  # it stopped after a failing test, as asked
                    break
                if event["event"] != "test" or event["i"] != index:
                    raise Stopped(
                        "violation", f"report {event.get('i')!r} where test {index} was due"
                    )
                judged.tests.append(event)
                if keep_going is not None and not keep_going(index, event):
                    judged.stopped_early = True
                    break
                if event["status"] != "ok" and job.stop_on_error:
                    break
            else:
                child.expect("done", Budget(None, wall_budget(STARTUP_ALLOWANCE_S)))
            _measure(judged, child, start, baseline_kb)
        except Stopped as stop:
            judged.stop = stop
            child.kill()
        return _finished(judged, child)


def _measure(judged: Judged, child: Child, start: Any, baseline_kb: int | None) -> None:
    """Totals over the tests: the kernel's, read now that the child has answered them all."""
    now = child.cpu_s()
    if start.cpu_s is not None and now is not None:
        judged.cpu_s = now - start.cpu_s
    judged.wall_s = child.marks.wall_s - start.wall_s
    memory = child.meter.memory_kb() if child.meter else None
    if memory is not None and baseline_kb is not None:
        judged.peak_kb = max(0, memory[1] - baseline_kb)
    if judged.trusted:  # each test ran in its own measured process (stdio)
        judged.cpu_s = sum(e.get("cpu", 0.0) for e in judged.tests)
        judged.wall_s = sum(e.get("wall", 0.0) for e in judged.tests)
        judged.peak_kb = max((e.get("peak_kb", 0) for e in judged.tests), default=0)


def _finished(judged: Judged, child: Child) -> Judged:
    judged.ending = child.finish(grace_s=0 if judged.stop or judged.stopped_early else 5.0)
    return judged
