"""Visible examples: what a task's statement shows, parsed so a system can run its own code on them.

A benchmark puts examples in ``Task.examples``, taken only from what the prompt shows (the
statement's sample I/O, a docstring's examples, a contest's public tests), never from hidden
tests. Two kinds:

- an ``assert f(x) == y`` line (function tasks), evaluated in the solution's namespace;
- a :class:`~corebench.harness.records.StdioExample` (whole programs): stdin and the stdout the
  statement shows, compared as a contest checker compares tokens.

The parsers here read the forms that real prompts use (doctest ``>>>``, ``f(x) ==> y``,
``Input: ... Output: ...`` blocks, ``For x = ... the output should be y``, APPS/Codeforces
``Input``/``Output`` sections and AtCoder ``Sample Input``/``Sample Output`` sections).
"""

from __future__ import annotations

import ast
import doctest
import re
from dataclasses import dataclass
from typing import Any, Literal

from .records import StdioExample


@dataclass(frozen=True)
class Example:
    """A visible example as the sandbox runs it.

    ``mode="expr"``: ``assert f(x) == <literal>`` is evaluated as the expression ``f(x)`` and the
    output compared in the harness with the literal; any other assert is evaluated as
    ``bool(<condition>)`` and must give True. ``mode="stdio"``: ``expr`` is the program's stdin
    and ``expected`` its stdout.
    """

    source: str  # the example as the prompt shows it
    expr: str
    expected: Any
    mode: Literal["expr", "stdio"] = "expr"


def parse_example(example: str | StdioExample) -> Example:
    """One ``assert ...`` line or stdin/stdout pair as an :class:`Example` (ValueError if an
    assert line is not a single assert statement)."""
    if isinstance(example, StdioExample):
        source = f"Input:\n{example.input.rstrip()}\nExpected output:\n{example.output.rstrip()}"
        return Example(source, example.input, example.output, mode="stdio")
    try:
        tree = ast.parse(example.strip())
    except SyntaxError as exc:
        raise ValueError(f"not a Python assert: {example!r}") from exc
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        raise ValueError(f"not a single assert statement: {example!r}")
    test = tree.body[0].test
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        try:
            expected = ast.literal_eval(test.comparators[0])
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
        else:
            return Example(example.strip(), ast.unparse(test.left), expected)
    return Example(example.strip(), f"bool({ast.unparse(_ImportModules().visit(test))})", True)


class _ImportModules(ast.NodeTransformer):
    """``math.isclose(...)`` in an assert (MBPP+'s float tests) names a module the test file
    imported: the expression imports it itself, so the solution's namespace is not changed."""

    MODULES = ("math",)

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        if isinstance(node.value, ast.Name) and node.value.id in self.MODULES:
            module = ast.Call(ast.Name("__import__", ast.Load()), [ast.Constant(node.value.id)], [])
            return ast.copy_location(ast.Attribute(module, node.attr, node.ctx), node)
        return self.generic_visit(node)


# --- function tasks ----------------------------------------------------------------------------
_ARROW = r"(?:==>|=>|==|➞|->|=|#\s*=>|#\s*returns?|should return|returns?)"
_NAME = re.compile(r"(?:^|,)\s*([A-Za-z_]\w*)\s*[=:]\s*", re.MULTILINE)
_IO_BLOCK = re.compile(
    r"^\s*Input\s*:\s*(?P<input>.*?)^\s*Output\s*:\s*(?P<output>.*?)\s*$",
    re.MULTILINE | re.DOTALL,
)
_FOR_GIVEN = re.compile(
    r"^\s*For\s+(?P<input>[A-Za-z_]\w*\s*=.*?)(?:,\s*)?\s+(?:the\s+)?(?:output|result)\s+should\s+be"
    r"\s+(?P<output>.+?)\.?\s*$",
    re.MULTILINE | re.IGNORECASE,
)


def _literal(text: str) -> str | None:
    """``text`` (a comment and trailing punctuation cut) if it is a Python literal, else None."""
    text = text.split(" #")[0].strip().rstrip(".,;")
    text = {"true": "True", "false": "False"}.get(text, text)  # "f(1) => true"
    try:
        ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return text


def _arguments(text: str) -> list[str] | None:
    """Argument literals from ``[1, 2]`` or ``arr = [1, 2], k = 3`` (also ``grid : ...`` lines)."""
    text = text.strip()
    names = list(_NAME.finditer(text))
    if not names or names[0].start() != 0:
        value = _literal(text)
        return None if value is None else [value]
    values = []
    for match, following in zip(names, [*names[1:], None], strict=True):
        value = _literal(text[match.end() : following.start() if following else len(text)])
        if value is None:
            return None
        values.append(value)
    return values


def _assert(entry_point: str, args: list[str], expected: str) -> str:
    return f"assert {entry_point}({', '.join(args)}) == {expected}"


