"""Memory cgroups for the measurement phase: each timing session runs in a cgroup of its own, and
its timed runs (forks of it) with it, so that the kernel counts every page a run causes —
anonymous, file-backed, shared, memfd and tmpfs pages alike — where no program can reach.

The sessions' cgroups are made below a folder of the memory controller: $COREBENCH_CGROUP when
set (a cgroup v2 folder delegated to this user, with ``memory`` in its ``cgroup.subtree_control``,
or any cgroup v1 memory folder it may write), else the harness's own memory cgroup where it may
create cgroups there (root, with cgroup v1's memory controller or cgroup v2 in its own
namespace). Without one, peak memory is the resident high-water mark (``ru_maxrss``), which
memory a program keeps out of its address space does not reach; the run records which it was.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import time
from pathlib import Path

from ..config import ENV_CGROUP
from ..errors import CorebenchError
from .protocol import MEMORY_COUNTERS

V1, V2 = "v1", "v2"
LEFTOVER_AGE_S = 60.0  # a dead harness's session cgroup older than this is removed at start
CGROUP_ACCOUNTING, RSS_ACCOUNTING = "cgroup", "rss"
_numbers = itertools.count()


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup per hierarchy: "memory" (cgroup v1) and "" (cgroup v2)."""
    found = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(","):
                found[name] = path
    return found


def _mounts() -> list[tuple[str, str, str, str]]:
    """(root, mount point, file system type, super options) of every mount."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, right = line.split(" - ", 1)
            fields, tail = left.split(), right.split()
            found.append((fields[3], fields[4], tail[0], tail[2] if len(tail) > 2 else ""))
    return found


def _in_mount(root: str, point: str, path: str) -> Path | None:
    """Where the cgroup ``path`` is, under a cgroup file system mounted at ``point`` from ``root``."""
    if path != root and not path.startswith(root.rstrip("/") + "/"):
        return None
    return Path(point, os.path.relpath(path, root))


def own_memory_cgroup() -> tuple[Path, str] | None:
    """The harness's own memory cgroup folder and its version (v1 first: where both exist, as on
    hybrid systems, the memory controller is v1's)."""
    own = _own_cgroups()
    for root, point, fstype, options in _mounts():
        if fstype == "cgroup" and "memory" in options.split(",") and "memory" in own:
            found = _in_mount(root, point, own["memory"])
            if found is not None:
                return found, V1
    for root, point, fstype, _ in _mounts():
        if fstype == "cgroup2" and "" in own:
            found = _in_mount(root, point, own[""])
            if found is not None:
                return found, V2
    return None


def _version(folder: Path) -> str | None:
    if (folder / MEMORY_COUNTERS[V1][1]).exists():
        return V1
    with contextlib.suppress(OSError):
        if "memory" in (folder / "cgroup.subtree_control").read_text().split():
            return V2
    return None


@functools.cache
def memory_cgroup_base() -> tuple[Path, str] | None:
    """Where sessions' cgroups are made, and the cgroup version; None where none can be."""
    wanted = os.environ.get(ENV_CGROUP)
    found = (Path(wanted), _version(Path(wanted))) if wanted else own_memory_cgroup()
    if found is None or found[1] is None:
        return None
    base, version = found
    if version == V2 and _version(base) != V2:  # its children would have no memory controller
        return None
    try:  # the proof: a cgroup made, its counters there and ours to write, and removed
        probe = SessionCgroup(base, version)
    except OSError:
        return None
    probe.close()
    remove_leftovers(base)
    return base, version


def remove_leftovers(base: Path, older_than_s: float = LEFTOVER_AGE_S) -> list[Path]:
    """Remove sessions' cgroups that a harness killed before it could remove them left below
    ``base``: those whose harness pid is gone, made more than ``older_than_s`` ago (a cgroup
    being made right now by a harness in another pid namespace is never touched), and empty (the
    kernel refuses to remove a cgroup that still holds a process). Returns those removed."""
    removed = []
    now = time.time()
    for folder in base.glob("corebench-*-*"):
        try:
            pid = int(folder.name.split("-")[1])
            os.kill(pid, 0)
            continue  # its harness lives
        except ProcessLookupError:
            pass
        except (ValueError, PermissionError):
            continue  # not one of ours, or a live process of another user
        with contextlib.suppress(OSError):
            if now - folder.stat().st_mtime > older_than_s:
                folder.rmdir()
                removed.append(folder)
    return removed


def memory_accounting() -> str:
    """How the measurement phase counts peak memory here: ``cgroup`` or ``rss``."""
    return CGROUP_ACCOUNTING if memory_cgroup_base() is not None else RSS_ACCOUNTING


class SessionCgroup:
    """A cgroup of its own for one timing session: made empty, handed to the session's process
    as an open folder (``fd``), which joins it; removed once the session has ended."""

    def __init__(self, base: Path, version: str):
        self.version = version
        self.path = base / f"corebench-{os.getpid()}-{next(_numbers)}"
        self.path.mkdir()
        self.fd = -1
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
            peak, _ = MEMORY_COUNTERS[version]  # the usage is only read
            for name in (peak, "cgroup.procs"):
                if not os.access(self.path / name, os.R_OK | os.W_OK):
                    raise PermissionError(f"{self.path / name} is not ours to write")
            # a peak that cannot be reset (cgroup v2 before Linux 6.12) is of no use
            (self.path / peak).write_text("0")
        except BaseException:
            self.close()
            raise

    @classmethod
    def made(cls) -> SessionCgroup | None:
        """A new session's cgroup, where sessions get one (a failure here is the machine's, and
        said as such: a session never measures otherwise than its run records)."""
        found = memory_cgroup_base()
        if found is None:
            return None
        try:
            return cls(*found)
        except OSError as exc:
            why = f"the measurement phase could not make its memory cgroup: {exc}"
            raise CorebenchError(why) from None

    def spec(self) -> str:
        """What the session is told: ``FD:VERSION``."""
        return f"{self.fd}:{self.version}"

    def handed_over(self) -> None:
        """The session's process holds the folder now: close ours (once)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def close(self, wait_s: float = 5.0) -> None:
        """Remove the cgroup (its processes are ending: a killed one leaves it within moments)."""
        with contextlib.suppress(OSError, AttributeError):
            self.handed_over()
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # left behind, empty of processes or about to be: harmless
                time.sleep(0.01)
