"""What travels to and from the judging service, as pydantic models (JSON on the wire).

A request names its tests one of two ways: a registered benchmark's task (``task``: the service
builds the suite from its own copy of the data, exactly as ``corebench run`` does), or the tests
themselves (``tests``: a suite as data, see :class:`Tests`). Test inputs and expected outputs are
JSON in the sandbox codec's form (``sandbox/codec.py``): plain JSON values are themselves; a tuple,
set, dict, bytes, big integer or non-finite float is an object tagged ``"$"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..comparators import Comparator, Tokens, comparator_from_spec
from ..config import MAX_SERVICE_REPEATS, MAX_TOTAL_TIME_S
from ..errors import CorebenchError
from ..sandbox.codec import decode, encode
from ..testsuite import FunctionalSuite, assert_suite


class Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskRef(Wire):
    """A task of a benchmark registered with the service (``corebench list`` names them)."""

    benchmark: str
    task_id: str
    options: dict[str, Any] = {}  # the benchmark's options, as ``corebench run -B``


class StdioCase(Wire):
    input: str
    output: str


class Tests(Wire):
    """A suite as data. Give ``inputs`` (one list of tests per suite name, each test a list: the
    call's arguments, ``[expression]`` or ``[stdin]`` by ``mode``) with ``expected`` outputs or a
    ``reference_code`` whose outputs are the expected ones; or, shorter, ``asserts`` (assert
    statements, judged as expressions) or ``stdio`` (input/output pairs, judged as contest
    checkers judge them)."""

    __test__ = False  # not a pytest class
    mode: Literal["call", "expr", "stdio"] = "call"
    entry_point: str = ""
    inputs: dict[str, list[list[Any]]] | None = None
    expected: dict[str, list[Any]] | None = None
    asserts: list[str] | None = None
    stdio: list[StdioCase] | None = None
    reference_code: str = ""
    comparator: str | dict[str, Any] | None = None  # a name, or Comparator.spec(); default exact
    time_limit_s: float | None = Field(None, gt=0, le=MAX_TOTAL_TIME_S)
    time_limit_fixed: bool = False  # time_limit_s even with a reference (a benchmark's own)
    exit_status: Literal["zero", "system_exit", "any"] = "zero"  # stdio endings judged
    setup_code: str = ""
    prelude: str = ""
    fingerprint: str = ""

    @model_validator(mode="after")
    def _one_form(self) -> Tests:
        forms = [f for f in ("inputs", "asserts", "stdio") if getattr(self, f) is not None]
        if len(forms) != 1:
            raise ValueError("give exactly one of inputs, asserts or stdio")
        if self.inputs is not None:
            if not any(self.inputs.values()):
                raise ValueError("inputs holds no test")
            if self.expected is None and not self.reference_code:
                raise ValueError("inputs need expected outputs or a reference_code")
            if self.expected is not None and (
                {k: len(v) for k, v in self.expected.items()}
                != {k: len(v) for k, v in self.inputs.items()}
            ):
                raise ValueError("expected must have one output per input, under the same names")
            if self.mode == "call" and not self.entry_point:
                raise ValueError('mode "call" needs an entry_point')
        elif not (self.asserts or self.stdio):
            raise ValueError("asserts or stdio holds no test")
        return self

    def suite(self, comparators: Mapping[str, type[Comparator]]) -> FunctionalSuite:
        """The suite these tests describe; ``comparators`` are the ones the service knows."""
        if self.asserts is not None:
            suite = assert_suite(
                self.asserts,
                self.reference_code,
                entry_point=self.entry_point,
                setup_code=self.setup_code,
                fingerprint=self.fingerprint,
            )
        elif self.stdio is not None:
            suite = FunctionalSuite(
                "",
                self.reference_code,
                {"tests": [[c.input] for c in self.stdio]},
                expected={"tests": [c.output for c in self.stdio]},
                comparator=Tokens(),
                mode="stdio",
                fingerprint=self.fingerprint,
            )
        else:
            try:
                inputs = {k: [decode(args) for args in v] for k, v in self.inputs.items()}
                expected = (
                    {k: [decode(out) for out in v] for k, v in self.expected.items()}
                    if self.expected is not None
                    else None
                )
            except (ValueError, TypeError, AttributeError) as exc:
                raise CorebenchError(f"tests: a value is not in the codec's form: {exc}") from None
            if any(not isinstance(args, list) for tests in inputs.values() for args in tests):
                raise CorebenchError("tests: each test input must be a list")
            suite = FunctionalSuite(
                self.entry_point,
                self.reference_code,
                inputs,
                expected=expected,
                mode=self.mode,
                setup_code=self.setup_code,
                prelude=self.prelude,
                fingerprint=self.fingerprint,
            )
        if self.comparator is not None:
            suite.comparator = comparator_from_spec(self.comparator, comparators)
        suite.time_limit_s = self.time_limit_s or suite.time_limit_s
        suite.time_limit_fixed, suite.exit_status = self.time_limit_fixed, self.exit_status
        return suite

    @classmethod
    def of(cls, suite: FunctionalSuite) -> Tests:
        """A suite as data (what a remote executor sends)."""
        assert isinstance(suite.comparator, Comparator)
        return cls(
            mode=suite.mode,
            entry_point=suite.entry_point,
            inputs={k: [encode(args) for args in v] for k, v in suite.inputs.items()},
            expected=(
                {k: [encode(out) for out in v] for k, v in suite.expected.items()}
                if suite.expected is not None
                else None
            ),
            reference_code=suite.reference_code,
            comparator=suite.comparator.spec(),
            time_limit_s=suite.time_limit_s,
            time_limit_fixed=suite.time_limit_fixed,
            exit_status=suite.exit_status,
            setup_code=suite.setup_code,
            prelude=suite.prelude,
            fingerprint=suite.fingerprint,
        )


class JudgeRequest(Wire):
    """One program to judge: its ``code`` (or a model's whole ``completion``, from which the code
    is extracted as ``corebench run`` extracts it) and its tests (``task``, ``tests``, or in a
    batch the name of one of the batch's ``suites``)."""

    id: str | None = Field(None, max_length=200)  # a retry with the same id is not judged again
    code: str | None = None
    completion: str | None = None
    task: TaskRef | None = None
    tests: Tests | None = None
    suite: str | None = None
    all_tests: bool = False  # run every test (pass rates), not stop at the first failure
    repeats: int = Field(0, ge=0, le=MAX_SERVICE_REPEATS)  # > 0: measure runtime and memory
    sample_index: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _complete(self) -> JudgeRequest:
        if (self.code is None) == (self.completion is None):
            raise ValueError("give exactly one of code or completion")
        if sum(x is not None for x in (self.task, self.tests, self.suite)) != 1:
            raise ValueError("give exactly one of task, tests or (in a batch) suite")
        return self


class BatchRequest(Wire):
    """Several programs at once; ``suites`` holds tests several items share (by name)."""

    suites: dict[str, Tests] = {}
    items: list[JudgeRequest] = Field(min_length=1)

    @model_validator(mode="after")
    def _named_suites(self) -> BatchRequest:
        for i, item in enumerate(self.items):
            if item.suite is not None and item.suite not in self.suites:
                raise ValueError(f"items[{i}] names suite {item.suite!r}, not in suites")
        return self


class ExamplesRequest(Wire):
    """A program on visible examples (assert lines or stdin/stdout pairs), as debugging agents
    and multi-turn training run their own code; never hidden tests."""

    code: str
    examples: list[str | StdioCase] = Field(min_length=1)
