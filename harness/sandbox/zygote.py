"""A pre-started sandbox interpreter that forks one freshly confined child per program
(``python -I -S zygote.py`` inside bubblewrap). Standard library only.

Starting bubblewrap and CPython and importing the child's modules costs about 60 ms of CPU per
program; a fork of this process costs about 2. The zygote has imported ``child.py`` and the
standard-library modules programs use most, then serves one program at a time:

    harness ──"fork N" + a socket (SCM_RIGHTS)──▶ zygote      the new child's channel
    zygote ──"ended N CODE"──▶ harness                        after the child is gone

For each request it forks an *intermediate* process that gives the program what a fresh
bubblewrap would: its own mount namespace (a fresh ``/tmp`` and ``/dev/shm``, the root and
``/dev`` read-only, ``/sandbox`` bound to the program's own folder ``/sandbox/N``), its own IPC
namespace, and its own pid namespace. There a reaper (the namespace's init, as bubblewrap's)
forks the child, which runs ``child.main`` exactly as an exec'd child would. When the child ends
(the harness kills it by the pid the channel's credentials name), the reaper exits with its
status (128 + N for a signal, as bubblewrap reports one), and the namespace ends with everything
the program started in it.

The program cannot reach the zygote: it is not in the program's pid namespace (no signal, no
ptrace, no pidfd), it is not dumpable (its ``/proc`` files are closed to other processes), and
the program holds none of its descriptors. Capabilities the zygote needs for the namespaces are
dropped before any program code runs (root: by becoming ``nobody``, as the child does; otherwise
``capset`` to none). ``random`` reseeds itself in every fork.
"""

from __future__ import annotations

import array
import ctypes
import gc
import os
import socket
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import child  # noqa: E402 - the child's code, run in each fork

sys.path.remove(_HERE)
sys.modules["_corebench_child"] = sys.modules.pop("child")

# What programs import most (MBPP+, HumanEval+, contest solutions): loaded once, here, instead of
# in every child. A program sees them in sys.modules, as it would after importing them itself.
PRELOAD = (
    "_sitebuiltins", "array", "bisect", "collections", "copy", "datetime", "decimal", "fractions",
    "functools", "hashlib", "heapq", "io", "itertools", "math", "operator", "random", "re",
    "statistics", "string", "typing",
)  # fmt: skip

CONTROL_FD = 1001
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID = 0x00020000, 0x08000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 32, 4096, 16384, 1 << 18,
)  # fmt: skip
# A remount must keep the flags a mount has (a user namespace may not clear them): statvfs's
# ST_* flag -> mount's MS_* flag.
KEPT_FLAGS = {2: 2, 4: 4, 8: 8, 1024: 1024, 2048: 2048, 4096: 1 << 21}
PR_SET_DUMPABLE = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
SANDBOX = "/sandbox"
SETUP_FAILED = 125  # the intermediate could not confine the child

_libc = ctypes.CDLL(None, use_errno=True)


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


def drop_capabilities() -> None:
    """No capabilities left in any set (the zygote's CAP_SYS_ADMIN was for the namespaces)."""
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.capset(header, data), "capset")


Plan = tuple[list[tuple[str, int]], list[tuple[str, list[str]]]]


def confinement_plan() -> Plan:
    """What every fork's :func:`confine` does to the mounts, worked out once, in the zygote: the
    flags "/" and "/dev" keep when made read-only, and the mount points below /tmp and /dev/shm
    that their fresh tmpfs must show again. A fork's mount namespace starts as a copy of the
    zygote's, which never changes (a fork's own mounts never propagate back), so each fork
    would find the same; working it out there cost each program about a millisecond of CPU
    (reading /proc/self/mountinfo twice, and the copy-on-write faults of that Python code)."""
    remounts = [(path, kept_flags(path)) for path in ("/", "/dev")]
    fresh = [(path, mounts_below(path)) for path in ("/tmp", "/dev/shm") if os.path.isdir(path)]
    return remounts, fresh


