"""Starting one sandboxed child and supervising it from the harness: the channel, the child's
kernel accounting, and its limits.

Everything here runs in a harness thread, outside the sandbox. The child is started under
bubblewrap (exec'd, or forked by a zygote: ``launch.py``; or, only when asked, unconfined) with
one end of a Unix socket pair as its fd 0; the harness's end has ``SO_PASSCRED`` set, so the
kernel stamps every message with the sender's pid in the harness's pid namespace. The first message (``ready``, sent before any program code runs)
names the child; a message from any other process (a fork of the program) is a violation.

Limits are the harness's: while waiting for the next event it reads the child's CPU clock and
kills the child (SIGKILL, which nothing in it can catch) once the test in progress has used its
CPU or wall-clock allowance. A line that is not a well-formed event, or arrives out of order, is
a violation: the child is stopped and the harness goes on.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import json
import signal
import socket
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import MAX_OUTPUT_BYTES, MAX_RESULT_BYTES
from .accounting import ProcessMeter
from .launch import ExecLaunch, ForkLaunch, ZygotePool
from .protocol import MAX_LINE_BYTES, Job, ProtocolError, parse_event

READ_CHUNK = 1 << 20
POLL_S = 0.05  # how often limits are checked while the child works
GATHER_S = 0.001  # how long small reports gather before a read (see Child._wait)
GATHER_BELOW_BYTES = 64 * 1024  # a read this large is drained at once, not waited for
_CREDENTIALS = struct.Struct("3i")


@dataclass(frozen=True)
class Budget:
    """What the child may use until its next event: CPU seconds (None: unlimited) and wall-clock
    seconds, both counted from the moment the previous event arrived."""

    cpu_s: float | None
    wall_s: float


class Stopped(Exception):
    """The harness stopped the child: ``kind`` is "cpu" or "wall" (a limit), "violation" (its
    channel), or "gone" (it ended, or closed its channel, before the event expected)."""

    def __init__(self, kind: str, detail: str, cpu_s: float | None = None):
        super().__init__(detail)
        self.kind, self.detail, self.cpu_s = kind, detail, cpu_s


@dataclass
class Ending:
    """How the child process ended, and what it and the launcher printed."""

    returncode: int | None = None
    wall_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    launcher: str = ""

    @property
    def signal_name(self) -> str | None:
        """The signal that ended the child (bubblewrap reports one as exit status 128 + N)."""
        code = self.returncode
        number = -code if code is not None and code < 0 else None
        if code is not None and 128 < code < 128 + 65:
            number = code - 128
        if number is None:
            return None
        try:
            return signal.Signals(number).name
        except ValueError:
            return f"signal {number}"


@dataclass
class Marks:
    """The child's CPU time and the wall clock when the last event arrived."""

    cpu_s: float | None = None
    wall_s: float = field(default_factory=time.perf_counter)


