"""corebench's executor against `evalplus.evaluate` on the same samples file, on this machine.

After one cold run of each (EvalPlus computes its ground truth; corebench its reference outputs),
the two alternate for --rounds warm rounds, so a drift in the machine's speed hits both alike.
Each round also times the machine's limit for the reference set: every test of every reference
solution called in plain worker processes (one per core, slowest task first, forked from a fresh
interpreter), with no isolation, no output transfer and no comparison: what no judge on this
machine can beat. And two floors of a judge that runs programs outside its own process, as
corebench must: the same calls in persistent plain worker processes, each input decoded from the
JSON text it was sent as, each output encoded as corebench's child encodes it (digested where
corebench marks the test ``large``) and compared as text in the parent; once in the workers
themselves (no process per program), once in a process each worker forks for each program (as
EvalPlus and corebench start every program in a process of its own), neither with isolation.
They are timed against corebench's own judging time (which includes starting its executor and
reading references; the floors' workers are started before their clocks), without --repeats.
Prints every round, the speed-up of the medians, and per-sample agreement of the base and
base+extra verdicts, listing every disagreement. Without --samples, the benchmark's reference
solutions are the samples. EvalPlus needs a sample for every task: tasks a samples file lacks get
their reference solution as a filler, which is judged but left out of the agreement.

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python measurements/versus_evalplus.py --bench mbpp
    .venv/bin/python measurements/versus_evalplus.py --bench mbpp --samples samples.jsonl
    .venv/bin/python measurements/versus_evalplus.py --bench mbpp --from-run runs/A --from-run runs/B
"""

from __future__ import annotations

import argparse
import copy
import gc
import hashlib
import importlib.util
import json
import multiprocessing
import multiprocessing.pool
import os
import pickle
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path


