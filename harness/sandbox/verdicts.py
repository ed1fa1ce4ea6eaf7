"""Verdicts: a judging run's events, its ending and the suite's comparator, turned into an
:class:`ExecutionResult`. Pure functions of data the harness holds; nothing runs here."""

from __future__ import annotations

import re
import reprlib
from typing import Any

from ..records import ExecutionResult, TestOutcome, Verdict
from .codec import Digest, encode_text, equal_texts, reported_output
from .judging import Judged
from .oracle import Expected
from .protocol import IDENTICAL
from .supervisor import Ending, Stopped

# Errors that only a program reaching past the sandbox gets: writing outside its folder,
# read-only system folders, signals to processes it does not own, the network.
_VIOLATION = re.compile(
    r"^(PermissionError|ConnectionRefusedError|gaierror)\b"
    r"|\[Errno (1|13|30|101)\] (Operation not permitted|Permission denied|Read-only file system"
    r"|Network is unreachable)"
)
_STATUS = {
    "timeout": Verdict.timeout,
    "memory": Verdict.memory_exceeded,
    "syntax_error": Verdict.syntax_error,
}


def status_verdict(status: str, error: str | None = None) -> Verdict:
    """The verdict for a reported status (and error text: a blocked escape is a violation)."""
    if status == "error" and error and _VIOLATION.search(error):
        return Verdict.sandbox_violation
    return _STATUS.get(status, Verdict.runtime_error)


def stop_verdict(stop: Stopped, ending: Ending) -> tuple[Verdict, str]:
    """Why the harness stopped a child, or why it ended before its next report."""
    if stop.kind in ("cpu", "wall"):
        used = f" after {stop.cpu_s:.2f} s of CPU" if stop.cpu_s is not None else ""
        return Verdict.timeout, f"{stop.detail}{used}"
    if stop.kind == "violation":
        return Verdict.sandbox_violation, f"report channel: {stop.detail}"
    return death_verdict(ending)


def death_verdict(ending: Ending) -> tuple[Verdict, str]:
    """Why a child ended before it finished its tests."""
    sig = ending.signal_name
    if sig == "SIGXCPU" or (sig == "SIGKILL" and "CPU" in ending.stderr):
        return Verdict.timeout, f"CPU-time limit exceeded ({sig})"
    if "MemoryError" in ending.stderr:
        return Verdict.memory_exceeded, "MemoryError"
    if sig:
        return Verdict.runtime_error, f"crashed ({sig})"
    return Verdict.runtime_error, f"exited (code {ending.returncode}) before finishing its tests"


def decoded(event: dict[str, Any]) -> Any:
    """A test event's output as plain data; Stopped (a violation) if it cannot be decoded."""
    try:
        return reported_output(event)
    except Exception as exc:  # forged: a well-formed line whose output is not our encoding
        raise Stopped("violation", f"an undecodable output ({type(exc).__name__})") from None


