"""The executor: the sandbox's one entry point for ``run``, ``evaluate`` and training rewards.

A thin façade over the package's parts: a bounded number of children at a time (``workers``
slots), the reference oracle (``oracle.py``), judging runs (``judging.py``) turned into verdicts
(``verdicts.py``), and timing sessions (``timing.py``), one per timing CPU at a time and never
beside judging.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import weakref
from collections.abc import AsyncIterator, Iterable
from typing import Any

from ..comparators import Close, Tokens
from ..config import (
    DEFAULT_TEST_TIME_LIMIT_S,
    EXAMPLE_TIME_LIMIT_S,
    MAX_FILE_BYTES,
    MAX_PROCESSES,
    MEASUREMENT_INPUTS,
    MEMORY_FLOOR_BYTES,
    MIN_TIME_LIMIT_S,
    REFERENCE_CPU_LIMIT_S,
    STARTUP_ALLOWANCE_S,
    TIME_LIMIT_FACTOR,
)
from ..errors import CorebenchError, MeasurementRefused
from ..examples import Example
from ..records import ExecutionResult, Measurement, TestOutcome, Verdict
from ..testsuite import FunctionalSuite
from . import protocol
from .cgroups import memory_accounting
from .isolation import (
    BWRAP,
    NOBODY,
    SANDBOX_HOME,
    drop_to_nobody,
    isolation_mode,
    memory_limit_bytes,
    site_packages,
)
from .judging import Judged, KeepGoing, run_judging, wall_budget
from .launch import ZygotePool, engine_setting
from .oracle import Expected, Oracle, Reference
from .protocol import Job, Limits, call_test, expr_test, stdio_test
from .supervisor import Budget, Stopped
from .timing import REFERENCE, SOLUTION, Timed, Timer, timing_cpus, timing_sessions_setting
from .verdicts import Verdicts

# What a timed run may write to inside bubblewrap (the rest is read-only): each run gets them
# fresh and empty, and they are gone with it, so no run can hand state to the next.
FRESH = (SANDBOX_HOME, "/tmp", "/dev/shm")


def time_limit(suite: FunctionalSuite, reference_cpu_s: float | None) -> float:
    """Per-test CPU limit: from the reference's CPU time when known, else the suite's own (always
    the suite's own when it is the benchmark's official limit)."""
    if reference_cpu_s is None or (suite.time_limit_fixed and suite.time_limit_s):
        return suite.time_limit_s or DEFAULT_TEST_TIME_LIMIT_S
    return max(MIN_TIME_LIMIT_S, TIME_LIMIT_FACTOR * reference_cpu_s)


def specs_for(suite: FunctionalSuite, limits: Iterable[tuple[int, float]]) -> list[dict[str, Any]]:
    """Tests (run-order index, CPU limit) as the child runs them, in the suite's mode; built in
    one pass, since a judging job holds a suite's thousand tests."""
    sent = suite.sent_inputs
    if suite.mode == "stdio":
        return [stdio_test(sent[i], limit, wall_budget(limit)) for i, limit in limits]
    if suite.mode == "expr":
        return [expr_test(sent[i], limit) for i, limit in limits]
    return [call_test(sent[i], limit) for i, limit in limits]


