"""Output comparison for differential tests, with EvalPlus's semantics and special oracles.

Runs in the harness on decoded plain data (see ``child.decode``): no object a solution created
ever takes part, so overriding ``__eq__`` or similar tricks cannot make a test pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from evalplus.eval import is_floats
from evalplus.eval._special_oracle import (
    MBPP_OUTPUT_NOT_NONE_TASKS,
    MBPP_OUTPUT_SET_EQ_TASKS,
    _digit_distance_nums,
    _poly,
    _surface_Area,
)

from ..config import STDIO_FLOAT_TOLERANCE
from ..testsuite import FunctionalSuite
from .child import Digest

__all__ = ["MBPP_OUTPUT_NOT_NONE_TASKS", "outputs_match"]


def _mbpp_special(out: Any, exp: Any, args: list[Any], suite: FunctionalSuite, exact: bool) -> bool:
    entry = suite.entry_point
    if entry == "are_equivalent":  # Mbpp/164: the reference itself is ambiguous
        return True
    if entry == "sum_div":  # Mbpp/295
        return exact or out == 0
    if entry == "surface_Area":  # Mbpp/581
        return exact or abs(out - _surface_Area(*args)) <= suite.atol
    if entry == "digit_distance_nums":  # Mbpp/558
        return exact or out == _digit_distance_nums(*args)
    if entry in MBPP_OUTPUT_SET_EQ_TASKS:
        return set(out) == set(exp)
    if entry in MBPP_OUTPUT_NOT_NONE_TASKS:
        return out == exp if isinstance(out, bool) else exp == (out is not None)
    return exact


def _as_json(value: Any) -> Any:
    """Tuples as lists, recursively: how JSON-stated expected outputs compare."""
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}
    return value


def _same_number(a: str, b: str) -> bool:
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return abs(x - y) <= STDIO_FLOAT_TOLERANCE * max(1.0, abs(y))


def stdio_match(out: Any, exp: Any) -> bool:
    """Program output against expected output, as contest checkers judge it: trailing spaces and
    blank lines ignored, then whitespace-separated tokens compared, numbers within a tolerance."""
    if not isinstance(out, str) or not isinstance(exp, str):
        return False
    if out == exp:
        return True
    lines = [[line.rstrip() for line in text.rstrip().splitlines()] for text in (out, exp)]
    if lines[0] == lines[1]:
        return True
    got, want = out.split(), exp.split()
    return len(got) == len(want) and all(
        g == w or _same_number(g, w) for g, w in zip(got, want, strict=True)
    )


def outputs_match(out: Any, exp: Any, args: list[Any], suite: FunctionalSuite) -> bool:
    """Whether a solution's output ``out`` on ``args`` is acceptable given the reference's ``exp``."""
    if isinstance(out, Digest) or isinstance(exp, Digest):  # outputs too large to report: exact
        return out == exp
    try:
        if suite.comparator == "stdio":
            return stdio_match(out, exp)
        if suite.comparator == "json":  # outputs stated as JSON: tuples and lists alike
            return _as_json(out) == _as_json(exp)
        if suite.comparator == "unwrap":  # APPS call-based tests: [result] or result
            out, exp = _as_json(out), _as_json(exp)
            return out == exp or (isinstance(exp, list) and len(exp) == 1 and out == exp[0])
        if suite.comparator == "evalplus-humaneval" and suite.entry_point == "find_zero":
            return abs(_poly(*args, out)) <= suite.atol  # HumanEval/32: any root will do
        exact = bool(out == exp)
        if suite.comparator == "evalplus-mbpp":
            exact = _mbpp_special(out, exp, args, suite, exact)
        atol = suite.atol
        if atol == 0 and is_floats(exp):
            atol = 1e-6
        if exact or atol == 0:
            return exact
        if type(out) is not type(exp):
            return False
        if isinstance(exp, (list, tuple)) and len(out) != len(exp):
            return False
        return bool(np.allclose(out, exp, rtol=1e-07, atol=atol))
    except Exception:  # comparisons on mismatched plain data (e.g. allclose on strings)
        return False
