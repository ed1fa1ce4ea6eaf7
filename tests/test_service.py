"""The judging service (`corebench sandbox serve`): a real HTTP server on loopback in front of the
real sandbox; verdicts compared with the executor's own, which `run` and `evaluate` use."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corebench.harness.errors import CorebenchError
from corebench.harness.registry import default_plugins
from corebench.harness.sandbox import Executor
from corebench.harness.service import JudgeClient, JudgeServer, JudgeService, ServiceError
from corebench.harness.service.wire import Tests
from corebench.harness.testsuite import FunctionalSuite

ADD = {
    "entry_point": "add",
    "inputs": {"base": [[1, 2], [3, 4]], "plus": [[10, -3]]},
    "expected": {"base": [3, 7], "plus": [7]},
}
PROGRAMS = {
    "passes": "def add(a, b):\n    return a + b\n",
    "wrong": "def add(a, b):\n    return a - b\n",
    "raises": "def add(a, b):\n    raise ValueError('no')\n",
    "syntax": "def add(a, b)\n    return a + b\n",
    "blank": "   \n",
    "loops": "def add(a, b):\n    while True:\n        pass\n",
}
VERDICTS = {
    "passes": "passed",
    "wrong": "wrong_answer",
    "raises": "runtime_error",
    "syntax": "syntax_error",
    "blank": "no_code",
    "loops": "timeout",
}


class Running:
    """A service and its HTTP server on a free loopback port, in threads of this process."""

    def __init__(self, data_dir=None, capacity=None, token=None, workers=2):
        self.service = JudgeService(Executor(workers=workers), data_dir=data_dir, capacity=capacity)
        self.server = JudgeServer(self.service, "127.0.0.1", 0, token)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = self.server.url

    def client(self, **kwargs) -> JudgeClient:
        return JudgeClient(self.url, **kwargs)

    def close(self) -> None:
        self.server.stop()
        self.thread.join(timeout=30)
        self.server.close()


@pytest.fixture(scope="module")
def running(data_dir) -> Iterator[Running]:
    service = Running(data_dir=data_dir)
    yield service
    service.close()


def raw(url: str, method: str, path: str, body: bytes | None = None, headers=None):
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.request(method, path, body=body, headers=headers or {})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), data


def programs_judged(client: JudgeClient) -> int:
    return client.health()["programs_judged"]


def local_verdict(code: str, suite: FunctionalSuite, stop_on_failure=True):
    return asyncio.run(Executor(workers=1).judge("inline", 0, code, suite, stop_on_failure))


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_tests_in_the_request_get_the_verdicts_the_executor_gives(running, name):
    tests = {**ADD, "time_limit_s": 0.5}
    answer = running.client().judge({"code": PROGRAMS[name], "tests": tests, "all_tests": True})
    assert answer["verdict"] == VERDICTS[name]
    suite = Tests.model_validate(tests).suite(running.service.comparators)
    local = local_verdict(PROGRAMS[name], suite, stop_on_failure=False)
    assert answer["result"]["suite_verdicts"] == {
        k: v.value for k, v in local.suite_verdicts.items()
    }

    def same(detail):  # a timeout's detail says how much CPU it had used when stopped
        return detail.split(" after ")[0] if detail else detail

    assert [(t["index"], t["verdict"], same(t["detail"])) for t in answer["result"]["tests"]] == [
        (t.index, t.verdict.value, same(t.detail)) for t in local.tests
    ]
    assert answer["tests_total"] == 3
    assert answer["tests_passed"] == (3 if name == "passes" else 0)


def test_a_benchmark_task_is_judged_as_the_executor_judges_it(running, data_dir):
    mbpp = default_plugins().benchmarks.get("mbpp").component(data_dir)
    suite = mbpp.test_suite("Mbpp/2")
    right = suite.reference_code
    wrong = "def similar_elements(a, b):\n    return tuple(a)\n"
    for code in (right, wrong):
        answer = running.client().judge(
            {"code": code, "task": {"benchmark": "mbpp", "task_id": "Mbpp/2"}}
        )
        local = local_verdict(code, suite)
        assert answer["verdict"] == local.verdict.value
        assert answer["result"]["first_failure"] == local.first_failure
        assert answer["tests_total"] == suite.size
    assert answer["verdict"] == "wrong_answer"


def test_a_completion_has_its_code_extracted_as_run_does(running):
    completion = "Here it is:\n```python\ndef add(a, b):\n    return a + b\n```\nDone."
    answer = running.client().judge({"completion": completion, "tests": ADD})
    assert answer["verdict"] == "passed"
    assert answer["code"].strip() == "def add(a, b):\n    return a + b"
    prose = running.client().judge({"completion": "I cannot do that.", "tests": ADD})
    assert prose["verdict"] == "no_code"


def test_a_batch_answers_every_item_in_order_with_shared_suites(running):
    items = [
        {"code": PROGRAMS[name], "suite": "add", "id": f"batch-{name}"}
        for name in ("wrong", "passes", "raises", "passes")
    ]
    items.append({"code": "def f():\n    return 5\n", "tests": {"asserts": ["assert f() == 5"]}})
    status, _, data = raw(
        running.url,
        "POST",
        "/v1/judge/batch",
        json.dumps({"suites": {"add": ADD}, "items": items}).encode(),
    )
    assert status == 200
    results = json.loads(data)["results"]
    assert [r["verdict"] for r in results] == [
        "wrong_answer",
        "passed",
        "runtime_error",
        "passed",
        "passed",
    ]
    # the repeated id is the same request: answered twice, judged once
    assert results[1] == results[3]


def test_a_retry_with_the_same_id_is_answered_without_judging_again(running):
    client = running.client()
    before = programs_judged(client)
    request = {"id": "retry-1", "code": PROGRAMS["passes"], "tests": ADD}
    with ThreadPoolExecutor(4) as pool:  # at once, and again after it finished
        answers = list(pool.map(lambda _: client.request("POST", "/v1/judge", request), range(4)))
    answers.append(client.request("POST", "/v1/judge", request))
    assert all(a == answers[0] for a in answers)
    assert programs_judged(client) == before + 1
    with pytest.raises(ServiceError) as caught:  # the same id for something else: refused
        client.request("POST", "/v1/judge", {**request, "code": PROGRAMS["wrong"]})
    assert caught.value.status == 409


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "says"),
    [
        ("POST", "/v1/judge", b"{not json", 400, "not JSON"),
        ("POST", "/v1/judge", b"[1, 2]", 400, "JSON object"),
        ("POST", "/v1/judge", b'{"code": "x"}', 422, "exactly one of task, tests"),
        ("POST", "/v1/judge", b'{"code": "x", "tests": {"entry_point": "f"}}', 422, "inputs"),
        (
            "POST",
            "/v1/judge",
            b'{"code": "x", "tests": '
            + json.dumps({**ADD, "expected": {"base": [3]}}).encode()
            + b"}",
            422,
            "one output per input",
        ),
        (
            "POST",
            "/v1/judge",
            b'{"code": "x", "tests": '
            + json.dumps({**ADD, "comparator": "closee"}).encode()
            + b"}",
            422,
            "Did you mean 'close'",
        ),
        (
            "POST",
            "/v1/judge",
            b'{"code": "x", "task": {"benchmark": "mbp", "task_id": "1"}}',
            404,
            "Did you mean 'mbpp'",
        ),
        (
            "POST",
            "/v1/judge",
            b'{"code": "x", "task": {"benchmark": "mbpp", "task_id": "Mbpp/0"}}',
            404,
            "unknown mbpp task",
        ),
        ("POST", "/v1/judge", b'{"code": "x", "suite": "s"}', 422, "/v1/judge/batch"),
        ("POST", "/v1/judge/batch", b'{"items": []}', 422, "items"),
        (
            "POST",
            "/v1/judge/batch",
            b'{"items": [{"code": "x", "suite": "s"}]}',
            422,
            "not in suites",
        ),
        ("POST", "/v1/examples", b'{"code": "x", "examples": ["print(1)"]}', 422, "assert"),
        ("GET", "/v1/judge", None, 405, "takes POST"),
        ("POST", "/health", b"{}", 405, "takes GET"),
        ("GET", "/v2/judge", None, 404, "no such path"),
    ],
)
def test_a_malformed_request_gets_a_4xx_with_its_reason(running, method, path, body, status, says):
    before = programs_judged(running.client())
    got, _, data = raw(running.url, method, path, body)
    assert got == status
    assert says in json.loads(data)["error"]
    assert programs_judged(running.client()) == before  # nothing was judged


def send_head(url: str, head: bytes) -> str:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head)
        reply = b""
        while chunk := sock.recv(4096):  # the service closes the connection after answering
            reply += chunk
        return reply.decode()


def test_a_body_too_large_or_of_unknown_length_is_refused_before_it_is_read(running):
    huge = b"POST /v1/judge HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n\r\n"
    reply = send_head(running.url, huge)
    assert reply.startswith("HTTP/1.1 413") and "at most" in reply
    unknown = b"POST /v1/judge HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    reply = send_head(running.url, unknown)
    assert reply.startswith("HTTP/1.1 411") and "Content-Length" in reply


def test_health_and_metrics_report_what_was_judged(running):
    client = running.client()
    health = client.health()
    assert health["status"] == "ok" and health["workers"] == 2 and health["capacity"] == 16
    assert health["isolation"] in ("bwrap", "unsafe") and "mbpp" in health["benchmarks"]
    before = client.metrics()
    client.judge({"code": PROGRAMS["wrong"], "tests": ADD})
    after = client.metrics()

    def count(text: str, line: str) -> int:
        found = [row.split()[-1] for row in text.splitlines() if row.startswith(line)]
        return int(found[0]) if found else 0

    wrong = 'corebench_judge_programs_total{verdict="wrong_answer"}'
    assert count(after, wrong) == count(before, wrong) + 1
    assert "corebench_judge_in_flight 0" in after
    assert 'corebench_judge_latency_seconds{quantile="0.99"}' in after


def test_measurement_is_returned_when_asked_for(running):
    tests = {**ADD, "expected": None, "reference_code": PROGRAMS["passes"]}
    answer = running.client().judge({"code": PROGRAMS["passes"], "tests": tests, "repeats": 2})
    measured = answer["result"]["measurement"]
    assert answer["measurement_error"] is None and measured["repeats"] == 2
    assert measured["runtime_ratio"] > 0 and measured["reference_cpu_s"] > 0
    no_reference = running.client().judge({"code": PROGRAMS["passes"], "tests": ADD, "repeats": 2})
    assert no_reference["result"]["measurement"] is None
    assert "no reference" in no_reference["measurement_error"]


@pytest.mark.measurement_phase
def test_a_memoized_program_measures_like_the_plain_one_through_the_service(running):
    # ~40 ms of work per call on inputs 200,000-400,000, its own code as the reference: a cache
    # kept between calls once measured this memoized version at 0.00001 of the plain one
    plain = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i * i\n    return s\n"
    memoized = "_seen = {}\n" + plain.replace(
        "def f(n):\n", "def f(n):\n    if n in _seen:\n        return _seen[n]\n"
    ).replace("    return s\n", "    _seen[n] = s\n    return s\n")
    tests = {
        "entry_point": "f",
        "inputs": {"base": [[200_000], [300_000], [400_000]]},
        "reference_code": plain,
    }
    ratios = {}
    for name, code in (("plain", plain), ("memoized", memoized)):
        answer = running.client().judge({"code": code, "tests": tests, "repeats": 3})
        assert answer["measurement_error"] is None, answer
        ratios[name] = answer["result"]["measurement"]["runtime_ratio"]
    assert ratios["plain"] / 1.5 < ratios["memoized"] < ratios["plain"] * 1.5, ratios


def test_examples_are_run_as_a_debugging_agent_runs_them(running):
    answer = running.client().examples(
        "def f(x):\n    return 2 * x\n", ["assert f(2) == 4", "assert f(3) == 7"]
    )
    assert not answer["passed"]
    assert [t["verdict"] for t in answer["tests"]] == ["passed", "wrong_answer"]
    assert "failed: assert f(3) == 7  # wrong_answer: got 6, expected 7" in answer["feedback"]


def test_a_full_service_answers_429_and_takes_work_again_once_there_is_room():
    running = Running(capacity=1, workers=1)
    try:
        client = running.client()
        slow = {"code": PROGRAMS["loops"], "tests": {**ADD, "time_limit_s": 2.0}}
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(client.judge, slow)
            deadline = time.monotonic() + 30
            while running.service.in_flight == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            body = json.dumps({"code": PROGRAMS["passes"], "tests": ADD}).encode()
            status, headers, data = raw(running.url, "POST", "/v1/judge", body)
            assert status == 429 and headers["Retry-After"] == "1"
            assert "busy: 1 programs in flight" in json.loads(data)["error"]
            batch = json.dumps({"items": [{"code": "x", "tests": ADD}] * 2}).encode()
            assert raw(running.url, "POST", "/v1/judge/batch", batch)[0] == 413
            assert first.result()["verdict"] == "timeout"
        assert raw(running.url, "POST", "/v1/judge", body)[0] == 200
    finally:
        running.close()


def test_many_clients_at_once_lose_no_request_and_none_is_judged_twice():
    """More clients than the service admits: they are told 429 and retry; every request is
    answered once, with its own verdict, and the service judged each exactly once."""
    running = Running(capacity=3)
    try:
        client = running.client(max_wait_s=120)
        jobs = [(f"load-{i}", "passes" if i % 3 else "wrong") for i in range(36)]

        def send(job):
            rid, name = job
            return client.request(
                "POST", "/v1/judge", {"id": rid, "code": PROGRAMS[name], "tests": ADD}
            )

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(send, jobs))
        assert [a["id"] for a in answers] == [rid for rid, _ in jobs]
        assert [a["verdict"] for a in answers] == [VERDICTS[name] for _, name in jobs]
        health = client.health()
        assert health["programs_judged"] == len(jobs) and health["in_flight"] == 0
        assert "corebench_judge_reused_total 0" in client.metrics()
    finally:
        running.close()


def test_a_token_guards_everything_but_health():
    running = Running(token="s3cret", workers=1)
    try:
        body = json.dumps({"code": PROGRAMS["passes"], "tests": ADD}).encode()
        assert raw(running.url, "POST", "/v1/judge", body)[0] == 401
        wrong = {"Authorization": "Bearer nope"}
        assert raw(running.url, "POST", "/v1/judge", body, wrong)[0] == 401
        assert raw(running.url, "GET", "/metrics")[0] == 401
        assert raw(running.url, "GET", "/health")[0] == 200
        answer = running.client(token="s3cret").judge({"code": PROGRAMS["passes"], "tests": ADD})
        assert answer["verdict"] == "passed"
    finally:
        running.close()


def test_bound_beyond_loopback_it_refuses_to_start_without_a_token():
    service = JudgeService(Executor(workers=1))
    try:
        with pytest.raises(CorebenchError, match="needs a token"):
            JudgeServer(service, "0.0.0.0", 0)
    finally:
        service.close()


def test_a_judging_that_ends_before_its_callback_is_attached_is_answered(monkeypatch):
    """The service once deadlocked when a program was judged before the bookkeeping callback
    was attached (the callback then ran at once, under the lock it needs)."""
    import corebench.harness.service.core as core

    real = core.asyncio.run_coroutine_threadsafe

    def ended_first(coroutine, loop):
        future = real(coroutine, loop)
        future.result(timeout=60)
        return future

    service = JudgeService(Executor(workers=1))
    monkeypatch.setattr(core.asyncio, "run_coroutine_threadsafe", ended_first)
    try:
        batch = core.BatchRequest(items=[{"id": "quick", "code": PROGRAMS["passes"], "tests": ADD}])
        answers: list = []
        thread = threading.Thread(
            target=lambda: answers.extend(service.judge(service.resolve(batch))), daemon=True
        )
        thread.start()
        thread.join(timeout=60)
        assert not thread.is_alive(), "the service hung"
        assert answers[0]["verdict"] == "passed" and service.in_flight == 0
    finally:
        monkeypatch.undo()
        service.close()


def test_a_timing_session_never_overlaps_judging(monkeypatch):
    """Measuring takes the whole machine: it waits for judging in flight, and judging asked for
    meanwhile waits for it (the service mixes both on one executor)."""
    import corebench.harness.sandbox.executor as executor_module
    import corebench.harness.sandbox.timing as timing_module

    spans: list[tuple[str, float, float]] = []

    def recorded(kind, function):
        def run(*args, **kwargs):
            start = time.monotonic()
            try:
                return function(*args, **kwargs)
            finally:
                spans.append((kind, start, time.monotonic()))

        return run

    monkeypatch.setattr(
        executor_module, "run_judging", recorded("judge", executor_module.run_judging)
    )
    monkeypatch.setattr(timing_module.Timer, "time", recorded("time", timing_module.Timer.time))
    tests = {**ADD, "expected": None, "reference_code": PROGRAMS["passes"], "time_limit_s": 1.0}
    suite = Tests.model_validate(tests).suite({})
    executor = Executor(workers=2)

    async def mixed():
        await executor.reference("t/add", suite)  # the reference's run is not part of the race
        spans.clear()
        slow = executor.judge("t/add", 0, PROGRAMS["loops"], suite)
        measure = executor.measure("t/add", PROGRAMS["passes"], suite, repeats=2)
        later = [executor.judge("t/add", i, PROGRAMS["passes"], suite) for i in range(3)]
        return await asyncio.gather(slow, measure, *later)

    results = asyncio.run(mixed())
    assert results[0].verdict.value == "timeout" and results[1].runtime_ratio > 0
    timings = [(a, b) for kind, a, b in spans if kind == "time"]
    judgings = [(a, b) for kind, a, b in spans if kind == "judge"]
    assert len(timings) == 1 and len(judgings) == 4  # the solution and its reference in one
    for t_start, t_end in timings:
        for j_start, j_end in judgings:
            assert j_end <= t_start or j_start >= t_end, (spans, "overlap")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_two_solutions_are_timed_at_once_each_on_a_cpu_of_its_own_and_never_beside_judging(
    monkeypatch,
):
    """With two timing CPUs, two measurements run at once (pinned apart), and judging asked for
    meanwhile waits for both: no judging run overlaps any timing session."""
    import corebench.harness.sandbox.executor as executor_module
    import corebench.harness.sandbox.timing as timing_module

    spans: list[tuple[str, float, float, int | None]] = []
    pinned: list[tuple[int | None, str]] = []  # (the timer's CPU, where each child may run)
    judge, time_programs = executor_module.run_judging, timing_module.Timer.time

    def judged(*args, **kwargs):
        start = time.monotonic()
        try:
            return judge(*args, **kwargs)
        finally:
            spans.append(("judge", start, time.monotonic(), None))

    def timed(timer, *args, **kwargs):
        start = time.monotonic()
        try:
            return time_programs(timer, *args, **kwargs)
        finally:
            spans.append(("time", start, time.monotonic(), timer.cpu))
            for child in timer.children.values():  # as the kernel has them
                status = Path(f"/proc/{child.pid}/status").read_text()
                allowed = status.split("Cpus_allowed_list:")[1].split()[0]
                pinned.append((timer.cpu, allowed))

    monkeypatch.setattr(executor_module, "run_judging", judged)
    monkeypatch.setattr(timing_module.Timer, "time", timed)
    monkeypatch.delenv("COREBENCH_TIMING_SESSIONS", raising=False)
    tests = {**ADD, "expected": None, "reference_code": PROGRAMS["passes"], "time_limit_s": 1.0}
    suite = Tests.model_validate(tests).suite({})
    executor = Executor(workers=2)
    assert executor.timing_sessions == 2

    async def mixed():
        await executor.reference("t/add", suite)
        spans.clear()
        measures = [executor.measure("t/add", PROGRAMS["passes"], suite, 3) for _ in range(2)]
        judges = [executor.judge("t/add", i, PROGRAMS["passes"], suite) for i in range(3)]
        return await asyncio.gather(*measures, *judges)

    results = asyncio.run(mixed())
    executor.close()
    assert all(m.runtime_ratio > 0 for m in results[:2])
    assert all(r.verdict.value == "passed" for r in results[2:])
    timings = [(a, b, cpu) for kind, a, b, cpu in spans if kind == "time"]
    judgings = [(a, b) for kind, a, b, _ in spans if kind == "judge"]
    assert len(timings) == 2 and len(judgings) == 3
    (a_start, a_end, a_cpu), (b_start, b_end, b_cpu) = timings
    assert a_start < b_end and b_start < a_end, "the two measurements did not run at once"
    assert a_cpu != b_cpu and {a_cpu, b_cpu} <= os.sched_getaffinity(0)
    # each session's two children (the solution's, the reference's) run on its CPU alone
    assert len(pinned) == 4 and all(allowed == str(cpu) for cpu, allowed in pinned), pinned
    for t_start, t_end, _ in timings:
        for j_start, j_end in judgings:
            assert j_end <= t_start or j_start >= t_end, (spans, "overlap")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_a_timing_session_joins_a_running_one_only_while_no_judging_waits(monkeypatch):
    """The second timing CPU's session joins the first's stretch at once when nothing else
    waits; once a judging run waits, a new session waits for the stretch to end and the judging
    run goes first (a service's judging is never starved by a stream of measurements)."""
    executor = Executor(workers=2, timing_sessions=2)
    order: list[str] = []
    cpus: dict[str, int | None] = {}

    async def in_thread(function, *args, **kwargs):  # a judging run that started and passed
        order.append("judged")
        return type("Judged", (), {"started": True})()

    monkeypatch.setattr(executor, "_in_thread", in_thread)

    async def session(name: str, entered: asyncio.Event, leave: asyncio.Event) -> None:
        async with executor._alone() as timer:
            order.append(f"{name} in")
            cpus[name] = timer.cpu
            entered.set()
            await leave.wait()
        order.append(f"{name} left")

    async def scenario() -> None:
        events = {k: asyncio.Event() for k in ("a in", "a out", "b in", "b out", "c in", "c out")}
        a = asyncio.create_task(session("a", events["a in"], events["a out"]))
        await events["a in"].wait()
        b = asyncio.create_task(session("b", events["b in"], events["b out"]))
        await asyncio.wait_for(events["b in"].wait(), 5)  # joined: nothing waited
        events["b out"].set()
        await b
        judge = asyncio.create_task(executor.run_judging(None, []))
        await asyncio.sleep(0.05)
        assert not judge.done()  # a's stretch holds every slot
        c = asyncio.create_task(session("c", events["c in"], events["c out"]))
        await asyncio.sleep(0.05)
        assert not events["c in"].is_set()  # a judging run waits: c may not join
        events["a out"].set()
        await a
        await asyncio.wait_for(judge, 5)
        await asyncio.wait_for(events["c in"].wait(), 5)
        events["c out"].set()
        await c
        assert executor._slots._value == 2 and executor._open.is_set()

    asyncio.run(scenario())
    executor.close()
    assert order == ["a in", "b in", "b left", "a left", "judged", "c in", "c left"]
    assert cpus["a"] != cpus["b"]  # at once, each on a CPU of its own


def test_a_cancelled_measurement_keeps_its_timer_until_its_thread_is_done(monkeypatch):
    """Cancelling a measurement cannot stop the thread that drives its timer: the timer is handed
    to no other session, and no judging starts, until that thread has finished, however often
    the measurement is cancelled."""
    import threading

    import corebench.harness.sandbox.timing as timing_module

    release, started = threading.Event(), threading.Event()
    running: list[str] = []

    def blocking_time(timer, *args, **kwargs):
        running.append("start")
        started.set()
        release.wait(30)
        running.append("end")
        return {}

    monkeypatch.setattr(timing_module.Timer, "time", blocking_time)
    tests = {**ADD, "expected": None, "reference_code": PROGRAMS["passes"], "time_limit_s": 1.0}
    suite = Tests.model_validate(tests).suite({})
    executor = Executor(workers=1, timing_sessions=1)

    async def scenario() -> None:
        first = asyncio.create_task(executor._timed(PROGRAMS["passes"], suite, {0: 1.0}, 1, None))
        await asyncio.to_thread(started.wait, 10)
        first.cancel()
        await asyncio.sleep(0.05)
        first.cancel()  # again, while it waits for its thread
        await asyncio.sleep(0.05)

        async def second_session() -> None:
            async with executor._alone():
                running.append("second")

        second = asyncio.create_task(second_session())
        await asyncio.sleep(0.1)
        assert running == ["start"] and not second.done()  # the first thread still runs
        assert not executor._open.is_set()  # and judging still waits
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await first
        await asyncio.wait_for(second, 5)

    try:
        asyncio.run(scenario())
    finally:
        release.set()  # a failed check must not leave the thread waiting
        executor.close()
    assert running == ["start", "end", "second"]


def test_timing_sessions_setting(monkeypatch):
    from corebench.harness.sandbox.timing import timing_cpus, timing_sessions_setting

    monkeypatch.delenv("COREBENCH_TIMING_SESSIONS", raising=False)
    assert timing_sessions_setting(4) == 4 and timing_sessions_setting(4, 1) == 1
    assert timing_sessions_setting(2, 8) == 2  # never more than the slots they take
    monkeypatch.setenv("COREBENCH_TIMING_SESSIONS", "1")
    one = Executor(workers=2)
    assert timing_sessions_setting(4) == 1 and one.timing_sessions == 1
    one.close()
    for bad in ("two", "0"):
        monkeypatch.setenv("COREBENCH_TIMING_SESSIONS", bad)
        with pytest.raises(CorebenchError, match="timing sessions|COREBENCH_TIMING_SESSIONS"):
            timing_sessions_setting(4)
    cpus = sorted(os.sched_getaffinity(0))
    assert timing_cpus(1) == cpus[-1:] and timing_cpus(len(cpus) + 5) == cpus


# --- the service against malformed requests (property-based, on the real loopback server) -------
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
VALID_JUDGE = {"code": PROGRAMS["passes"], "tests": {**ADD}}
FIELDS = [  # (path into a valid /v1/judge body, what may replace it)
    (("code",), JSON_VALUES),
    (("tests",), JSON_VALUES),
    (("tests", "entry_point"), JSON_VALUES),
    (("tests", "inputs"), JSON_VALUES),
    (("tests", "expected"), JSON_VALUES),
    (("tests", "mode"), st.text(max_size=8) | JSON_VALUES),
    (("tests", "comparator"), st.text(max_size=12) | JSON_VALUES),
    (("tests", "time_limit_s"), JSON_VALUES),
    (("tests", "asserts"), st.lists(st.text(max_size=30), max_size=3) | JSON_VALUES),
    (("tests", "stdio"), JSON_VALUES),
    (("repeats",), st.integers(-5, 50) | JSON_VALUES),
    (("task",), JSON_VALUES),
    (("completion",), JSON_VALUES),
    (("id",), JSON_VALUES),
]


def replaced(body: dict, path: tuple[str, ...], value) -> dict:
    body = json.loads(json.dumps(body))
    *parents, last = path
    target = body
    for key in parents:
        target = target[key]
    if value is None and last == "code":
        del target[last]
    else:
        target[last] = value
    return body


def assert_no_server_error(running, path: str, body: bytes) -> None:
    status, _, data = raw(running.url, "POST", path, body, {"Content-Type": "application/json"})
    assert status < 500, (status, data[:300], body[:300])
    if status >= 400:
        assert json.loads(data)["error"], data


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(range(len(FIELDS))), data=st.data())
def test_any_value_of_any_field_is_never_a_5xx(running, field, data):
    path, values = FIELDS[field]
    body = replaced(VALID_JUDGE, path, data.draw(values))
    assert_no_server_error(running, "/v1/judge", json.dumps(body).encode())