def confine(folder: str, plan: Plan) -> None:
    """In the intermediate: the namespaces and mounts a fresh bubblewrap would give."""
    remounts, fresh = plan
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID), "unshare")
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing below propagates back to the zygote
    mount(folder, SANDBOX, None, MS_BIND | MS_REC)  # its own folder, and no other program's
    for path, flags in remounts:  # where earlier programs could otherwise leave files
        read_only(path, flags)
    for path, below in fresh:  # fresh and empty, as bubblewrap's
        fresh_tmpfs(path, below)


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
            if point.startswith(path + "/"):
                points.append(point)
    outermost: list[str] = []
    for point in sorted(set(points)):
        if not any(point.startswith(top + "/") for top in outermost):
            outermost.append(point)
    return outermost


def fresh_tmpfs(path: str, below: list[str]) -> None:
    """An empty tmpfs at ``path``, with the mounts ``below`` it bound again, read-only."""
    keep = [(point, os.open(point, os.O_PATH)) for point in below]
    mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for point, fd in keep:
        os.makedirs(point, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", point, None, MS_BIND | MS_REC)
        read_only(point)
        os.close(fd)


def run_program(channel_fd: int) -> None:
    """Becomes the child, with the channel as fd 0 and no other descriptor of the zygote's."""
    os.chdir(SANDBOX)
    os.dup2(channel_fd, 0)
    os.closerange(3, 1 << 16)
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # the harness reads and resets its /proc files
    if os.geteuid() != 0:  # a root child drops to `nobody` itself, as an exec'd one does
        drop_capabilities()
    child.main()


def intermediate(number: int, channel_fd: int, plan: Plan) -> None:
    """Confine, start the program's namespace, wait for it, and exit with its status."""
    code = SETUP_FAILED
    try:
        os.close(CONTROL_FD)
        confine(f"{SANDBOX}/{number}", plan)
        pid = os.fork()
        if pid == 0:
            reaper(channel_fd)
        os.close(channel_fd)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
    except BaseException as exc:  # noqa: BLE001
        os.write(2, f"zygote: cannot confine a child: {exc}\n".encode())
    os._exit(code)


def reaper(channel_fd: int) -> None:
    """First process of the program's pid namespace (as bubblewrap's own is): starts the child,
    reaps whatever the program leaves, and exits with the child's status, which ends the
    namespace and every process still in it. The child is not this namespace's init, so a
    signal it sends itself works as it does anywhere; the reaper, like any init, ignores the
    signals its namespace sends it."""
    code = SETUP_FAILED
    try:
        pid = os.fork()
        if pid == 0:
            try:
                run_program(channel_fd)
            except BaseException:  # noqa: BLE001 - the child's own failure, on stderr
                import traceback

                traceback.print_exc()
            os._exit(3)
        os.close(channel_fd)
        while True:
            ended, status = os.wait()
            if ended == pid:
                code = os.waitstatus_to_exitcode(status)
                code = 128 - code if code < 0 else code
                break
    except BaseException as exc:  # noqa: BLE001
        os.write(2, f"zygote: the reaper failed: {exc}\n".encode())
    os._exit(code)


def receive(control: socket.socket) -> tuple[bytes, list[int]]:
    fds = array.array("i")
    message, ancillary, _, _ = control.recvmsg(256, socket.CMSG_SPACE(fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return message, list(fds)


def serve(control: socket.socket, plan: Plan) -> None:
    while True:
        message, fds = receive(control)
        if not message:  # the harness is done with this zygote
            return
        words = message.split()
        if len(words) != 2 or words[0] != b"fork" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            control.sendall(b"error unexpected request\n")
            continue
        number = int(words[1])
        pid = os.fork()
        if pid == 0:
            intermediate(number, fds[0], plan)
        os.close(fds[0])
        _, status = os.waitpid(pid, 0)
        control.sendall(f"ended {number} {os.waitstatus_to_exitcode(status)}\n".encode())


def main() -> None:
    os.dup2(0, CONTROL_FD)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    control = socket.socket(fileno=CONTROL_FD)
    for name in PRELOAD:
        __import__(name)
    plan = confinement_plan()
    gc.freeze()  # no collection in a fork walks (and so copies) what the zygote holds
    child.not_dumpable()
    control.sendall(b"ready\n")
    serve(control, plan)


if __name__ == "__main__":
    main()
