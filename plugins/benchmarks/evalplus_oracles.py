"""How EvalPlus judges HumanEval+ and MBPP+ outputs: exact equality, a float tolerance, and a few
per-task oracles where the reference output is not the only right answer. Written for corebench
from EvalPlus 0.3.1's documented behaviour; owned by this plugin, not by the sandbox."""

from __future__ import annotations

import math
from typing import Any

from corebench.harness.comparators import Comparator, close

# MBPP+ tasks (by entry point) whose output is a collection in any order.
SET_EQUAL_TASKS = frozenset(
    {
        "similar_elements",  # Mbpp/2
        "find_char_long",  # Mbpp/7
        "common_in_nested_lists",  # Mbpp/111
        "extract_singly",  # Mbpp/140
        "larg_nnum",  # Mbpp/232
        "intersection_array",  # Mbpp/249
        "find_dissimilar",  # Mbpp/579
        "Diff",  # Mbpp/769
    }
)
# MBPP+ tasks whose reference returns a match object or None: only "found or not" is compared.
NOT_NONE_TASKS = frozenset({"check_str", "text_match_three", "text_starta_endb"})
# MBPP+ tasks with an oracle of their own (``_mbpp_oracle``): not plain equality
MBPP_ORACLE_TASKS = SET_EQUAL_TASKS | NOT_NONE_TASKS | {
    "are_equivalent", "sum_div", "surface_Area", "digit_distance_nums",
}  # fmt: skip


def pyramid_surface(base_edge: float, height: float) -> int:
    """Mbpp/581: a square pyramid's total surface, height taken as the apex's distance from the
    base, rounded (the task's text allows this reading besides the reference's)."""
    slant = math.sqrt((base_edge / 2) ** 2 + height**2)
    return round(base_edge**2 + 2 * base_edge * slant)


def digit_distance(a: int, b: int) -> int:
    """Mbpp/558: the sum of per-digit differences, the shorter number padded with zeros."""
    x, y = str(a), str(b)
    width = max(len(x), len(y))
    return sum(abs(int(p) - int(q)) for p, q in zip(x.zfill(width), y.zfill(width), strict=True))


def polynomial(coefficients: list[float], x: float) -> float:
    """HumanEval/32: the polynomial with these coefficients (lowest degree first) at ``x``."""
    return sum(c * math.pow(x, i) for i, c in enumerate(coefficients))


class EvalPlusComparator(Comparator):
    """EvalPlus's judgement of one output: the task's special oracle where it has one, then
    exact equality with a float tolerance (``atol``, at least 1e-6 when floats are expected)."""

    name = "evalplus"

    def __init__(self, dataset: str, entry_point: str, atol: float = 0.0):
        self.dataset, self.entry_point, self.atol = dataset, entry_point, atol

    @property
    def accepts_equal(self) -> bool:  # type: ignore[override]
        """Equal is acceptable except for HumanEval/32, where only a root is (checked anew)."""
        return not (self.dataset == "humaneval" and self.entry_point == "find_zero")

    @property
    def exact_for_strings(self) -> bool:  # type: ignore[override]
        """An expected string takes an equal string, except where a task has its own oracle
        (the tolerance needs floats: a string is never close to another)."""
        if self.dataset == "mbpp":
            return self.entry_point not in MBPP_ORACLE_TASKS
        return self.accepts_equal

    def __call__(self, output: Any, expected: Any, args: list[Any]) -> bool:
        try:
            if self.dataset == "humaneval" and self.entry_point == "find_zero":
                return abs(polynomial(*args, output)) <= self.atol  # any root will do
            exact = bool(output == expected)
            if self.dataset == "mbpp":
                exact = self._mbpp_oracle(output, expected, args, exact)
            return close(output, expected, self.atol, exact)
        except Exception:  # mismatched plain data (e.g. arithmetic on a string)
            return False

    def _mbpp_oracle(self, output: Any, expected: Any, args: list[Any], exact: bool) -> bool:
        entry = self.entry_point
        if entry not in MBPP_ORACLE_TASKS:  # plain equality (``exact_for_strings`` trusts this)
            return exact
        if entry == "are_equivalent":  # Mbpp/164: the reference itself is ambiguous
            return True
        if entry == "sum_div":  # Mbpp/295
            return exact or output == 0
        if entry == "surface_Area":  # Mbpp/581
            return exact or abs(output - pyramid_surface(*args)) <= self.atol
        if entry == "digit_distance_nums":  # Mbpp/558
            return exact or output == digit_distance(*args)
        if entry in SET_EQUAL_TASKS:
            return set(output) == set(expected)
        if entry in NOT_NONE_TASKS:
            found = expected is not None
            return output == found if isinstance(output, bool) else found == (output is not None)
        return exact
