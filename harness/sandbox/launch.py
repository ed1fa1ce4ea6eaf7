"""How a sandbox child starts, seen from the harness: exec'd in a fresh bubblewrap ("exec"), or
forked by a pre-started zygote in a bubblewrap of its own ("fork", ``zygote.py``).

Either way the harness gets the same thing: a Unix socket to a child that sends ``ready`` before
any program code runs, a folder whose ``stdout.txt``/``stderr.txt`` hold the program's logs,
a way to wait for the child's exit status and to kill it with everything it started. The
``fork`` engine needs bubblewrap; a zygote that cannot start or cannot confine its forks turns
the pool back to ``exec`` with one warning.
"""

from __future__ import annotations

import array
import concurrent.futures
import contextlib
import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path

from ..config import ENV_ENGINE
from ..errors import CorebenchError
from .accounting import ProcessMeter
from .cgroups import SessionCgroup
from .isolation import BWRAP, child_command, minimal_env

ENGINES = ("fork", "exec")
# Zygotes are started from this one thread, which lives as long as the harness: bubblewrap's
# --die-with-parent follows the thread that started it, and a worker thread may end sooner.
_STARTER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="corebench-zygotes")
ZYGOTE_START_S = 20.0  # a zygote imports the child's modules and PRELOAD once
ENDED_GRACE_S = 10.0  # after the harness killed a fork: its zygote reports the end within this
QUICK_END_S = 0.5  # how long a zygote has to report a child that is gone already


class EngineWarning(UserWarning):
    """Programs start exec'd: the fork engine is not available here."""


def engine_setting(wanted: str | None, mode: str) -> str:
    """'fork' or 'exec', from ``wanted`` or $COREBENCH_ENGINE (default fork; exec without
    bubblewrap, where there are no namespaces to give each fork)."""
    engine = (wanted or os.environ.get(ENV_ENGINE) or "fork").lower()
    if engine not in ENGINES:
        raise CorebenchError(f"unknown engine {engine!r} (fork or exec)")
    return engine if mode == BWRAP else "exec"


def _tail(path: Path, start: int = 0, limit: int = 64 * 1024) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


class ExecLaunch:
    """A child exec'd in a fresh bubblewrap (or unconfined, when asked), in a fresh folder."""

    def __init__(self, mode: str, fixed_layout: bool = False, timing: bool = False):
        self.folder = tempfile.mkdtemp(prefix="corebench-")
        os.chmod(self.folder, 0o777)
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._log = open(Path(self.folder, "launcher.txt"), "wb")  # noqa: SIM115
        # a timing session counts its runs' memory in a cgroup of its own, where one can be made
        self.cgroup = None
        try:
            self.cgroup = SessionCgroup.made() if timing else None
            argv, home = child_command(
                self.folder,
                mode,
                fixed_layout=fixed_layout,
                timing=timing,
                memory_cgroup=self.cgroup.spec() if self.cgroup is not None else None,
            )
            self.proc = subprocess.Popen(
                argv,
                cwd=self.folder,
                env=minimal_env(home),
                stdin=theirs,
                stdout=subprocess.DEVNULL,
                stderr=self._log,  # bubblewrap's or the interpreter's own complaints
                start_new_session=True,  # its own process group: killing it kills every descendant
                pass_fds=[self.cgroup.fd] if self.cgroup is not None else [],
            )
        except BaseException:
            if self.cgroup is not None:
                self.cgroup.close()
            raise
        finally:
            theirs.close()
            if self.cgroup is not None:
                self.cgroup.handed_over()

    def kill(self, meter: ProcessMeter | None = None) -> None:
        """Kill the child's process group, and the child (known by ``meter``) itself."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if meter is not None:
            meter.kill()

    def wait(self, timeout: float | None) -> int | None:
        """The exit status, or None if it has not ended within ``timeout``."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> str:
        """Release everything; returns what the launcher printed."""
        self.kill()  # whatever it left behind in its group
        if self.cgroup is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)  # the session has left its cgroup
            self.cgroup.close()
        self._log.close()
        text = _tail(Path(self.folder, "launcher.txt"))
        shutil.rmtree(self.folder, ignore_errors=True)
        return text