class Executor:
    """Evaluate programs in sandboxed child processes; never in the harness process."""

    where = "local"

    def __init__(
        self,
        workers: int | None = None,
        memory_bytes: int | None = None,
        isolation: str | None = None,
        engine: str | None = None,
        timing_sessions: int | None = None,
    ):
        self.mode = isolation_mode(isolation)
        self.engine = engine_setting(engine, self.mode)
        self.zygotes = ZygotePool(self.mode) if self.engine == "fork" else None
        if self.zygotes is not None:  # no zygote outlives its executor
            weakref.finalize(self, self.zygotes.close)
        self.memory_bytes = memory_bytes or memory_limit_bytes()
        # how timed runs' peak memory is counted: "cgroup" (every page), or "rss" (the resident
        # high-water mark, which pages kept out of the address space do not reach)
        self.memory_accounting = memory_accounting()
        self.workers = workers or os.cpu_count() or 1
        self._slots = asyncio.Semaphore(self.workers)
        # one thread per slot, of its own: a judging run never waits in the event loop's shared
        # pool behind file reads or model calls, and never takes their threads
        self._threads = concurrent.futures.ThreadPoolExecutor(
            self.workers, thread_name_prefix="corebench-judging"
        )
        weakref.finalize(self, self._threads.shutdown, wait=False)
        self._open = asyncio.Event()  # cleared while timing sessions have the machine
        self._open.set()
        self.oracle = Oracle(self.job, self.run_judging)
        # the measurement phase's children, one timer per timing CPU: started on first use,
        # kept, stopped with the executor
        self._timers = [
            Timer(
                self.bare_job(
                    "",
                    mode="call",
                    cpu_budget=24 * 3600,
                    fresh=list(FRESH) if self.mode == BWRAP else [],
                ),
                self.mode,
                cpu,
            )
            for cpu in timing_cpus(timing_sessions_setting(self.workers, timing_sessions))
        ]
        for timer in self._timers:
            weakref.finalize(self, timer.close)
        self.timing_sessions = len(self._timers)  # measurements at once, each on its own CPU
        self._idle_timers: asyncio.Queue[Timer] = asyncio.Queue()  # a session takes one
        for timer in self._timers:
            self._idle_timers.put_nowait(timer)
        self._stretch = asyncio.Lock()  # a stretch of timing sessions starting or joined
        self._sessions = 0  # timing sessions running now
        self._held = 0  # worker slots the running timing sessions hold
        self._judges_waiting = 0  # judging runs waiting for a slot
        self._stretch_over = asyncio.Event()  # set when no timing session runs
        self._stretch_over.set()
        self.timings = 0  # timing sessions completed (each a solution beside its reference)

    def close(self) -> None:
        """Stop the pre-started children and the threads (also done once it is collected)."""
        if self.zygotes is not None:
            self.zygotes.close()
        for timer in self._timers:
            timer.close()
        self._threads.shutdown(wait=False)

    async def _in_thread(self, function, /, *args: Any, **kwargs: Any) -> Any:
        """``function`` on one of the executor's own threads (the caller holds a slot)."""
        call = functools.partial(function, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._threads, call)

    # --- children --------------------------------------------------------------------------------
    def job(
        self,
        suite: FunctionalSuite,
        code: str,
        cpu_limits: list[float] | None,
        large: Iterable[int] = (),
        **extra: Any,
    ) -> Job:
        """A child job running ``code`` on the suite's tests with these per-test CPU limits (None:
        a timing session); ``large``: the tests only an output identical to the expected one
        passes, answered by a digest when long (``protocol.large``, ``_by_digest``). A call or
        expr job without large tests carries the suite's inputs as the text made once per suite
        (``FunctionalSuite.inputs_text``); the harness enforces the limits of call and expr tests
        itself."""
        tests: list[dict[str, Any]] | str | None = None
        if cpu_limits is not None:
            if len(cpu_limits) != suite.size:
                raise ValueError(f"{len(cpu_limits)} CPU limits for {suite.size} tests")
            extra.setdefault("cpu_budget", _cpu_budget(cpu_limits))
            large = list(large)
            if suite.mode == "stdio":
                tests = specs_for(suite, zip(range(suite.size), cpu_limits, strict=True))
            elif large:
                tests = protocol.input_tests(suite.mode, suite.sent_inputs)
            else:
                tests = suite.inputs_text
            for index in large:
                tests[index] = protocol.large(tests[index])
        return self.bare_job(
            suite.prelude + code if suite.prelude else code,
            mode=suite.mode,
            entry_point=suite.entry_point if suite.mode == "call" else None,
            setup=suite.setup_code,
            tests=tests,
            exit_status=suite.exit_status,
            **extra,
        )

    def bare_job(self, code: str, *, cpu_budget: float = 0.0, **fields: Any) -> Job:
        """A job with the executor's limits; the kernel's CPU backstop is ``cpu_budget`` (0: from
        the limits its listed tests carry)."""
        tests = fields.get("tests") or []
        if not cpu_budget and isinstance(tests, str):
            raise ValueError("a job whose tests are JSON text needs its cpu_budget")
        budget = cpu_budget or _cpu_budget([float(t["cpu_limit"]) for t in tests])
        return Job(
            code=code,
            limits=Limits(
                memory=self.memory_bytes,
                fsize=MAX_FILE_BYTES,
                nproc=MAX_PROCESSES,
                cpu=int(min(budget, 24 * 3600))
                + 2,  # a kernel backstop behind the harness's limits
            ),
            # Root is exempt from RLIMIT_NPROC and may write anywhere: program code runs as `nobody`
            # (inside bubblewrap always; without it when `nobody` can run the interpreter).
            drop_to=NOBODY if drop_to_nobody(self.mode) else None,
            sys_path=site_packages(),
            load_cpu_limit=STARTUP_ALLOWANCE_S,
            **fields,
        )

    async def run_judging(
        self,
        job: Job,
        budgets: list[Budget],
        keep_going: KeepGoing | None = None,
        identical: list[bytes | None] | None = None,
    ) -> Judged:
        self._judges_waiting += 1
        try:
            await self._open.wait()
            await self._slots.acquire()
        finally:
            self._judges_waiting -= 1
        try:
            judged = await self._in_thread(
                run_judging,
                job,
                budgets,
                mode=self.mode,
                keep_going=keep_going,
                identical=identical or (),
                zygotes=self.zygotes,
            )
        finally:
            self._slots.release()
        if not judged.started:  # nothing of the program ran yet: the sandbox itself failed
            launcher = judged.ending.launcher.strip().splitlines()[-1:]
            why = launcher[0] if launcher else f"exit code {judged.ending.returncode}"
            raise CorebenchError(f"the sandbox ({self.mode}) could not start: {why}")
        return judged

    # --- reference outputs ---------------------------------------------------------------------
    async def reference(self, task_id: str, suite: FunctionalSuite) -> Reference:
        return await self.oracle.reference(task_id, suite)

    async def reference_cost(self, task_id: str, suite: FunctionalSuite) -> float:
        """CPU seconds the reference needs for all of the suite's tests."""
        return await self.oracle.cost(task_id, suite)

    # --- solutions -----------------------------------------------------------------------------
    async def judge(
        self,
        task_id: str,
        sample_index: int,
        code: str,
        suite: FunctionalSuite,
        stop_on_failure: bool = True,
        error: str | None = None,
    ) -> ExecutionResult:
        """A solution's verdict, as ``run``, ``evaluate``, the judging service and training rewards
        give it: ``no_code`` (with ``error``, e.g. why none was extracted) when ``code`` is blank,
        else :meth:`evaluate`."""
        if not code.strip():
            return ExecutionResult(
                task_id=task_id,
                sample_index=sample_index,
                verdict=Verdict.no_code,
                suite_verdicts={name: Verdict.no_code for name in suite.inputs},
                first_failure=error,
            )
        return await self.evaluate(task_id, sample_index, code, suite, stop_on_failure)

    async def evaluate(
        self,
        task_id: str,
        sample_index: int,
        code: str,
        suite: FunctionalSuite,
        stop_on_failure: bool = True,
    ) -> ExecutionResult:
        """Run ``code`` on the hidden tests and compare each output with the expected one as it
        arrives; by default the child is stopped at the first failing test (as EvalPlus does);
        ``stop_on_failure=False`` runs every test, after wrong answers and errors too."""
        reference = await self.reference(task_id, suite)
        plan = [
            (name, i, args) for name in suite.inputs for i, args in enumerate(suite.inputs[name])
        ]
        limits = [time_limit(suite, reference.cpu_s[name][i]) for name, i, _ in plan]
        verdicts = Verdicts(plan, reference.outputs, suite.comparator)
        large = _by_digest(plan, reference.outputs, suite)
        judged = await self.run_judging(
            self.job(suite, code, limits, large, stop_on_error=stop_on_failure),
            _budgets(limits, suite.mode),
            verdicts.keep_going(stop_on_failure),
            verdicts.identical_lines(),
        )
        return verdicts.result(task_id, sample_index, judged)

    async def run_examples(self, code: str, examples: list[Example]) -> list[TestOutcome]:
        """Run a system's own code on visible examples (for debugging agents, not for scoring).
        Every example runs, so the feedback lists all that fail."""
        modes = {e.mode for e in examples}
        if len(modes) != 1:
            raise CorebenchError(f"a task's examples must share one mode, not {sorted(modes)}")
        mode = modes.pop()
        plan = [("examples", i, []) for i in range(len(examples))]
        limits = [EXAMPLE_TIME_LIMIT_S] * len(examples)
        expected = {"examples": [e.expected for e in examples]}
        if mode == "stdio":  # whole programs, judged as the contest benchmarks judge them
            verdicts = Verdicts(plan, expected, Tokens())
            wall = wall_budget(EXAMPLE_TIME_LIMIT_S)
            tests = [stdio_test(e.expr, EXAMPLE_TIME_LIMIT_S, wall) for e in examples]
        else:
            verdicts = Verdicts(plan, expected, Close())
            tests = [expr_test(e.expr, EXAMPLE_TIME_LIMIT_S) for e in examples]
        job = self.bare_job(code, mode=mode, tests=tests, stop_on_error=False)
        judged = await self.run_judging(job, _budgets(limits, mode))
        result = verdicts.result("examples", 0, judged)
        if result.tests and len(result.tests) == len(examples):
            return result.tests
        # it did not load, or stopped: every example not reported gets the same reason
        reason = result.first_failure or result.verdict.value
        done = {t.index: t for t in result.tests}
        return [
            done.get(i)
            or TestOutcome(suite="examples", index=i, verdict=result.verdict, detail=reason)
            for i in range(len(examples))
        ]

    # --- efficiency ----------------------------------------------------------------------------
    async def _timed(
        self,
        code: str,
        suite: FunctionalSuite,
        limits: dict[int, float],
        repeats: int,
        verdicts: Verdicts,
    ) -> dict[str, Timed]:
        """The solution ``code`` and the suite's reference, timed together on the tests
        ``limits`` names (the solution under those limits, the reference under its own)."""
        tests = list(limits)
        programs, specs = {}, {}
        for slot, source, limit_of in (
            (SOLUTION, code, limits.get),
            (REFERENCE, suite.reference_code, lambda _: REFERENCE_CPU_LIMIT_S),
        ):
            programs[slot] = {
                "code": suite.prelude + source if suite.prelude else source,
                "setup": suite.setup_code,
                "mode": suite.mode,
                "entry_point": suite.entry_point if suite.mode == "call" else None,
                "exit_status": suite.exit_status,
            }
            specs[slot] = dict(
                zip(tests, specs_for(suite, [(i, limit_of(i)) for i in tests]), strict=True)
            )

        def check(index: int, event: dict[str, Any]) -> bool:
            try:
                return verdicts.compare(index, event)[1]
            except Stopped:  # an undecodable answer
                return False

        async with self._alone() as timer:
            running = asyncio.ensure_future(
                self._in_thread(timer.time, programs, specs, repeats, check)
            )
            try:
                timed = await asyncio.shield(running)
            except asyncio.CancelledError:
                # the thread goes on driving this timer: it is handed to no other session, and
                # no judging starts beside it, until it is done (however often it is cancelled)
                while not running.done():
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.wait({running})
                raise
        self.timings += 1
        return timed

    @contextlib.asynccontextmanager
    async def _alone(self) -> AsyncIterator[Timer]:
        """A timer (a CPU of its own) for one timing session, with no judging beside it. The
        first session of a stretch waits for every judging run in flight to end, and judging runs
        asked for meanwhile wait for the stretch's last session to end; other sessions join the
        stretch only while no judging run waits, so that a service's judging is never starved."""
        timer = await self._idle_timers.get()
        try:
            async with self._stretch:
                while self._sessions and self._judges_waiting:
                    await self._stretch_over.wait()
                if not self._sessions:
                    self._open.clear()
                    self._stretch_over.clear()
                    try:
                        while self._held < self.workers:
                            await self._slots.acquire()
                            self._held += 1
                    except BaseException:
                        self._end_stretch()
                        raise
                self._sessions += 1
            try:
                yield timer
            finally:
                self._sessions -= 1
                if not self._sessions:
                    self._end_stretch()
        finally:
            self._idle_timers.put_nowait(timer)

    def _end_stretch(self) -> None:
        """Give judging its slots back. Judging is woken before a session waiting to start the
        next stretch (events wake their waiters in the order they are set), so that it takes
        the slots first and is never held back a whole stretch more."""
        for _ in range(self._held):
            self._slots.release()
        self._held = 0
        self._open.set()
        self._stretch_over.set()

    async def measure(
        self, task_id: str, code: str, suite: FunctionalSuite, repeats: int
    ) -> Measurement:
        """CPU time and memory of a passing solution and of the reference, measured alike on the
        task's heaviest tests (:func:`heavy_tests`); CorebenchError when the solution cannot be
        measured honestly."""
        if not suite.reference_code:
            raise CorebenchError(f"{task_id} has no reference solution to measure against")
        reference = await self.reference(task_id, suite)
        reference_cpu = [c for name in suite.inputs for c in reference.cpu_s[name]]
        chosen = heavy_tests(reference_cpu)
        plan = [
            (name, i, args) for name in suite.inputs for i, args in enumerate(suite.inputs[name])
        ]
        verdicts = Verdicts(plan, reference.outputs, suite.comparator)
        limits = {i: time_limit(suite, reference_cpu[i]) for i in chosen}
        try:
            timed = await self._timed(code, suite, limits, repeats, verdicts)
        except MeasurementRefused:
            raise
        except CorebenchError as exc:  # the machine's or the reference's: not a stored refusal
            raise CorebenchError(f"measuring {task_id}: {exc}") from None
        mine, ref = timed[SOLUTION], timed[REFERENCE]
        wall, cpu, peak, calibration = _totals(mine)
        ref_wall, ref_cpu, ref_peak, ref_calibration = _totals(ref)
        return Measurement(
            repeats=repeats,
            runtime_s=wall,
            cpu_s=cpu,
            peak_memory_bytes=peak,
            calibration_s=calibration,
            reference_runtime_s=ref_wall,
            reference_cpu_s=ref_cpu,
            reference_peak_memory_bytes=ref_peak,
            reference_calibration_s=ref_calibration,
            # the two timed in alternating runs: the machine's drift reaches both alike
            runtime_ratio=cpu / ref_cpu if ref_cpu > 0 else float("nan"),
            memory_ratio=max(peak, MEMORY_FLOOR_BYTES) / max(ref_peak, MEMORY_FLOOR_BYTES),
            tests=[t.index for t in mine.tests],
            runs=[t.runs for t in mine.tests],
            test_cpu_s=[t.cpu_s for t in mine.tests],
            test_peak_memory_bytes=[1024 * t.peak_kb for t in mine.tests],
        )


