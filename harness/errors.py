"""Errors a user sees as one clear line."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class CorebenchError(Exception):
    """An error caused by input or environment, reported as one line without a traceback."""


class MeasurementRefused(CorebenchError):
    """A passing program's measurement refused for what the program did while timed (a wrong
    answer, a failure, a changed file, a forged report): its verdict stays, and the refusal is
    stored (retrying would meet the same program). Other measurement errors (the machine, the
    reference) are plain CorebenchErrors: not stored, tried again on resume."""


class UnknownNameError(CorebenchError, KeyError):
    """A benchmark, system or backend name that no plugin registered."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        known = sorted(known)
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        super().__init__(f"unknown {kind} {name!r}.{hint} Known: {', '.join(known) or 'none'}.")

    def __str__(self) -> str:  # KeyError would add quotes
        return str(self.args[0])


class DatasetMissingError(CorebenchError):
    """A benchmark's data file is neither local nor downloadable."""
