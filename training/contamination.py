"""Near-duplicate decontamination: training tasks that are, or nearly are, evaluation tasks.

A training task is flagged against an evaluation task by any of five criteria (each pair and
criterion one ``Flag`` with its score):

- ``id``: the same task id (MBPP+ draws its ids from the whole of MBPP);
- ``description``: the prompts' prose (asserts and docstring quotes removed, lower-cased words)
  as similar as ``difflib``'s ratio says, at least the ``description`` threshold;
- ``code``: the reference solutions, names canonicalized (``v0``, ``v1``, ... in order of
  appearance; builtins and attributes kept, docstrings and annotations dropped) and written
  back from their syntax trees, as similar as ``difflib``'s ratio over their tokens says, at
  least ``code``; code under ``NEAR_DUPLICATE_CODE_MIN_TOKENS`` tokens is not compared;
- ``tests``: the share of the training task's tests (arguments and expected value; stdin and
  stdout) that are tests of the evaluation task, at least ``tests``, and at least
  ``MIN_SHARED_TESTS`` (2) of them;
- ``name``: the same function name and at least one identical test.

Tests are each task's first suite (MBPP+ and HumanEval+: the base tests, the original asserts),
with expected values from the dataset or, where it states none, from the reference solution run
in the sandbox. Every pair is compared; a bound on ``difflib``'s ratio from the two sequences'
shared symbols (numpy) skips the pairs that cannot reach a threshold before ``difflib`` runs.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import difflib
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from pydantic import Field

from corebench.harness import config as C
from corebench.harness.benchmark import Benchmark
from corebench.harness.errors import CorebenchError
from corebench.harness.options import Options
from corebench.harness.sandbox import SandboxExecutor
from corebench.harness.testsuite import FunctionalSuite

CRITERIA = ("id", "description", "code", "tests", "name")
BUILTINS = frozenset(dir(builtins))


class Thresholds(Options):
    """How similar a pair must be to be flagged (the ``corebench decontaminate`` flags, and the
    training settings ``decontaminate_*``)."""

    description: float = Field(
        C.NEAR_DUPLICATE_DESCRIPTION, ge=0, le=1, description="difflib ratio of the prose"
    )
    code: float = Field(
        C.NEAR_DUPLICATE_CODE, ge=0, le=1, description="difflib ratio of the canonical trees"
    )
    tests: float = Field(
        C.NEAR_DUPLICATE_TESTS, ge=0, le=1, description="share of the training task's tests shared"
    )


@dataclass(frozen=True)
class Item:
    """A task as the check compares it."""

    task_id: str
    description: str  # lower-cased words of the prompt's prose
    code: tuple[str, ...]  # the reference's canonical tokens (() without one, or too short)
    tests: frozenset[str]  # canonical (arguments, expected) of its first suite's tests
    name: str = ""  # the entry point


@dataclass(frozen=True)
class Flag:
    train_id: str
    eval_id: str
    criterion: str  # one of CRITERIA
    score: float

    def line(self) -> str:
        return f"{self.train_id} {self.eval_id} {self.criterion} {self.score:.3f}"


class ContaminationError(CorebenchError):
    """Training data overlaps the evaluation tasks."""


# --- what is compared ------------------------------------------------------------------------------
def description(prompt: str) -> str:
    """The prose of a prompt (assert, doctest and docstring-quote lines removed), as lower-cased
    words joined by single spaces."""
    prose = [
        line
        for line in prompt.splitlines()
        if not line.strip().startswith(("assert", '"""', "'''", ">>>"))
    ]
    return " ".join(re.findall(r"[a-z0-9]+", " ".join(prose).lower()))


class _Canonical(ast.NodeTransformer):
    """Names to ``v0``, ``v1``, ... in order of appearance (builtins kept); no docstrings, no
    annotations."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def _name(self, name: str) -> str:
        return name if name in BUILTINS else self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self._name(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg, node.annotation = self._name(node.arg), None
        return node

    def _body(self, node: Any) -> Any:
        node.name = self._name(node.name)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            node.body = body[1:] or [ast.Pass()]
        if hasattr(node, "returns"):
            node.returns = None
        self.generic_visit(node)
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _body


def quiet_parse(source: str, mode: str = "exec") -> ast.AST:
    """``ast.parse`` without the warnings old code gives (invalid escape sequences)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source, mode=mode)


def code_tokens(code: str) -> tuple[str, ...]:
    """The source tokens of ``code`` with names canonicalized (``_Canonical``); () for code that
    does not parse or is shorter than ``NEAR_DUPLICATE_CODE_MIN_TOKENS`` (too short to tell a
    copy from a coincidence)."""
    try:
        tree = quiet_parse(code)
    except (SyntaxError, ValueError):
        return ()
    tokens = tuple(re.findall(r"\w+|[^\w\s]", ast.unparse(_Canonical().visit(tree))))
    return tokens if len(tokens) >= C.NEAR_DUPLICATE_CODE_MIN_TOKENS else ()


