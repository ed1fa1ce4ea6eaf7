"""The CoRe-Code plan outline: a planner's answer parsed into its sections, and checked for code.

A plan follows six headings (Input/Output, Steps, Branches, Loops, Final step, Complexity) and
holds no code: the coder writes the program. ``parse_plan`` reads the sections a plan has and
the lines of it that are Python rather than prose; ``quality`` is the share of the outline a plan
follows, 0 for a plan with code in it (the planner's reward term that keeps the program out of
the plan).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

SECTIONS = ("Input/Output", "Steps", "Branches", "Loops", "Final step", "Complexity")
_HEADING = re.compile(
    r"^[^\w\n]*(" + "|".join(re.escape(s) for s in SECTIONS) + r")[^\w\n]*:?[ \t]*",
    re.MULTILINE | re.IGNORECASE,
)
_MARKER = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")  # list bullets and step numbers
_HEADERS = ("def ", "class ", "for ", "while ", "if ", "elif ", "else", "try", "except", "with ")


@dataclass
class Outline:
    """A plan as structure: its sections' text and the lines that are code."""

    sections: dict[str, str] = field(default_factory=dict)
    code_lines: list[str] = field(default_factory=list)

    @property
    def missing(self) -> list[str]:
        return [s for s in SECTIONS if not self.sections.get(s)]

    @property
    def has_code(self) -> bool:
        return bool(self.code_lines)

    @property
    def quality(self) -> float:
        """Share of the outline's sections the plan fills; 0 when the plan holds code."""
        if self.has_code:
            return 0.0
        return sum(1 for s in SECTIONS if self.sections.get(s)) / len(SECTIONS)

    def as_artifact(self) -> dict[str, object]:
        return {"sections": self.sections, "missing": self.missing, "code_lines": self.code_lines}


def parse_plan(text: str) -> Outline:
    headings = list(_HEADING.finditer(text))
    sections: dict[str, str] = {}
    for match, following in zip(headings, [*headings[1:], None], strict=False):
        name = next(s for s in SECTIONS if s.lower() == match[1].lower())
        body = text[match.end() : following.start() if following else len(text)].strip()
        sections.setdefault(name, body)
    return Outline(sections, code_lines(text))


def code_lines(text: str) -> list[str]:
    """Lines that are Python, not prose: a fenced block's lines, statement headers such as
    ``for x in xs:`` or ``def f(a):``, imports, and whole assignments or returns."""
    found = []
    fenced = False
    for raw in text.splitlines():
        line = _MARKER.sub("", raw).strip()
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced and line or line and _is_statement(line):
            found.append(line)
    return found


def _is_statement(line: str) -> bool:
    if line.endswith(":") and line.startswith(_HEADERS):
        candidate = f"{line}\n    pass"
    elif line.startswith(("import ", "from ", "return ")) or re.match(
        r"^[\w.\[\], ]+ [-+*/]?= ", line
    ):
        candidate = line
    else:
        return False
    try:
        tree = ast.parse(candidate)
    except SyntaxError:
        return False
    statement = tree.body[0] if tree.body else None
    if isinstance(statement, ast.Return):  # "return the largest value" is prose
        return statement.value is not None and _is_code_expression(line.removeprefix("return "))
    return statement is not None


def _is_code_expression(text: str) -> bool:
    """An expression with code's shape (calls, operators, subscripts), not a few words."""
    try:
        node = ast.parse(text.rstrip("."), mode="eval").body
    except SyntaxError:
        return False
    return not isinstance(node, ast.Name) or "_" in node.id
