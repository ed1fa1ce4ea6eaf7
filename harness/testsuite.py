"""Hidden test suites: they go from a benchmark to the sandbox only; systems never see them.
(Visible examples, which a system may run on its own code, are in ``examples.py``.)"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from .comparators import Comparator, Exact, comparator_named
from .examples import parse_example

Mode = Literal["call", "expr", "stdio"]


@dataclass
class FunctionalSuite:
    """A task's hidden tests, run in the sandbox and judged in the harness.

    ``inputs`` maps a suite name ("base", "plus", "public", "private", ...) to test inputs, whose
    meaning depends on ``mode``:

    - ``call``: argument lists for ``entry_point`` (``f`` or ``Class.method``);
    - ``expr``: ``[expression]`` evaluated in the solution's namespace (assert-style tests);
    - ``stdio``: ``[stdin text]`` for the whole program, whose stdout is the output.

    Expected outputs are ``expected`` when the dataset states them (asserts, stdin/stdout pairs),
    otherwise computed by running ``reference_code`` in the sandbox (and cached). With a
    reference, per-test time limits derive from its CPU time; without one, ``time_limit_s``
    applies, or applies always with ``time_limit_fixed`` (a benchmark's official limit).
    ``exit_status`` (stdio): which endings of a program still have their output judged
    (``protocol.EXIT_STATUSES``). ``comparator`` (owned by the benchmark; a name of a built-in one, or a
    :class:`~corebench.harness.comparators.Comparator`) decides whether an output is acceptable;
    it runs in the harness on plain data, so a solution cannot influence it.
    """

    entry_point: str
    reference_code: str
    inputs: dict[str, list[list[Any]]]
    atol: float = 0.0
    comparator: Comparator | str = field(default_factory=Exact)
    fingerprint: str = ""  # identifies the dataset version (recorded; the cache hashes content)
    extra: dict[str, Any] = field(default_factory=dict)
    mode: Mode = "call"
    expected: dict[str, list[Any]] | None = None
    time_limit_s: float | None = None  # per test, when there is no reference to time
    setup_code: str = ""  # run after the solution, before the tests (MBPP's test_setup_code)
    prelude: str = ""  # run before the solution, in its namespace (a benchmark's implicit imports)
    time_limit_fixed: bool = False  # time_limit_s even where a reference's CPU time is known
    exit_status: str = "zero"  # stdio: "zero", "system_exit" or "any" (protocol.EXIT_STATUSES)

    def __post_init__(self) -> None:
        if isinstance(self.comparator, str):
            self.comparator = comparator_named(self.comparator)
        from .sandbox.protocol import EXIT_STATUSES  # the package imports this module

        if self.exit_status not in EXIT_STATUSES:
            raise ValueError(f"exit_status {self.exit_status!r}: one of {', '.join(EXIT_STATUSES)}")

    @property
    def size(self) -> int:
        """How many tests, over all named suites."""
        return sum(map(len, self.inputs.values()))

    @property
    def flat_inputs(self) -> list[list[Any]]:
        """Every test's input in run order (suite by suite)."""
        return [args for tests in self.inputs.values() for args in tests]

    @cached_property
    def sent_inputs(self) -> list[Any]:
        """Every test's input in run order as the child receives it: call arguments in the
        sandbox's encoding, an expression or stdin as text. Made once per suite: the cache key
        and every job reuse it."""
        if self.mode != "call":
            return [str(args[0]) for args in self.flat_inputs]
        from .sandbox.codec import encode

        return [encode(args) for args in self.flat_inputs]

    @cached_property
    def inputs_text(self) -> str:
        """Every test's input as JSON text, made once per suite: in call and expr suites the
        tests as a judging job carries them (``protocol.input_tests``), spliced into every job
        as they are; in stdio suites the stdin texts. The cache key hashes it."""
        if self.mode == "stdio":
            return json.dumps(self.sent_inputs)
        from .sandbox.protocol import input_tests

        return json.dumps(input_tests(self.mode, self.sent_inputs))

    @cached_property
    def content_key(self) -> str:
        """sha256 of everything that determines the reference's outputs and times: its code, how
        it is run, and every test input (so a changed dataset or option never reuses a cache)."""
        digest = hashlib.sha256()
        parts = (self.prelude, self.reference_code, self.mode, self.entry_point, self.setup_code)
        if self.exit_status != "zero":  # how a reference may end decides its outputs
            parts = (*parts, self.exit_status)
        for part in (*parts, self.fingerprint):
            digest.update(json.dumps(part).encode() + b"\0")
        digest.update(
            json.dumps([[name, len(tests)] for name, tests in self.inputs.items()]).encode()
        )
        digest.update(self.inputs_text.encode())
        return digest.hexdigest()


def assert_suite(
    asserts: list[str],
    reference_code: str = "",
    *,
    entry_point: str = "",
    setup_code: str = "",
    fingerprint: str = "",
) -> FunctionalSuite:
    """Assert statements as one ``base`` suite of expressions with the values they state
    (see :class:`Example`); ``reference_code``, when given, sets the time limits."""
    examples = [parse_example(a) for a in asserts]
    return FunctionalSuite(
        entry_point=entry_point,
        reference_code=reference_code,
        inputs={"base": [[ex.expr] for ex in examples]},
        expected={"base": [ex.expected for ex in examples]},
        mode="expr",
        setup_code=setup_code,
        fingerprint=fingerprint,
    )
