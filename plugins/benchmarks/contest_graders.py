"""The contest benchmarks' official output checks, as comparators their benchmarks own.

Each one follows its grader as published, rule for rule (read from the graders themselves, not
from their papers); what corebench runs differently around the check (time limits, how a
program is started) is in ``docs/benchmarks.md``:

- LiveCodeBench, ``lcb_runner/evaluation/testing_util.py`` (also ``livecodebench.evaluation.
  testing_util`` in PyPI's ``nvidia-livecodebench``): standard output and expected output are
  stripped, split at ``\\n`` and each line stripped; the line counts must agree and each line must
  be the same text, or the same list of ``Decimal`` numbers (so ``1.0`` is ``1``, ``1e3`` is
  ``1000``, and ``0.3333333`` is not ``0.333333333``). Functional (LeetCode) tests: a returned
  tuple becomes a list, then Python's ``==``.
- APPS, ``hendrycks/apps`` ``eval/testing_util.py``: a cascade of looser and looser checks on
  the output's lines (the whole text stripped; lines stripped; blank lines dropped; one float
  per line with numpy's ``allclose``; each line as a set of tokens, the lines as a set of those
  sets, also with every token rounded to 3 decimals). Call-based tests: ``==`` after a tuple
  becomes a list, also against the first element of an expected list.
- CodeContests, ``google-deepmind/code_contests`` ``execution/tester_sandboxer.cc``
  (``OutputsMatch``): tokens split at ASCII blanks, lower-cased; equal token lists match, else
  each pair of tokens must be two numbers less than 1e-5 apart (absolutely, integers included:
  they are compared as doubles) or the same text.

Every comparator here is total: it never raises on odd data (a program's output is untrusted).
"""

from __future__ import annotations

import math
import re
import string
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

from corebench.harness.comparators import Comparator

# --- LiveCodeBench -----------------------------------------------------------------------------


def lcb_lines(text: str) -> list[str]:
    """LiveCodeBench's view of an output: stripped, split at newlines, each line stripped."""
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(token) for token in line.split()]
    except (InvalidOperation, ValueError):
        return None


def lcb_line_matches(got: str, want: str) -> bool:
    """One stripped output line against the expected one: the same text, or the same numbers."""
    if got == want:
        return True
    numbers, expected = _decimals(got), _decimals(want)
    if numbers is None or expected is None:
        return False
    try:
        return numbers == expected
    except InvalidOperation:  # a signalling NaN: LiveCodeBench's check raises, a failed test
        return False


class LiveCodeBenchOutput(Comparator):
    """LiveCodeBench's standard-input check: line by line, each line as text or as Decimals."""

    name = "livecodebench-stdio"

    def __call__(self, output: Any, expected: Any, args: list[Any]) -> bool:
        if not isinstance(output, str) or not isinstance(expected, str):
            return False
        got, want = lcb_lines(output), lcb_lines(expected)
        return len(got) == len(want) and all(map(lcb_line_matches, got, want))


class LiveCodeBenchCall(Comparator):
    """LiveCodeBench's functional check: a returned tuple as a list, then Python's ``==``
    (no tolerance: ``0.1 + 0.2`` is not ``0.3``; ``True == 1`` and ``1.0 == 1``, as in Python)."""

    name = "livecodebench-call"
    accepts_equal = exact_for_strings = True

    def __call__(self, output: Any, expected: Any, args: list[Any]) -> bool:
        if isinstance(output, tuple):
            output = list(output)
        return bool(output == expected)


# --- APPS --------------------------------------------------------------------------------------


def _floats(lines: list[str]) -> list[float] | None:
    try:
        return [float(line) for line in lines]
    except (TypeError, ValueError):
        return None


def _rounded(sets: list[set[str]]) -> set[frozenset[float]] | None:
    try:
        return {frozenset(round(float(t), 3) for t in s) for s in sets}
    except (TypeError, ValueError, OverflowError):
        return None