@settings(max_examples=80, deadline=None)
@given(
    path=st.sampled_from(["/v1/judge", "/v1/judge/batch", "/v1/examples"]),
    body=JSON_VALUES.map(lambda v: json.dumps(v).encode()) | st.binary(max_size=200),
)
def test_any_body_is_a_4xx_or_an_answer_never_a_5xx(running, path, body):
    assert_no_server_error(running, path, body)


@settings(max_examples=30, deadline=None)
@given(depth=st.integers(1, 5000), opener=st.sampled_from(["[", '{"a":']), where=st.integers(0, 2))
def test_nested_bodies_of_any_depth_are_never_a_5xx(running, depth, opener, where):
    closer = "]" if opener == "[" else "}"
    nested = opener * depth + "1" + closer * depth
    body = [
        nested,  # the whole body
        json.dumps({**VALID_JUDGE, "tests": {**ADD, "inputs": {"base": [[1, 2]]}}}).replace(
            "[[1, 2]]", f"[[{nested}, 2]]"
        ),  # one test's argument
        json.dumps({"code": "x", "examples": ["assert 1"]}).replace('"x"', nested),
    ][where]
    assert_no_server_error(running, "/v1/examples" if where == 2 else "/v1/judge", body.encode())


@settings(max_examples=40, deadline=None)
@given(lines=st.lists(st.text(max_size=40), min_size=1, max_size=3))
def test_asserts_that_are_not_assert_statements_are_a_422(running, lines):
    lines = [f"x{line}" for line in lines]  # never an assert statement
    body = {"code": PROGRAMS["passes"], "tests": {"entry_point": "add", "asserts": lines}}
    status, _, data = raw(
        running.url, "POST", "/v1/judge", json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )  # fmt: skip
    assert status == 422 and "assert" in json.loads(data)["error"], (status, data[:300])
