"""The protocol between the harness and the sandbox child, one JSON object per line over a Unix
stream socket (the child's fd 0 when it starts). Standard library only: the child imports it.

    harness ──Job──▶ child                     first line: what to run and how
    child ──ready──▶ harness                   sent before any program code runs; the socket's
                                               credentials give the harness the child's pid
    child ──load──▶ harness                    the program compiled (stdio) or loaded (call/expr)
    child ──test──▶ harness  (× tests)          judging: one per test, in order
    harness ──prepare/call/run──▶ child        timing sessions: one request at a time
    child ──prepared/called/ran──▶ harness
    child ──done──▶ harness

An event that carries an output has it spliced in last, as the JSON text the child's encoder made
(:func:`event_line`); the harness keeps that text undecoded (:func:`parse_event`), so an output
identical to the reference's is accepted by comparing bytes, and only others are ever decoded.

Trust. In ``call`` and ``expr`` suites the program is loaded into the child, so every line after
``ready`` comes from an interpreter the program controls: the harness validates it strictly
(:func:`parse_event`) and measures time and memory itself, from outside. In ``stdio`` suites the
child never runs program code: each test runs in a fresh fork that cannot reach the channel, and
the child's measurements (the kernel's ``wait4`` accounting) are trusted.
"""

from __future__ import annotations

import json
import re
import types
from typing import Any

MODES = ("call", "expr", "stdio")
# How a stdio program may end and still have its output judged (and timed): "zero" (exit status
# 0 only), "system_exit" (also ``sys.exit(n)``, as graders that run programs in-process and catch
# SystemExit: LiveCodeBench, APPS), "any" (any ending but a time limit: CodeContests' tester
# judges the output alone, a program killed at its limit included, which corebench does not)
EXIT_STATUSES = ("zero", "system_exit", "any")
STATUSES = ("ok", "error", "timeout", "memory", "syntax_error")
MAX_LINE_BYTES = 64 * 1024**2  # one event (an output of up to 8 MB of JSON, escaped)
MAX_TEXT = 2000  # error messages and the like
OUTPUT_FIELD = b', "output": '  # how an event's output is spliced in, after its other fields
# A memory cgroup's counters, per cgroup version: the file that holds the peak (reset by a write)
# and the one that holds the usage. The harness proves them (``cgroups.py``); a timing session
# passed ``--memory-cgroup FD:VERSION`` reads them (``child.MemoryCounter``).
MEMORY_COUNTERS = {
    "v1": ("memory.max_usage_in_bytes", "memory.usage_in_bytes"),
    "v2": ("memory.peak", "memory.current"),
}
# why a timed run ended that says nothing about the program: the machine or the sandbox
WALL_OVERRUN = "wall-clock limit exceeded"
NOT_STARTED = "the timed process did not start"
UNCONFINED = "new processes cannot be forbidden here"
NOT_THE_PROGRAMS = (WALL_OVERRUN, NOT_STARTED, UNCONFINED)


class _Record:
    """A plain record (the child avoids ``dataclasses``, whose import costs ~10 ms per start)."""

    __slots__: tuple[str, ...] = ()

    def __init__(self, **fields: Any):
        for name in self.__slots__:
            setattr(self, name, fields.pop(name, getattr(type(self), f"_{name}", None)))
        if fields:
            raise TypeError(f"{type(self).__name__} has no field {sorted(fields)[0]!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            name: value.to_dict() if isinstance(value, _Record) else value
            for name in self.__slots__
            for value in [getattr(self, name)]
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_dict()})"


class Limits(_Record):
    """Kernel limits the child sets before any program code runs: ``memory`` (RLIMIT_AS bytes),
    ``fsize`` (RLIMIT_FSIZE bytes), ``nproc`` (RLIMIT_NPROC), ``cpu`` (RLIMIT_CPU seconds, soft =
    hard: SIGKILL; a backstop behind the per-test limits)."""

    __slots__ = ("memory", "fsize", "nproc", "cpu")
    memory: int
    fsize: int
    nproc: int
    cpu: int


