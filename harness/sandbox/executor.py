"""The executor: runs solutions (and reference solutions) in sandboxed children, a bounded number
at a time, and turns their reports into verdicts. Used by ``corebench run`` and reward functions."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import reprlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config import (
    CALIBRATION_SAMPLE_S,
    DEFAULT_TEST_TIME_LIMIT_S,
    EFFICIENCY_FIXED_LAYOUT,
    EFFICIENCY_MIN_SAMPLE_S,
    EFFICIENCY_WARMUP,
    EXAMPLE_TIME_LIMIT_S,
    MAX_TOTAL_TIME_S,
    MEMORY_FLOOR_BYTES,
    MIN_TIME_LIMIT_S,
    REFERENCE_CPU_LIMIT_S,
    REFERENCE_TIMING_BUDGET_S,
    REFERENCE_TIMING_REPEATS,
    REFERENCE_TIMING_WARMUP,
    STARTUP_ALLOWANCE_S,
    TIME_LIMIT_FACTOR,
    WALL_SLACK_FACTOR,
    cache_dir,
)
from ..errors import CorebenchError
from ..records import Efficiency, ExecutionResult, TestOutcome, Verdict, calibrated
from ..testsuite import Example, FunctionalSuite
from .child import encode, reported_output
from .compare import outputs_match
from .isolation import isolation_mode, memory_limit_bytes
from .process import ChildReport, run_child

REFERENCE_FORMAT = 5  # bump when the cached reference-output format changes


@dataclass
class Reference:
    """Expected outputs and the reference solution's CPU time, per suite and test."""

    outputs: dict[str, list[Any]]
    cpu_s: dict[str, list[float | None]]  # None: no reference time (the suite's limit applies)


def test_spec(suite: FunctionalSuite, test_input: list[Any], cpu_limit: float) -> dict[str, Any]:
    """One test of a child job, as the suite's mode runs it."""
    if suite.mode == "stdio":
        return {"stdin": str(test_input[0]), "cpu_limit": cpu_limit}
    if suite.mode == "expr":
        return {"expr": str(test_input[0]), "cpu_limit": cpu_limit}
    return {"args": encode(test_input), "cpu_limit": cpu_limit}


