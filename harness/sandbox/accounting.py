"""Kernel accounting of a sandboxed process, read by the harness from outside it.

The harness knows the process by its pid in the harness's own pid namespace (the kernel gives it
with the channel's credentials) and reads:

- CPU time: the process's CPU clock (``clock_gettime`` on ``CPUCLOCK_SCHED`` of the pid): every
  thread, live or finished, to the nanosecond, plus children it has reaped (``/proc/PID/stat``,
  scheduler ticks);
- memory: ``VmRSS`` and ``VmHWM`` from ``/proc/PID/status``, the high-water mark reset by
  writing ``5`` to ``/proc/PID/clear_refs`` (Linux >= 4.0).

Inside bubblewrap the process's own ``/proc`` is mounted read-only, so it cannot reset its
high-water mark itself; the harness writes through the host's ``/proc``. The program cannot
change any of these numbers except by doing less work.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Iterator


def cpu_clock_id(pid: int) -> int:
    """The clock id of a process's CPU-time clock (``clock_getcpuclockid``): Linux encodes it as
    ``(~pid << 3) | CPUCLOCK_SCHED`` (2)."""
    return ((~pid) << 3) | 2


class ProcessMeter:
    """CPU time and memory of one live process, by pid (held by a pidfd against pid reuse)."""

    def __init__(self, pid: int):
        self.pid = pid
        self._clock = cpu_clock_id(pid)
        self._pidfd = os.pidfd_open(pid)
        try:
            self._status = os.open(f"/proc/{pid}/status", os.O_RDONLY)
            try:
                self._stat = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
            except OSError:
                os.close(self._status)
                raise
        except OSError:  # gone meanwhile: nothing stays open
            os.close(self._pidfd)
            raise
        try:
            self._clear_refs: int | None = os.open(f"/proc/{pid}/clear_refs", os.O_WRONLY)
        except OSError:  # not allowed (a root harness always is; the same user is while dumpable)
            self._clear_refs = None
        self._tick = os.sysconf("SC_CLK_TCK")

    def alive(self) -> bool:
        return not select.select([self._pidfd], [], [], 0)[0]

    def cpu_s(self) -> float | None:
        """CPU seconds used so far by all its threads and its reaped children; None once gone."""
        try:
            own = time.clock_gettime(self._clock)
            fields = os.pread(self._stat, 4096, 0).rsplit(b")", 1)[1].split()
        except OSError:
            return None
        if not self.alive():  # the pid may already name another process
            return None
        return own + (int(fields[13]) + int(fields[14])) / self._tick  # cutime + cstime

    def memory_kb(self) -> tuple[int, int] | None:
        """(VmRSS, VmHWM) in KiB; None once gone."""
        try:
            text = os.pread(self._status, 8192, 0)
        except OSError:
            return None
        rss = hwm = None
        for line in text.splitlines():
            if line.startswith(b"VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith(b"VmHWM:"):
                hwm = int(line.split()[1])
        return (rss, hwm) if rss is not None and hwm is not None else None

    def reset_peak(self) -> bool:
        """Start a new high-water mark at the current RSS; False if that is not possible."""
        if self._clear_refs is None:
            return False
        try:
            os.write(self._clear_refs, b"5")
        except OSError:
            return False
        return True

    @contextlib.contextmanager
    def stopped(self) -> Iterator[None]:
        """The process stopped (SIGSTOP: it cannot catch or ignore it) for the duration, so that
        none of its threads runs beside what the harness measures meanwhile."""
        try:
            signal.pidfd_send_signal(self._pidfd, signal.SIGSTOP)
        except OSError:  # already gone: nothing of it runs
            yield
            return
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL, by pidfd: never another process that reused the pid."""
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def close(self) -> None:
        for fd in (self._pidfd, self._status, self._stat, self._clear_refs):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._clear_refs = None
