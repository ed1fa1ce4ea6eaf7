"""The judging service's core, apart from HTTP: requests resolved to suites, admitted up to a
bound, and judged in one event loop by one :class:`~corebench.harness.sandbox.Executor` through
``Executor.judge``, the call ``run`` and ``evaluate`` make. A request id is judged at most once:
a retry, or the same id twice in flight, gets the first judging's answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..bounded import Bounded
from ..comparators import BUILT_IN, Comparator
from ..config import SERVICE_PENDING_PER_WORKER, SERVICE_REMEMBERED_IDS
from ..context import ExampleCheck
from ..errors import CorebenchError, DatasetMissingError, UnknownNameError
from ..examples import parse_example
from ..extract import extract_code
from ..metadata import package_versions
from ..records import ExecutionResult, StdioExample, Verdict
from ..registry import Plugins, default_plugins
from ..sandbox import Executor, SandboxExecutor
from ..testsuite import FunctionalSuite
from .metrics import Metrics
from .wire import BatchRequest, ExamplesRequest, JudgeRequest, StdioCase, TaskRef

SUITES_KEPT = 4096  # benchmark task suites kept built (building one hashes all its inputs)


class RequestError(CorebenchError):
    """A request the service answers with an HTTP error ``status`` and this message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class Work:
    """One program to judge, resolved."""

    request: JudgeRequest
    suite: FunctionalSuite
    task_id: str
    digest: str  # of the request: a retry is the same request, not merely the same id