def heavy_tests(reference_cpu: list[float | None], count: int = MEASUREMENT_INPUTS) -> list[int]:
    """The tests (run-order indices, in run order) a task is measured on: the ``count`` on which
    its reference spends the most CPU, as EvalPerf measures on performance-exercising inputs.
    Tests without a reference time count as the cheapest."""
    ranked = sorted(range(len(reference_cpu)), key=lambda i: (-(reference_cpu[i] or 0.0), i))
    return sorted(ranked[:count])


def _by_digest(
    plan: list[tuple[str, int, Any]], expected: Expected, suite: FunctionalSuite
) -> list[int]:
    """The tests (run-order indices) a judging job marks ``large``: those whose expected output
    is a digest, and, where the comparator takes only an equal string for an expected string,
    those expecting a long string (HumanEval/15's 147 MB then never cross the channel)."""
    comparator = suite.comparator
    strings = suite.mode != "stdio" and all(
        getattr(comparator, flag, False) for flag in ("accepts_equal", "exact_for_strings")
    )
    return [
        k
        for k, (name, i, _) in enumerate(plan)
        if expected.digested(name, i) or (strings and expected.long_string(name, i))
    ]


def _cpu_budget(cpu_limits: Iterable[float]) -> float:
    """CPU seconds a job's child may use in all: a backstop far behind the per-test limits."""
    return sum(cpu_limits) * 5 + STARTUP_ALLOWANCE_S


def _budgets(limits: list[float], mode: str) -> list[Budget]:
    """The harness's allowance per test. A stdio child enforces each run's limits itself (its
    program runs in a process of its own), so the harness only bounds the wall clock there.
    Tests with the same limit share one (frozen) budget: most of a suite's tests have the
    minimum limit."""
    made: dict[float, Budget] = {}
    for limit in set(limits):
        if mode == "stdio":
            made[limit] = Budget(None, wall_budget(limit) + STARTUP_ALLOWANCE_S)
        else:
            made[limit] = Budget(limit, wall_budget(limit))
    return [made[limit] for limit in limits]


def _totals(timed: Timed) -> tuple[float, float, int, float | None]:
    """Wall and CPU seconds summed over tests, peak memory, and the calibration time that makes
    ``calibrated(cpu, calibration)`` the sum over tests of each test's calibrated CPU time."""
    cpu = sum(t.cpu_s for t in timed.tests)
    units = sum(t.cpu_s / t.calibration_s for t in timed.tests if t.calibration_s > 0)
    calibration = cpu / units if units > 0 else None
    return (
        sum(t.wall_s for t in timed.tests),
        cpu,
        max((t.peak_kb for t in timed.tests), default=0) * 1024,
        calibration,
    )