class SelfTiming(_Record):
    """Reference solutions only (trusted code): time each test in the child, ``warmup`` calls and
    then up to ``repeats`` calls, fewer once they used ``budget_s`` of CPU; report the median."""

    __slots__ = ("warmup", "repeats", "budget_s")
    warmup: int
    repeats: int
    budget_s: float


class Job(_Record):
    """The first line the child reads.

    ``code``; ``mode`` (one of MODES); ``limits``; ``entry_point`` (call mode: ``f`` or
    ``Class.method``); ``setup`` (expr mode: set-up code run after the program); ``tests``
    (judging: a list, or the text ``json.dumps`` made of one; None: a timing session of
    requests); ``stop_on_error``; ``load_cpu_limit`` (stdio:
    compiling; call/expr: enforced by the harness); ``self_timing``; ``drop_to`` (the uid and gid
    that run program code when the child is root); ``sys_path``; ``cpu`` (pin to this CPU);
    ``fresh`` (a timing session: the folders each timed run gets fresh and empty, gone after it); ``exit_status``
    (stdio: which endings count as finished, see ``EXIT_STATUSES``).
    """

    __slots__ = (
        "code", "mode", "limits", "entry_point", "setup", "tests", "stop_on_error",
        "load_cpu_limit", "self_timing", "drop_to", "sys_path", "cpu", "fresh", "exit_status",
    )  # fmt: skip
    _setup, _stop_on_error, _load_cpu_limit, _sys_path, _fresh = "", True, 5.0, (), ()
    _exit_status = "zero"
    code: str
    mode: str
    limits: Limits
    entry_point: str | None
    setup: str
    tests: list[dict[str, Any]] | str | None
    stop_on_error: bool
    load_cpu_limit: float
    self_timing: SelfTiming | None
    drop_to: int | None
    sys_path: list[str] | None
    cpu: int | None
    fresh: list[str]
    exit_status: str

    def to_line(self) -> bytes:
        fields = self.to_dict()
        if isinstance(self.tests, str):  # already JSON text (``FunctionalSuite.inputs_text``)
            tests = fields.pop("tests")
            return f'{json.dumps(fields)[:-1]}, "tests": {tests}}}\n'.encode()
        return json.dumps(fields).encode() + b"\n"

    @classmethod
    def from_line(cls, line: bytes) -> Job:
        data = json.loads(line)
        data["limits"] = Limits(**data["limits"])
        if data.get("self_timing"):
            data["self_timing"] = SelfTiming(**data["self_timing"])
        return cls(**data)


def input_tests(mode: str, sent: list[Any]) -> list[dict[str, Any]]:
    """A call or expr suite's tests as a judging job carries them: each test's input alone. The
    harness enforces their limits from outside; only stdio tests carry theirs, which the child
    enforces, and so do a timing session's requests (``call_test``, ``expr_test``)."""
    key = "args" if mode == "call" else "expr"
    return [{key: item} for item in sent]


def call_test(args_encoded: Any, cpu_limit: float) -> dict[str, Any]:
    return {"args": args_encoded, "cpu_limit": cpu_limit}


def expr_test(expression: str, cpu_limit: float) -> dict[str, Any]:
    return {"expr": expression, "cpu_limit": cpu_limit}


def large(test: dict[str, Any]) -> dict[str, Any]:
    """``test`` (a call or expression) that only an output identical to the expected one passes
    (that one was too large to send, or is a long string): the child reports a long output as a
    digest, without making its text when it can (``codec.encode_text``)."""
    return {**test, "large": True}


def stdio_test(stdin: str, cpu_limit: float, wall_limit: float) -> dict[str, Any]:
    return {"stdin": stdin, "cpu_limit": cpu_limit, "wall_limit": wall_limit}


class ProtocolError(Exception):
    """A line on the channel that is not a well-formed event (forged, garbled or out of order)."""


