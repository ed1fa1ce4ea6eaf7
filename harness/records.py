"""Typed records that flow through a run. All serialize to JSON with pydantic, no glue code.

Task ──system──▶ Solution (code + trace of ModelCalls) ──sandbox──▶ ExecutionResult
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .config import CALIBRATION_REFERENCE_S


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Message(Record):
    role: Literal["system", "user", "assistant"]
    content: str


class GenerationRequest(Record):
    """One chat completion asked of a backend."""

    messages: list[Message]
    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    stop: list[str] = Field(default_factory=list)
    # the answer ends where this regular expression first matches (the match kept), e.g. after
    # the first complete code block; backends that cannot stop there cut the text the same way
    stop_pattern: str | None = None
    seed: int | None = None


class Generation(Record):
    """What a backend returns for one request: text and an honest account of the work."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: Literal["stop", "length", "error"]
    latency_s: float
    batch_size: int = 1


class ModelCall(Record):
    """One entry of a solution's trace."""

    role: str
    model: str
    messages: list[Message]
    completion: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    latency_s: float
    batch_size: int = 1


class StdioExample(Record):
    """A sample a contest statement shows: the program's stdin and the stdout expected."""

    input: str
    output: str


class Task(Record):
    """What a system may see of a problem. Hidden tests are never part of it."""

    task_id: str
    benchmark: str
    prompt: str
    entry_point: str | None = None
    # what the prompt shows as examples: assert lines (functions) or stdin/stdout samples
    examples: list[str | StdioExample] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class Solution(Record):
    """A system's final program for one (task, sample) and how it got there."""

    task_id: str
    sample_index: int
    code: str
    trace: list[ModelCall] = Field(default_factory=list)
    artifacts: dict[str, Any] = Field(default_factory=dict)  # e.g. the plan
    error: str | None = None  # e.g. "no code found", "call budget exceeded"
    wall_time_s: float = 0.0

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.trace)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.trace)


class Verdict(str, Enum):
    passed = "passed"
    wrong_answer = "wrong_answer"
    runtime_error = "runtime_error"
    timeout = "timeout"
    memory_exceeded = "memory_exceeded"
    syntax_error = "syntax_error"
    sandbox_violation = "sandbox_violation"
    no_code = "no_code"


class TestOutcome(Record):
    """One hidden test of one solution."""

    __test__ = False  # not a pytest class

    suite: str  # "base" or "plus" (EvalPlus), "tests" otherwise
    index: int
    verdict: Verdict
    wall_s: float | None = None
    cpu_s: float | None = None
    peak_memory_bytes: int | None = None  # above the interpreter's own baseline
    detail: str | None = None  # failing input, exception type and message


def calibrated(cpu_s: float, calibration_s: float | None) -> float:
    """``cpu_s`` in calibrated seconds: scaled by how fast the same child ran the fixed calibration
    work (CALIBRATION_REFERENCE_S on the reference machine); unchanged when not calibrated."""
    return cpu_s * CALIBRATION_REFERENCE_S / calibration_s if calibration_s else cpu_s


class Measurement(Record):
    """Runtime and memory of a passing solution on its task's heaviest tests, measured in the
    measurement phase (each timed run a fresh process; the median over runs), next to the
    reference solution measured the same way, their runs alternating on one CPU."""

    repeats: int
    runtime_s: float  # sum over the measured tests of the median wall time of a run
    cpu_s: float  # sum over the measured tests of the median CPU time of a run (all threads)
    peak_memory_bytes: int
    reference_runtime_s: float
    reference_peak_memory_bytes: int
    # cpu_s / reference_cpu_s, the two timed in alternating runs (EffiBench's NET for one task,
    # up to calibration: NET sums calibrated CPU times of samples timed at different moments)
    runtime_ratio: float
    reference_cpu_s: float | None = None  # None in runs stored before CPU ratios
    memory_ratio: float  # with both sides floored at MEMORY_FLOOR_BYTES (NMU for one task)
    # seconds per calibration-work call around the solution's / reference's runs, each test's own
    # (the mean of the samples around it) weighted by its CPU time; None in runs stored before
    calibration_s: float | None = None
    reference_calibration_s: float | None = None
    # the tests measured (run-order indices: the task's heaviest for its reference), and per
    # test the timed runs, the median CPU seconds of a run, and the largest peak memory
    tests: list[int] | None = None
    runs: list[int] | None = None
    test_cpu_s: list[float] | None = None
    test_peak_memory_bytes: list[int] | None = None

    @property
    def calibrated_cpu_s(self) -> float:
        """CPU seconds on the reference machine: stable while this machine's speed drifts."""
        return calibrated(self.cpu_s, self.calibration_s)

    @property
    def reference_calibrated_cpu_s(self) -> float | None:
        if self.reference_cpu_s is None:
            return None
        return calibrated(self.reference_cpu_s, self.reference_calibration_s)


class ExecutionResult(Record):
    """The sandbox's verdict on a solution, computed by the harness, never by the solution."""

    task_id: str
    sample_index: int
    verdict: Verdict
    suite_verdicts: dict[str, Verdict] = Field(default_factory=dict)
    tests: list[TestOutcome] = Field(default_factory=list)
    runtime_s: float | None = None  # wall time inside the tests (start-up and imports excluded)
    cpu_s: float | None = None  # CPU time inside the tests
    wall_s: float | None = None  # the whole child process, start-up included
    peak_memory_bytes: int | None = None
    first_failure: str | None = None
    stdout: str = ""
    stderr: str = ""
    isolation: str = ""
    measurement: Measurement | None = None
    # why the measurement phase refused to measure this passing solution (its verdict stands)
    measurement_refused: str | None = None

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.passed


class RunConfig(Record):
    """Everything that defines a run; two runs with equal configs produce the same samples."""

    benchmark: str
    system: str
    model: str
    n: int = 1
    k: list[int] = Field(default_factory=lambda: [1])
    temperature: float = 0.0
    top_p: float = 0.95
    seed: int = 0
    max_new_tokens: int = 512
    limit: int | None = None
    tasks: list[str] | None = None
    split: str = "test"
    system_options: dict[str, Any] = Field(default_factory=dict)
    benchmark_options: dict[str, Any] = Field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        """The fields that decide which samples exist and what they contain."""
        return self.model_dump(exclude={"k"})
