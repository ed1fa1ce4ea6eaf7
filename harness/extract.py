"""Find the program in a model's answer: fenced blocks, prose around code, thinking sections,
truncated output. EvalPlus's sanitizer then keeps the entry point, its helpers and imports."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_THINK = re.compile(r"<(think|thinking|reasoning)>.*?(</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PYTHON_TAGS = {"", "python", "py", "python3", "py3"}


@dataclass(frozen=True)
class Extracted:
    code: str
    found: bool
    note: str = ""


def _defines(code: str, name: str) -> bool:
    return (
        re.search(rf"^\s*(async\s+)?def\s+{re.escape(name)}\s*\(", code, re.MULTILINE) is not None
    )


def _parses(code: str) -> bool:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return any(not isinstance(node, ast.Expr) for node in tree.body)


def _sanitize(code: str, entry_point: str | None) -> str:
    from evalplus.sanitize import sanitize

    try:
        cleaned = sanitize(code, entry_point)
    except Exception:  # tree-sitter failure: keep the raw block
        return code
    return cleaned if cleaned.strip() else code


def extract_code(text: str, entry_point: str | None = None) -> Extracted:
    """The program in ``text``; ``found`` is False when there is no runnable code."""
    visible = _THINK.sub("", text)
    blocks = [body for tag, body in _FENCE.findall(visible) if tag.lower() in _PYTHON_TAGS]
    if blocks:
        primary = None
        if entry_point:
            primary = next((b for b in reversed(blocks) if _defines(b, entry_point)), None)
        if primary is None:
            primary = blocks[-1]
        # Helpers from other blocks, then the final definition of the entry point.
        others = [
            b for b in blocks if b is not primary and not (entry_point and _defines(b, entry_point))
        ]
        code = "\n\n".join([*others, primary])
        note = "fenced"
    else:
        code, note = visible, "unfenced"
    code = _sanitize(code, entry_point)
    if not _parses(code):
        return Extracted("", False, f"no runnable code ({note})")
    if entry_point and not _defines(code, entry_point):
        return Extracted(code, True, f"code does not define {entry_point} ({note})")
    return Extracted(code, True, note)