_ANY = object()
# event -> {field: (type or tuple of types, required)}; output values are checked when decoded
_FIELDS: dict[str, dict[str, tuple[Any, bool]]] = {
    "ready": {},
    "load": {"status": (str, True), "error": (str, False)},
    "test": {
        "i": (int, True),
        "status": (str, True),
        "output": (_ANY, False),
        "digest": (str, False),
        "error": (str, False),
        # measurements: trusted only from a stdio child or a self-timed reference
        "cpu": ((int, float), False),
        "wall": ((int, float), False),
        "peak_kb": (int, False),
        "calls": (int, False),
    },
    "prepared": {},
    # a timing session's run: measured by the child, which never runs program code itself
    "timed": {
        "status": (str, True),
        "error": (str, False),
        "cpu": ((int, float), False),
        "wall": ((int, float), False),
        "peak_kb": (int, False),
        "digest": (str, False),
        "output": (_ANY, False),
    },
    "done": {},
}


def event_line(fields: dict[str, Any], output_json: str | None = None) -> bytes:
    """An event as the child sends it: ``fields`` as JSON, then (when given) the output's JSON
    text spliced in as the last field, not encoded twice."""
    line = json.dumps(fields).encode()
    if output_json is not None:
        line = line[:-1] + OUTPUT_FIELD + output_json.encode() + b"}"
    return line + b"\n"


def passed_test_line(index: int, output_json: bytes) -> bytes:
    """``event_line`` of a test that returned an output, without building it field by field:
    the line every test of a correct program sends (the same bytes)."""
    return b'{"event": "test", "i": %d, "status": "ok", "output": %b}\n' % (index, output_json)


# What the harness keeps of a test whose report was byte for byte the line ``passed_test_line``
# makes of the expected output (``run_judging``'s ``identical``): passed, nothing parsed or
# decoded. No child can send it: "identical" is not a field of its reports.
IDENTICAL = types.MappingProxyType({"event": "test", "status": "ok", "identical": True})

# the head (before OUTPUT_FIELD) of such a line: parsed without the JSON decoder, which it
# matches exactly (an index without leading zeros, JSON's own spacing)
_PASSED_HEAD = re.compile(rb'\{"event": "test", "i": (0|[1-9][0-9]{0,17}), "status": "ok"')


def parse_event(line: bytes) -> dict[str, Any]:
    """One line from the child as a checked event dict; :class:`ProtocolError` otherwise. An
    output (see :func:`event_line`) is kept as its JSON text, bytes that are decoded only when
    needed (``codec.reported_output``); an output anywhere but last is refused."""
    if len(line) > MAX_LINE_BYTES:
        raise ProtocolError(f"a report line of {len(line)} bytes")
    head, spliced, output = line.partition(OUTPUT_FIELD)
    if spliced:
        if not output.endswith(b"}"):
            raise ProtocolError("a report whose output is not its last field")
        if passed := _PASSED_HEAD.fullmatch(head):  # as the JSON decoder would read it
            return {"event": "test", "i": int(passed[1]), "status": "ok", "output": output[:-1]}
        line = head + b"}"
    try:
        event = json.loads(line)
    except Exception as exc:  # RecursionError for deeply nested text, MemoryError, ValueError
        raise ProtocolError(f"unreadable report ({type(exc).__name__})") from None
    if not isinstance(event, dict):
        raise ProtocolError("a report that is not an object")
    if "output" in event:
        raise ProtocolError("a report whose output is not its last field")
    if spliced:
        event["output"] = output[:-1]
    kind = event.get("event")
    fields = _FIELDS.get(kind) if isinstance(kind, str) else None
    if fields is None:
        raise ProtocolError(f"unknown report {str(kind)[:40]!r}")
    for key, value in event.items():
        if key == "event":
            continue
        if key not in fields:
            raise ProtocolError(f"{kind} report with unexpected field {key[:40]!r}")
        kinds = fields[key][0]
        if kinds is not _ANY and (isinstance(value, bool) or not isinstance(value, kinds)):
            raise ProtocolError(f"{kind} report with a malformed {key!r}")
    missing = [key for key, (_, required) in fields.items() if required and key not in event]
    if missing:
        raise ProtocolError(f"{kind} report without {missing[0]!r}")
    status = event.get("status")
    if status is not None and status not in STATUSES:
        raise ProtocolError(f"{kind} report with unknown status {str(status)[:40]!r}")
    if "error" in event:
        event["error"] = event["error"][:MAX_TEXT]
    return event