def canonical(value: Any) -> Any:
    """A value with tuples as lists and sets and dicts in a fixed order, so that equal data from
    a literal and from a decoded output look alike."""
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return sorted((repr(canonical(k)), repr(canonical(v))) for k, v in value.items())
    if isinstance(value, (set, frozenset)):
        return sorted(repr(canonical(v)) for v in value)
    return value


def _called_arguments(expression: str) -> list[Any] | None:
    """The literal arguments of the function an assert-style expression tests
    (``set(f(x, y)) == set(z)`` -> ``[x, y]``), through builtin wrappers and comparisons."""
    try:
        node: ast.AST = quiet_parse(expression, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    while True:
        if isinstance(node, ast.Compare):
            node = node.left
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id not in BUILTINS:
                break
            if not node.args:
                return None
            node = node.args[0]
        else:
            return None
    try:
        return [ast.literal_eval(a) for a in node.args] + [
            (k.arg, ast.literal_eval(k.value)) for k in node.keywords
        ]
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _stated_value(expression: str) -> str | None:
    """The right side of ``bool(A == B)``, as text: the value an assert states where it is not a
    literal (``True`` alone would make every such assert on the same call alike)."""
    try:
        node: ast.AST = quiet_parse(expression, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "bool":
        node = node.args[0] if len(node.args) == 1 else node
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
        return ast.unparse(node.comparators[0])
    return None


MIN_SHARED_TESTS = 2  # the "tests" criterion needs at least this many identical tests


def signatures(suite: FunctionalSuite, expected: list[Any] | None) -> frozenset[str]:
    """The first suite's tests as canonical text: call arguments (or the tested call's arguments
    in an assert-style expression; stdin) with the expected value (stdout; for ``bool(A == B)``
    asserts, B as written)."""
    if not suite.inputs or expected is None:
        return frozenset()
    first = next(iter(suite.inputs.values()))
    out = set()
    for test, value in zip(first, expected, strict=False):
        if suite.mode == "stdio":
            arguments: Any = str(test[0]).strip()
            value = str(value).strip()
        elif suite.mode == "expr":
            arguments = _called_arguments(str(test[0]))
            if arguments is None:
                continue
            if value is True:
                value = _stated_value(str(test[0])) or value
        else:
            arguments = list(test)
        out.add(repr((canonical(arguments), canonical(value))))
    return frozenset(out)


async def _first_expected(
    task_id: str, suite: FunctionalSuite, executor: SandboxExecutor
) -> list[Any] | None:
    """The expected outputs of the suite's first tests: the dataset's, else the reference's (its
    first suite alone, run in the sandbox)."""
    if not suite.inputs:
        return None
    name = next(iter(suite.inputs))
    if suite.expected is not None:
        return list(suite.expected.get(name, []))
    if not suite.reference_code:
        return None
    first = replace(suite, inputs={name: suite.inputs[name]}, expected=None)
    try:
        return list((await executor.reference(task_id, first)).outputs[name])
    except CorebenchError:  # a reference that fails on its own tests: no tests to compare
        return None


def items(benchmark: Benchmark, split: str, executor: SandboxExecutor | None = None) -> list[Item]:
    """Every task of ``benchmark``'s ``split`` as the check compares it (references run in
    ``executor``, default: a local sandbox, where the dataset states no expected outputs; a
    training run's rewards may go to a judging service or a cluster, which judge programs but do
    not hand back a reference's outputs)."""
    tasks = benchmark.tasks(split)
    suites = [benchmark.test_suite(t.task_id) for t in tasks]

    async def expected_all(box: SandboxExecutor) -> list[list[Any] | None]:
        return list(
            await asyncio.gather(
                *(_first_expected(t.task_id, s, box) for t, s in zip(tasks, suites, strict=True))
            )
        )

    if all(s.expected is not None or not s.reference_code for s in suites):
        expected = [_first_expected_stated(s) for s in suites]
    else:  # references are the dataset's own code: run in a local sandbox unless told otherwise
        from corebench.harness.sandbox.placement import executor_for

        from .rewards import in_own_loop

        expected = in_own_loop(expected_all, executor or executor_for("local"))
    return [
        Item(t.task_id, description(t.prompt), code_tokens(s.reference_code),
             signatures(s, e), t.entry_point or "")
        for t, s, e in zip(tasks, suites, expected, strict=True)
    ]  # fmt: skip


def _first_expected_stated(suite: FunctionalSuite) -> list[Any] | None:
    if not suite.inputs or suite.expected is None:
        return None
    return list(suite.expected.get(next(iter(suite.inputs)), []))


# --- comparing ------------------------------------------------------------------------------------
def similar_pairs(
    train: list[tuple[str, ...] | str], evaluation: list[tuple[str, ...] | str], threshold: float
) -> list[tuple[int, int, float]]:
    """(i, j, ratio) for every pair whose ``difflib`` ratio is at least ``threshold``. The
    ratio is at most 2·(shared symbols, as multisets)/(total length), computed for all pairs at
    once with numpy; only the pairs this bound lets through are matched by ``difflib``."""
    if not train or not evaluation:
        return []
    vocabulary: dict[str, int] = {}
    for sequence in (*train, *evaluation):
        for symbol in sequence:
            vocabulary.setdefault(symbol, len(vocabulary))

    def counts(sequences: list) -> np.ndarray:
        matrix = np.zeros((len(sequences), max(1, len(vocabulary))), dtype=np.int32)
        for row, sequence in enumerate(sequences):
            np.add.at(matrix[row], [vocabulary[s] for s in sequence], 1)
        return matrix

    a, b = counts(train), counts(evaluation)
    lengths_b = b.sum(axis=1)
    found = []
    for i, sequence in enumerate(train):
        if not len(sequence):
            continue
        shared = np.minimum(a[i], b).sum(axis=1)
        bound = 2 * shared / np.maximum(1, len(sequence) + lengths_b)
        for j in np.flatnonzero((bound >= threshold) & (lengths_b > 0)):
            matcher = difflib.SequenceMatcher(None, sequence, evaluation[j], autojunk=False)
            ratio = matcher.ratio()
            if ratio >= threshold:
                found.append((i, int(j), ratio))
    return found


def near_duplicates(
    train: Iterable[Item], evaluation: Iterable[Item], thresholds: Thresholds | None = None
) -> list[Flag]:
    """Every flagged (training task, evaluation task, criterion), in training order, then
    criterion order, then evaluation order."""
    thresholds = thresholds or Thresholds()
    train, evaluation = list(train), list(evaluation)
    flags: list[Flag] = []
    by_id = {e.task_id for e in evaluation}
    flags += [Flag(t.task_id, t.task_id, "id", 1.0) for t in train if t.task_id in by_id]
    for criterion, field_ in (("description", "description"), ("code", "code")):
        pairs = similar_pairs(
            [getattr(t, field_) for t in train],
            [getattr(e, field_) for e in evaluation],
            getattr(thresholds, criterion),
        )
        flags += [
            Flag(train[i].task_id, evaluation[j].task_id, criterion, ratio) for i, j, ratio in pairs
        ]
    holders: dict[str, list[int]] = {}
    for j, e in enumerate(evaluation):
        for signature in e.tests:
            holders.setdefault(signature, []).append(j)
    for t in train:
        shared: dict[int, int] = {}
        for signature in t.tests:
            for j in holders.get(signature, ()):
                shared[j] = shared.get(j, 0) + 1
        for j, count in shared.items():
            share, e = count / len(t.tests), evaluation[j]
            if share >= thresholds.tests and count >= MIN_SHARED_TESTS:  # one is too little
                flags.append(Flag(t.task_id, e.task_id, "tests", share))
            if t.name and t.name == e.name:
                flags.append(Flag(t.task_id, e.task_id, "name", share))
    order = {t.task_id: i for i, t in enumerate(train)}
    place = {e.task_id: j for j, e in enumerate(evaluation)}
    return sorted(
        flags,
        key=lambda f: (order[f.train_id], CRITERIA.index(f.criterion), place.get(f.eval_id, -1)),
    )


def excluded_by(flags: list[Flag]) -> dict[str, int]:
    """How many training tasks each criterion flags (a task flagged by several counts under
    each)."""
    return {c: len({f.train_id for f in flags if f.criterion == c}) for c in CRITERIA}


def check(
    train: list[Item],
    evaluation: list[Item],
    thresholds: Thresholds | None = None,
    allow: bool = False,
) -> list[Flag]:
    """The flagged pairs; raises unless ``allow`` when there are any."""
    flags = near_duplicates(train, evaluation, thresholds)
    if flags and not allow:
        first = {f.train_id: f for f in reversed(flags)}  # each task's first flag
        shown = ", ".join(
            f"{f.train_id}~{f.eval_id} ({f.criterion} {f.score:.2f})"
            for f in list(reversed(first.values()))[:5]
        )
        raise ContaminationError(
            f"{len(first)} training tasks are near duplicates of evaluation tasks: {shown}"
            + (" ..." if len(first) > 5 else "")
            + "; drop them (exclude_overlaps) or allow with allow_overlap=true"
        )
    return flags
