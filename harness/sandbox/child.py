"""The program that runs inside the sandbox. Standard library only; also imported by the harness
for its codec (``encode``/``decode``).

Protocol: the harness writes one JSON job to stdin; the child reports JSON lines on the file
descriptor that was stdout, after pointing fd 1 and 2 at capped files so that nothing the
solution prints can be mistaken for a report. The child never sees expected outputs: it only
calls the function and reports plain-data outputs, which the harness compares itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import pickle
import resource
import signal
import statistics
import sys
import time
import traceback

MAX_DEPTH = 100
MAX_LOOPS = 10_000  # calls per timed sample at most (efficiency phase)


def calibration_work() -> int:
    """A fixed piece of interpreter work (a loop, arithmetic, calls, a dict, strings). Timed beside
    a solution in the same process, it says how fast this machine runs Python at that moment."""
    table: dict[int, int] = {}
    parts = []
    for i in range(64):
        table[i % 13] = table.get(i % 13, 0) + i * i
        parts.append(str(i))
    return len("".join(parts)) + sum(table.values())


def calibration_sample(loops: int) -> float:
    """Thread CPU seconds per ``calibration_work`` call, over ``loops`` calls."""
    started = time.thread_time()
    for _ in range(loops):
        calibration_work()
    return (time.thread_time() - started) / loops


class CpuTimeout(BaseException):
    """Raised by SIGPROF when a test exceeds its CPU-time limit."""


class Opaque:
    """A decoded value that was not plain data (only its type and repr were kept)."""

    __slots__ = ("type", "repr")

    def __init__(self, type_name: str, text: str):
        self.type, self.repr = type_name, text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and (self.type, self.repr) == (other.type, other.repr)

    def __hash__(self) -> int:
        return hash((self.type, self.repr))

    def __repr__(self) -> str:
        return f"<{self.type} {self.repr}>"


class Digest:
    """A decoded output too large to report: the sha256 of its canonical encoding."""

    __slots__ = ("hex",)

    def __init__(self, hex_digest: str):
        self.hex = hex_digest

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Digest) and self.hex == other.hex

    def __hash__(self) -> int:
        return hash(self.hex)

    def __repr__(self) -> str:
        return f"<output with sha256 {self.hex[:12]}…>"


def reported_output(event: dict):
    """The output of a test event: decoded plain data, or a Digest for a large one."""
    if "digest" in event:
        return Digest(str(event["digest"]))
    return decode(event.get("output"))


# --- codec: plain Python data <-> JSON, keeping tuples, sets, complex, non-str keys ----------------
INLINE_OUTPUT_CHARS = 8 * 1024 * 1024  # larger outputs are reported as a digest of their encoding
_FLAT_TYPES = ({str}, {bool}, {type(None)})


def _flat(items):
    """``items`` as a list when every element is a JSON scalar that needs no tag (fast path, in C)."""
    types = set(map(type, items))
    if not types or types in _FLAT_TYPES:
        return list(items)
    if types == {int} and min(items) > -(2**63) and max(items) < 2**63:
        return list(items)
    if types == {float} and all(map(math.isfinite, items)):
        return list(items)
    return None


def _sorted_by_text(encoded):
    """Canonical order for unordered containers, so equal values encode (and hash) equally."""
    return sorted(encoded, key=lambda e: json.dumps(e))


def encode(value, depth: int = 0):
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    d = depth + 1
    if value is None or type(value) is bool or type(value) is str:
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        value = int.__int__(value)
        return value if abs(value) < 2**63 else {"$": "bigint", "v": hex(value)}
    if isinstance(value, float):
        value = float.__float__(value)
        return value if math.isfinite(value) else {"$": "float", "v": repr(value)}
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, complex):
        return {"$": "complex", "v": [encode(value.real, d), encode(value.imag, d)]}
    if isinstance(value, list):
        flat = _flat(value) if type(value) is list else None
        return flat if flat is not None else [encode(v, d) for v in list.__iter__(value)]
    if isinstance(value, tuple):
        flat = _flat(value) if type(value) is tuple else None
        return {
            "$": "tuple",
            "v": flat if flat is not None else [encode(v, d) for v in tuple.__iter__(value)],
        }
    if isinstance(value, frozenset):
        return {
            "$": "frozenset",
            "v": _sorted_by_text(encode(v, d) for v in frozenset.__iter__(value)),
        }
    if isinstance(value, set):
        return {"$": "set", "v": _sorted_by_text(encode(v, d) for v in set.__iter__(value))}
    if isinstance(value, dict):
        pairs = [[encode(k, d), encode(v, d)] for k, v in dict.items(value)]
        return {"$": "dict", "v": sorted(pairs, key=lambda kv: json.dumps(kv[0]))}
    if isinstance(value, (bytes, bytearray)):
        return {"$": "bytes", "v": bytes(value).hex()}
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return encode(value.tolist(), d)
    try:
        text = repr(value)[:1000]
    except BaseException:  # noqa: BLE001
        text = "?"
    return {
        "$": "opaque",
        "type": f"{type(value).__module__}.{type(value).__qualname__}",
        "r": text,
    }


PICKLE_DIGEST_ITEMS = 65_536  # long outputs made of flat rows are hashed from a canonical pickle
_PLAIN = {str, int, float, bool, type(None)}


def _flat_rows(value) -> bool:
    """Every item is an exact tuple or list of untagged scalars (checked at C speed per item)."""
    return set(map(type, value)) <= {tuple, list} and all(
        set(map(type, row)) <= _PLAIN for row in value
    )


def _pickle_digest(value) -> str:
    """sha256 of a memo-free pickle: equal values give equal bytes whatever object identity they
    have, and tuples differ from lists. Ten times faster than JSON for rows of strings."""
    hasher = hashlib.sha256(f"pickle-v1:{type(value).__name__}:".encode())
    for start in range(0, len(value), 10_000):
        buffer = io.BytesIO()
        pickler = pickle.Pickler(buffer, protocol=4)
        pickler.fast = True  # no memo: canonical for trees of plain values
        pickler.dump(value[start : start + 10_000])
        hasher.update(buffer.getvalue())
    return hasher.hexdigest()


def encode_text(value, limit: int = INLINE_OUTPUT_CHARS) -> tuple[str | None, str | None]:
    """(JSON text, None) for an output, or (None, sha256 of that text) when it exceeds ``limit``.

    Long top-level lists and tuples are encoded item by item, so a huge output never exists
    twice in memory; the text is the same as ``json.dumps(encode(value))`` would give.
    """
    if type(value) in (list, tuple) and len(value) > PICKLE_DIGEST_ITEMS and _flat_rows(value):
        return None, _pickle_digest(value)
    if type(value) in (list, tuple) and len(value) > 1024 and _flat(value) is None:
        head, tail = ("[", "]") if type(value) is list else ('{"$": "tuple", "v": [', "]}")
        items = (json.dumps(encode(item, 1)) for item in value)
    else:
        head, tail, items = "", "", iter((json.dumps(encode(value)),))
    parts, size, hasher = [head], len(head), None
    for i, text in enumerate(items):
        piece = text if i == 0 else ", " + text
        size += len(piece)
        if hasher is None:
            parts.append(piece)
            if size > limit:
                hasher = hashlib.sha256("".join(parts).encode())
                parts = []
        else:
            hasher.update(piece.encode())
    if hasher is None:
        return "".join(parts) + tail, None
    hasher.update(tail.encode())
    return None, hasher.hexdigest()


def decode(data):
    """Rebuild plain Python values (only built-in types; never anything the solution defined)."""
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    tag, v = data.get("$"), data.get("v")
    if tag == "tuple":
        return tuple(decode(x) for x in v)
    if tag == "set":
        return {decode(x) for x in v}
    if tag == "frozenset":
        return frozenset(decode(x) for x in v)
    if tag == "dict":
        return {decode(k): decode(x) for k, x in v}
    if tag == "complex":
        return complex(decode(v[0]), decode(v[1]))
    if tag == "bigint":
        return int(v, 16)
    if tag == "float":
        return float(v)
    if tag == "bytes":
        return bytes.fromhex(v)
    if tag == "opaque":
        return Opaque(str(data.get("type")), str(data.get("r")))
    raise ValueError(f"unknown tag {tag!r}")


class CappedWriter:
    """sys.stdout/stderr for the solution: keeps the first bytes, silently drops the rest, so that
    printing never fails a program (writes to the raw file descriptors still meet RLIMIT_FSIZE)."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, fd: int, cap: int = 1 << 20):
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


