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
import protocol  # noqa: E402

sys.path.remove(_HERE)
for _name in ("codec", "protocol"):
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
        data = memoryview(protocol.event_line(event, output_json))
        while data:
            data = data[os.write(self.fd, data) :]

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


def output_fields(output) -> tuple[dict, str | None]:
    """(event fields, JSON text of the output or None) for a test's result."""
    try:
        text, digest = codec.encode_text(output)
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
        started = clock()
        try:
            args = fresh(test)
            called = clock()
            output = call(args)
            returned = clock()
        except BaseException as exc:  # noqa: BLE001
            status, error = error_status(exc)
            fields.update(status=status, error=error)
        else:
            extra, output_json = output_fields(output)
            fields.update(extra)
            del output, args
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


IMMUTABLE = (int, float, complex, str, bytes, bool, type(None))


def immutable(value) -> bool:
    """True for a value no call can change (so every call may share it)."""
    if isinstance(value, (tuple, frozenset)):
        return all(immutable(item) for item in value)
    return type(value) in IMMUTABLE


def copies(fresh, test: dict, n: int, mode: str) -> list:
    """``n`` independent inputs for ``test``, as a call would get from ``fresh``: one decoded input
    shared when no call can change it, otherwise copies unpickled from one decoding (several
    times faster than decoding each)."""
    first = fresh(test)
    if mode == "expr" or all(immutable(arg) for arg in first):
        return [first] * n
    import pickle  # loaded before "ready" in a timing session

    try:
        data = pickle.dumps(first, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - a value pickle cannot copy: decode each copy
        return [first] + [fresh(test) for _ in range(n - 1)]
    loads = pickle.loads
    return [first] + [loads(data) for _ in range(n - 1)]


def serve_call_session(job: protocol.Job, channel: Channel, loaded) -> None:
    """Timing requests, one at a time: ``prepare`` decodes fresh inputs (outside the measured
    window), ``call`` runs the program on all of them (the window the harness measures)."""
    fresh, call = caller(job, loaded)
    batch: list = []
    while (request := channel.receive()) is not None:
        if request["op"] == "prepare":
            batch = copies(fresh, request["test"], request["copies"], job.mode)
            channel.send({"event": "prepared", "copies": len(batch)})
            continue
        fields, output_json = {"event": "called", "status": "ok"}, None
        try:
            outputs = [call(args) for args in batch]
        except BaseException as exc:  # noqa: BLE001
            status, error = error_status(exc)
            fields.update(status=status, error=error)
        else:
            if request.get("report"):
                extra, output_json = output_fields(outputs[0])
                fields.update(extra)
            del outputs
        batch = []
        channel.send(fields, output_json)


# --- stdio suites: each run is a fresh fork ----------------------------------------------------
HIGH_FD = 1100  # descriptors a fork rearranges live above the numbers it assigns (0-4)


def high(fd: int) -> int:
    """``fd`` moved above HIGH_FD, so that dup2 onto 0-4 in the fork never overwrites a source."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, HIGH_FD)
    os.close(fd)
    return moved


def memfd(name: str, data: bytes = b"") -> int:
    fd = high(os.memfd_create(name, 0))
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
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


def rss_kb() -> int:
    with open("/proc/self/status", "rb") as f:
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
            if exc.code not in (None, 0):
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
    elif code != 0 or error:
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
    if job.tests is None:  # a timing session: one run per request
        while (request := channel.receive()) is not None:
            result = run_program(compiled, job, request["test"], logs)
            result.pop("output", None)
            channel.send({"event": "ran", **result})
        return
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
    if job.tests is None and job.mode != "stdio":
        import pickle  # noqa: F401 - a timing session copies inputs with it: loaded before the
        # memory baseline the harness reads at "ready"
    channel.send({"event": "ready"})  # the harness learns this process's pid from the socket
    if job.mode == "stdio":
        serve_programs(job, channel)
    else:
        drop_privileges(job.drop_to)
        set_limit("RLIMIT_FSIZE", job.limits.fsize)
        loaded, ok = load_program(job, channel)
        if ok:
            if job.tests is None:
                serve_call_session(job, channel, loaded)
            else:
                judge_calls(job, channel, loaded)
    channel.wait_for_close()
    os._exit(0)


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
