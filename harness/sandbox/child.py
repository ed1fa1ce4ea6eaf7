"""The program that runs inside the sandbox (``python -I -S child.py``). Standard library only.

It reads a :class:`protocol.Job` from fd 0 (a Unix socket to the harness), sets kernel limits,
reports ``ready`` and then, depending on the suite's mode:

- ``call`` / ``expr``: drops privileges, loads the program into this process and runs its tests
  (judging) or answers timing requests (a session). From the moment the program loads, nothing
  this process says is trusted: the harness checks every line and measures CPU time and memory
  from outside (``supervisor.py``).
- ``stdio``: never runs the program itself. Each run of a test is a fresh fork, which drops
  privileges, closes the channel, gets the test's input on fd 0 and a file on fd 1, and runs the
  program as ``__main__``; this process measures it with ``wait4`` (CPU time of all its threads
  and reaped children, peak memory) and enforces its CPU and wall-clock limits by SIGKILL. What it
  reports is trusted: the program cannot reach it.

The child never sees expected outputs; the harness compares outputs itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import select
import signal
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import codec  # noqa: E402 - siblings, imported under private names so programs cannot shadow them
import mounts  # noqa: E402
import protocol  # noqa: E402

sys.path.remove(_HERE)
for _name in ("codec", "mounts", "protocol"):
    sys.modules[f"_corebench_{_name}"] = sys.modules.pop(_name)

CHANNEL_FD = 1000  # the socket to the harness, out of the way of the program's own descriptors
ERROR_FD = 3  # in a stdio run: where the wrapper writes the program's exception
MAX_LOOPS = 10_000  # calls per timed sample at most
LOG_CAP = 1 << 20  # bytes of the program's stdout/stderr kept in the logs
STACK_BYTES = 512 * 1024**2  # main-thread stack for deep recursion (contest programs raise limits)
PR_SET_DUMPABLE = 4


class Channel:
    """The socket to the harness: newline-delimited JSON both ways (raw descriptor I/O: the
    ``socket`` module would cost an import at every start)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = b""

    def send(self, event: dict, output_json: str | None = None) -> None:
        """``event``, with its output (``output_json``, or an ``output`` field) last."""
        if "output" in event:
            event = dict(event)
            output_json = json.dumps(event.pop("output"))
        self.write(protocol.event_line(event, output_json))

    def write(self, line: bytes) -> None:
        write_all(self.fd, line)

    def read_line(self) -> bytes | None:
        """The next line, or None once the harness has closed its end."""
        while b"\n" not in self.buffer:
            chunk = os.read(self.fd, 1 << 16)  # below malloc's mmap threshold: no mmap per read
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def receive(self) -> dict | None:
        """The next request, or None once the harness has closed its end."""
        line = self.read_line()
        return None if line is None else json.loads(line)

    def wait_for_close(self) -> None:
        """Stay alive until the harness has read this process's final accounting."""
        with contextlib.suppress(OSError):
            while os.read(self.fd, 1 << 16):
                pass


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def error_status(exc: BaseException) -> tuple[str, str]:
    """(status, message) for an exception a program raised."""
    if isinstance(exc, MemoryError):
        return "memory", "MemoryError"
    return "error", f"{type(exc).__name__}: {str(exc)[:500]}"


def set_limit(name: str, value: int) -> None:
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(getattr(resource, name), (int(value), int(value)))


def set_limits(limits: protocol.Limits) -> None:
    """Memory, processes and total CPU for this process and its forks (RLIMIT_FSIZE is set where
    program code runs: the child's own log and input files are not the program's)."""
    set_limit("RLIMIT_AS", limits.memory)
    set_limit("RLIMIT_NPROC", limits.nproc)
    set_limit("RLIMIT_CPU", limits.cpu)
    set_limit("RLIMIT_CORE", 0)
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    wanted = STACK_BYTES if hard == resource.RLIM_INFINITY else min(STACK_BYTES, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_STACK, (max(soft, wanted), hard))


def drop_privileges(uid: int | None) -> None:
    """A root child runs program code as ``uid`` (nobody): no writing outside its folder, no
    signalling processes it does not own, RLIMIT_NPROC in force."""
    if uid is not None and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def not_dumpable() -> None:
    """Forbid same-user processes (the forked programs) to ptrace this one or open its memory."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def install_exit_builtins() -> None:
    """``exit()`` and ``quit()``, which ``site`` would have added (the child runs with -S)."""
    import _sitebuiltins
    import builtins

    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")


class CappedWriter:
    """sys.stdout/stderr in call and expr suites: keeps the first bytes, drops the rest, so that
    printing never fails a function (writes to the raw descriptors still meet RLIMIT_FSIZE)."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, fd: int, cap: int = LOG_CAP):
        self.fd, self.left = fd, cap

    def write(self, text: str) -> int:
        if self.left > 0:
            data = str(text).encode("utf-8", "replace")[: self.left]
            self.left -= len(data)
            with contextlib.suppress(OSError):
                os.write(self.fd, data)
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.fd


