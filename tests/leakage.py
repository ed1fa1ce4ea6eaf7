"""Finding hidden tests in the text a model is shown, by value, whatever the formatting.

Every call of a task's entry point written in a text, and every literal written after the
word "input" (as the harness describes a failing test), is parsed (``ast``) and its arguments
compared, as normalised values, with every hidden test's: spacing, quotes, a trailing comma,
`(1, 2)` against `[1, 2]`, `1.0` against `1` make no difference. Stdin tests are compared as
their whitespace-separated tokens (those of at least 8 tokens: a short stdin such as "3" is in
every text). A hidden test found in a prompt is a leak unless the task's own prompt shows it.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from corebench.harness import FunctionalSuite

LONGEST_CALL = 20_000  # characters a call written in a prompt may span


def normalised(value: Any) -> str:
    """A value as comparable text: sequences as lists, sets and dicts in a fixed order, numbers
    as floats (so 1 == 1.0 == 1+0j), booleans apart from numbers."""

    def plain(v: Any) -> Any:
        if isinstance(v, bool) or v is None:
            return {"$": repr(v)}
        if isinstance(v, complex) and v.imag == 0:
            v = v.real  # 1 == 1+0j, as Python compares them
        if isinstance(v, (int, float)):
            return round(float(v), 9) if abs(v) < 1e15 else repr(v)
        if isinstance(v, complex):
            return {"$complex": [plain(v.real), plain(v.imag)]}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, (set, frozenset)):
            return {"$set": sorted(json.dumps(plain(x), sort_keys=True) for x in v)}
        if isinstance(v, dict):
            return {"$dict": sorted(json.dumps([plain(k), plain(x)]) for k, x in v.items())}
        return v if isinstance(v, str) else repr(v)

    return json.dumps(plain(value), sort_keys=True)


def calls_in(text: str, name: str) -> set[str]:
    """The normalised argument lists of every call of ``name`` in ``text`` whose arguments are
    literals (``f(1, [2, 3])``, ``obj.f(...)`` and ``f (1)`` alike)."""
    return set(written_calls(text, name))


def written_calls(text: str, name: str) -> dict[str, list[Any]]:
    """Like :func:`calls_in`, each normalised argument list with the arguments as written."""
    name = name.rpartition(".")[2]
    found: dict[str, list[Any]] = {}
    for match in re.finditer(rf"\b{re.escape(name)}\s*\(", text):
        start = match.end() - 1
        for end in _closing(text, start):
            try:
                call = ast.parse(f"_{text[start : end + 1]}", mode="eval").body
            except (SyntaxError, ValueError, RecursionError):
                continue
            if isinstance(call, ast.Call) and not call.keywords:
                try:
                    args = [ast.literal_eval(a) for a in call.args]
                except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                    break
                found[normalised(args)] = args
            break
    return found


def described_inputs(text: str) -> dict[str, list[Any]]:
    """Argument lists written as the harness describes a failing test (``input [1, 2]: got``,
    ``input (1, 2)``): each literal list or tuple after the word "input"."""
    found: dict[str, list[Any]] = {}
    for match in re.finditer(r"\binputs?\b:?\s*([\[(])", text):
        start = match.start(1)
        closer = "]" if text[start] == "[" else ")"
        position = start
        while (position := text.find(closer, position + 1, start + LONGEST_CALL)) != -1:
            try:
                value = ast.literal_eval(text[start : position + 1])
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                continue
            if isinstance(value, (list, tuple)):
                found[normalised(list(value))] = list(value)
            break
    return found


def shape(args: list[Any]) -> tuple:
    """A cheap fingerprint two equal argument lists share: how many, and each one's length."""
    return tuple(len(a) if isinstance(a, (str, list, tuple, dict, set)) else -1 for a in args)


def _closing(text: str, start: int):
    """Candidate positions of the parenthesis closing the one at ``start``, nearest first."""
    position = start
    while (position := text.find(")", position + 1, start + LONGEST_CALL)) != -1:
        yield position


def hidden_calls(suite: FunctionalSuite, shapes: set[tuple] | None = None) -> set[str]:
    """Every hidden test's call, normalised (call and expr suites); with ``shapes``, only those of
    these shapes (normalising a large suite whole takes a while)."""
    if suite.mode == "call":
        return {
            normalised(list(args))
            for args in suite.flat_inputs
            if shapes is None or shape(list(args)) in shapes
        }
    if suite.mode == "expr":
        return {c for [expression] in suite.flat_inputs for c in _expr_calls(expression, suite)}
    return set()


def _expr_calls(expression: str, suite: FunctionalSuite) -> set[str]:
    name = suite.entry_point or _called_name(expression)
    return calls_in(expression, name) if name else set()


def _called_name(expression: str) -> str | None:
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return node.func.id
    return None


def tokens(text: str) -> str:
    return " ".join(text.split())


def leaks(shown: str, visible: str, suite: FunctionalSuite) -> list[str]:
    """The hidden tests ``shown`` contains that ``visible`` (the task's own prompt) does not."""
    if suite.mode == "stdio":
        seen, own = tokens(shown), tokens(visible)
        return [
            stdin
            for [stdin] in suite.flat_inputs
            if len(tokens(stdin)) >= 8 and tokens(stdin) in seen and tokens(stdin) not in own
        ]
    name = suite.entry_point or next((n for [e] in suite.flat_inputs if (n := _called_name(e))), "")
    if not name:
        return []
    written = written_calls(shown, name) | described_inputs(shown)
    hidden = hidden_calls(suite, {shape(args) for args in written.values()})
    own = calls_in(visible, name) | set(described_inputs(visible))
    return sorted((set(written) & hidden) - own)
