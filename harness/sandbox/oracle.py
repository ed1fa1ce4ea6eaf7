"""Reference outputs and reference CPU times (which set the per-test time limits).

The reference solution is the dataset's own code, not a program under test: it runs once per
suite in the sandbox and times itself (a warm-up call, then the median of up to
REFERENCE_TIMING_REPEATS calls, fewer once they used REFERENCE_TIMING_BUDGET_S of CPU; a stdio
reference is timed by the child, one process per run). Results are cached on disk under a key
made of everything that determines them: the suite's content (code, mode, every test input),
how large outputs are digested (``codec.FORMAT``), the Python version and the timing settings.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import platform
import sys
import threading
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..bounded import Bounded
from ..config import (
    REFERENCE_CPU_LIMIT_S,
    REFERENCE_TIMING_BUDGET_S,
    REFERENCE_TIMING_REPEATS,
    REFERENCE_TIMING_WARMUP,
    REFERENCES_KEPT,
    cache_dir,
)
from ..errors import CorebenchError
from ..testsuite import FunctionalSuite
from . import codec
from .codec import reported_output
from .judging import Judged, wall_budget
from .protocol import Job, SelfTiming, passed_test_line
from .supervisor import Budget

REFERENCE_FORMAT = 9  # bump when the cached reference format changes
RunJudging = Callable[[Job, list[Budget]], Awaitable[Judged]]


class Expected:
    """Expected outputs per suite, decoded on first use. ``stored`` keeps them as the cache does
    (the JSON the child reported, or a digest), so that an identical report needs no decoding.
    A long string read from the cache (``_read``) comes as its digest ("sha") and where its text
    lies in the file (``texts``), read only if a comparison needs more than the digest."""

    def __init__(
        self,
        decoded: dict[str, list[Any]] | None = None,
        stored: dict[str, list[dict[str, Any]]] | None = None,
        texts: LongTexts | None = None,
    ):
        self.stored = stored
        self.texts = texts
        self._loading = threading.Lock()
        self._decoded: dict[str, list[Any]] = dict(decoded or {})
        self._digests: dict[tuple[str, int], str] = {}  # long strings' (every sample compares)
        self._lines: list[bytes | None] | None = None
        self._order: list[tuple[str, int]] | None = None

    def __getitem__(self, name: str) -> list[Any]:
        if name not in self._decoded:
            if self.stored is None or name not in self.stored:
                raise KeyError(name)
            outputs = range(len(self.stored[name]))
            self._decoded[name] = [reported_output(self.stored_output(name, i)) for i in outputs]
        return self._decoded[name]

    def stored_output(self, name: str, index: int) -> dict[str, Any] | None:
        """The cached form of one expected output (a long string's text read now if it was left
        in the file); None when the dataset states them."""
        stored = None if self.stored is None else self.stored[name][index]
        if stored is not None and "output" not in stored and "sha" in stored:
            if self.texts is None:
                raise CorebenchError("a cached reference's long text, with no file to read")
            with self._loading:  # judging threads compare too
                if "output" not in stored:
                    stored["output"] = self.texts.read(stored["at"], stored["size"], stored["sha"])
        return stored

    def _entry(self, name: str, index: int) -> dict[str, Any] | None:
        """The cached form as it is (a long string's text may still be in the file)."""
        return None if self.stored is None else self.stored[name][index]

    def order(self) -> list[tuple[str, int]]:
        """(suite name, index) of every stored output, suite by suite: the order tests run in."""
        if self._order is None:
            stored = self.stored or {}
            self._order = [
                (name, i) for name, outputs in stored.items() for i in range(len(outputs))
            ]
        return self._order

    def identical_lines(self) -> list[bytes | None]:
        """Per stored output, suite by suite (the order tests run in), the report line
        (``protocol.passed_test_line``, without its newline) of an output whose text is this
        one's, when that text is equal to itself (``codec.equal_to_itself``) and at most
        LONG_STRING_CHARS long, else None. Made once: every sample reuses it."""
        if self._lines is None:  # a long string left in the file has no line ("output")
            texts = [
                entry.get("output") for entries in (self.stored or {}).values() for entry in entries
            ]
            self._lines = [
                passed_test_line(run_index, text)[:-1]
                if text is not None
                and len(text) <= codec.LONG_STRING_CHARS
                and codec.equal_to_itself(text)
                else None
                for run_index, text in enumerate(texts)
            ]
        return self._lines

    def digested(self, name: str, index: int) -> bool:
        """The reference's output was too large to send: only its digest is known."""
        stored = self._entry(name, index)
        return stored is not None and "digest" in stored

    def long_string(self, name: str, index: int) -> bool:
        """The reference's output is a string whose text is over ``codec.LONG_STRING_CHARS``
        (a JSON text that starts with a quote is a string; the cache marks one by its "sha")."""
        stored = self._entry(name, index)
        if stored is not None and "sha" in stored:
            return True
        text = None if stored is None else stored.get("output")
        return text is not None and _long_string(text)

    def digest(self, name: str, index: int) -> str | None:
        """The expected output's digest as the child reports it: the stored one, or for a long
        string the sha256 of its text (``codec.encode_text``); None for any other output."""
        stored = self._entry(name, index)
        if stored is None:
            return None
        if "digest" in stored or "sha" in stored:
            return stored.get("digest") or stored["sha"]
        if not self.long_string(name, index):
            return None
        if (name, index) not in self._digests:
            self._digests[name, index] = hashlib.sha256(stored["output"]).hexdigest()
        return self._digests[name, index]


@dataclass
class Reference:
    """Expected outputs and the reference solution's CPU time, per suite and test."""

    outputs: Expected
    cpu_s: dict[str, list[float | None]]  # None: no reference time (the suite's limit applies)


def reference_key(task_id: str, suite: FunctionalSuite) -> str:
    material = json.dumps(
        [
            REFERENCE_FORMAT,
            codec.FORMAT,
            sys.version,
            platform.machine(),
            task_id,
            suite.content_key,
            [REFERENCE_TIMING_WARMUP, REFERENCE_TIMING_REPEATS, REFERENCE_TIMING_BUDGET_S],
        ]
    )
    return hashlib.sha256(material.encode()).hexdigest()[:40]


class Oracle:
    """Reference results per suite: computed once (one computation at a time per suite), kept in
    memory and on disk."""

    def __init__(self, make_job: Callable[..., Job], run_judging: RunJudging):
        self.make_job, self.run_judging = make_job, run_judging
        self._memory: Bounded[str, Reference] = Bounded(REFERENCES_KEPT)
        self._locks: Bounded[str, asyncio.Lock] = Bounded(REFERENCES_KEPT)

    async def reference(self, task_id: str, suite: FunctionalSuite) -> Reference:
        """Expected outputs (the dataset's, when it states them) and reference CPU times."""
        if suite.expected is not None and not suite.reference_code:
            return Reference(
                outputs=Expected(suite.expected),
                cpu_s={name: [None] * len(outs) for name, outs in suite.expected.items()},
            )
        key = reference_key(task_id, suite)
        if key in self._memory:
            return self._memory[key]
        async with self._locks.setdefault(key, asyncio.Lock()):
            if key not in self._memory:
                data = await self._cached(key, task_id, suite)
                outputs = (
                    Expected(suite.expected)
                    if suite.expected
                    else Expected(None, data["outputs"], data.get("texts"))
                )
                self._memory[key] = Reference(outputs, data["cpu_s"])
            return self._memory[key]

    async def cost(self, task_id: str, suite: FunctionalSuite) -> float:
        """The reference's CPU seconds over all tests (how long judging the task takes), read
        from a small file found by :func:`cost_key`: ordering work by cost loads no reference
        and encodes no input before the first program starts."""
        if suite.expected is not None and not suite.reference_code:
            return 0.0
        try:
            return float(_path(cost_key(task_id, suite), ".cost").read_text())
        except (OSError, ValueError):
            return _total_cpu((await self.reference(task_id, suite)).cpu_s)

    async def _cached(self, key: str, task_id: str, suite: FunctionalSuite) -> dict[str, Any]:
        """From the disk cache, or computed and stored. Files are read and written on a worker
        thread, and outputs stay the text they were sent as (:func:`_dump`): loading MBPP+'s
        largest reference (11 MB) holds up nothing else."""
        path = _path(key, ".ref")
        data = await asyncio.to_thread(_read, path)
        if data is None:
            data = await self._compute(task_id, suite)
            await asyncio.to_thread(_write, path, _dump(data))
        cost, total = _path(cost_key(task_id, suite), ".cost"), repr(_total_cpu(data["cpu_s"]))
        try:
            kept = cost.read_text()
        except OSError:
            kept = None
        if kept != total:  # none yet, or left by a reference computed before (another format)
            _write(cost, total)
        return data

    async def _compute(self, task_id: str, suite: FunctionalSuite) -> dict[str, Any]:
        names, size = list(suite.inputs), suite.size
        calls = 1 + REFERENCE_TIMING_WARMUP + REFERENCE_TIMING_REPEATS
        job = self.make_job(
            suite,
            suite.reference_code,
            [REFERENCE_CPU_LIMIT_S] * size,
            stop_on_error=False,
            self_timing=SelfTiming(
                warmup=REFERENCE_TIMING_WARMUP,
                repeats=REFERENCE_TIMING_REPEATS,
                budget_s=REFERENCE_TIMING_BUDGET_S,
            ),
        )
        budget = Budget(REFERENCE_CPU_LIMIT_S * calls, wall_budget(REFERENCE_CPU_LIMIT_S * calls))
        judged = await self.run_judging(job, [budget] * size)
        tests = {i: e for i, e in enumerate(judged.tests) if e["status"] == "ok"}
        bad = [i for i in range(size) if i not in tests]
        if bad and suite.expected is None:  # its outputs are the expected ones: all are needed
            first = judged.tests[bad[0]] if bad[0] < len(judged.tests) else {}
            why = first.get("error") or first.get("status") or _why_stopped(judged)
            raise CorebenchError(
                f"reference solution of {task_id} fails on {len(bad)} of {size} inputs ({why})"
            )
        outputs: dict[str, list[Any]] = {}
        cpu: dict[str, list[float | None]] = {}
        index = 0
        for name in names:
            span = range(index, index + len(suite.inputs[name]))
            outputs[name] = [_stored_output(tests.get(i, {})) for i in span]
            cpu[name] = [tests[i].get("cpu") if i in tests else None for i in span]
            index = span.stop
        return {"outputs": outputs, "cpu_s": cpu}


def cost_key(task_id: str, suite: FunctionalSuite) -> str:
    """Where a reference's total CPU time is kept: the task, the dataset version and the
    reference code, but not every input, so it is cheap to compute for every task up front. A
    cost found under a stale key only changes the order work is done in, never a result."""
    material = [REFERENCE_FORMAT, sys.version, platform.machine(), task_id, suite.fingerprint]
    material += [suite.reference_code, suite.mode, suite.size]
    return "cost-" + hashlib.sha256(json.dumps(material).encode()).hexdigest()[:40]


def _dump(data: dict[str, Any]) -> bytes:
    """A reference as its cache file: one JSON line of the CPU times and the outputs, then the
    outputs' JSON texts (as the child sent them), each entry saying where its text lies in what
    follows the line ("at", "size"). Long strings come last, with their digest ("sha"):
    reading the file reads none of them (``_read``; HumanEval/15's are 147 MB)."""
    short: list[bytes] = []
    long: list[tuple[dict[str, Any], bytes]] = []
    outputs: dict[str, list[dict[str, Any]]] = {}
    offset = 0
    for name, stored in data["outputs"].items():
        outputs[name] = []
        for entry in stored:
            if "output" in entry:
                text = entry["output"]
                if _long_string(text):
                    entry = {"size": len(text), "sha": hashlib.sha256(text).hexdigest()}
                    long.append((entry, text))
                else:
                    entry = {"at": offset, "size": len(text)}
                    short.append(text)
                    offset += len(text)
            outputs[name].append(entry)
    head = {"cpu_s": data["cpu_s"], "outputs": outputs, "short": offset}
    for entry, text in long:
        entry["at"], offset = offset, offset + len(text)
    head["size"] = offset
    return b"\n".join([json.dumps(head).encode(), b"".join(short + [t for _, t in long])])


def _read(path: Path) -> dict[str, Any] | None:
    """A cached reference (outputs kept as their text: nothing large is decoded, and long
    strings stay in the file, read through ``texts`` when needed); None when there is none, or
    a torn or foreign file (computed again)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    texts = LongTexts(fd)  # closes the file once nothing needs it
    try:
        with open(fd, "rb", closefd=False) as file:
            data = json.loads(file.readline())
            body = file.tell()
            short = file.read(data.pop("short"))
        if os.fstat(fd).st_size != body + data.pop("size"):
            return None
        for stored in data["outputs"].values():
            for entry in stored:
                if "sha" in entry:
                    entry["at"] += body
                    data["texts"] = texts  # kept open while this reference is
                elif "at" in entry:
                    at, size = entry.pop("at"), entry.pop("size")
                    entry["output"] = short[at : at + size]
                    if len(entry["output"]) != size:
                        return None
        return data
    except (OSError, ValueError, LookupError, TypeError, AttributeError):
        return None


class LongTexts:
    """The long strings of a cached reference, read from its file on demand. The file stays
    open while a reference uses it, so a cache rewritten or removed meanwhile changes nothing."""

    def __init__(self, fd: int):
        self.fd = fd
        weakref.finalize(self, os.close, fd)

    def read(self, at: int, size: int, sha: str) -> bytes:
        text = os.pread(self.fd, size, at)
        if len(text) != size or hashlib.sha256(text).hexdigest() != sha:
            raise CorebenchError(
                "a cached reference output is damaged; delete the cache's references folder"
            )
        return text


def _long_string(text: bytes) -> bool:
    """An output's JSON text is a string longer than ``codec.LONG_STRING_CHARS``."""
    return len(text) > codec.LONG_STRING_CHARS and text[:1] == b'"'


def _path(key: str, suffix: str) -> Path:
    return cache_dir() / "references" / f"{key}{suffix}"


def _write(path: Path, content: bytes | str) -> None:
    """Atomically: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(content.encode() if isinstance(content, str) else content)
    tmp.replace(path)


def _total_cpu(cpu_s: dict[str, list[float | None]]) -> float:
    return sum(c or 0.0 for times in cpu_s.values() for c in times)


def _why_stopped(judged: Judged) -> str:
    if judged.stop is not None:
        return judged.stop.detail
    if judged.load is not None and judged.load["status"] != "ok":
        return judged.load.get("error") or judged.load["status"]
    return f"exited (code {judged.ending.returncode})"


def _stored_output(event: dict[str, Any]) -> dict[str, Any]:
    """What the cache keeps of a test event: its output (the JSON text the child sent) or its
    digest."""
    return {key: event[key] for key in ("output", "digest") if key in event}
