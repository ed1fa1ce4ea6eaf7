"""Run one job in a fresh sandboxed child process and collect its report."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import MAX_FILE_BYTES, MAX_OUTPUT_BYTES, MAX_PROCESSES, MAX_RESULT_BYTES
from .isolation import NOBODY, child_command, drop_to_nobody, minimal_env, site_packages


@dataclass
class ChildReport:
    """What came back from one child: its events, how it ended, and what it printed."""

    events: list[dict[str, Any]] = field(default_factory=list)
    returncode: int | None = None
    killed_by_deadline: bool = False
    stopped_early: bool = False  # the harness stopped it after a failing test
    report_overflow: bool = False
    wall_s: float = 0.0
    cpu_s: float = 0.0  # from the kernel (wait4), not from the child
    max_rss_kb: int = 0
    stdout: str = ""
    stderr: str = ""
    launcher: str = ""  # what the sandbox launcher printed before the child took over
    isolation: str = ""

    @property
    def started(self) -> bool:
        """Whether the child got as far as reporting (nothing a solution does can prevent that)."""
        return self.first("ready") is not None

    def first(self, event: str) -> dict[str, Any] | None:
        return next((e for e in self.events if e.get("event") == event), None)

    def tests(self) -> dict[int, dict[str, Any]]:
        """Test events by index; the first report of an index counts."""
        found: dict[int, dict[str, Any]] = {}
        for e in self.events:
            if e.get("event") == "test" and isinstance(e.get("i"), int):
                found.setdefault(e["i"], e)
        return found

    @property
    def signal_name(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_OUTPUT_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _take(
    report: ChildReport, lines: list[bytes], keep_going: Callable[[dict[str, Any]], bool] | None
) -> bool:
    """Parse complete report lines into events; False as soon as ``keep_going`` says stop."""
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # not ours: a solution writing to the report pipe gains nothing
        if isinstance(event, dict):
            report.events.append(event)
            if keep_going is not None and not keep_going(event):
                return False
    return True


def _reap(pid: int, end: float) -> tuple[int | None, Any]:
    """Wait for ``pid`` until ``end``; (None, None) if it is still running then."""
    while True:
        reaped, status, usage = os.wait4(pid, os.WNOHANG)
        if reaped:
            return status, usage
        if time.perf_counter() >= end:
            return None, None
        time.sleep(0.005)


def run_child(
    job: dict[str, Any],
    *,
    deadline_s: float,
    memory_bytes: int,
    mode: str,
    keep_going: Callable[[dict[str, Any]], bool] | None = None,
) -> ChildReport:
    """Blocking: start the child, feed it ``job``, read its report until exit or deadline.

    ``keep_going`` sees each event as it arrives; returning False stops the child at once (the
    harness has seen a failing test and needs no more)."""
    report = ChildReport(isolation=mode)
    cpu_budget = sum(float(t["cpu_limit"]) for t in job.get("tests", [])) + float(
        job.get("load_cpu_limit", 5.0)
    )
    job = {
        **job,
        # Root is exempt from RLIMIT_NPROC and may write anywhere: the child drops to `nobody`
        # before running the solution, so the kernel bounds its processes and it can signal nothing
        # of ours (inside bubblewrap always; without it when `nobody` can run the interpreter).
        "drop_privileges": NOBODY if drop_to_nobody(mode) else None,
        "sys_path": site_packages(),
        "limits": {
            "memory": memory_bytes,
            "fsize": MAX_FILE_BYTES,
            "nproc": MAX_PROCESSES,
            "cpu": int(cpu_budget) + 2,  # hard kernel backstop behind the per-test timers
        },
    }
    payload = json.dumps(job).encode()
    with tempfile.TemporaryDirectory(prefix="corebench-") as workdir:
        os.chmod(workdir, 0o777)
        argv, home = child_command(workdir, mode, fixed_layout=bool(job.get("fixed_layout")))
        launcher_log = open(Path(workdir, "launcher.txt"), "wb")  # noqa: SIM115 - closed below
        started = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            cwd=workdir,
            env=minimal_env(home),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=launcher_log,  # bubblewrap's or the interpreter's own complaints, before the child takes over
            start_new_session=True,  # its own process group: a timeout kills every descendant
        )
        try:
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(payload)
                proc.stdin.close()
            except BrokenPipeError:
                pass
            buffer, received = bytearray(), 0
            end = started + deadline_s
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                while True:
                    remaining = end - time.perf_counter()
                    if remaining <= 0:
                        report.killed_by_deadline = True
                        break
                    if not sel.select(timeout=min(remaining, 0.5)):
                        continue
                    chunk = os.read(proc.stdout.fileno(), 1 << 16)
                    if not chunk:
                        break
                    received += len(chunk)
                    if received > MAX_RESULT_BYTES:
                        report.report_overflow = True
                        break
                    buffer += chunk
                    if b"\n" not in chunk:  # a long line still arriving: no complete line yet
                        continue
                    *lines, rest = bytes(buffer).split(b"\n")
                    buffer = bytearray(rest)
                    if not _take(report, lines, keep_going):
                        report.stopped_early = True
                        break
            _take(report, [bytes(buffer)], None)
            if report.killed_by_deadline or report.report_overflow or report.stopped_early:
                _kill_group(proc)
            status, usage = _reap(proc.pid, end)
            if status is None:  # closed its report pipe but kept running
                report.killed_by_deadline = True
                _kill_group(proc)
                _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        finally:
            _kill_group(proc)  # whatever the child left behind in its group
            if proc.returncode is None:
                proc.kill()
                proc.wait()
        report.wall_s = time.perf_counter() - started
        report.returncode = proc.returncode
        report.cpu_s = usage.ru_utime + usage.ru_stime
        report.max_rss_kb = usage.ru_maxrss
        launcher_log.close()
        report.launcher = _tail(Path(workdir, "launcher.txt"))
        report.stdout = _tail(Path(workdir, "stdout.txt"))
        report.stderr = _tail(Path(workdir, "stderr.txt"))
    return report
