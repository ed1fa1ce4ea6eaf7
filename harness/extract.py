"""Find the program in a model's answer: fenced blocks, prose around code, thinking sections,
truncated output. EvalPlus's sanitizer then keeps the entry point, its helpers and imports."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_THINK = re.compile(r"<(think|thinking|reasoning)>.*?(</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PYTHON_TAGS = {"", "python", "py", "python3", "py3"}
# a request's stop_pattern for "the answer ends after its first complete Python code block" (a
# bare fence counts as Python; fences are not paired, so the bare closing fence of an earlier
# block in another language would open a match: models asked for one Python block rarely do that)
CLOSED_CODE_BLOCK = r"(?i)```[ \t]*(?:python3?|py3?)?[ \t]*\n[\s\S]*?\n[ \t]*```"


@dataclass(frozen=True)
class Extracted:
    code: str
    found: bool
    note: str = ""


def _defines(code: str, name: str) -> bool:
    """Whether ``code`` defines the function ``name`` (or the class of ``Class.method``)."""
    owner, _, function = name.partition(".")
    pattern = (
        rf"^\s*class\s+{re.escape(owner)}\b"
        if function
        else rf"^\s*(async\s+)?def\s+{re.escape(name)}\s*\("
    )
    return re.search(pattern, code, re.MULTILINE) is not None


def _parses(code: str, program: bool = False) -> bool:
    """Valid Python with something to run: a definition or statement (a program may be only
    expressions such as ``print(...)``; a lone string or name is prose, not code)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    if program:
        return any(
            not isinstance(node, ast.Expr) or isinstance(node.value, ast.Call) for node in tree.body
        )
    return any(not isinstance(node, ast.Expr) for node in tree.body)


def _sanitize(code: str, entry_point: str | None) -> str:
    from evalplus.sanitize import sanitize

    try:
        cleaned = sanitize(code, entry_point)
    except Exception:  # tree-sitter failure: keep the raw block
        return code
    return cleaned if cleaned.strip() else code


def _python_blocks(text: str) -> list[str]:
    """The Python code blocks of ``text``. Code before the first fence is a block whose opening
    fence is missing (a model that starts with code and closes it with a fence), so that fence
    closes it rather than opening the prose after it."""
    head, fence, rest = text.partition("```")
    lead = [head] if fence and head.strip() and _parses(head) else []
    after = rest if lead else text
    return lead + [body for tag, body in _FENCE.findall(after) if tag.lower() in _PYTHON_TAGS]


def extract_code(text: str, entry_point: str | None = None, *, program: bool = False) -> Extracted:
    """The program in ``text``; ``found`` is False when there is no runnable code.

    ``program``: a whole stdin/stdout program is wanted, so top-level statements stay (no
    sanitizing, which keeps only definitions) and the last code block is the program.
    """
    visible = _THINK.sub("", text)
    blocks = _python_blocks(visible)
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
        code = primary if program else "\n\n".join([*others, primary])
        note = "fenced"
    else:
        code, note = visible, "unfenced"
    if not program or not _parses(code, program):
        code = _sanitize(code, entry_point.partition(".")[0] if entry_point else None)
    if not _parses(code, program):
        return Extracted("", False, f"no runnable code ({note})")
    if entry_point and not _defines(code, entry_point):
        return Extracted(code, True, f"code does not define {entry_point} ({note})")
    return Extracted(code, True, note)