class Child:
    """One child process: start it with a job, read its events under budgets, send requests,
    measure it, and stop it. Not thread-safe; one harness thread drives it."""

    def __init__(
        self,
        job: Job,
        *,
        mode: str,
        fixed_layout: bool = False,
        zygotes: ZygotePool | None = None,
        timing: bool = False,
    ):
        self.started = time.perf_counter()
        if zygotes is not None:
            self.launch: ExecLaunch | ForkLaunch = zygotes.launch(fixed_layout, timing)
        else:
            self.launch = ExecLaunch(mode, fixed_layout=fixed_layout, timing=timing)
        self.workdir = self.launch.folder
        self.sock = self.launch.sock
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.pid: int | None = None
        self.meter: ProcessMeter | None = None
        self.marks = self._arrival = Marks()
        self.received = 0
        self._buffer = bytearray()
        self._chunk = bytearray(READ_CHUNK)  # reused for every read
        self._lines: collections.deque[bytes] = collections.deque()
        self._streaming = False  # the last read held several small reports: let more gather
        self._closed = False
        self.ending: Ending | None = None
        self._send(job.to_line())

    # --- the channel ----------------------------------------------------------------------------
    def _send(self, data: bytes) -> None:
        try:
            self.sock.setblocking(True)
            self.sock.settimeout(60)
            self.sock.sendall(data)
        except OSError:  # it died or stopped reading: the next read says so
            pass

    def send(self, request: dict[str, Any]) -> None:
        """Send a request; the child's CPU clock just before it becomes the new mark."""
        marks = Marks(self.cpu_s())
        self._send(json.dumps(request).encode() + b"\n")
        self.marks = marks
        self._streaming = False  # one answer is due, not a stream

    def _receive(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for data; False on timeout. Raises Stopped at the end."""
        self.sock.settimeout(max(timeout, 0.0001))
        try:
            size, ancillary, _, _ = self.sock.recvmsg_into([self._chunk], socket.CMSG_SPACE(12))
        except (TimeoutError, BlockingIOError):
            return False
        except OSError as exc:
            raise Stopped("gone", f"its channel failed ({exc.strerror})") from None
        if not size:
            self._closed = True
            raise Stopped("gone", "it closed its channel")
        data = self._chunk[:size]
        sender = None
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                sender = _CREDENTIALS.unpack(payload[: _CREDENTIALS.size])[0]
        if self.pid is None:
            self.pid = sender
        elif sender != self.pid:
            raise Stopped("violation", f"a report from another process (pid {sender})")
        self.received += size
        if self.received > MAX_RESULT_BYTES:
            raise Stopped("violation", "wrote more than the report limit to its channel")
        self._buffer += data
        if len(self._buffer) > MAX_LINE_BYTES:
            raise Stopped("violation", f"a report line of over {MAX_LINE_BYTES} bytes")
        if b"\n" in data:
            *lines, rest = bytes(self._buffer).split(b"\n")
            self._buffer = bytearray(rest)
            self._lines.extend(lines)
            self._arrival = Marks(self.cpu_s())
            self._streaming = len(lines) > 1 and size < GATHER_BELOW_BYTES
        return True

    def read_event(self, budget: Budget) -> dict[str, Any]:
        """The next event, parsed and checked; Stopped if the child overruns ``budget`` first,
        breaks the protocol, or ends."""
        return checked_event(self.read_line(budget))

    def read_line(self, budget: Budget) -> bytes:
        """The next line as it came, unchecked (``checked_event`` checks it); Stopped if the
        child overruns ``budget`` first, or ends."""
        self._wait(budget)
        self.marks = self._arrival
        return self._lines.popleft()

    def _wait(self, budget: Budget) -> None:
        """Until a complete line is buffered; a limit overrun is noticed within POLL_S.

        While small reports stream in (the last read held several: a program passing thousands
        of tiny tests faster than they are read), the harness first lets them gather for
        GATHER_S: one wake-up then reads a batch of them instead of one line, which frees the CPU
        for the children (each wake-up costs as much as a tiny test). A test's budget starts when the batch holding its predecessor was read, so the
        delay can only under-count a test's CPU time, by at most GATHER_S.

        An overrun counts only if no report had arrived by the time the child's clock was read:
        a harness thread held up past its poll (another thread holding the GIL for a second)
        would otherwise charge the next test's work to a test that ended meanwhile."""
        if not self._lines and self._streaming:
            self._streaming = False
            time.sleep(GATHER_S)
        while not self._lines:
            wall_left = self.marks.wall_s + budget.wall_s - time.perf_counter()
            if wall_left > 0 and self._receive(min(POLL_S, wall_left)) and self._lines:
                return
            used = self.cpu_used()
            over_wall = self.marks.wall_s + budget.wall_s <= time.perf_counter()
            over_cpu = budget.cpu_s is not None and used is not None and used > budget.cpu_s
            if (over_wall or over_cpu) and not self._arrived():
                if over_wall:
                    raise Stopped("wall", "wall-clock limit exceeded", used)
                raise Stopped("cpu", "CPU-time limit exceeded", used)

    def pending(self) -> bool:
        """Whether more than the lines read so far has arrived with them."""
        return bool(self._lines or self._buffer)

    def _arrived(self) -> bool:
        """Whether a complete line is in the channel now (read without waiting)."""
        while not self._lines and self._receive(0):
            pass
        return bool(self._lines)

    def expect(self, kind: str, budget: Budget) -> dict[str, Any]:
        event = self.read_event(budget)
        if event["event"] != kind:
            raise Stopped("violation", f"a {event['event']} report where {kind} was due")
        if kind == "ready":
            self._start_metering()
        return event

    # --- measurement ------------------------------------------------------------------------------
    def _start_metering(self) -> None:
        if self.pid is None:
            raise Stopped("violation", "its first report carried no credentials")
        try:
            self.meter = ProcessMeter(self.pid)
        except OSError as exc:
            # A program that ends at once (os._exit in its first call) can be gone before the
            # harness gets here: it did start, and nothing is left to measure or limit; its
            # reports are still in the channel.
            if exc.errno not in (errno.ESRCH, errno.ENOENT):
                raise Stopped("gone", f"cannot be measured ({exc.strerror})") from None
        self.marks = self._arrival = Marks(self.cpu_s())

    def cpu_s(self) -> float | None:
        return self.meter.cpu_s() if self.meter else None

    def cpu_used(self) -> float | None:
        """CPU seconds since the last mark (None before the child is known)."""
        now = self.cpu_s()
        if now is None or self.marks.cpu_s is None:
            return None
        return now - self.marks.cpu_s

    # --- ending -------------------------------------------------------------------------------------
    def kill(self) -> None:
        """SIGKILL the child and everything it started (nothing in it can catch that)."""
        self.launch.kill(self.meter)

    def finish(self, grace_s: float = 5.0) -> Ending:
        """Close the channel, let the child exit (kill it after ``grace_s``), collect its logs."""
        if self.ending is not None:
            return self.ending
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)
        returncode = self.launch.wait(grace_s)
        if returncode is None:
            self.kill()
            returncode = self.launch.wait(None)
        self.kill()  # whatever it left behind
        self.sock.close()
        if self.meter is not None:
            self.meter.close()
        self.ending = Ending(
            returncode=returncode,
            wall_s=time.perf_counter() - self.started,
            stdout=_tail(Path(self.workdir, "stdout.txt")),
            stderr=_tail(Path(self.workdir, "stderr.txt")),
        )
        self.ending.launcher = self.launch.close()[:MAX_OUTPUT_BYTES]
        return self.ending

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.ending is None:
            self.kill()
            self.finish(grace_s=0)


def checked_event(line: bytes) -> dict[str, Any]:
    """A line from the child as a checked event; a malformed one is a violation (Stopped)."""
    try:
        return parse_event(line)
    except ProtocolError as exc:
        raise Stopped("violation", str(exc)) from None


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_OUTPUT_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""