def redirect_output() -> None:
    """fd 0 from /dev/null; fd 1 and 2 to capped log files in the working folder."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        os.dup2(out, fd)
        os.close(out)
    sys.stdout, sys.stderr = CappedWriter(1), CappedWriter(2)


# --- call and expr suites: the program lives in this process ------------------------------------
def load_program(job: protocol.Job, channel: Channel):
    """Compile and run the program's module code; returns the test function (None in expr
    mode), or None after reporting why it did not load."""
    try:
        # dont_inherit: this file's own `from __future__ import annotations` must not leak into
        # the program (it would hide a NameError in annotations that plain Python raises).
        compiled = compile(job.code, "<solution>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        channel.send(
            {"event": "load", "status": "syntax_error", "error": f"{type(exc).__name__}: {exc}"}
        )
        return None, False
    namespace: dict = {"__name__": "__main__"}
    try:
        exec(compiled, namespace)
        if job.setup:  # a benchmark's own test set-up code (MBPP's test_setup_code)
            exec(compile(job.setup, "<setup>", "exec", dont_inherit=True), namespace)
        fn = entry(namespace, job.entry_point) if job.mode == "call" else None
    except BaseException as exc:  # noqa: BLE001 - anything the program raises
        if isinstance(exc, (KeyError, AttributeError)) and job.mode == "call":
            exc = NameError(f"entry point {job.entry_point!r} is not defined")
        status, error = error_status(exc)
        channel.send({"event": "load", "status": status, "error": error})
        return None, False
    channel.send({"event": "load", "status": "ok"})
    return (fn, namespace), True


def entry(namespace: dict, name: str):
    """The function tests call: ``f``, or ``Class.method`` on a fresh instance (LeetCode style)."""
    owner, _, method = name.rpartition(".")
    return getattr(namespace[owner](), method) if owner else namespace[name]


def caller(job: protocol.Job, loaded):
    """(fresh input for a test, call on that input)."""
    fn, namespace = loaded
    if job.mode == "expr":
        compiled: dict[str, object] = {}

        def expr_input(test: dict):
            code = compiled.get(test["expr"])
            if code is None:
                code = compiled[test["expr"]] = compile(
                    test["expr"], "<test>", "eval", dont_inherit=True
                )
            return code

        return expr_input, lambda code: eval(code, namespace)
    decode = codec.decode
    # A test's input is decoded anew for every call: programs may mutate their arguments.
    return (lambda test: decode(test["args"])), (lambda args: fn(*args))


def output_fields(output, large: bool = False) -> tuple[dict, str | None]:
    """(event fields, JSON text of the output or None) for a test's result; ``large``: only an
    output identical to the expected one passes the test (``protocol.large``), so a long output
    may go as its digest (see ``codec.encode_text``)."""
    try:
        text, digest = codec.encode_text(output, large=large)
    except BaseException as exc:  # noqa: BLE001
        return {"status": "error", "error": f"unencodable output: {type(exc).__name__}"}, None
    if digest is not None:
        return {"status": "ok", "digest": digest}, None
    return {"status": "ok"}, text


def judge_calls(job: protocol.Job, channel: Channel, loaded) -> None:
    """Every test once, in order, each reported as it finishes."""
    fresh, call = caller(job, loaded)
    timing = job.self_timing
    clock = time.thread_time
    for index, test in enumerate(job.tests or []):
        fields, output_json = {"event": "test", "i": index}, None
        try:
            if timing is None:
                args = fresh(test)
                output = call(args)
            else:
                started = clock()
                args = fresh(test)
                called = clock()
                output = call(args)
                returned = clock()
        except BaseException as exc:  # noqa: BLE001
            status, error = error_status(exc)
            fields.update(status=status, error=error)
        else:
            extra, output_json = output_fields(output, "large" in test)
            del output, args
            if timing is None and output_json is not None:  # the common case, built at once
                channel.write(protocol.passed_test_line(index, output_json.encode()))
                continue
            fields.update(extra)
            if timing is not None and fields["status"] == "ok":
                # the harness times a test from report to report: decoding the input and encoding
                # the output count as they do for a program under test
                around = (called - started) + (clock() - returned)
                cpu, calls = self_time(fresh, call, test, timing)
                fields.update(cpu=cpu + around, calls=calls)
        channel.send(fields, output_json)
        if fields["status"] != "ok" and job.stop_on_error:
            break
    channel.send({"event": "done"})


def self_time(fresh, call, test: dict, timing: protocol.SelfTiming) -> tuple[float, int]:
    """Reference solutions only: median thread CPU time per call after warm-up calls, repeating
    until ``repeats`` calls or ``budget_s`` of CPU (slow tests need few repeats)."""
    for _ in range(timing.warmup):
        call(fresh(test))
    cpus: list[float] = []
    while len(cpus) < timing.repeats and sum(cpus) < timing.budget_s:
        args = fresh(test)
        started = time.thread_time()
        call(args)
        cpus.append(time.thread_time() - started)
    return median(cpus), len(cpus)


# --- stdio suites: each run is a fresh fork ----------------------------------------------------
HIGH_FD = 1100  # descriptors a fork rearranges live above the numbers it assigns (0-4)


def high(fd: int) -> int:
    """``fd`` moved above HIGH_FD, so that dup2 onto 0-4 in the fork never overwrites a source."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, HIGH_FD)
    os.close(fd)
    return moved


