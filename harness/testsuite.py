"""Hidden tests. A benchmark hands these to the sandbox only; systems never see them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Comparator = Literal["exact", "evalplus-mbpp", "evalplus-humaneval"]


@dataclass
class FunctionalSuite:
    """Differential tests: call ``entry_point`` on each input and compare with the reference.

    ``inputs`` maps a suite name ("base", "plus") to argument tuples. Expected outputs are
    computed by running ``reference_code`` in the sandbox (and cached); the comparison happens
    in the harness on plain data, so a solution cannot influence it.
    """

    entry_point: str
    reference_code: str
    inputs: dict[str, list[list[Any]]]
    atol: float = 0.0
    comparator: Comparator = "exact"
    output_not_none: bool = False  # EvalPlus: the reference output is only checked for not-None
    fingerprint: str = ""  # identifies the dataset version, for the reference-output cache
    extra: dict[str, Any] = field(default_factory=dict)