# --- measurement helpers -------------------------------------------------------------------------------
def _status_kb(field: str) -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _reset_peak() -> None:
    try:  # Linux >= 4.0: writing 5 resets the peak RSS (VmHWM) of this process
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _entry(namespace: dict, name: str):
    """The function tests call: ``f``, or ``Class.method`` on a fresh instance (LeetCode style)."""
    owner, _, method = name.rpartition(".")
    return getattr(namespace[owner](), method) if owner else namespace[name]


def _run_program(compiled, stdin_text: str) -> str:
    """Run a whole program as ``__main__`` with ``stdin_text`` as its input; return its stdout.

    ``exit()`` with status 0 or None ends the program normally; any other status is an error.
    """
    stdin = io.TextIOWrapper(io.BytesIO(stdin_text.encode()), encoding="utf-8")
    captured = io.BytesIO()
    stdout = io.TextIOWrapper(captured, encoding="utf-8", write_through=True)
    saved = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = stdin, stdout
    try:
        exec(compiled, {"__name__": "__main__"})
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise RuntimeError(f"exit status {exc.code!r}") from None
    finally:
        with contextlib.suppress(Exception):
            stdout.flush()
        sys.stdin, sys.stdout = saved
    return captured.getvalue().decode("utf-8", "replace")