def docstring_examples(prompt: str, entry_point: str) -> list[str]:
    """The examples a HumanEval-style docstring shows, as assert statements that parse.

    Doctests first (``>>> f(x)`` then the value, or ``>>> f(x) == y``); else every line
    ``f(args) <arrow> value`` (``==>``, ``=>``, ``->``, ``=``, ``# returns``, ...), every
    ``Input: ... Output: ...`` block and every ``For x = ... the output should be y`` line.
    """
    found = []
    try:
        doctests = doctest.DocTestParser().get_examples(prompt)
    except ValueError:  # malformed doctest layout
        doctests = []
    for example in doctests:
        want = [line for line in example.want.splitlines() if line.strip() not in ('"""', "'''")]
        source, value = example.source.strip(), " ".join(want).strip()
        if value:
            found.append(f"assert {source} == {value}")
        elif _node(source, ast.Compare):  # ">>> f(x) == y"
            found.append(f"assert {source}")
        elif _node(source, ast.Call):  # a call that prints nothing returned None
            found.append(f"assert {source} == None")
    if not found:
        shown = _last_examples_section(prompt)
        found = calls_shown(shown, entry_point) + io_blocks(shown, entry_point)
    return [source for source in found if _is_example(source)]


def _node(source: str, kind: type[ast.expr]) -> bool:
    """Whether ``source`` is one expression of the given kind."""
    try:
        return isinstance(ast.parse(source, mode="eval").body, kind)
    except SyntaxError:
        return False


def _last_examples_section(text: str) -> str:
    """The text after the last "Example(s):" heading (a docstring's definitions above it, such
    as ``tri(1) = 3``, are not examples), or all of it without one."""
    headings = list(re.finditer(r"^\s*(?:for\s+)?examples?\s*:?\s*$", text, re.M | re.I))
    return text[headings[-1].end() :] if headings else text


def calls_shown(text: str, entry_point: str) -> list[str]:
    """``f(args) ==> value`` lines (with an optional bullet, ``assert`` or ``for`` before them)."""
    call = re.compile(
        rf"^\s*(?:[*-]\s*|assert\s+|for\s+)?({re.escape(entry_point)}\(.*?\))\s*{_ARROW}\s*(.+?)\s*$",
        re.MULTILINE,
    )
    found = []
    for match in call.finditer(text):
        value = _literal(match[2]) or _literal(match[2].rsplit("=", 1)[-1])  # "19 - 5 - 6 = 8"
        if value is not None and _literal_call(match[1]):
            found.append(f"assert {match[1]} == {value}")
    return found


def _literal_call(source: str) -> bool:
    """A call whose arguments are all literals (``is_happy(a)`` in a docstring means a string)."""
    try:
        call = ast.parse(source, mode="eval").body
        assert isinstance(call, ast.Call)
        for arg in call.args:
            ast.literal_eval(arg)
    except (SyntaxError, ValueError, TypeError, AssertionError, MemoryError, RecursionError):
        return False
    return True


def io_blocks(text: str, entry_point: str) -> list[str]:
    """``Input: args`` / ``Output: value`` blocks and ``For x = ... the output should be y``."""
    found = []
    for pattern in (_IO_BLOCK, _FOR_GIVEN):
        for match in pattern.finditer(text):
            given = match["input"]
            if pattern is _FOR_GIVEN:  # "For N = 1000, the sum of digits will be 1 the ..."
                given = re.split(r",\s+(?![A-Za-z_]\w*\s*=)", given)[0]
            args, value = _arguments(given), _literal(match["output"].split("\n")[0])
            if args is not None and value is not None:
                found.append(_assert(entry_point, args, value))
    return found


def _is_example(source: str) -> bool:
    try:
        parse_example(source)
    except ValueError:
        return False
    return True


# --- whole programs (stdin/stdout) ---------------------------------------------------------------
_SECTION = re.compile(r"^-{3,}\s*(?P<title>[^-\n]+?)\s*-{3,}\s*$", re.MULTILINE)
_INPUT_OUTPUT = re.compile(
    r"^\s*Input\s*:?\s*$\n(?P<input>.*?)^\s*Output\s*:?\s*$\n(?P<output>.*?)(?=^\s*Input\s*:?\s*$|\Z)",
    re.MULTILINE | re.DOTALL,
)
_SAMPLE = re.compile(r"sample\s+(input|output)\s*(\d*)", re.IGNORECASE)


def statement_examples(statement: str) -> list[StdioExample]:
    """The sample input/output pairs a contest statement shows.

    Two layouts: an ``-----Examples-----`` section of ``Input`` / ``Output`` blocks (APPS,
    Codeforces), and ``-----Sample Input N-----`` / ``-----Sample Output N-----`` sections
    (AtCoder, Kattis). Blank lines around a block are not part of it.
    """
    sections = list(_SECTION.finditer(statement))
    bodies = [
        (m["title"], statement[m.end() : nxt.start() if nxt else len(statement)])
        for m, nxt in zip(sections, [*sections[1:], None], strict=False)
    ]
    found: list[StdioExample] = []
    samples: dict[str, dict[str, str]] = {}
    for title, body in bodies:
        if re.fullmatch(r"examples?", title.strip(), re.IGNORECASE):
            for block in _INPUT_OUTPUT.finditer(body):
                found.append(_stdio(block["input"], block["output"]))
        elif sample := _SAMPLE.fullmatch(title.strip()):
            samples.setdefault(sample[2], {})[sample[1].lower()] = body
    for pair in samples.values():
        if "input" in pair and "output" in pair:
            found.append(_stdio(pair["input"], pair["output"]))
    return [e for e in found if e.input.strip() and e.output.strip()]


def _stdio(stdin: str, stdout: str) -> StdioExample:
    return StdioExample(input=stdin.strip("\n") + "\n", output=stdout.strip("\n") + "\n")