def memfd(name: str, data: bytes = b"") -> int:
    fd = high(os.memfd_create(name, 0))
    write_all(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def read_all(fd: int, cap: int, rewind: bool = True) -> bytes:
    if rewind:
        os.lseek(fd, 0, os.SEEK_SET)
    chunks, left = [], cap
    while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def rss_kb(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status", "rb") as f:
        for line in f:
            if line.startswith(b"VmRSS:"):
                return int(line.split()[1])
    return 0


def program_process(compiled, job: protocol.Job, fds: dict[str, int], baseline_w: int) -> None:
    """In the fork: confine, then run the program as ``__main__``; never returns."""
    status = 0
    try:
        os.setsid()  # its own process group: the parent kills whatever it leaves behind
        os.dup2(fds["stdin"], 0)
        os.dup2(fds["stdout"], 1)
        os.dup2(fds["stderr"], 2)
        os.dup2(fds["error"], ERROR_FD)
        os.dup2(baseline_w, 4)
        os.closerange(5, 1 << 16)  # the channel and every other inherited descriptor
        drop_privileges(job.drop_to)
        set_limit("RLIMIT_FSIZE", job.limits.fsize)
        os.write(4, str(rss_kb()).encode())  # baseline memory, before any program code runs
        os.close(4)
        sys.stdin = sys.__stdin__ = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = sys.__stderr__ = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        try:
            exec(compiled, {"__name__": "__main__", "__builtins__": __builtins__})
        except SystemExit as exc:
            if exc.code not in (None, 0) and job.exit_status == "zero":
                os.write(ERROR_FD, f"RuntimeError: exit status {exc.code!r}"[:500].encode())
                status = 2
        finally:
            for stream in (sys.stdout, sys.__stdout__, sys.stderr):
                with contextlib.suppress(BaseException):
                    stream.flush()
    except BaseException as exc:  # noqa: BLE001
        with contextlib.suppress(BaseException):
            os.write(ERROR_FD, f"{type(exc).__name__}: {str(exc)[:500]}".encode())
        status = 1
    os._exit(status)


def run_program(compiled, job: protocol.Job, test: dict, logs: dict[str, int]) -> dict:
    """One run of the program on one test's input, in a fresh fork, measured here."""
    fds = {
        "stdin": memfd("stdin", test["stdin"].encode()),
        "stdout": memfd("stdout"),
        "stderr": memfd("stderr"),
        "error": memfd("error"),
    }
    baseline_r, baseline_w = map(high, os.pipe())
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        program_process(compiled, job, fds, baseline_w)
    os.close(baseline_w)
    cpu_limit, wall_limit = float(test["cpu_limit"]), float(test["wall_limit"])
    clock = ((~pid) << 3) | 2  # the process's CPU clock (all its threads), read from outside
    pidfd = os.pidfd_open(pid)
    killed = None
    try:
        while not select.select([pidfd], [], [], min(0.05, cpu_limit / 4))[0]:
            with contextlib.suppress(OSError):
                if time.clock_gettime(clock) > cpu_limit:
                    killed = "cpu"
            if time.perf_counter() - started > wall_limit:
                killed = "wall"
            if killed:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                break
        _, wait_status, usage = os.wait4(pid, 0)
    finally:
        os.close(pidfd)
    wall = time.perf_counter() - started
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)  # whatever it left behind in its group
    baseline = read_all(baseline_r, 64, rewind=False)
    os.close(baseline_r)
    cpu = usage.ru_utime + usage.ru_stime
    peak_kb = max(0, usage.ru_maxrss - int(baseline or b"0"))
    result = {"cpu": cpu, "wall": wall, "peak_kb": peak_kb}
    error = read_all(fds["error"], protocol.MAX_TEXT).decode("utf-8", "replace")
    code = os.waitstatus_to_exitcode(wait_status)
    if killed or (code < 0 and -code in (signal.SIGXCPU, signal.SIGKILL) and cpu >= cpu_limit):
        result.update(
            status="timeout",
            error=f"{'wall-clock' if killed == 'wall' else 'CPU-time'} limit exceeded",
        )
    elif (code != 0 or error) and job.exit_status != "any":
        status = "memory" if error.startswith("MemoryError") else "error"
        if not error:
            error = f"crashed ({signal.Signals(-code).name})" if code < 0 else f"exit status {code}"
        result.update(status=status, error=error)
    else:
        result.update(
            status="ok", output=read_all(fds["stdout"], job.limits.fsize).decode("utf-8", "replace")
        )
    text = read_all(fds["stderr"], LOG_CAP)
    if text and logs["left"] > 0:
        os.write(2, text[: logs["left"]])
        logs["left"] -= len(text)
    for fd in fds.values():
        os.close(fd)
    return result


def serve_programs(job: protocol.Job, channel: Channel) -> None:
    not_dumpable()
    try:
        compiled = compile(job.code, "<solution>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        channel.send(
            {"event": "load", "status": "syntax_error", "error": f"{type(exc).__name__}: {exc}"}
        )
        return
    channel.send({"event": "load", "status": "ok"})
    logs = {"left": LOG_CAP}
    for index, test in enumerate(job.tests):
        result = run_program(compiled, job, test, logs)
        if result["status"] == "ok" and job.self_timing is not None:
            cpu, calls = time_program(compiled, job, test, logs)
            if calls:
                result.update(cpu=cpu, calls=calls)
        channel.send({"event": "test", "i": index, **result})
        if result["status"] != "ok" and job.stop_on_error:
            break
    channel.send({"event": "done"})


def time_program(compiled, job: protocol.Job, test: dict, logs: dict) -> tuple[float, int]:
    """A reference program's CPU time on one test: median of repeated runs after warm-up."""
    timing = job.self_timing
    for _ in range(timing.warmup):
        run_program(compiled, job, test, logs)
    cpus: list[float] = []
    while len(cpus) < timing.repeats and sum(cpus) < timing.budget_s:
        result = run_program(compiled, job, test, logs)
        if result["status"] != "ok":
            break
        cpus.append(result["cpu"])
    return (median(cpus), len(cpus)) if cpus else (0.0, 0)


# --- timing sessions: every timed run is a fresh fork of this process -------------------------
# This process never runs program code: it compiles the program, decodes a test's input once,
# and forks one process per timed run. The fork confines itself (below) before any program code
# runs, says so, and waits; this process then reads its CPU clock and memory, lets it go, and
# reads its CPU clock again when its answer has arrived. What it reports is trusted.
REPORT_FD, GO_FD = (
    5,
    6,
)  # in a timed run: its answer goes to REPORT_FD; it starts on a byte on GO_FD
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
CLONE_THREAD = 0x00010000
# Per architecture: its AUDIT_ARCH_*; the system calls that start a process ("forks", "clone");
# that create state which outlives the process ("lasting": System V IPC, message queues,
# keyrings); that run another program ("exec"); memfd_create ("memfd"); that act on a process
# named by their first argument ("pid": signals, scheduling, limits, memory of another process)
# or their second ("who": setpriority and ioprio_set, with the "which" that names one process);
# and that reach another process whatever their arguments ("never": ptrace, kcmp,
# perf_event_open, pidfd_send_signal, which takes a /proc/PID folder for a process, setpgid,
# which could join the timing process's group); "fcntl" and "ioctl" with the commands that
# name who gets a descriptor's SIGIO (F_SETOWN: only the run; F_SETOWN_EX, FIOSETOWN,
# SIOCSPGRP: never); "socket" for anything but AF_UNIX (a TCP socket's TIME_WAIT outlives the
# run, in a network namespace the next run shares); "madvise" MADV_COLD/MADV_PAGEOUT and
# "fadvise" POSIX_FADV_DONTNEED (pages pushed out of the cgroup's count, or out of the page
# cache charged before the go, would hide memory).
# unshare setns mount umount2 pivot_root: a run may not make namespaces (a user namespace would
# give it capabilities again) or mount anything; nor with the new mount API (open_tree
# move_mount fsopen fsconfig fsmount fspick mount_setattr, numbered alike everywhere)
NAMESPACES = {"x86_64": (272, 308, 165, 166, 155), "aarch64": (97, 268, 40, 39, 41)}
NEW_MOUNT_API = (428, 429, 430, 431, 432, 433, 442)
SYSCALLS = {
    "x86_64": {
        "arch": 0xC000003E,
        "forks": {"fork": 57, "vfork": 58, "clone3": 435},
        "clone": 56,
        "lasting": (29, 64, 68, 240, 248, 249, 250),  # shmget semget msgget mq_open *key*
        "exec": (59, 322),
        "memfd": 319,
        # kill tkill tgkill rt_sigqueueinfo rt_tgsigqueueinfo pidfd_open sched_setaffinity
        # sched_setparam sched_setscheduler sched_setattr prlimit64 process_vm_readv/writev
        # migrate_pages move_pages
        "pid": (62, 200, 234, 129, 297, 434, 203, 142, 144, 314, 302, 310, 311, 256, 279),
        "who": ((141, 0), (251, 1)),  # PRIO_PROCESS, IOPRIO_WHO_PROCESS
        "never": (101, 312, 298, 424, 109, *NAMESPACES["x86_64"], *NEW_MOUNT_API),
        "fcntl": 72,
        "ioctl": 16,
        "socket": 41,
        "madvise": 28,
        "fadvise": 221,
    },
    "aarch64": {
        "arch": 0xC00000B7,
        "forks": {"clone3": 435},
        "clone": 220,
        "lasting": (194, 190, 186, 180, 217, 218, 219),
        "exec": (221, 281),
        "memfd": 279,
        "pid": (129, 130, 131, 138, 240, 434, 122, 118, 119, 274, 261, 270, 271, 238, 239),
        "who": ((140, 0), (30, 1)),
        "never": (117, 272, 241, 424, 154, *NAMESPACES["aarch64"], *NEW_MOUNT_API),
        "fcntl": 25,
        "ioctl": 29,
        "socket": 198,
        "madvise": 233,
        "fadvise": 223,
    },
}
PID_PLACEHOLDER = 0x7FFFFFFF  # in the filter: the timed run's own pid, written in by each fork
F_SETOWN, F_SETOWN_EX, FIOSETOWN, SIOCSPGRP = 8, 15, 0x8901, 0x8902
AF_UNIX, MADV_COLD, MADV_PAGEOUT, POSIX_FADV_DONTNEED = 1, 20, 21, 4


def seccomp_filter(memfd: bool = True) -> tuple[bytes, list[int]] | None:
    """A seccomp BPF program for a timed run, and the byte offsets where its own pid goes. It
    refuses new processes (fork, vfork, clone without CLONE_THREAD; clone3 says ENOSYS, so the C
    library starts threads with clone), running another program, kernel objects that outlive a
    process, memfd_create unless ``memfd``, and any reach into another process (a process a
    call names must be this one, or 0: itself), and allows everything else; None on other
    architectures."""
    import platform
    import struct

    known = SYSCALLS.get(platform.machine())
    if known is None:
        return None
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06

    def op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
        return struct.pack("=HBBI", code, jt, jf, k)

    allow = op(ret, 0x7FFF0000)

    def refuse(err: int) -> bytes:
        return op(ret, 0x00050000 | err)

    import errno

    def argument(index: int) -> bytes:  # its low 32 bits (a pid_t; little-endian)
        return op(ld, 16 + 8 * index)

    itself = [op(jeq, 0, 2, 0), op(jeq, PID_PLACEHOLDER, 1, 0), refuse(errno.EPERM), allow]
    prog = [op(ld, 4), op(jeq, known["arch"], 1, 0), refuse(errno.ENOSYS)]  # another ABI
    prog += [op(ld, 0), op(jge, 0x40000000, 0, 1), refuse(errno.ENOSYS)]  # x32 numbers
    for name, number in known["forks"].items():
        prog += [op(jeq, number, 0, 1), refuse(errno.ENOSYS if name == "clone3" else errno.EAGAIN)]
    refused = [*known["lasting"], *known["exec"], *known["never"]]
    for number in refused + ([] if memfd else [known["memfd"]]):
        prog += [op(jeq, number, 0, 1), refuse(errno.EPERM)]
    for number in known["pid"]:  # A holds the number again after a block it skips
        prog += [op(jeq, number, 0, 1 + len(itself)), argument(0), *itself]
    for number, which in known["who"]:
        block = [argument(0), op(jeq, which, 0, 3), argument(1), *itself]
        prog += [op(jeq, number, 0, len(block)), *block]
    # fcntl(fd, F_SETOWN, pid): the run only; F_SETOWN_EX (a pid in a struct): never
    block = [argument(1), op(jeq, F_SETOWN_EX, 6, 0), op(jeq, F_SETOWN, 0, 6), argument(2)]
    block += [*itself, refuse(errno.EPERM), allow]
    prog += [op(jeq, known["fcntl"], 0, len(block)), *block]
    block = [argument(1), op(jeq, FIOSETOWN, 1, 0), op(jeq, SIOCSPGRP, 0, 1), refuse(errno.EPERM)]
    prog += [op(jeq, known["ioctl"], 0, len(block) + 1), *block, allow]
    block = [argument(0), op(jeq, AF_UNIX, 1, 0), refuse(errno.EACCES), allow]
    prog += [op(jeq, known["socket"], 0, len(block)), *block]
    block = [argument(2), op(jeq, MADV_COLD, 1, 0), op(jeq, MADV_PAGEOUT, 0, 1)]
    block += [refuse(errno.EPERM), allow]
    prog += [op(jeq, known["madvise"], 0, len(block)), *block]
    block = [argument(3), op(jeq, POSIX_FADV_DONTNEED, 0, 1), refuse(errno.EPERM), allow]
    prog += [op(jeq, known["fadvise"], 0, len(block)), *block]
    prog += [op(jeq, known["clone"], 1, 0), allow, op(ld, 16), op(jset, CLONE_THREAD, 1, 0)]
    prog += [refuse(errno.EAGAIN), allow]  # args[0] (flags): a thread may start, a process not
    offsets = [8 * i + 4 for i, code in enumerate(prog) if code == itself[1]]
    return b"".join(prog), offsets


class Confinement:
    """What a timed run applies to itself before its program runs, so that its work cannot move
    to another process and it cannot reach one: the seccomp filter (prepared here, once: a timed
    run imports nothing; each fork writes its own pid into its copy)."""

    def __init__(self, memfd: bool = True):
        self.prctl = self.fprog = None
        prepared = seccomp_filter(memfd)
        if prepared is None:
            return
        program, self.offsets = prepared
        with contextlib.suppress(Exception):
            import ctypes

            class Filter(ctypes.Structure):
                _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

            self._code = ctypes.create_string_buffer(program, len(program))
            self.fprog = ctypes.byref(Filter(len(program) // 8, ctypes.addressof(self._code)))
            self.prctl = ctypes.CDLL(None, use_errno=True).prctl

    def apply(self) -> bytes:
        """The seccomp filter (b"s"), else RLIMIT_NPROC 1, which stops threads too (b"n", where
        the kernel enforces it: not for root), else nothing (b"-")."""
        if self.prctl is not None:
            pid = os.getpid().to_bytes(4, sys.byteorder)
            for offset in self.offsets:
                self._code[offset : offset + 4] = pid
            if (
                self.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                and self.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, self.fprog, 0, 0) == 0
            ):
                return b"s"
        set_limit("RLIMIT_NPROC", 1)
        return b"n" if os.getuid() != 0 else b"-"


class MemoryCounter:
    """The memory cgroup a timing session joins (``cgroups.SessionCgroup``, handed over as an
    open folder): its timed runs are forks of it, in it, and the kernel charges every page they
    cause to it. The session is idle while a run goes: the run's peak is the cgroup's peak above
    its usage at the go."""

    def __init__(self, spec: str):
        number, version = spec.split(":")
        folder = int(number)
        peak, usage = protocol.MEMORY_COUNTERS[version]
        try:
            procs = os.open("cgroup.procs", os.O_WRONLY, dir_fd=folder)
            try:
                os.write(procs, b"0")  # this process, and every fork it makes from now on
            finally:
                os.close(procs)
            self.peak_fd = high(os.open(peak, os.O_RDWR, dir_fd=folder))
            self.usage_fd = high(os.open(usage, os.O_RDONLY, dir_fd=folder))
        finally:
            os.close(folder)

    def start(self) -> int:
        """Reset the peak to the usage now (cgroup v2: for this descriptor), and return it."""
        os.write(self.peak_fd, b"0")
        return int(os.pread(self.usage_fd, 64, 0))

    def peak(self) -> int:
        return int(os.pread(self.peak_fd, 64, 0))


REHEARSAL = compile(
    "def _rehearsal(*args):\n"
    "    total = 0\n"
    "    for i in range(200):\n"
    "        total += i * i % 7\n"
    "    return [len(args), total, 1.5, 'text', (None, True), {'key': [2, 3]}]\n",
    "<rehearsal>",
    "exec",
    dont_inherit=True,
)


def rehearse(args) -> None:
    """Before the go: load, call and encode a tiny function as a run does, so that the pages of
    the interpreter every run touches are mapped in this fork before it is measured (a fork
    shares its parent's memory, but maps file pages such as the interpreter's code anew)."""
    namespace: dict = {"__name__": "__main__"}
    exec(REHEARSAL, namespace)
    output_fields(namespace["_rehearsal"](*args))


class Program:
    """A program a timing session times: compiled here, run only in timed forks."""

    def __init__(self, request: dict):
        self.mode, self.entry_point = request["mode"], request.get("entry_point")
        self.exit_status = request.get("exit_status", "zero")  # stdio: endings still judged
        self.code = compile(request["code"], "<solution>", "exec", dont_inherit=True)
        setup = request.get("setup")
        self.setup = compile(setup, "<setup>", "exec", dont_inherit=True) if setup else None


def timed_process(
    program: Program,
    session: Session,
    job: protocol.Job,
    prepared,
    fds: dict[str, int],
    report: int,
    go: int,
) -> None:
    """In the fork: confine, wait for the go, run the program once, answer; never returns."""
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(fds.get("stdin", devnull), 0)
        os.dup2(fds.get("stdout", devnull), 1)
        os.dup2(devnull, 2)
        os.dup2(report, REPORT_FD)
        os.dup2(go, GO_FD)
        os.closerange(GO_FD + 1, 1 << 16)  # the channel, counters and every other descriptor
        os.setpgid(0, 0)  # its own process group: a signal to "its group" reaches it alone
        placed = True
        if session.places:  # nowhere to keep state: fresh, empty folders, gone with the run
            try:
                mounts.fresh_places(session.places, job.limits.fsize)
            except OSError:
                placed = False
        if os.geteuid() == 0:
            drop_privileges(job.drop_to)
        elif session.places:
            mounts.drop_capabilities()  # CAP_SYS_ADMIN (its user namespace's) was for the mounts
        set_limit("RLIMIT_FSIZE", job.limits.fsize)
        guard = session.confinement.apply() if placed else b"-"
        rehearse(prepared if program.mode == "call" else ())
        os.write(REPORT_FD, b"r" + guard)
        if os.read(GO_FD, 1) != b"g":
            os._exit(0)
    except BaseException:  # noqa: BLE001
        os._exit(3)
    # from here on program code runs: nothing this process says is trusted
    fields: dict = {"status": "ok"}
    output_json = None
    try:
        if program.mode == "stdio":
            sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            try:
                exec(program.code, {"__name__": "__main__", "__builtins__": __builtins__})
            except SystemExit as exc:
                if exc.code not in (None, 0) and program.exit_status == "zero":
                    raise RuntimeError(f"exit status {exc.code!r}") from None
            except BaseException:
                if program.exit_status != "any":  # judged by its output alone: timed the same
                    raise
            with contextlib.suppress(BaseException):  # as when judged (a closed stdout, say)
                sys.stdout.flush()
        else:
            namespace: dict = {"__name__": "__main__"}
            exec(program.code, namespace)
            if program.setup is not None:
                exec(program.setup, namespace)
            if program.mode == "call":
                output = entry(namespace, program.entry_point)(*prepared)
            else:
                output = eval(prepared, namespace)
            extra, output_json = output_fields(output)
            fields.update(extra)
    except BaseException as exc:  # noqa: BLE001
        status, error = error_status(exc)
        fields = {"status": status, "error": error}
        output_json = None
    with contextlib.suppress(BaseException):
        write_all(REPORT_FD, protocol.event_line({"event": "timed", **fields}, output_json))
    with contextlib.suppress(BaseException):
        os.read(GO_FD, 1)  # stopped and ended here by the process that measures it
    os._exit(0)


ENDED = "it ended without an answer"


def read_report(fd: int, pidfd: int, clock: int, cpu_limit: float, deadline: float):
    """A timed run's answer line; (None, reason) if it ended, or used its CPU or wall-clock
    limit, first."""
    chunks, size = [], 0
    while True:
        now = time.perf_counter()
        if now > deadline:
            return None, protocol.WALL_OVERRUN
        ready = readable(fd, min(0.05, deadline - now))
        with contextlib.suppress(OSError):
            if time.clock_gettime(clock) > cpu_limit:
                return None, "CPU-time limit exceeded"
        if not ready:
            if readable(pidfd, 0):
                return None, ENDED
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return None, ENDED
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n"):
            return b"".join(chunks), None
        if size > protocol.MAX_LINE_BYTES:
            return None, "an answer larger than the report limit"


class Session:
    """What every timed run of a timing session shares: the seccomp filter, the folders it gets
    fresh (``places``: the plan, worked out once), and the memory cgroup that counts its pages
    (None: its resident high-water mark, ``ru_maxrss``, is all there is)."""

    def __init__(self, job: protocol.Job, memory: str | None):
        self.memory = MemoryCounter(memory) if memory else None
        # without a memory cgroup, pages in a memfd would be memory no count sees
        self.confinement = Confinement(memfd=self.memory is not None)
        self.places = mounts.places(job.fresh)


def timed_run(program: Program, session: Session, job: protocol.Job, test: dict, prepared) -> bytes:
    """One fresh fork of this process runs the program once on ``test``'s input, measured here:
    CPU from the go to the answer, peak memory above the memory at the go; a ``timed`` line."""
    fds: dict[str, int] = {}
    if program.mode == "stdio":
        fds = {"stdin": memfd("stdin", prepared), "stdout": memfd("stdout")}
    report_r, report_w = map(high, os.pipe())
    go_r, go_w = map(high, os.pipe())
    pid = os.fork()
    if pid == 0:
        timed_process(program, session, job, prepared, fds, report_w, go_r)
    os.close(report_w)
    os.close(go_r)
    clock = ((~pid) << 3) | 2  # its CPU clock, all threads, read from outside
    pidfd = os.pidfd_open(pid)
    cpu_limit, wall_limit = float(test["cpu_limit"]), float(test.get("wall_limit") or 0)
    wall_limit = wall_limit or 3 * cpu_limit + 5
    result: dict = {}
    ended_itself = None  # a stdio run that ended without its report line: start and wall time
    try:
        confined = read_exact(report_r, 2, time.perf_counter() + 30)
        if confined is None or confined[:1] != b"r":
            result = {"status": "error", "error": protocol.NOT_STARTED}
        elif confined[1:] == b"-":
            result = {"status": "error", "error": protocol.UNCONFINED}
        else:
            start_cpu = time.clock_gettime(clock)
            if session.memory is not None:
                start_bytes = session.memory.start()
            else:
                start_kb = rss_kb(pid)
            started = time.perf_counter()
            os.write(go_w, b"g")
            line, why = read_report(report_r, pidfd, clock, cpu_limit, started + wall_limit)
            if line is not None and b"\n" in line[:-1]:  # it would answer the next request too
                line, why = None, "more than one answer line"
            ended = time.perf_counter()
            if line is None:
                result = {"status": "timeout" if "limit" in why else "error", "error": why}
                if why == ENDED and program.mode == "stdio":  # os._exit after a flush, say
                    ended_itself = {"start": start_cpu, "wall": ended - started}
            else:
                end_cpu = stopped_clock(pid, pidfd, clock)  # None: it ended (rusage counts)
                result = {"line": line, "end": end_cpu, "start": start_cpu, "wall": ended - started}
    finally:
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        _, status, usage = os.wait4(pid, 0)
        peak_bytes = session.memory.peak() if session.memory is not None else None
        os.close(pidfd)
        for fd in (report_r, go_w):
            os.close(fd)
    if ended_itself is not None and (
        os.waitstatus_to_exitcode(status) == 0 or program.exit_status == "any"
    ):
        # a whole program that ended by itself with status 0 (any, where the suite judges any
        # ending): its answer is what it wrote, as when it is judged
        result = {"line": b'{"event": "timed", "status": "ok"}', "end": None, **ended_itself}
    output = None
    if program.mode == "stdio" and "line" in result:
        output = read_all(fds["stdout"], job.limits.fsize).decode("utf-8", "replace")
    for fd in fds.values():
        os.close(fd)
    if "line" not in result:
        return protocol.event_line({"event": "timed", **result})
    end_cpu = result["end"]
    if end_cpu is None:
        end_cpu = usage.ru_utime + usage.ru_stime
    if peak_bytes is not None:
        peak_kb = max(0, peak_bytes - start_bytes) // 1024
    else:
        peak_kb = max(0, usage.ru_maxrss - start_kb)
    measured = {"cpu": end_cpu - result["start"], "wall": result["wall"], "peak_kb": peak_kb}
    # its own line, with the measurements put first (an output, when there is one, stays last)
    try:
        event = protocol.parse_event(result["line"].rstrip(b"\n"))
        if event["event"] != "timed" or any(key in event for key in measured):
            raise protocol.ProtocolError("forged")
        text = event["output"].decode() if "output" in event else None
    except (protocol.ProtocolError, UnicodeDecodeError) as exc:
        return protocol.event_line({"event": "timed", "status": "error", "error": str(exc)})
    head = {k: v for k, v in event.items() if k != "output"}
    if output is not None and event["status"] == "ok":  # stdio: the answer is what it wrote
        return protocol.event_line({**head, **measured}, json.dumps(output))
    return protocol.event_line({**head, **measured}, text)


def readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` (any number: these live above 1024, beyond select's reach) has data or its
    end, waiting up to ``timeout`` seconds."""
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    return bool(poll.poll(max(0, timeout) * 1000))


def stopped_clock(pid: int, pidfd: int, clock: int) -> float | None:
    """The CPU clock of a process once it is stopped (SIGSTOP; its accounting is then complete:
    a running process's clock can lag behind); None if it ended meanwhile (it stays waitable)."""
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGSTOP)
        info = os.waitid(os.P_PID, pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
        if info is None or info.si_code != os.CLD_STOPPED:
            return None
        return time.clock_gettime(clock)
    except OSError:
        return None


def read_exact(fd: int, n: int, deadline: float) -> bytes | None:
    data = b""
    while len(data) < n:
        left = deadline - time.perf_counter()
        if left <= 0 or not readable(fd, left):
            return None
        chunk = os.read(fd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def serve_timing(job: protocol.Job, channel: Channel, memory: str | None = None) -> None:
    """A timing session, for any number of programs: ``program`` compiles one (``load``),
    ``prepare`` decodes a test's input here (once, before any fork), and each ``time`` request is
    one timed run of the program on it in a fresh fork. ``memory``: the memory cgroup handed
    over (``FD:VERSION``), if any."""
    not_dumpable()
    import array  # noqa: F401 - what encoding an answer imports: loaded once, here, not per run
    import hashlib  # noqa: F401
    import io  # noqa: F401
    import pickle  # noqa: F401

    session = Session(job, memory)
    program: Program | None = None
    test, prepared = None, None
    while (request := channel.receive()) is not None:
        op = request["op"]
        if op == "program":
            program = test = prepared = None
            try:
                program = Program(request)
            except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
                error = f"{type(exc).__name__}: {exc}"
                channel.send({"event": "load", "status": "syntax_error", "error": error})
            else:
                channel.send({"event": "load", "status": "ok"})
        elif op == "prepare" and program is not None:
            test = request["test"]
            if program.mode == "call":
                prepared = codec.decode(test["args"])
            elif program.mode == "expr":
                prepared = compile(test["expr"], "<test>", "eval", dont_inherit=True)
            else:
                prepared = test["stdin"].encode()
            # only the limits stay: a timed run inherits this process's memory, and memory it
            # could free (the input's JSON form) would hide that much of its own allocation
            test = {key: test[key] for key in ("cpu_limit", "wall_limit") if key in test}
            del request
            channel.send({"event": "prepared"})
        elif op == "time" and program is not None and test is not None:
            channel.write(timed_run(program, session, job, test, prepared))
        else:
            raise ValueError(f"unexpected request {op!r}")


def main() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # room for the descriptors above 1000
    if soft != resource.RLIM_INFINITY and soft < 4096:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    os.dup2(0, CHANNEL_FD)
    channel = Channel(CHANNEL_FD)
    line = channel.read_line()
    if line is None:
        return
    job = protocol.Job.from_line(line)
    redirect_output()
    set_limits(job.limits)
    if job.cpu is not None:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {job.cpu})
    sys.path.extend(job.sys_path)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    install_exit_builtins()
    channel.send({"event": "ready"})  # the harness learns this process's pid from the socket
    if job.tests is None:
        serve_timing(job, channel, memory_cgroup_argument())
    elif job.mode == "stdio":
        serve_programs(job, channel)
    else:
        drop_privileges(job.drop_to)
        set_limit("RLIMIT_FSIZE", job.limits.fsize)
        loaded, ok = load_program(job, channel)
        if ok:
            judge_calls(job, channel, loaded)
    channel.wait_for_close()
    os._exit(0)


def memory_cgroup_argument() -> str | None:
    """``--memory-cgroup FD:VERSION`` on the command line (a timing session's, from the harness)."""
    args = sys.argv[1:]
    if "--memory-cgroup" in args[:-1]:
        return args[args.index("--memory-cgroup") + 1]
    return None


def median(values: list[float]) -> float:
    ordered, middle = sorted(values), len(values) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


if __name__ == "__main__":
    try:
        main()
    except BaseException:  # noqa: BLE001 - the child's own failure, on stderr
        import traceback

        traceback.print_exc()
        os._exit(3)
