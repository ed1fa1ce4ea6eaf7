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


def outputs_match(out: Any, exp: Any, args: list[Any], suite: FunctionalSuite) -> bool:
    """Whether a solution's output ``out`` on ``args`` is acceptable given the reference's ``exp``."""
    if isinstance(out, Digest) or isinstance(exp, Digest):  # outputs too large to report: exact
        return out == exp
    try:
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
