"""Mount namespaces and fresh, empty folders, for the zygote's forks (``zygote.py``) and for each
timed run of a timing session (``child.py``). Standard library only.

A process that holds CAP_SYS_ADMIN (in its own user namespace is enough) unshares its mount
namespace and mounts a fresh tmpfs over each folder a program may write; the tmpfs lives as
long as the namespace, which ends with the last process in it. Capabilities are dropped before
any program code runs.
"""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID = 0x00020000, 0x08000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 32, 4096, 16384, 1 << 18,
)  # fmt: skip
# A remount must keep the flags a mount has (a user namespace may not clear them): statvfs's
# ST_* flag -> mount's MS_* flag.
KEPT_FLAGS = {2: 2, 4: 4, 8: 8, 1024: 1024, 2048: 2048, 4096: 1 << 21}
LINUX_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)

# What a fresh place needs: its path and the mount points below it to show again, read-only
# (a checkout or virtual environment under /tmp, bound there by bubblewrap).
Places = list[tuple[str, list[str]]]


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    encode = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(
        _libc.mount(encode(source), target.encode(), encode(fstype), flags, encode(data) or None),
        f"mount {target}",
    )


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def drop_capabilities() -> None:
    """No capabilities left in any set (CAP_SYS_ADMIN was for the namespaces and mounts)."""
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.capset(header, data), "capset")


def kept_flags(path: str) -> int:
    """The flags a read-only remount of the mount at ``path`` must keep."""
    kept = os.statvfs(path).f_flag
    return sum(ms for st, ms in KEPT_FLAGS.items() if kept & st)


def read_only(path: str, flags: int | None = None) -> None:
    """Remount the mount at ``path`` read-only, keeping ``flags`` (by default, its own)."""
    kept = kept_flags(path) if flags is None else flags
    mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)


def mounts_below(path: str) -> list[str]:
    """The outermost mount points strictly below ``path`` (a checkout or venv under /tmp)."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            point = line.split()[4]
            for escape in ("\\040", "\\011", "\\012", "\\134"):
                point = point.replace(escape, chr(int(escape[1:], 8)))
            if point.startswith(path.rstrip("/") + "/"):
                points.append(point)
    outermost: list[str] = []
    for point in sorted(set(points)):
        if not any(point.startswith(top + "/") for top in outermost):
            outermost.append(point)
    return outermost


def places(paths: list[str]) -> Places:
    """What :func:`fresh_places` needs for ``paths`` (the existing ones), worked out once."""
    return [(path, mounts_below(path)) for path in paths if os.path.isdir(path)]


def fresh_tmpfs(path: str, below: list[str], options: str = "mode=0755") -> None:
    """An empty tmpfs at ``path`` (mounted with ``options``), with the mounts ``below`` it bound
    again, read-only."""
    keep = [(point, os.open(point, os.O_PATH)) for point in below]
    mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, options)
    for point, fd in keep:
        os.makedirs(point, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", point, None, MS_BIND | MS_REC)
        read_only(point)
        os.close(fd)


def fresh_places(plan: Places, size: int) -> None:
    """In a timed run, before its program: mount and IPC namespaces of its own, with a fresh, empty
    tmpfs of at most ``size`` bytes over each folder of ``plan`` (everything else a program
    could write is read-only), gone with the run. The working folder is entered again, so that
    it is the fresh one; as when judged, it is the only one open to every user (a root harness
    runs programs as `nobody`), and the others belong to the user mounting them."""
    cwd = os.getcwd()
    unshare(CLONE_NEWNS | CLONE_NEWIPC)  # System V IPC and message queues of its own, too
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing here reaches the session's mounts
    for path, below in plan:
        fresh_tmpfs(path, below, f"mode={'0777' if path == cwd else '0755'},size={size}")
    os.chdir(cwd)