def child_job(
    suite: FunctionalSuite, code: str, tests: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    """A child job running ``code`` on ``tests`` the way ``suite`` says."""
    return {
        "code": code,
        "entry_point": suite.entry_point if suite.mode == "call" else None,
        "mode": suite.mode,
        "setup": suite.setup_code,
        "tests": tests,
        **extra,
    }


def time_limit(suite: FunctionalSuite, reference_cpu_s: float | None) -> float:
    """Per-test CPU limit: from the reference's CPU time when known, else the suite's own."""
    if reference_cpu_s is None:
        return suite.time_limit_s or DEFAULT_TEST_TIME_LIMIT_S
    return max(MIN_TIME_LIMIT_S, TIME_LIMIT_FACTOR * reference_cpu_s)


# Errors that only a program reaching past the sandbox gets: writing outside its directory,
# read-only system folders, signals to processes it does not own, the network.
_VIOLATION = re.compile(
    r"^(PermissionError|ConnectionRefusedError|gaierror)\b"
    r"|\[Errno (1|13|30|101)\] (Operation not permitted|Permission denied|Read-only file system"
    r"|Network is unreachable)"
)


def _status_verdict(status: str, error: str | None = None) -> Verdict:
    """The verdict for a child's status (and error text: a blocked escape is a violation)."""
    if status == "error" and error and _VIOLATION.search(error):
        return Verdict.sandbox_violation
    return {
        "timeout": Verdict.timeout,
        "memory": Verdict.memory_exceeded,
        "syntax_error": Verdict.syntax_error,
    }.get(status, Verdict.runtime_error)


def death_verdict(report: ChildReport) -> tuple[Verdict, str]:
    """Why a child stopped reporting before it finished."""
    if report.killed_by_deadline:
        return Verdict.timeout, "wall-clock limit exceeded"
    if report.report_overflow:
        return Verdict.sandbox_violation, "wrote more than the report limit to the report channel"
    sig = report.signal_name
    if sig in ("SIGXCPU", "SIGKILL"):
        return Verdict.timeout, f"CPU-time limit exceeded ({sig})"
    if "MemoryError" in report.stderr:
        return Verdict.memory_exceeded, "MemoryError"
    if sig:
        return Verdict.runtime_error, f"crashed ({sig})"
    return Verdict.runtime_error, f"exited (code {report.returncode}) before finishing its tests"


class Executor:
    """Evaluate programs in sandboxed child processes; never in the harness process."""

    def __init__(self, workers: int | None = None, memory_bytes: int | None = None):
        self.mode = isolation_mode()
        self.memory_bytes = memory_bytes or memory_limit_bytes()
        self.workers = workers or os.cpu_count() or 1
        self._slots = asyncio.Semaphore(self.workers)
        self._references: dict[str, Reference] = {}
        self._reference_efficiency: dict[str, tuple[float, float, int, float | None]] = {}
        self._measuring = asyncio.Lock()
        self._reference_locks: dict[str, asyncio.Lock] = {}

    async def run(
        self,
        job: dict[str, Any],
        deadline_s: float,
        keep_going: Callable[[dict[str, Any]], bool] | None = None,
    ) -> ChildReport:
        async with self._slots:
            report = await asyncio.to_thread(
                run_child,
                job,
                deadline_s=deadline_s,
                memory_bytes=self.memory_bytes,
                mode=self.mode,
                keep_going=keep_going,
            )
        if not report.started and not report.killed_by_deadline:
            why = report.launcher.strip().splitlines()[-1:] or [f"exit code {report.returncode}"]
            raise CorebenchError(f"the sandbox ({self.mode}) could not start: {why[0]}")
        return report

    # --- reference outputs ---------------------------------------------------------------------
    @staticmethod
    def _reference_key(task_id: str, suite: FunctionalSuite) -> str:
        material = json.dumps(
            [
                REFERENCE_FORMAT,
                sys.version_info[:2],
                suite.fingerprint,
                task_id,
                suite.reference_code,
                suite.mode,
                suite.setup_code,
            ],
            default=str,
        )
        return hashlib.sha256(material.encode()).hexdigest()[:32]

    async def reference(self, task_id: str, suite: FunctionalSuite) -> Reference:
        """Expected outputs and reference CPU times: the reference solution is run once (cached on
        disk); outputs the dataset states (``suite.expected``) take precedence over its outputs."""
        if suite.expected is not None and not suite.reference_code:
            return Reference(
                outputs=suite.expected,
                cpu_s={name: [None] * len(outs) for name, outs in suite.expected.items()},
            )
        key = self._reference_key(task_id, suite)
        if key in self._references:
            return self._references[key]
        lock = self._reference_locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key in self._references:
                return self._references[key]
            path = cache_dir() / "references" / f"{key}.json"
            if path.exists():
                data = json.loads(path.read_text())
            else:
                data = await self._compute_reference(task_id, suite)
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(data))
                tmp.replace(path)
            outputs = {
                name: [reported_output(o) for o in outs] for name, outs in data["outputs"].items()
            }
            if suite.expected is not None:
                outputs = suite.expected
            elif suite.output_not_none:
                outputs = {name: [o is not None for o in outs] for name, outs in outputs.items()}
            reference = Reference(outputs, data["cpu_s"])
            self._references[key] = reference
            return reference

    async def _compute_reference(self, task_id: str, suite: FunctionalSuite) -> dict[str, Any]:
        names = list(suite.inputs)
        flat = [args for name in names for args in suite.inputs[name]]
        job = child_job(
            suite,
            suite.reference_code,
            [test_spec(suite, args, REFERENCE_CPU_LIMIT_S) for args in flat],
            stop_on_error=False,
            warmup=REFERENCE_TIMING_WARMUP,  # a first call pays for lazy imports and caches
            repeats=REFERENCE_TIMING_REPEATS,
            repeat_budget_s=REFERENCE_TIMING_BUDGET_S,  # slow tests: fewer timed calls
        )
        calls = REFERENCE_TIMING_WARMUP + REFERENCE_TIMING_REPEATS
        report = await self.run(job, deadline_s=REFERENCE_CPU_LIMIT_S * max(1, len(flat)) * calls)
        tests = report.tests()
        bad = [i for i in range(len(flat)) if tests.get(i, {}).get("status") != "ok"]
        if bad and suite.expected is not None:  # only its times are wanted; failures get none
            tests = {i: e for i, e in tests.items() if i not in bad}
        elif bad:
            first = tests.get(bad[0], {})
            why = first.get("error") or first.get("status") or death_verdict(report)[1]
            raise CorebenchError(
                f"reference solution of {task_id} fails on {len(bad)} of {len(flat)} inputs ({why})"
            )
        outputs: dict[str, list[Any]] = {}
        cpu: dict[str, list[float]] = {}
        index = 0
        for name in names:
            count = len(suite.inputs[name])
            outputs[name] = [_stored_output(tests.get(i, {})) for i in range(index, index + count)]
            cpu[name] = [
                tests[i]["cpu"] if i in tests else None for i in range(index, index + count)
            ]
            index += count
        return {"outputs": outputs, "cpu_s": cpu}

    # --- efficiency ------------------------------------------------------------------------------------
    async def _timed(self, code: str, suite: FunctionalSuite, repeats: int) -> ChildReport:
        plan = [args for name in suite.inputs for args in suite.inputs[name]]
        job = child_job(
            suite,
            code,
            [test_spec(suite, args, REFERENCE_CPU_LIMIT_S) for args in plan],
            repeats=repeats,
            warmup=EFFICIENCY_WARMUP,
            min_sample_s=EFFICIENCY_MIN_SAMPLE_S,
            calibration_sample_s=CALIBRATION_SAMPLE_S,
            fixed_layout=EFFICIENCY_FIXED_LAYOUT,
        )
        async with self._measuring:  # one measurement at a time: no neighbour distorts the timings
            report = await self.run(
                job, deadline_s=MAX_TOTAL_TIME_S * (repeats + EFFICIENCY_WARMUP)
            )
        if len(report.tests()) != len(plan) or any(
            e.get("status") != "ok" for e in report.tests().values()
        ):
            raise CorebenchError("a solution that passed failed during the efficiency phase")
        return report

    @staticmethod
    def _totals(report: ChildReport) -> tuple[float, float, int, float | None]:
        """Wall and CPU seconds summed over tests, peak memory, and the calibration time that makes
        ``calibrated(cpu, calibration)`` the sum over tests of the median calibrated call."""
        tests = report.tests().values()
        cpu = sum(e["cpu"] for e in tests)
        calibration = None
        if all(e.get("calibration", 0) > 0 for e in tests):
            # each test in units of the calibration work around it, so the machine's drift cancels
            units = sum(e["cpu"] / e["calibration"] for e in tests)
            calibration = cpu / units if units > 0 else None
        return (
            sum(e["wall"] for e in tests),
            cpu,
            max(int(e.get("peak_kb", 0)) for e in tests) * 1024,
            calibration,
        )

    async def measure(
        self, task_id: str, code: str, suite: FunctionalSuite, repeats: int
    ) -> Efficiency:
        """Runtime and memory of a passing solution and of the reference, measured alike."""
        key = self._reference_key(task_id, suite)
        if key not in self._reference_efficiency:
            self._reference_efficiency[key] = self._totals(
                await self._timed(suite.reference_code, suite, repeats)
            )
        ref_wall, ref_cpu, ref_peak, ref_calibration = self._reference_efficiency[key]
        wall, cpu, peak, calibration = self._totals(await self._timed(code, suite, repeats))
        return Efficiency(
            repeats=repeats,
            runtime_s=wall,
            cpu_s=cpu,
            peak_memory_bytes=peak,
            calibration_s=calibration,
            reference_runtime_s=ref_wall,
            reference_cpu_s=ref_cpu,
            reference_peak_memory_bytes=ref_peak,
            reference_calibration_s=ref_calibration,
            # CPU time (unlike wall time it does not grow while a loaded machine runs others), each
            # side in units of its own child's calibration work: the machine's speed drifts between
            # the two measurements
            runtime_ratio=calibrated(cpu, calibration) / calibrated(ref_cpu, ref_calibration)
            if ref_cpu > 0
            else float("nan"),
            memory_ratio=max(peak, MEMORY_FLOOR_BYTES) / max(ref_peak, MEMORY_FLOOR_BYTES),
        )

    # --- solutions -----------------------------------------------------------------------------------
    async def evaluate(
        self,
        task_id: str,
        sample_index: int,
        code: str,
        suite: FunctionalSuite,
        stop_on_failure: bool = True,
    ) -> ExecutionResult:
        """Run ``code`` on the hidden inputs and compare each output with the reference as it
        arrives; by default the child is stopped at the first failing test (as EvalPlus does);
        ``stop_on_failure=False`` runs every test, after wrong answers and errors too."""
        reference = await self.reference(task_id, suite)
        plan = [
            (name, i, args) for name in suite.inputs for i, args in enumerate(suite.inputs[name])
        ]
        limits = [time_limit(suite, reference.cpu_s[name][i]) for name, i, _ in plan]
        job = child_job(
            suite,
            code,
            [test_spec(suite, args, lim) for (_, _, args), lim in zip(plan, limits, strict=True)],
            load_cpu_limit=STARTUP_ALLOWANCE_S,
            stop_on_error=stop_on_failure,
        )
        deadline = min(MAX_TOTAL_TIME_S, WALL_SLACK_FACTOR * sum(limits)) + STARTUP_ALLOWANCE_S
        checked: dict[int, tuple[Any, bool]] = {}

        def keep_going(event: dict[str, Any]) -> bool:
            index = event.get("i")
            if event.get("event") != "test" or not isinstance(index, int) or index in checked:
                return True
            if not 0 <= index < len(plan) or event.get("status") != "ok":
                return True  # the child stops by itself after an error
            checked[index] = self._check(event, plan[index], reference, suite)
            return checked[index][1] or not stop_on_failure

        report = await self.run(job, deadline_s=deadline, keep_going=keep_going)
        return self._judge(task_id, sample_index, suite, plan, reference, report, checked)

    async def run_examples(self, code: str, examples: list[Example]) -> list[TestOutcome]:
        """Run a system's own code on visible examples (for debugging agents, not for scoring).

        Every example runs, so the feedback lists all that fail; details show what the code gave.
        """
        job = {
            "code": code,
            "tests": [{"expr": ex.expr, "cpu_limit": EXAMPLE_TIME_LIMIT_S} for ex in examples],
            "load_cpu_limit": STARTUP_ALLOWANCE_S,
            "stop_on_error": False,
        }
        deadline = WALL_SLACK_FACTOR * EXAMPLE_TIME_LIMIT_S * len(examples) + STARTUP_ALLOWANCE_S
        report = await self.run(job, deadline_s=deadline)
        load = report.first("load")
        if load is None or load.get("status") != "ok":
            if load is None:
                verdict, detail = death_verdict(report)
            else:
                verdict = _status_verdict(load["status"], load.get("error"))
                detail = load.get("error") or load["status"]
            return [
                TestOutcome(suite="examples", index=i, verdict=verdict, detail=detail)
                for i in range(len(examples))
            ]
        events = report.tests()
        outcomes = []
        for i, example in enumerate(examples):
            event = events.get(i)
            if event is None:
                verdict, detail = death_verdict(report)
            elif event.get("status") == "timeout":
                verdict, detail = Verdict.timeout, f"no result within {EXAMPLE_TIME_LIMIT_S} s"
            elif event.get("status") != "ok":
                verdict = _status_verdict(event.get("status", ""), event.get("error"))
                detail = event.get("error") or event.get("status")
            else:
                try:
                    output = reported_output(event)
                except Exception:
                    output = _Unreadable
                if outputs_match(output, example.expected, [], _EXAMPLES):
                    verdict, detail = Verdict.passed, None
                else:
                    verdict, detail = Verdict.wrong_answer, f"got {_short(output)}"
            outcomes.append(TestOutcome(suite="examples", index=i, verdict=verdict, detail=detail))
        return outcomes

    @staticmethod
    def _check(
        event: dict[str, Any],
        planned: tuple[str, int, Any],
        reference: Reference,
        suite: FunctionalSuite,
    ) -> tuple[Any, bool]:
        """The decoded output of a test event and whether it matches the reference's."""
        name, i, args = planned
        try:
            output = reported_output(event)
        except Exception:  # malformed report: treat as a wrong answer
            output = _Unreadable
        return output, outputs_match(output, reference.outputs[name][i], args, suite)

    def _judge(
        self,
        task_id: str,
        sample_index: int,
        suite: FunctionalSuite,
        plan: list[tuple[str, int, Any]],
        reference: Reference,
        report: ChildReport,
        checked: dict[int, tuple[Any, bool]],
    ) -> ExecutionResult:
        result = ExecutionResult(
            task_id=task_id,
            sample_index=sample_index,
            verdict=Verdict.passed,
            stdout=report.stdout,
            stderr=report.stderr,
            isolation=report.isolation,
            wall_s=report.wall_s,
        )
        load = report.first("load")
        if load is None or load.get("status") != "ok":
            if load is None:
                verdict, detail = death_verdict(report)
            else:
                verdict, detail = (
                    _status_verdict(load["status"], load.get("error")),
                    load.get("error") or load["status"],
                )
            result.verdict, result.first_failure = verdict, f"while loading: {detail}"
            result.suite_verdicts = {name: verdict for name in suite.inputs}
            return result

        events = report.tests()
        for index, (name, i, args) in enumerate(plan):
            event = events.get(index)
            if (
                event is None
            ):  # the child stopped: the test in progress gets the reason, the rest did not run
                if result.verdict is Verdict.passed:
                    verdict, detail = death_verdict(report)
                    result.tests.append(
                        TestOutcome(suite=name, index=i, verdict=verdict, detail=detail)
                    )
                    self._fail(result, name, verdict, f"{name} test {i}: {detail}")
                break
            outcome = TestOutcome(
                suite=name,
                index=i,
                verdict=Verdict.passed,
                wall_s=event.get("wall"),
                cpu_s=event.get("cpu"),
                peak_memory_bytes=int(event.get("peak_kb", 0)) * 1024,
            )
            if event.get("status") != "ok":
                outcome.verdict = _status_verdict(event.get("status", ""), event.get("error"))
                outcome.detail = event.get("error") or event.get("status")
            else:
                output, matched = checked.get(index) or self._check(
                    event, plan[index], reference, suite
                )
                if not matched:
                    outcome.verdict = Verdict.wrong_answer
                    outcome.detail = f"input {_short(args)}: got {_short(output)}, expected {_short(reference.outputs[name][i])}"
            result.tests.append(outcome)
            if outcome.verdict is not Verdict.passed:
                self._fail(result, name, outcome.verdict, f"{name} test {i}: {outcome.detail}")
        for name in suite.inputs:
            ran = [t for t in result.tests if t.suite == name]
            if name not in result.suite_verdicts:  # no failure seen: passed only if every test ran
                complete = len(ran) == len(suite.inputs[name])
                result.suite_verdicts[name] = Verdict.passed if complete else result.verdict
        result.runtime_s = sum(t.wall_s or 0.0 for t in result.tests)
        result.cpu_s = sum(t.cpu_s or 0.0 for t in result.tests)
        result.peak_memory_bytes = max((t.peak_memory_bytes or 0 for t in result.tests), default=0)
        return result

    @staticmethod
    def _fail(result: ExecutionResult, suite_name: str, verdict: Verdict, detail: str) -> None:
        if result.verdict is Verdict.passed:
            result.verdict, result.first_failure = verdict, detail
        result.suite_verdicts.setdefault(suite_name, verdict)


_Unreadable = object()
_EXAMPLES = FunctionalSuite(entry_point="", reference_code="", inputs={})


def _stored_output(event: dict[str, Any]) -> dict[str, Any]:
    """What the reference cache keeps of a test event: its output or its digest."""
    return {key: event[key] for key in ("output", "digest") if key in event}


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 120
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 8


def _short(value: Any, limit: int = 200) -> str:
    """A bounded, never-failing description of an input or output for failure messages."""
    try:
        text = _REPR.repr(value)
    except ValueError:  # e.g. an int beyond Python's digit limit for str()
        text = f"<{type(value).__name__} too large to print>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