class Verdicts:
    """Builds one ExecutionResult; ``checked`` holds comparisons made while the run went on."""

    def __init__(
        self,
        plan: list[tuple[str, int, Any]],
        expected: Expected | dict[str, list[Any]],
        comparator: Any,
    ):
        self.plan = plan  # (suite name, index in suite, decoded input) per test, in run order
        self.expected = expected if isinstance(expected, Expected) else Expected(expected)
        self.comparator = comparator
        self.checked: dict[int, tuple[Any, bool]] = {}

    def check(self, index: int, event: dict[str, Any]) -> tuple[Any, bool]:
        """(output, acceptable) for a test event with status ok, compared once per test."""
        if index not in self.checked:
            self.checked[index] = self.compare(index, event)
        return self.checked[index]

    def compare(self, index: int, event: dict[str, Any]) -> tuple[Any, bool]:
        """(output, acceptable) for an event with status ok that answers test ``index``."""
        if event is IDENTICAL:  # its line was the expected output's (``identical_lines``)
            return None, True
        name, i, args = self.plan[index]
        if self._identical(name, i, event):  # no decoding: the same text or digest as expected
            return event.get("output") or reported_output(event), True
        output = decoded(event)
        if isinstance(output, Digest) and self.expected.long_string(name, i):
            return output, False  # the digest of another text than the expected string's
        expected = self.expected[name][i]
        if isinstance(output, Digest) != isinstance(expected, Digest):
            # one of them too large to send (or long rows, digested whatever their size): the
            # other must have the same digest, as an output that large must match exactly
            digest, value = (output, expected) if isinstance(output, Digest) else (expected, output)
            try:
                return output, encode_text(value)[1] == digest.hex
            except Exception:  # a value the codec cannot encode: not this digest's
                return output, False
        try:
            return output, bool(self.comparator(output, expected, args))
        except Exception:  # a comparator meeting mismatched plain data
            return output, False

    def _identical(self, name: str, index: int, event: dict[str, Any]) -> bool:
        """The output is the reference's, byte for byte, or has its digest (a comparator that
        accepts equal values then accepts it, even one that cannot compare digests: nothing to
        decode)."""
        if not getattr(self.comparator, "accepts_equal", False):
            return False
        if "digest" in event:  # never reads a long string's text (``Expected.digest``)
            return event["digest"] == self.expected.digest(name, index)
        stored = self.expected.stored_output(name, index)
        if stored is None:
            return False
        return "output" in event and equal_texts(event["output"], stored.get("output", b""))

    def identical_lines(self) -> list[bytes | None]:
        """For ``run_judging``: per test, the report line that passes it as it is (an output
        whose text is the expected one's, see ``_identical``), or None; empty when the
        comparator does not accept equal outputs or the dataset states the expected ones."""
        stored = self.expected.stored
        if not getattr(self.comparator, "accepts_equal", False) or stored is None:
            return []
        if [(name, i) for name, i, _ in self.plan] != self.expected.order():
            return []  # not the order the reference ran in (never so for a suite's own plan)
        return self.expected.identical_lines()

    def keep_going(self, stop_on_failure: bool):
        """The judging run's callback: compare each output as it arrives."""

        def keep(index: int, event: dict[str, Any]) -> bool:
            if event["status"] != "ok" or not 0 <= index < len(self.plan):
                return True  # the child stops by itself after an error
            return self.check(index, event)[1] or not stop_on_failure

        return keep

    def result(self, task_id: str, sample_index: int, judged: Judged) -> ExecutionResult:
        suites = list(dict.fromkeys(name for name, _, _ in self.plan))
        result = ExecutionResult(
            task_id=task_id,
            sample_index=sample_index,
            verdict=Verdict.passed,
            stdout=judged.ending.stdout,
            stderr=judged.ending.stderr,
            isolation=judged.isolation,
            wall_s=judged.ending.wall_s,
        )
        load = judged.load
        if load is None or load["status"] != "ok":
            if load is None:
                verdict, detail = self._interrupted(judged)
            else:
                verdict = status_verdict(load["status"], load.get("error"))
                detail = load.get("error") or load["status"]
            result.verdict, result.first_failure = verdict, f"while loading: {detail}"
            result.suite_verdicts = dict.fromkeys(suites, verdict)
            return result
        for index, (name, i, args) in enumerate(self.plan):
            if index >= len(
                judged.tests
            ):  # the test in progress gets the reason; the rest never ran
                if result.verdict is Verdict.passed and not judged.stopped_early:
                    verdict, detail = self._interrupted(judged)
                    result.tests.append(
                        TestOutcome(suite=name, index=i, verdict=verdict, detail=detail)
                    )
                    _fail(result, name, verdict, f"{name} test {i}: {detail}")
                break
            event = judged.tests[index]
            outcome = TestOutcome(suite=name, index=i, verdict=Verdict.passed)
            if event is IDENTICAL:  # passed on arrival (``identical_lines``): nothing to check
                result.tests.append(outcome)
                continue
            if judged.trusted:
                outcome.cpu_s, outcome.wall_s = event.get("cpu"), event.get("wall")
                outcome.peak_memory_bytes = 1024 * event["peak_kb"] if "peak_kb" in event else None
            if event["status"] != "ok":
                outcome.verdict = status_verdict(event["status"], event.get("error"))
                outcome.detail = event.get("error") or event["status"]
            else:
                try:
                    output, ok = self.check(index, event)
                except Stopped as stop:
                    outcome.verdict, outcome.detail = stop_verdict(stop, judged.ending)
                else:
                    if not ok:
                        expected = self.expected[name][i]
                        given = f"input {short(args)}: " if args else ""
                        outcome.verdict = Verdict.wrong_answer
                        outcome.detail = f"{given}got {short(output)}, expected {short(expected)}"
            result.tests.append(outcome)
            if outcome.verdict is not Verdict.passed:
                _fail(result, name, outcome.verdict, f"{name} test {i}: {outcome.detail}")
        for name in suites:
            if name not in result.suite_verdicts:  # no failure seen: passed only if every test ran
                planned = sum(1 for n, _, _ in self.plan if n == name)
                ran = sum(1 for t in result.tests if t.suite == name)
                result.suite_verdicts[name] = Verdict.passed if ran == planned else result.verdict
        if judged.stop is not None and judged.stop.kind == "violation" and result.passed:
            verdict, detail = stop_verdict(judged.stop, judged.ending)  # after its last test
            result.verdict, result.first_failure = verdict, detail
        result.cpu_s, result.runtime_s = judged.cpu_s, judged.wall_s
        result.peak_memory_bytes = None if judged.peak_kb is None else 1024 * judged.peak_kb
        return result

    @staticmethod
    def _interrupted(judged: Judged) -> tuple[Verdict, str]:
        if judged.stop is not None:
            return stop_verdict(judged.stop, judged.ending)
        return death_verdict(judged.ending)


def _fail(result: ExecutionResult, suite_name: str, verdict: Verdict, detail: str) -> None:
    if result.verdict is Verdict.passed:
        result.verdict, result.first_failure = verdict, detail
    result.suite_verdicts.setdefault(suite_name, verdict)


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 120
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 8


def short(value: Any, limit: int = 200) -> str:
    """A bounded, never-failing description of an input or output for failure messages."""
    try:
        text = _REPR.repr(value)
    except Exception:  # e.g. an int beyond Python's digit limit for str()
        text = f"<{type(value).__name__} too large to print>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
