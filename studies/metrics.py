"""What the papers report per solution, besides pass/fail: the share of tests passed, the kind of
failure (the exception type where there is one), and the code's cyclomatic complexity and
maintainability index (radon)."""

from __future__ import annotations

import re
import warnings

from corebench.harness.records import ExecutionResult, Verdict

# an exception type as Python prints it: "ValueError: ...", "json.decoder.JSONDecodeError"
EXCEPTION = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Exit|Interrupt))\b")


def failure_kind(result: ExecutionResult) -> str | None:
    """None when it passed; the exception type for a runtime error (``ValueError``,
    ``IndexError``, ...); otherwise the verdict (``timeout``, ``wrong_answer``, ...)."""
    if result.passed:
        return None
    if result.verdict is Verdict.runtime_error:
        failing = [t.detail for t in result.tests if t.verdict is Verdict.runtime_error]
        for text in [*failing, result.first_failure]:
            match = EXCEPTION.search(text or "")
            if match:
                return match.group(1)
    return result.verdict.value


def test_pass_rate(result: ExecutionResult, planned: int) -> float:
    """Passed tests over the task's tests (a test that never ran counts as failed)."""
    if planned <= 0:
        return float(result.passed)
    passed = sum(1 for t in result.tests if t.verdict is Verdict.passed)
    return min(passed, planned) / planned


def complexity(code: str) -> tuple[float | None, float | None]:
    """(mean cyclomatic complexity of the functions and methods, maintainability index 0-100);
    None for code radon cannot parse."""
    from radon.complexity import cc_visit
    from radon.metrics import mi_visit

    if not code.strip():
        return None, None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            blocks = cc_visit(code)
            mi = float(mi_visit(code, multi=True))
    except (SyntaxError, ValueError, RecursionError):
        return None, None
    functions = [b.complexity for b in blocks if b.letter in ("F", "M")] or [
        b.complexity for b in blocks
    ]
    cc = sum(functions) / len(functions) if functions else 1.0
    return float(cc), mi
