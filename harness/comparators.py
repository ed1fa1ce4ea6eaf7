"""Comparators: whether a program's output is acceptable, given the expected output.

A suite's comparator belongs to the benchmark that builds the suite (``FunctionalSuite.comparator``);
the sandbox only calls it. Comparators run in the harness on decoded plain data (see
``sandbox.codec``), so no object a program created ever takes part in a comparison.

The generic ones live here; a benchmark with its own rules (EvalPlus's special oracles, for
instance) subclasses :class:`Comparator` in its plugin.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np


class Comparator(ABC):
    """``comparator(output, expected, args) -> bool``; ``args`` are the test's decoded inputs."""

    name: ClassVar[str] = "comparator"
    # True when an output that == the expected one (Python equality) is always acceptable: the
    # harness then accepts a reported output identical to the reference's without decoding it
    accepts_equal: ClassVar[bool] = False
    # True when, for an expected string, only an equal string is acceptable: with accepts_equal,
    # the harness then has a long expected string's test answered by its digest
    # (``codec.LONG_STRING_CHARS``)
    exact_for_strings: ClassVar[bool] = False

    @abstractmethod
    def __call__(self, output: Any, expected: Any, args: list[Any]) -> bool:
        """Whether ``output`` is acceptable where ``expected`` is the expected output."""

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"

    def spec(self) -> dict[str, Any]:
        """The comparator as plain data: its name and its settings, which are its constructor's
        keyword arguments (``comparator_from_spec`` builds it again)."""
        return {"name": self.name, **vars(self)}


def holds_floats(value: Any) -> bool:
    """A float, or a non-empty list or tuple of floats (where EvalPlus compares with a tolerance)."""
    if isinstance(value, float):
        return True
    return (
        isinstance(value, (list, tuple))
        and bool(value)
        and all(isinstance(v, float) for v in value)
    )


class Exact(Comparator):
    """Python equality on plain data."""

    name = "exact"
    accepts_equal = exact_for_strings = True

    def __call__(self, output: Any, expected: Any, args: list[Any]) -> bool:
        return bool(output == expected)


class Close(Comparator):
    """Equal, or, where the expected value holds floats, close: numpy's ``allclose`` with
    ``rtol=1e-7`` and ``atol`` (at least 1e-6 for floats), same type and length (EvalPlus's rule)."""

    name = "close"
    accepts_equal = exact_for_strings = True

    def __init__(self, atol: float = 0.0):
        self.atol = atol

    def __call__(self, output: Any, expected: Any, args: list[Any]) -> bool:
        return close(output, expected, self.atol, bool(output == expected))


def close(output: Any, expected: Any, atol: float, exact: bool) -> bool:
    """EvalPlus's tolerance step after its exact (or special-oracle) verdict ``exact``."""
    if atol == 0 and holds_floats(expected):
        atol = 1e-6
    if exact or atol == 0:
        return exact
    if type(output) is not type(expected):
        return False
    if isinstance(expected, (list, tuple)) and len(output) != len(expected):
        return False
    try:
        return bool(np.allclose(output, expected, rtol=1e-07, atol=atol))
    except (TypeError, ValueError):
        return False


def _as_json(value: Any) -> Any:
    """Tuples as lists, recursively: how a JSON-stated expected output sees a program's output."""
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}
    return value


def _same_json(output: Any, expected: Any, tolerance: float) -> bool:
    if isinstance(expected, bool) or isinstance(output, bool):  # true is not 1 in JSON
        return type(output) is type(expected) and output == expected
    if isinstance(expected, float):
        if not isinstance(output, (int, float)):
            return False
        if not (math.isfinite(expected) and math.isfinite(output)):
            return output == expected
        return abs(output - expected) <= tolerance * max(1.0, abs(expected))
    if isinstance(expected, list):
        return (
            isinstance(output, list)
            and len(output) == len(expected)
            and all(_same_json(o, e, tolerance) for o, e in zip(output, expected, strict=True))
        )
    if isinstance(expected, dict):
        return (
            isinstance(output, dict)
            and output.keys() == expected.keys()
            and all(_same_json(output[k], v, tolerance) for k, v in expected.items())
        )
    return bool(output == expected)