class JudgeService:
    """Judges programs with ``executor`` (made here when not given), at most ``capacity``
    programs admitted (running or waiting) at a time; more are refused, not queued without end."""

    def __init__(
        self,
        executor: SandboxExecutor | None = None,
        *,
        plugins: Plugins | None = None,
        data_dir: Path | None = None,
        capacity: int | None = None,
    ):
        self.plugins = plugins or default_plugins()
        self.data_dir = data_dir
        self.comparators: dict[str, type[Comparator]] = dict(BUILT_IN)
        for registered in self.plugins.benchmarks:
            self.comparators.update((c.name, c) for c in registered.component.comparators)
        self.metrics = Metrics()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        # the executor's locks belong to the loop that runs its work
        self.executor = (
            executor or asyncio.run_coroutine_threadsafe(_make_executor(), self.loop).result()
        )
        self.capacity = capacity or SERVICE_PENDING_PER_WORKER * self.executor.workers
        self._lock = threading.RLock()  # admission and the ids
        self._pending = 0
        self._by_id: Bounded[str, tuple[str, concurrent.futures.Future]] = Bounded(
            SERVICE_REMEMBERED_IDS
        )
        self._data_lock = threading.Lock()
        self._benchmarks: dict[tuple[str, str], Any] = {}
        self._suites: Bounded[tuple[str, str, str], FunctionalSuite] = Bounded(SUITES_KEPT)

    def close(self) -> None:
        """Stop the loop (after the work in it) and the executor's pre-started children."""
        self.executor.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)

    # --- what the service reports -----------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._pending

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "version": package_versions().get("corebench"),
            "isolation": self.executor.mode,
            "memory_accounting": self.executor.memory_accounting,
            "engine": self.executor.engine,
            "workers": self.executor.workers,
            "timing_sessions": self.executor.timing_sessions,
            "memory_bytes": self.executor.memory_bytes,
            "capacity": self.capacity,
            "in_flight": self.in_flight,
            "programs_judged": self.metrics.programs,
            "benchmarks": [r.name for r in self.plugins.benchmarks],
        }

    def metrics_text(self) -> str:
        return self.metrics.text(
            {
                "in_flight": self.in_flight,
                "capacity": self.capacity,
                "workers": self.executor.workers,
            }
        )

    # --- requests to work -----------------------------------------------------------------------
    def resolve(self, batch: BatchRequest) -> list[Work]:
        """Every item's suite, before anything is judged: one bad item refuses the batch."""
        shared = {name: self._inline(tests) for name, tests in batch.suites.items()}
        works = []
        for item in batch.items:
            if item.task is not None:
                suite, task_id = self._task_suite(item.task), item.task.task_id
            elif item.tests is not None:
                suite, task_id = self._inline(item.tests), "inline"
            else:
                suite, task_id = shared[str(item.suite)], f"inline:{item.suite}"
            digest = hashlib.sha256(
                json.dumps(
                    [
                        item.model_dump(mode="json", exclude={"id", "tests", "suite"}),
                        task_id,
                        suite.content_key,
                    ],
                    sort_keys=True,
                ).encode()
            ).hexdigest()
            works.append(Work(item, suite, task_id, digest))
        return works

    def _inline(self, tests: Any) -> FunctionalSuite:
        try:
            return tests.suite(self.comparators)
        except (CorebenchError, ValueError, TypeError) as exc:  # e.g. a line that is no assert
            raise RequestError(422, f"tests: {exc}") from None

    def _task_suite(self, ref: TaskRef) -> FunctionalSuite:
        options = json.dumps(ref.options, sort_keys=True)
        key = (ref.benchmark, options, ref.task_id)
        with self._data_lock:
            if key in self._suites:
                return self._suites[key]
            try:
                benchmark = self._benchmarks.get(key[:2])
                if benchmark is None:
                    component = self.plugins.benchmarks.get(ref.benchmark).component
                    benchmark = self._benchmarks[key[:2]] = component(self.data_dir, **ref.options)
                suite = benchmark.test_suite(ref.task_id)
            except UnknownNameError as exc:
                raise RequestError(404, str(exc)) from None
            except DatasetMissingError as exc:
                raise RequestError(503, f"the service has no data for it: {exc}") from None
            except KeyError:
                raise RequestError(404, f"unknown {ref.benchmark} task {ref.task_id!r}") from None
            except CorebenchError as exc:
                raise RequestError(422, str(exc)) from None
            self._suites[key] = suite
            return suite

    # --- judging ---------------------------------------------------------------------------------
    def judge(self, works: list[Work]) -> list[dict[str, Any]]:
        """Judge ``works`` (blocking): one answer per item, in order; an item whose judging failed
        (the sandbox could not start) answers ``{"id", "error"}`` and may be retried."""
        futures = self._admit_works(works)
        answers = []
        for work, future in zip(works, futures, strict=True):
            try:
                answers.append(future.result())
            except CorebenchError as exc:
                answers.append({"id": work.request.id, "error": str(exc)})
        return answers

    def _admit_works(self, works: list[Work]) -> list[concurrent.futures.Future]:
        with self._lock:
            found: dict[str, concurrent.futures.Future | None] = {}
            new = 0
            for work in works:
                rid = work.request.id
                if rid is not None and rid in found:
                    continue
                if rid is not None and rid in self._by_id:
                    digest, future = self._by_id[rid]
                    if digest != work.digest:
                        raise RequestError(409, f"id {rid!r} was given to a different request")
                    found[rid] = future
                    continue
                if rid is not None:
                    found[rid] = None
                new += 1
            self._reserve(new)
            futures = []
            reused = 0
            for work in works:
                rid = work.request.id
                if rid is not None and found.get(rid) is not None:
                    futures.append(found[rid])
                    reused += 1
                    continue
                future = asyncio.run_coroutine_threadsafe(self._judge(work), self.loop)
                if rid is not None:
                    found[rid] = future
                    self._by_id[rid] = (work.digest, future)
                # runs at once, in this thread, if the judging already ended (hence the RLock)
                future.add_done_callback(lambda f, rid=rid: self._finished(f, rid))
                futures.append(future)
        self.metrics.reuse(reused)
        return futures

    def _reserve(self, count: int) -> None:
        """Admit ``count`` more programs or refuse them all (called with the lock held)."""
        if count > self.capacity:
            raise RequestError(
                413,
                f"{count} programs in one request; this service takes at most "
                f"{self.capacity} at a time: split it",
            )
        if self._pending + count > self.capacity:
            raise RequestError(
                429,
                f"busy: {self._pending} programs in flight, room for "
                f"{self.capacity - self._pending}; retry later",
            )
        self._pending += count

    def _finished(self, future: concurrent.futures.Future, rid: str | None) -> None:
        with self._lock:
            self._pending -= 1
            failed = future.cancelled() or future.exception() is not None
            if failed and rid is not None and self._by_id.get(rid, (None, None))[1] is future:
                del self._by_id[rid]  # nothing was judged: a retry should judge it
        if not failed and "verdict" in future.result():
            self.metrics.judged(future.result()["verdict"])

    async def _judge(self, work: Work) -> dict[str, Any]:
        request, suite = work.request, work.suite
        code, error = request.code, None
        if request.completion is not None:
            entry = suite.entry_point.split(".")[0] or None
            extracted = extract_code(request.completion, entry, program=suite.mode == "stdio")
            code, error = extracted.code, extracted.note or None
        result = await self.executor.judge(
            work.task_id,
            request.sample_index,
            code or "",
            suite,
            stop_on_failure=not request.all_tests,
            error=error,
        )
        measurement_error = None
        if request.repeats and result.passed:
            if not suite.reference_code:
                measurement_error = "no reference solution to measure against"
            else:
                try:
                    result.measurement = await self.executor.measure(
                        work.task_id, code or "", suite, request.repeats
                    )
                except CorebenchError as exc:
                    measurement_error = str(exc)
        return answer(request, suite, result, code, measurement_error)

    def examples(self, request: ExamplesRequest) -> dict[str, Any]:
        """A program on visible examples (blocking), as debugging agents run their own code."""
        try:
            examples = [
                parse_example(StdioExample(input=e.input, output=e.output))
                if isinstance(e, StdioCase)
                else parse_example(e)
                for e in request.examples
            ]
        except (CorebenchError, ValueError, SyntaxError) as exc:
            raise RequestError(422, f"examples: {exc}") from None
        with self._lock:
            self._reserve(1)
        try:
            outcomes = asyncio.run_coroutine_threadsafe(
                self.executor.run_examples(request.code, examples), self.loop
            ).result()
        finally:
            with self._lock:
                self._pending -= 1
        check = ExampleCheck(outcomes, examples)
        return {
            "passed": check.passed,
            "tests": [o.model_dump(mode="json") for o in outcomes],
            "feedback": check.feedback,
        }


async def _make_executor() -> Executor:
    return Executor()


def answer(
    request: JudgeRequest,
    suite: FunctionalSuite,
    result: ExecutionResult,
    code: str | None,
    measurement_error: str | None,
) -> dict[str, Any]:
    """What the service returns for one program."""
    out = {
        "id": request.id,
        "task_id": result.task_id,
        "verdict": result.verdict.value,
        "passed": result.verdict is Verdict.passed,
        "tests_total": suite.size,
        "tests_passed": sum(t.verdict is Verdict.passed for t in result.tests),
        "result": result.model_dump(mode="json"),
        "measurement_error": measurement_error,
    }
    if request.completion is not None:
        out["code"] = code  # what was extracted from the completion
    return out