def apps_output_matches(output: str, expected: str) -> bool:
    """APPS's standard-input check on a program's whole output (what ``print`` wrote)."""
    lines = output.splitlines()  # APPS captures stdout and keeps ``splitlines()``
    want = expected.strip()
    if "\n".join(lines).strip() == want:
        return True
    if "\n".join(line.strip() for line in lines).strip() == want:
        return True
    if lines == [expected]:
        return True
    # the expected text as non-empty lines, each stripped (a line of blanks becomes "")
    want_lines = [line.strip() for line in expected.split("\n") if line]
    if lines == want_lines:
        return True
    lines = [line for line in lines if line]
    if lines == want_lines:
        return True
    numbers, want_numbers = _floats(lines), _floats(want_lines)
    if (
        numbers is not None
        and want_numbers is not None
        and len(numbers) == len(want_numbers)
        and bool(np.allclose(numbers, want_numbers))
    ):
        return True
    want_sets = [set(line.split()) for line in want_lines]
    if not lines and not want_sets:  # APPS compares the line list with the sets' list here
        return True
    got_sets = [set(tokens) for tokens in (line.split() for line in lines) if tokens]
    if {frozenset(s) for s in got_sets} == {frozenset(s) for s in want_sets}:
        return True
    rounded, want_rounded = _rounded(got_sets), _rounded(want_sets)
    return rounded is not None and rounded == want_rounded


class AppsOutput(Comparator):
    """APPS's standard-input check (``apps_output_matches``)."""

    name = "apps-stdio"

    def __call__(self, output: Any, expected: Any, args: list[Any]) -> bool:
        if not isinstance(output, str) or not isinstance(expected, str):
            return False
        return apps_output_matches(output, expected)


class AppsCall(Comparator):
    """APPS's call-based check: a returned tuple as a list; equal to the expected value, or to
    the first element of an expected list (APPS stores many results as ``[value]``), or, for a
    list of tuples, equal as a list of lists to that first element."""

    name = "apps-call"
    accepts_equal = exact_for_strings = True

    def __call__(self, output: Any, expected: Any, args: list[Any]) -> bool:
        if isinstance(output, tuple):
            output = list(output)
        if output == expected:
            return True
        if isinstance(expected, list) and expected and output == expected[0]:
            return True
        try:  # APPS tries this on anything indexable, and ignores what fails
            return bool(isinstance(output[0], tuple) and [list(x) for x in output] == expected[0])
        except Exception:  # noqa: BLE001
            return False


def apps_int_keys(value: Any) -> dict[int, Any] | None:
    """A dict stated in JSON with its keys as integers, as APPS's grader converts one (None when
    a key is not an integer: APPS then leaves it as it is)."""
    try:
        return {int(k): v for k, v in value.items()}
    except (ValueError, TypeError, AttributeError):
        return None


# --- CodeContests ------------------------------------------------------------------------------

_BLANKS = re.compile(r"[ \n\t\r\v]")  # absl::ByAnyChar(" \n\t\r\v"): not \f
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
# absl::SimpleAtod: one optional sign, then what std::from_chars reads in its general format
_DOUBLE = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan(?:\([0-9A-Za-z_]*\))?)",
    re.IGNORECASE | re.ASCII,
)


def absl_double(token: str) -> float | None:
    """``token`` as absl's SimpleAtod reads it (None: not a number): ASCII blanks around it
    stripped (a form feed, which does not split tokens, included)."""
    token = token.strip(" \t\n\v\f\r")
    if not _DOUBLE.fullmatch(token):
        return None
    if "nan" in token.lower():
        return math.nan
    return float(token)


def codecontests_token_matches(got: str, want: str) -> bool:
    """``ValuesMatch``: two numbers within 1e-5 (absolutely), or the same text."""
    x, y = absl_double(got), absl_double(want)
    if x is None or y is None:
        return got == want
    return abs(x - y) < 1e-5


class CodeContestsOutput(Comparator):
    """CodeContests' ``OutputsMatch``: lower-cased tokens, numbers within 1e-5."""

    name = "codecontests-stdio"

    def __call__(self, output: Any, expected: Any, args: list[Any]) -> bool:
        if not isinstance(output, str) or not isinstance(expected, str):
            return False
        got = [t.translate(_ASCII_LOWER) for t in _BLANKS.split(output) if t]
        want = [t.translate(_ASCII_LOWER) for t in _BLANKS.split(expected) if t]
        if got == want:
            return True
        return len(got) == len(want) and all(map(codecontests_token_matches, got, want))


GRADERS: tuple[type[Comparator], ...] = (
    LiveCodeBenchOutput,
    LiveCodeBenchCall,
    AppsOutput,
    AppsCall,
    CodeContestsOutput,
)