def main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    report_fd = os.dup(1)
    for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, fd)
        os.close(out)
    sys.stdout = CappedWriter(1)
    sys.stderr = CappedWriter(2)

    def report(output_json: str | None = None, **event) -> None:
        line = json.dumps(event)
        if output_json is not None:  # already JSON: spliced in, not encoded twice
            line = line[:-1] + ', "output": ' + output_json + "}"
        data = (line + "\n").encode()
        while data:
            data = data[os.write(report_fd, data) :]

    limits = job["limits"]
    for name, value in (
        ("RLIMIT_AS", limits.get("memory")),
        ("RLIMIT_FSIZE", limits.get("fsize")),
        ("RLIMIT_NPROC", limits.get("nproc")),
        ("RLIMIT_CPU", limits.get("cpu")),
        ("RLIMIT_CORE", 0),
    ):
        if value is not None and hasattr(resource, name):
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(getattr(resource, name), (int(value), int(value)))
    drop = job.get("drop_privileges")
    if drop is not None and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(drop)
        os.setuid(drop)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)

    def on_sigprof(signum, frame):
        raise CpuTimeout()

    signal.signal(signal.SIGPROF, on_sigprof)
    # CPU time of this (the solution's) thread: while a process-wide CPU timer is armed (the
    # per-test ITIMER_PROF limit), Linux reads the process clock at scheduler-tick granularity.
    clock, cpu_clock, setitimer = time.perf_counter, time.thread_time, signal.setitimer

    def error_event(exc: BaseException) -> dict:
        if isinstance(exc, CpuTimeout):
            return {"status": "timeout"}
        if isinstance(exc, MemoryError):
            return {"status": "memory"}
        return {"status": "error", "error": f"{type(exc).__name__}: {str(exc)[:500]}"}

    # Efficiency phase: a sample of fixed calibration work just before and just after each test's
    # timed calls, so the harness can relate its time to this machine's speed at that moment (a
    # VM's speed can change twofold within a tenth of a second). Sized before the solution loads.
    calibration_loops = 0
    if job.get("calibration_sample_s"):
        per_call = max(calibration_sample(10), 1e-9)
        calibration_loops = max(1, math.ceil(float(job["calibration_sample_s"]) / per_call))
    sys.path.extend(job.get("sys_path", []))
    baseline_kb = _status_kb("VmRSS:")
    report(event="ready", baseline_kb=baseline_kb)
    namespace: dict = {"__name__": "__main__"}
    started = clock()
    try:
        # dont_inherit: this file's own `from __future__ import annotations` must not leak into the
        # solution (it would hide a NameError in annotations that plain Python raises).
        compiled = compile(job["code"], "<solution>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        report(event="load", status="syntax_error", error=f"{type(exc).__name__}: {exc}")
        os._exit(0)
    stdio = job.get("mode") == "stdio"  # a whole program per test: stdin in, stdout out
    try:
        setitimer(signal.ITIMER_PROF, float(job.get("load_cpu_limit", 5.0)))
        if not stdio:
            exec(compiled, namespace)
            if job.get("setup"):  # a benchmark's own test set-up code (MBPP test_setup_code)
                exec(compile(job["setup"], "<setup>", "exec", dont_inherit=True), namespace)
        setitimer(signal.ITIMER_PROF, 0)
        fn = _entry(namespace, job["entry_point"]) if job.get("entry_point") else None
    except BaseException as exc:  # noqa: BLE001 - anything the solution raises
        setitimer(signal.ITIMER_PROF, 0)
        if isinstance(exc, (KeyError, AttributeError)):
            exc = NameError(f"entry point {job['entry_point']!r} is not defined")
        report(event="load", **error_event(exc))
        os._exit(0)
    report(event="load", status="ok", load_s=clock() - started)

    repeats = max(1, int(job.get("repeats", 1)))  # efficiency phase: timed calls per test
    warmup = max(0, int(job.get("warmup", 0)))  # untimed calls before them
    # Efficiency phase: a timed sample repeats a fast test until it lasts min_sample_s (as timeit's
    # autorange), so microsecond tests are not measured at the timer's and scheduler's noise level.
    min_sample = float(job.get("min_sample_s", 0.0))
    # Reference timing: a slow test stops repeating once its timed calls used this much CPU time;
    # the timer's relative noise is already small there, and the repeats would dominate the cost.
    budget = float(job.get("repeat_budget_s", math.inf))

    def fresh_input(test: dict):
        """A test's input, decoded anew for every call: solutions may mutate their arguments."""
        return None if stdio or "expr" in test else decode(test["args"])

    def run_test(test: dict, args):
        """One call: the whole program on stdin, the expression, or the entry point on ``args``."""
        if stdio:
            return _run_program(compiled, test["stdin"])
        if "expr" in test:
            return eval(compile(test["expr"], "<test>", "eval", dont_inherit=True), namespace)
        return fn(*args)

    for index, test in enumerate(job["tests"]):
        walls, cpus, peak_kb, output, outcome = [], [], 0, None, {"status": "ok"}
        loops, before = 1, None
        for call in range(warmup + repeats):
            if calibration_loops and call == warmup:
                before = calibration_sample(calibration_loops)
            batch = [fresh_input(test) for _ in range(loops)]  # decoded before the clock starts
            _reset_peak()
            rss0 = _status_kb("VmRSS:")
            wall0, cpu0 = clock(), cpu_clock()
            try:
                setitimer(signal.ITIMER_PROF, float(test["cpu_limit"]) * loops)
                for args in batch:
                    result = run_test(test, args)
                setitimer(signal.ITIMER_PROF, 0)
            except BaseException as exc:  # noqa: BLE001
                setitimer(signal.ITIMER_PROF, 0)
                output, outcome = None, error_event(exc)
                walls.append(clock() - wall0)
                cpus.append(cpu_clock() - cpu0)
                break
            wall, cpu = (clock() - wall0) / loops, (cpu_clock() - cpu0) / loops
            if loops == 1:  # memory from single calls only (a sample's inputs all exist at once)
                peak_kb = max(peak_kb, max(_status_kb("VmHWM:"), rss0) - baseline_kb)
            if call == 0:
                output = result  # the first call's output is the one judged (always a single call)
            if call >= warmup:
                walls.append(wall)
                cpus.append(cpu)
            elif call == warmup - 1 and 0 < wall < min_sample:
                loops = min(MAX_LOOPS, math.ceil(min_sample / wall))
            del result, batch
            if sum(cpus) * loops >= budget:
                break
        if loops > 1 and outcome["status"] == "ok":  # memory from as many single calls as samples
            for _ in range(repeats):
                args = fresh_input(test)
                _reset_peak()
                rss0 = _status_kb("VmRSS:")
                try:
                    setitimer(signal.ITIMER_PROF, float(test["cpu_limit"]))
                    run_test(test, args)
                except BaseException:  # noqa: BLE001 - its timed calls passed; keep their numbers
                    break
                finally:
                    setitimer(signal.ITIMER_PROF, 0)
                peak_kb = max(peak_kb, max(_status_kb("VmHWM:"), rss0) - baseline_kb)
        if outcome["status"] == "ok":
            try:
                text, digest = encode_text(output)
                outcome["output_json" if digest is None else "digest"] = text or digest
            except BaseException as exc:  # noqa: BLE001
                outcome = {"status": "error", "error": f"unencodable output: {type(exc).__name__}"}
        timing = {"wall": statistics.median(walls), "cpu": statistics.median(cpus)}
        if repeats > 1:
            timing["walls"] = walls
            timing["loops"] = loops
        if before is not None:  # the calibration work's time around this test's timed calls
            timing["calibration"] = (before + calibration_sample(calibration_loops)) / 2
        report(event="test", i=index, peak_kb=max(peak_kb, 0), **timing, **outcome)
        output = None
        if outcome["status"] != "ok" and job.get("stop_on_error", True):
            break
    report(event="done")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    try:
        main()
    except BaseException:  # noqa: BLE001 - report the child's own failure on stderr
        traceback.print_exc()
        os._exit(3)
