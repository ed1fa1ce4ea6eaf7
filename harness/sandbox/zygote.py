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
mounts = child.mounts  # mount namespaces and fresh folders, shared with timed runs

# What programs import most (MBPP+, HumanEval+, contest solutions): loaded once, here, instead of
# in every child. A program sees them in sys.modules, as it would after importing them itself.
PRELOAD = (
    "_sitebuiltins", "array", "bisect", "collections", "copy", "datetime", "decimal", "fractions",
    "functools", "hashlib", "heapq", "io", "itertools", "math", "operator", "random", "re",
    "statistics", "string", "typing",
)  # fmt: skip

CONTROL_FD = 1001
PR_SET_DUMPABLE = 4
SANDBOX = "/sandbox"
SETUP_FAILED = 125  # the intermediate could not confine the child

_libc = ctypes.CDLL(None, use_errno=True)
Plan = tuple[list[tuple[str, int]], "mounts.Places"]


def confinement_plan() -> Plan:
    """What every fork's :func:`confine` does to the mounts, worked out once, in the zygote: the
    flags "/" and "/dev" keep when made read-only, and the mount points below /tmp and /dev/shm
    that their fresh tmpfs must show again. A fork's mount namespace starts as a copy of the
    zygote's, which never changes (a fork's own mounts never propagate back), so each fork
    would find the same; working it out there cost each program about a millisecond of CPU
    (reading /proc/self/mountinfo twice, and the copy-on-write faults of that Python code)."""
    remounts = [(path, mounts.kept_flags(path)) for path in ("/", "/dev")]
    return remounts, mounts.places(["/tmp", "/dev/shm"])


def confine(folder: str, plan: Plan) -> None:
    """In the intermediate: the namespaces and mounts a fresh bubblewrap would give."""
    remounts, fresh = plan
    mounts.unshare(mounts.CLONE_NEWNS | mounts.CLONE_NEWIPC | mounts.CLONE_NEWPID)
    # nothing below propagates back to the zygote
    mounts.mount(None, "/", None, mounts.MS_REC | mounts.MS_PRIVATE)
    # its own folder, and no other program's
    mounts.mount(folder, SANDBOX, None, mounts.MS_BIND | mounts.MS_REC)
    for path, flags in remounts:  # where earlier programs could otherwise leave files
        mounts.read_only(path, flags)
    for path, below in fresh:  # fresh and empty, as bubblewrap's
        mounts.fresh_tmpfs(path, below)


def run_program(channel_fd: int) -> None:
    """Becomes the child, with the channel as fd 0 and no other descriptor of the zygote's."""
    os.chdir(SANDBOX)
    os.dup2(channel_fd, 0)
    os.closerange(3, 1 << 16)
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # the harness reads and resets its /proc files
    if os.geteuid() != 0:  # a root child drops to `nobody` itself, as an exec'd one does
        mounts.drop_capabilities()
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
