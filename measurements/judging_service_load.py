"""Load on the judging service over loopback: N concurrent clients send MBPP+ programs to a
`corebench sandbox serve` started here, bounded in count and time; stops by itself.

    .venv/bin/python measurements/judging_service_load.py [--clients 8] [--requests 400]
        [--seconds 300] [--data-dir ../shared/data]

Each request is one program judged against an MBPP+ task by reference (``task``): the task's
reference solution (must pass) or a stub returning None (must not). A warm-up pass first judges
each task's reference once (the service computes and caches reference outputs). Then the clients
share the requests; a full service answers 429 and the client retries after ``Retry-After``; 5 %
of the requests are sent a second time with the same id, as a client that timed out would.

Checks, then prints: every request answered, once, with the expected verdict; the service judged
each id exactly once (its own counters); latency p50/p99 as clients see it (retries included)
and programs per second.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from corebench.harness.registry import default_plugins
from corebench.harness.sandbox import Executor
from corebench.harness.service import JudgeClient

ROOT = Path(__file__).resolve().parents[1]


def start_service(data_dir: Path, workers: int | None) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "corebench.harness.cli", "sandbox", "serve", "--port", "0"]
    command += ["--data-dir", str(data_dir)] + (["--workers", str(workers)] if workers else [])
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    line = server.stderr.readline()
    found = re.search(r"judging at (http://\S+)", line)
    if not found:
        server.kill()
        raise SystemExit(f"the service did not start: {line}{server.stderr.read()}")
    threading.Thread(target=server.stderr.read, daemon=True).start()  # keep the pipe drained
    return server, found.group(1)


def counter(metrics: str, name: str) -> int:
    return sum(
        int(float(line.split()[-1])) for line in metrics.splitlines() if line.startswith(name)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--seconds", type=float, default=300.0, help="stop sending after this")
    parser.add_argument("--workers", type=int, help="the service's (default: CPU cores)")
    parser.add_argument(
        "--baseline",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also judge the same programs in-process (no HTTP) for comparison",
    )
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args()

    mbpp = default_plugins().benchmarks.get("mbpp").component(args.data_dir)
    tasks = [t.task_id for t in mbpp.tasks()]
    suites = {t: mbpp.test_suite(t) for t in tasks}
    jobs = []  # (id, task, code, must pass)
    for i in range(args.requests):
        task = tasks[i // 2 % len(tasks)]
        suite = suites[task]
        stub = f"def {suite.entry_point}(*args):\n    return None\n"
        jobs.append((f"load-{i}", task, suite.reference_code if i % 2 == 0 else stub, i % 2 == 0))
    resend = {job[0] for job in jobs[::20]}  # 5 %: sent again with the same id

    server, url = start_service(args.data_dir, args.workers)
    try:
        client = JudgeClient(url, max_wait_s=args.seconds)
        health = client.health()
        print(
            f"service {url}: {health['isolation']}, {health['engine']} engine, "
            f"{health['workers']} workers, capacity {health['capacity']}"
        )
        started = time.perf_counter()
        warm = sorted({task for _, task, _, _ in jobs})
        with ThreadPoolExecutor(health["workers"]) as pool:
            list(
                pool.map(
                    lambda t: client.judge(
                        {
                            "code": suites[t].reference_code,
                            "task": {"benchmark": "mbpp", "task_id": t},
                        }
                    ),
                    warm,
                )
            )
        print(f"warm-up: {len(warm)} task references in {time.perf_counter() - started:.1f} s")
        judged_before = client.health()["programs_judged"]

        deadline = time.monotonic() + args.seconds
        answers: dict[str, list[dict]] = {}
        attempted: set[str] = set()
        failures: list[str] = []
        latencies: list[float] = []
        lock = threading.Lock()

        def send(job) -> None:
            rid, task, code, _ = job
            if time.monotonic() > deadline:
                return
            body = {"id": rid, "code": code, "task": {"benchmark": "mbpp", "task_id": task}}
            with lock:
                attempted.add(rid)
            for _ in range(2 if rid in resend else 1):
                sent = time.perf_counter()
                try:
                    answer = client.request("POST", "/v1/judge", body)
                except Exception as exc:  # noqa: BLE001 - counted as lost below
                    with lock:
                        failures.append(f"{rid}: {exc}")
                    return
                with lock:
                    latencies.append(time.perf_counter() - sent)
                    answers.setdefault(rid, []).append(answer)

        started = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(send, jobs))
        wall = time.perf_counter() - started
        metrics = client.metrics()
    finally:
        server.terminate()
        server.wait(timeout=120)

    sent = [job for job in jobs if job[0] in attempted]
    lost = [rid for rid, *_ in sent if rid not in answers]
    wrong = [
        rid for rid, _, _, must in sent if rid in answers and answers[rid][0]["passed"] != must
    ]
    twice = [rid for rid in answers if len(answers[rid]) != (2 if rid in resend else 1)]
    differ = [rid for rid in answers if any(a != answers[rid][0] for a in answers[rid])]
    judged = counter(metrics, "corebench_judge_programs_total") - judged_before
    reused = counter(metrics, "corebench_judge_reused_total")
    ordered = sorted(latencies)
    print(
        f"{len(sent)} programs ({len(jobs) - len(sent)} not sent within the time bound) from "
        f"{args.clients} clients in {wall:.1f} s: {len(sent) / wall:.1f} programs/s"
    )
    for failure in failures[:5]:
        print(f"lost: {failure}")
    print(
        f"latency per request (retries after 429 included): p50 {1e3 * statistics.median(ordered):.0f} ms, "
        f"p99 {1e3 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]:.0f} ms; "
        f"429 answers retried: {client.retries_429}"
    )
    print(
        f"checks: lost {len(lost)}, wrong verdict {len(wrong)}, answered other than once {len(twice)}, "
        f"retries answered differently {len(differ)}; the service judged {judged} programs for "
        f"{len(sent)} ids and answered {reused} retries without judging"
    )
    if args.baseline:  # the same programs, judged by an executor in this process: no HTTP
        executor = Executor()

        async def judge_all() -> None:
            await asyncio.gather(
                *(executor.judge(task, 0, code, suites[task]) for _, task, code, _ in sent)
            )

        started = time.perf_counter()
        asyncio.run(judge_all())
        local = time.perf_counter() - started
        print(
            f"baseline, the same {len(sent)} programs through an Executor in one process: "
            f"{local:.1f} s, {len(sent) / local:.1f} programs/s"
        )
    ok = (
        not (lost or wrong or twice or differ)
        and judged == len(sent)
        and reused == len(resend & set(answers))
    )
    print("OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