class Zygote:
    """One pre-started zygote: serves one program at a time (a pool hands it to one thread)."""

    def __init__(self, mode: str):
        self.root = tempfile.mkdtemp(prefix="corebench-zygote-")
        os.chmod(self.root, 0o777)
        argv, home = child_command(self.root, mode, zygote=True)
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.log_path = Path(self.root, "zygote.txt")
        self._log = open(self.log_path, "wb")  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=self.root,
                env=minimal_env(home),
                stdin=theirs,
                stdout=subprocess.DEVNULL,
                stderr=self._log,
                start_new_session=True,
            )
        finally:
            theirs.close()
        self._buffer = b""
        self.count = 0
        self.healthy = True
        if self._line(ZYGOTE_START_S) != "ready":
            self.close()
            raise OSError(f"the zygote did not start: {self.log()[-500:].strip() or 'no output'}")

    def _line(self, timeout: float) -> str | None:
        """The zygote's next line; None if none came within ``timeout``. A zygote whose channel
        fails or ends serves no more."""
        self.control.settimeout(timeout)
        while b"\n" not in self._buffer:
            try:
                chunk = self.control.recv(4096)
            except (TimeoutError, BlockingIOError):
                return None
            except OSError:
                chunk = b""
            if not chunk:
                self.healthy = False
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("ascii", "replace")

    def log(self, start: int = 0) -> str:
        return _tail(self.log_path, start)

    def fork(self) -> tuple[socket.socket, str, int]:
        """A new child: (the harness's end of its channel, its folder, the log offset now)."""
        self.count += 1
        folder = os.path.join(self.root, str(self.count))
        os.mkdir(folder)
        os.chmod(folder, 0o777)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        offset = self.log_path.stat().st_size
        try:
            fds = array.array("i", [theirs.fileno()])
            self.control.settimeout(10)
            self.control.sendmsg(
                [f"fork {self.count}\n".encode()],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)],
            )
        except OSError:
            self.healthy = False
        finally:
            theirs.close()
        return ours, folder, offset

    def ended(self, timeout: float) -> int | None:
        """The exit status of the fork in progress (128 + N for signal N); None when the zygote
        did not say within ``timeout``."""
        line = self._line(timeout)
        if line is None:
            return None
        words = line.split()
        if len(words) == 3 and words[0] == "ended" and words[1] == str(self.count):
            return int(words[2])
        self.healthy = False  # anything else: it serves no more
        return None

    def close(self) -> None:
        self.healthy = False
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.control.close()
        self.proc.wait()
        self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)


class ForkLaunch:
    """A child forked by a zygote taken from ``pool``; given back when the child is done."""

    def __init__(self, pool: ZygotePool, zygote: Zygote):
        self.pool, self.zygote = pool, zygote
        self.sock, self.folder, self._log_start = zygote.fork()
        self._status: int | None = None

    def kill(self, meter: ProcessMeter | None = None) -> None:
        """Killing the child (``meter`` knows it) ends its pid namespace and everything in it.
        A child the harness does not know by pid is already gone (its zygote says so at once)
        or never started: then only the whole zygote can be killed."""
        if self._status is not None:  # ended, and its namespace with it
            return
        if meter is not None:
            meter.kill()
        elif self.wait(QUICK_END_S) is None:
            self.zygote.close()

    def wait(self, timeout: float | None) -> int | None:
        """The child's exit status, or None if it has not ended within ``timeout`` (None: the
        grace a killed child has, after which its zygote serves no more)."""
        if self._status is None and self.zygote.healthy:
            self._status = self.zygote.ended(ENDED_GRACE_S if timeout is None else timeout)
            if self._status is None and timeout is None:
                self.zygote.healthy = False
        return self._status

    def close(self) -> str:
        if self._status is None:  # never ended as far as the harness knows: start afresh
            self.zygote.close()
        text = self.zygote.log(self._log_start)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.pool.give_back(self.zygote)
        return text


class ZygotePool:
    """Idle zygotes of one isolation mode, started on demand and reused; thread-safe."""

    def __init__(self, mode: str):
        self.mode = mode
        self._idle: queue.SimpleQueue[Zygote] = queue.SimpleQueue()
        self._all: list[Zygote] = []
        self._lock = threading.Lock()
        self.available = True

    def launch(self, fixed_layout: bool = False, timing: bool = False) -> ExecLaunch | ForkLaunch:
        """A started child: forked when a zygote serves, exec'd otherwise."""
        if self.available and not (fixed_layout or timing):
            zygote = self._take()
            if zygote is not None:
                return ForkLaunch(self, zygote)
        return ExecLaunch(self.mode, fixed_layout=fixed_layout, timing=timing)

    def _take(self) -> Zygote | None:
        while True:
            try:
                zygote = self._idle.get_nowait()
            except queue.Empty:
                break
            if zygote.healthy and zygote.proc.poll() is None:
                return zygote
            self._forget(zygote)
        try:
            zygote = _STARTER.submit(Zygote, self.mode).result()
        except OSError as exc:
            with self._lock:
                if self.available:
                    warnings.warn(
                        f"programs start exec'd (slower; the same isolation): {exc}",
                        EngineWarning,
                        stacklevel=4,
                    )
                self.available = False
            return None
        with self._lock:
            self._all.append(zygote)
        return zygote

    def give_back(self, zygote: Zygote) -> None:
        if zygote.healthy:
            self._idle.put(zygote)
        else:
            self._forget(zygote)

    def _forget(self, zygote: Zygote) -> None:
        zygote.close()
        with self._lock, contextlib.suppress(ValueError):
            self._all.remove(zygote)

    def close(self) -> None:
        with self._lock:
            zygotes, self._all = self._all, []
        for zygote in zygotes:
            zygote.close()