def _codec_alone():
    """corebench's codec, loaded from its file as the sandbox's child loads it (it imports only
    the standard library): the floors' workers import this script, and stay small that way. The
    rest of corebench is imported in the functions that use it."""
    harness = importlib.util.find_spec("corebench.harness")  # imports only the namespace
    path = Path(harness.origin).parent / "sandbox" / "codec.py"
    spec = importlib.util.spec_from_file_location("_versus_evalplus_codec", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


codec = _codec_alone()
OVERRIDE = {"mbpp": "MBPP_OVERRIDE_PATH", "humaneval": "HUMANEVAL_OVERRIDE_PATH"}


def reference_samples(benchmark) -> list[dict]:
    return [
        {"task_id": t, "solution": p["prompt"] + p["canonical_solution"]}
        for t, p in benchmark.problems.items()
    ]


def run_samples(run_dir: Path) -> list[dict]:
    from corebench.harness.store import Store

    return [
        {"task_id": s.task_id, "solution": s.code}
        for s, _ in Store(run_dir, create=False).samples()
    ]


LIMIT = "the machine's limit"
CPU_S: dict[str, list[float]] = {}  # per tool: CPU seconds of each run
BUSY_S: dict[str, list[float]] = {}  # per tool: the machine's busy CPU seconds over each run
OWN_S: dict[str, list[float]] = {}  # per tool: its own process's CPU seconds (no children)
JUDGING_S: list[float] = []  # corebench's own "judged N samples in X s", per run
JUDGED = re.compile(r"judged \d+ samples in ([0-9.]+) s")


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy since boot (/proc/stat: every process,
    the kernel included, however it was started or reaped)."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def own_cpu_s(pid: int) -> float | None:
    """CPU seconds of process ``pid`` itself (all its threads, none of its children)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(argv: list[str], env: dict[str, str], tool: str) -> float:
    """Wall seconds of one run; its CPU seconds (user + system of every process that was waited
    for, as the kernel counts them) are kept in CPU_S, the machine's busy seconds in BUSY_S, and
    the started process's own CPU seconds (read from /proc every 50 ms while it runs) in OWN_S."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy = machine_busy_s()
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    own: list[float] = []

    def sample() -> None:
        while proc.poll() is None:
            if (seconds := own_cpu_s(proc.pid)) is not None:
                own.append(seconds)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - started
    sampler.join()
    BUSY_S.setdefault(tool, []).append(machine_busy_s() - busy)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{argv[:4]} failed:\n{stdout[-2000:]}\n{stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    CPU_S.setdefault(tool, []).append(cpu)
    OWN_S.setdefault(tool, []).append(max(own, default=0.0))
    if judged := JUDGED.search(stderr):
        JUDGING_S.append(float(judged[1]))
    return wall


def with_fillers(rows: list[dict], benchmark) -> tuple[list[dict], int]:
    """``rows`` plus one reference solution for each task they lack; returns how many are real."""
    present = {r["task_id"] for r in rows}
    fillers = [r for r in reference_samples(benchmark) if r["task_id"] not in present]
    return rows + fillers, len(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", default="mbpp", choices=sorted(OVERRIDE))
    parser.add_argument("--samples", type=Path)
    parser.add_argument("--from-run", type=Path, action="append", default=[])
    parser.add_argument("--rounds", type=int, default=2, help="warm rounds of each, alternating")
    parser.add_argument(
        "--repeats",
        type=int,
        default=0,
        help="corebench's measurement phase: timed runs per measured test (0: off, as EvalPlus "
        "measures nothing; the issue's target with it on is at most 2x evalplus.evaluate)",
    )
    args = parser.parse_args()
    from corebench.harness.config import data_dir_setting
    from corebench.harness.registry import default_plugins

    benchmark = default_plugins().benchmarks.get(args.bench).component(data_dir_setting())
    work = Path(tempfile.mkdtemp(prefix="versus-evalplus-"))
    if args.samples:
        rows = [json.loads(line) for line in args.samples.read_text().splitlines() if line.strip()]
    elif args.from_run:
        rows = [row for run in args.from_run for row in run_samples(run)]
    else:
        rows = reference_samples(benchmark)
    rows, real = with_fillers(rows, benchmark)
    samples = work / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{real} samples ({len(rows) - real} reference fillers) of {args.bench}")
    env = {**os.environ, OVERRIDE[args.bench]: str(benchmark.path)}
    evalplus = [sys.executable, "-m", "evalplus.evaluate", "--dataset", args.bench]
    ours = [
        *(sys.executable, "-m", "corebench.harness.cli", "evaluate", "--bench", args.bench),
        *("--samples", str(samples), "--repeats", str(args.repeats)),
    ]
    if args.repeats:
        print(f"corebench measures runtime and memory ({args.repeats} timed runs per test)")

    def run_evalplus(name: str) -> float:
        copy = work / f"evalplus-{name}" / "samples.jsonl"
        copy.parent.mkdir()
        copy.write_text(samples.read_text())
        return timed([*evalplus, "--samples", str(copy)], env, "evalplus.evaluate")

    def run_corebench(name: str) -> float:
        return timed([*ours, "--out", str(work / f"corebench-{name}")], env, "corebench evaluate")

    print(f"cold: evalplus.evaluate {run_evalplus('cold'):.1f} s, ", end="")
    print(f"corebench evaluate {run_corebench('cold'):.1f} s")
    theirs_s, ours_s, limit_s, floor_s, forked_s = [], [], [], [], []
    own_references = not (args.samples or args.from_run)
    limit_work = costliest_first(reference_work(benchmark)) if own_references else []
    floor_work = sent_work(limit_work)
    floored = own_references and not args.repeats  # its judging time then includes timing
    expected = expected_of(judge_floor(floor_work)[1]) if floored else []
    for round_ in range(args.rounds):
        theirs_s.append(run_evalplus(f"warm{round_}"))
        ours_s.append(run_corebench(f"warm{round_}"))
        limit_s.append(machine_limit(limit_work) if own_references else 0)
        floor_s.append(judge_floor(floor_work, expected)[0] if floored else 0)
        forked_s.append(judge_floor(floor_work, expected, own_process=True)[0] if floored else 0)
        print(f"warm round {round_ + 1}: evalplus.evaluate {theirs_s[-1]:.1f} s, ", end="")
        print(f"corebench evaluate {ours_s[-1]:.1f} s ({theirs_s[-1] / ours_s[-1]:.2f}x)", end="")
        print(f" judging {JUDGING_S[-1]:.1f} s" if len(JUDGING_S) == round_ + 2 else "", end="")
        print(f", the machine's limit {limit_s[-1]:.1f} s" if limit_s[-1] else "", end="")
        print(
            f", an out-of-process judge's floor {floor_s[-1]:.1f} s" if floor_s[-1] else "", end=""
        )
        print(f" ({forked_s[-1]:.1f} s with a process per program)" if forked_s[-1] else "")
    print(
        f"median warm: evalplus.evaluate {statistics.median(theirs_s):.1f} s, corebench evaluate "
        f"{statistics.median(ours_s):.1f} s; speed-up "
        f"{statistics.median(theirs_s) / statistics.median(ours_s):.2f}x"
    )
    warm_cpu = {  # the tools' first run is the cold one
        tool: statistics.median(runs if tool == LIMIT else runs[1:]) for tool, runs in CPU_S.items()
    }
    print(
        "median warm CPU seconds of the processes each waited for (the kernel's count; "
        "corebench's sandbox children are reaped inside their own PID namespace, so its figure "
        "is the harness's own work; the limit's is its tasks' own CPU time, from loading each "
        "reference to its last call): "
        + ", ".join(f"{tool} {cpu:.1f} s" for tool, cpu in warm_cpu.items())
    )
    if all(limit_s):
        limit = statistics.median(limit_s)
        print(
            f"the machine's limit (plain processes, no isolation): {limit:.1f} s, "
            f"{statistics.median(theirs_s) / limit:.2f}x evalplus.evaluate; corebench takes "
            f"{statistics.median(ours_s) / limit:.2f}x the limit"
        )
    if all(floor_s) and len(JUDGING_S) == len(ours_s) + 1:
        judging = statistics.median(JUDGING_S[1:])
        start = statistics.median(ours_s) - judging
        for name, runs in (
            ("persistent plain workers, no isolation", floor_s),
            ("a plain process forked per program, no isolation", forked_s),
        ):
            floor = statistics.median(runs)
            print(
                f"an out-of-process judge's floor ({name}): {floor:.1f} s judging, against "
                f"corebench's {judging:.1f} s ({judging / floor:.2f}x); with corebench's start-up "
                f"and reports ({start:.1f} s) it would take {floor + start:.1f} s, "
                f"{statistics.median(theirs_s) / (floor + start):.2f}x faster than "
                f"evalplus.evaluate and {(floor + start) / statistics.median(limit_s):.2f}x the "
                "machine's limit"
            )
    programs_s = [programs_cpu(work / f"corebench-warm{r}") for r in range(args.rounds)]
    print(where_it_goes(ours_s, programs_s, warm_cpu.get(LIMIT), measuring=args.repeats > 0))

    last = args.rounds - 1
    theirs = json.loads((work / f"evalplus-warm{last}" / "samples_eval_results.json").read_text())
    mine = {}
    for line in (work / f"corebench-warm{last}" / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        mine[(r["task_id"], r["sample_index"])] = r
    counted = {
        (r["task_id"], i) for r, i in zip(rows[:real], sample_numbers(rows[:real]), strict=True)
    }
    agree = {"base": 0, "plus": 0}
    for task_id, results in theirs["eval"].items():
        for index, r in enumerate(results):
            if (task_id, index) not in counted:
                continue
            m = mine[(task_id, index)]
            their_base = r["base_status"] == "pass"
            their_plus = their_base and r["plus_status"] == "pass"
            our_base, our_plus = m["base_status"] == "passed", m["verdict"] == "passed"
            agree["base"] += their_base == our_base
            agree["plus"] += their_plus == our_plus
            if (their_base, their_plus) != (our_base, our_plus):
                print(
                    f"  {task_id}#{index}: evalplus base={r['base_status']} plus={r['plus_status']}; "
                    f"corebench {m['verdict']} ({m['first_failure']})"
                )
    for key in ("base", "plus"):
        print(f"agreement ({key}): {agree[key]}/{real} = {100 * agree[key] / real:.2f}%")
    print(f"work dir: {work}")


def programs_cpu(run_dir: Path) -> float:
    """CPU seconds of the judged programs, as the harness read them from the kernel (each
    child's clock from its first report to its end, all threads)."""
    rows = (json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines())
    return sum(row["cpu_s"] or 0.0 for row in rows)


def where_it_goes(
    ours_s: list[float], programs_s: list[float], limit_cpu: float | None, measuring: bool
) -> str:
    """corebench's warm rounds (medians) taken apart: the time before and after judging, and
    the machine's CPU seconds during the run (cores x wall) by who spent them. The harness's
    CPU is the corebench process's own (all its threads, read from /proc while it ran); the
    programs' is the kernel's count for each judged child; the sandbox's (starting and ending
    each program's namespaces and processes) is what the machine spent beyond both; idle is
    what nobody used."""
    warm = slice(1, None)  # the first run of each tool was the cold one
    if len(JUDGING_S) != len(ours_s) + 1:
        return "where corebench's time goes: its judging time was not printed"
    wall, judging = statistics.median(ours_s), statistics.median(JUDGING_S[warm])
    busy = statistics.median(BUSY_S["corebench evaluate"][warm])
    harness = statistics.median(OWN_S["corebench evaluate"][warm])
    programs = statistics.median(programs_s)
    cores = os.cpu_count() or 1
    plain = f" (the same calls in plain processes: {limit_cpu:.1f} s)" if limit_cpu else ""
    return "\n".join(
        [
            f"where corebench's {wall:.1f} s go (median warm round): {wall - judging:.1f} s "
            f"starting (imports, data, samples file) and writing reports, {judging:.1f} s "
            f"{'judging and measuring' if measuring else 'judging'}; of the machine's {cores} x "
            f"{wall:.1f} = {cores * wall:.1f} CPU seconds:",
            f"  programs {programs:.1f} s{plain}: calls, decoding inputs, encoding and sending "
            "outputs, loading each program",
            f"  harness {harness:.1f} s: preparing inputs and references, reading and comparing "
            "outputs, storing results, reports",
            f"  sandbox and kernel {max(0.0, busy - harness - programs):.1f} s: starting and "
            "ending each program's namespaces and processes"
            + (", and the measurement phase's timed runs" if measuring else ""),
            f"  idle {max(0.0, cores * wall - busy):.1f} s: a core waiting (starting up, the "
            "last tasks, the harness's one interpreter lock)",
        ]
    )


def plain_workers() -> multiprocessing.pool.Pool:
    """os.cpu_count() plain worker processes forked from a fresh interpreter (a fork server), so
    that no worker inherits, walks or forks this process's copies of the benchmark's inputs.
    Each imports this script as it starts (stdlib and corebench's codec: 20 MB, 60 ms), and the
    pool is returned once every worker has, so that no clock counts a worker's start."""
    context = multiprocessing.get_context("forkserver")
    started = context.Barrier(os.cpu_count() + 1)
    pool = context.Pool(os.cpu_count(), initializer=started.wait)
    started.wait()
    return pool


def _run_task(work: tuple[str, str, list]) -> float:
    """One reference's every test, called in this plain process (the benchmark's own code)."""
    code, entry_point, inputs = work
    started = time.process_time()
    namespace: dict = {"__name__": "__main__"}
    exec(compile(code, "<reference>", "exec"), namespace)  # noqa: S102 - dataset references
    function = namespace[entry_point]
    for args in inputs:
        function(*copy.deepcopy(args))
    return time.process_time() - started


def reference_work(benchmark) -> list[tuple[str, str, list]]:
    """(code, entry point, every test's input) of every reference solution."""
    work = []
    for task_id, problem in benchmark.problems.items():
        suite = benchmark.test_suite(task_id)
        code = problem["prompt"] + problem["canonical_solution"]
        code = suite.prelude + code if suite.prelude else code
        if suite.setup_code:
            code += "\n" + suite.setup_code
        work.append((code, suite.entry_point, [a for n in suite.inputs for a in suite.inputs[n]]))
    return work


def machine_limit(work: list[tuple[str, str, list]]) -> float:
    """Wall seconds to call every reference on every test in os.cpu_count() plain processes, in
    the order given (costliest first: ``costliest_first``)."""
    with plain_workers() as pool:
        started = time.perf_counter()
        cpu = sum(pool.imap_unordered(_run_task, work, chunksize=1))
        wall = time.perf_counter() - started
    CPU_S.setdefault(LIMIT, []).append(cpu)
    return wall


def sent_work(work: list[tuple[str, str, list]]) -> list[tuple[str, str, list[str]]]:
    """``work`` with each test's input as the JSON text a judge sends (corebench's encoding)."""
    return [
        (code, entry, [json.dumps(codec.encode(args)) for args in inputs])
        for code, entry, inputs in work
    ]


Judged = list[tuple[bool, str]]  # per test: (marked large, the output's text or digest)


def _judge_task(item: tuple[int, tuple[str, str, list[str]], list[bool]]) -> tuple[int, Judged]:
    """One reference judged in this plain worker: each input decoded from its text, the output
    encoded as corebench's child encodes it (``codec.encode_text``; ``large`` per test, as the
    harness marks them, so a long output may go as a digest)."""
    index, (code, entry_point, inputs), large = item
    namespace: dict = {"__name__": "__main__"}
    exec(compile(code, "<reference>", "exec"), namespace)  # noqa: S102 - dataset references
    function = namespace[entry_point]
    outputs = []
    for text, marked in zip(inputs, large or [False] * len(inputs), strict=True):
        output = function(*codec.decode(json.loads(text)))
        encoded, digest = codec.encode_text(output, large=marked)
        outputs.append((digest is not None, encoded if digest is None else digest))
    return index, outputs


def _judge_in_own_process(item: tuple[int, tuple[str, str, list[str]], list[bool]]) -> bytes:
    """:func:`_judge_task` in a process this worker forks for the one program: no execve, no
    isolation, the worker's collector frozen first as corebench's zygote freezes its own (here
    at every fork: the worker makes no cyclic garbage worth collecting). The pickled ``(index,
    outputs)`` it writes to a pipe is passed on as it is, to be unpickled once, by the judge."""
    read, write = os.pipe()
    gc.freeze()
    pid = os.fork()
    if pid == 0:  # the program's own process
        os.close(read)
        status = 1
        try:
            with os.fdopen(write, "wb") as sent:
                pickle.dump(_judge_task(item), sent, protocol=pickle.HIGHEST_PROTOCOL)
            status = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as received:
        judged = received.read()
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if status:
        raise RuntimeError(f"the floor's process for {item[1][1]}() exited with {status}")
    return judged


def expected_of(outputs: list[Judged]) -> list[Judged]:
    """What the floor compares with, from a first run with no test marked: a digest where that
    run sent one or a long string (the tests corebench marks ``large``), else the text."""
    expected = []
    for task in outputs:
        expected.append([])
        for digested, text in task:
            if not digested and text[:1] == '"' and len(text) > codec.LONG_STRING_CHARS:
                digested, text = True, hashlib.sha256(text.encode()).hexdigest()
            expected[-1].append((digested, text))
    return expected


def judge_floor(
    work: list[tuple[str, str, list[str]]],
    expected: list[Judged] | None = None,
    own_process: bool = False,
) -> tuple[float, list[Judged]]:
    """(wall seconds, outputs per task) of judging every reference in os.cpu_count() persistent
    plain processes (``own_process``: each program in a process forked for it alone), in the
    order given, each output sent to this process and compared as text with ``expected``
    (:func:`expected_of` a first run; a mismatch ends the script: the floor must give the same
    outputs every round)."""
    outputs: list[Judged] = [[] for _ in work]
    marks = [[digested for digested, _ in task] for task in expected] if expected else None
    items = ((i, w, marks[i] if marks else None) for i, w in enumerate(work))
    with plain_workers() as pool:
        started = time.perf_counter()
        judge = _judge_in_own_process if own_process else _judge_task
        for judged in pool.imap_unordered(judge, items, chunksize=1):
            index, got = pickle.loads(judged) if own_process else judged
            if expected is not None and got != expected[index]:
                sys.exit(f"the floor's judge got other outputs for {work[index][1]}")
            outputs[index] = got
        wall = time.perf_counter() - started
    return wall, outputs


def costliest_first(work: list[tuple[str, str, list]]) -> list[tuple[str, str, list]]:
    with plain_workers() as pool:
        costs = pool.map(_run_task, work, chunksize=1)
    return [w for _, w in sorted(zip(costs, work, strict=True), key=lambda pair: -pair[0])]


def sample_numbers(rows: list[dict]) -> list[int]:
    """The n-th sample of its task, as both tools number them (in file order)."""
    seen: dict[str, int] = {}
    numbers = []
    for r in rows:
        numbers.append(seen.get(r["task_id"], 0))
        seen[r["task_id"]] = numbers[-1] + 1
    return numbers


if __name__ == "__main__":
    main()