class JsonEqual(Comparator):
    """Outputs stated as JSON (LeetCode style): tuples count as lists, integers compare exactly,
    an expected real number allows ``float_tolerance`` (absolute, or relative above 1)."""

    name = "json"

    def __init__(self, float_tolerance: float = 1e-6):
        self.float_tolerance = float_tolerance

    def __call__(self, output: Any, expected: Any, args: list[Any]) -> bool:
        return _same_json(_as_json(output), expected, self.float_tolerance)


class Unwrap(Comparator):
    """APPS's call-based tests store a result as ``[value]``: either form is accepted."""

    name = "unwrap"
    accepts_equal = exact_for_strings = True

    def __call__(self, output: Any, expected: Any, args: list[Any]) -> bool:
        output, expected = _as_json(output), _as_json(expected)
        if output == expected:
            return True
        return isinstance(expected, list) and len(expected) == 1 and output == expected[0]


_INTEGER = re.compile(r"[+-]?\d+")
_REAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def _same_token(got: str, want: str, tolerance: float) -> bool:
    """One output token against the expected one, as a contest checker compares numbers: an
    expected integer needs the same integer; an expected real number allows ``tolerance``
    (absolute, or relative above 1); anything else must be the same text."""
    if _INTEGER.fullmatch(want):
        return _INTEGER.fullmatch(got) is not None and int(got) == int(want)
    if not _REAL.fullmatch(want) or not _REAL.fullmatch(got):
        return False
    x, y = float(got), float(want)
    if not (math.isfinite(x) and math.isfinite(y)):
        return False
    return abs(x - y) <= tolerance * max(1.0, abs(y))


class Tokens(Comparator):
    """A whole program's output against the expected text, as contest checkers judge it:
    whitespace-separated tokens (line breaks and trailing blanks do not matter), integers exact,
    real numbers within ``float_tolerance`` where the expected token is one, other tokens as
    text (``case_sensitive=False`` for graders that ignore case, e.g. CodeContests')."""

    name = "tokens"

    def __init__(self, float_tolerance: float = 1e-6, case_sensitive: bool = True):
        self.float_tolerance = float_tolerance
        self.case_sensitive = case_sensitive

    def __call__(self, output: Any, expected: Any, args: list[Any]) -> bool:
        if not isinstance(output, str) or not isinstance(expected, str):
            return False
        if output == expected:
            return True
        got, want = output.split(), expected.split()
        if len(got) != len(want):
            return False
        if not self.case_sensitive:
            got, want = [g.lower() for g in got], [w.lower() for w in want]
        return got == want or all(
            g == w or _same_token(g, w, self.float_tolerance)
            for g, w in zip(got, want, strict=True)
        )


BUILT_IN: dict[str, type[Comparator]] = {
    c.name: c for c in (Exact, Close, JsonEqual, Unwrap, Tokens)
}


def comparator_named(name: str) -> Comparator:
    """A built-in comparator with its default settings, by name (suites may name one)."""
    return comparator_from_spec(name)


def comparator_from_spec(
    spec: str | dict[str, Any], known: Mapping[str, type[Comparator]] = BUILT_IN
) -> Comparator:
    """A comparator from its name, or from ``Comparator.spec()``'s data, among ``known`` ones
    (by default the built-in ones; benchmarks add theirs through ``Benchmark.comparators``)."""
    from .errors import CorebenchError, UnknownNameError

    settings = {"name": spec} if isinstance(spec, str) else dict(spec)
    name = settings.pop("name", None)
    if not isinstance(name, str) or name not in known:
        raise UnknownNameError("comparator", str(name), known)
    try:
        return known[name](**settings)
    except TypeError as exc:
        raise CorebenchError(f"comparator {name!r}: bad settings {settings}: {exc}") from None
