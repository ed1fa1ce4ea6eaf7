"""Clients of the judging service: :class:`JudgeClient` (HTTP, retrying politely) and
:class:`RemoteExecutor`, which offers the executor's judging calls so that code written against
:class:`~corebench.harness.sandbox.Executor` (training rewards) can judge on a service instead."""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.client
import json
import os
import random
import threading
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

from ..config import ENV_JUDGE_TOKEN, ENV_JUDGE_URL
from ..errors import CorebenchError
from ..examples import Example
from ..records import ExecutionResult, Measurement, TestOutcome
from ..testsuite import FunctionalSuite
from .wire import Tests


class ServiceError(CorebenchError):
    """The service answered with an error (``status``) or could not be reached."""

    def __init__(self, status: int, message: str):
        super().__init__(f"judging service: {status}: {message}" if status else message)
        self.status = status


class JudgeClient:
    """Requests to a judging service at ``url`` (default ``$COREBENCH_JUDGE_URL``), with
    ``token`` (default ``$COREBENCH_JUDGE_TOKEN``). One keep-alive connection per thread. A 429
    is retried after the ``Retry-After`` it names and a dropped connection at once, for up to
    ``max_wait_s``; every judging request carries an id, so a retry is never judged twice."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout_s: float = 900.0,
        max_wait_s: float = 600.0,
    ):
        url = url or os.environ.get(ENV_JUDGE_URL)
        if not url:
            raise CorebenchError(f"no judging service: give its URL or set {ENV_JUDGE_URL}")
        parts = urlsplit(url if "//" in url else f"http://{url}")
        if parts.scheme != "http" or not parts.hostname:
            raise CorebenchError(f"judging service URL {url!r}: expected http://HOST:PORT")
        self.url = f"http://{parts.hostname}:{parts.port or 80}"
        self._address = (parts.hostname, parts.port or 80)
        self.token = token or os.environ.get(ENV_JUDGE_TOKEN)
        self.timeout_s, self.max_wait_s = timeout_s, max_wait_s
        self._local = threading.local()
        self.retries_429 = 0  # how often the service said it was full

    # --- transport -------------------------------------------------------------------------------
    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection(
                *self._address, timeout=self.timeout_s
            )
        return conn

    def _once(
        self, method: str, path: str, body: bytes | None
    ) -> tuple[int, dict[str, str], bytes]:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        conn = self._connection()
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        except (OSError, http.client.HTTPException):
            conn.close()
            self._local.conn = None
            raise

    def request(self, method: str, path: str, payload: Any = None) -> Any:
        """The answer to one request, retried while the service is full or unreachable."""
        body = None if payload is None else json.dumps(payload).encode()
        deadline = time.monotonic() + self.max_wait_s
        delay = 0.05
        while True:
            try:
                status, headers, data = self._once(method, path, body)
            except (OSError, http.client.HTTPException) as exc:
                if time.monotonic() > deadline:
                    raise ServiceError(
                        0, f"judging service at {self.url} unreachable: {exc}"
                    ) from exc
                time.sleep(delay)
                delay = min(2.0, delay * 2)
                continue
            if status == 429 and time.monotonic() < deadline:
                self.retries_429 += 1
                wait = float(headers.get("Retry-After", "1"))
                time.sleep(wait * random.uniform(0.1, 1.0))  # spread the retries out
                continue
            text = data.decode(errors="replace")
            if status != 200:
                try:
                    message = json.loads(text).get("error", text)
                except ValueError:
                    message = text
                raise ServiceError(status, message)
            return (
                json.loads(text)
                if headers.get("Content-Type", "").startswith("application/json")
                else text
            )

    # --- endpoints -------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        return self.request("GET", "/health")

    def metrics(self) -> str:
        return self.request("GET", "/metrics")

    def judge(self, item: dict[str, Any]) -> dict[str, Any]:
        """One program (a ``JudgeRequest`` as a dict) -> its answer."""
        return self.request("POST", "/v1/judge", {"id": uuid.uuid4().hex, **item})

    def judge_batch(
        self, items: list[dict[str, Any]], suites: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Many programs -> their answers in order; sent in parts the service can take at once."""
        items = [{"id": uuid.uuid4().hex, **item} for item in items]
        size = max(1, int(self.health()["capacity"]))
        answers: list[dict[str, Any]] = []
        for start in range(0, len(items), size):
            part = items[start : start + size]
            named = {i["suite"] for i in part if i.get("suite")}
            body = {
                "items": part,
                "suites": {k: v for k, v in (suites or {}).items() if k in named},
            }
            answers += self.request("POST", "/v1/judge/batch", body)["results"]
        return answers

    def examples(self, code: str, examples: list[Any]) -> dict[str, Any]:
        return self.request("POST", "/v1/examples", {"code": code, "examples": examples})


class RemoteExecutor:
    """The executor's judging calls (``judge``, ``evaluate``, ``measure``, ``run_examples``),
    answered by a judging service: suites travel as data (their comparators must be ones the
    service knows: built-in, or a registered benchmark's)."""

    def __init__(self, client: JudgeClient | None = None, parallel: int = 32):
        self.client = client or JudgeClient()
        self.where = f"service {self.client.url}"
        self._pool = concurrent.futures.ThreadPoolExecutor(parallel, "corebench-judge-client")
        self._health: dict[str, Any] | None = None

    def _described(self) -> dict[str, Any]:
        if self._health is None:
            self._health = self.client.health()
        return self._health

    @property
    def mode(self) -> str:
        """How the service confines programs."""
        return str(self._described()["isolation"])

    @property
    def memory_bytes(self) -> int:
        return int(self._described().get("memory_bytes") or 0)

    @property
    def timing_sessions(self) -> int:
        """How many programs the service times at once (a CPU each)."""
        return max(1, int(self._described().get("timing_sessions") or 1))

    @property
    def memory_accounting(self) -> str | None:
        """How the service counts timed runs' memory (``cgroup`` or ``rss``)."""
        return self._described().get("memory_accounting")

    def close(self) -> None:
        self._pool.shutdown(wait=False)

    async def reference_cost(self, task_id: str, suite: FunctionalSuite) -> float:
        """Unknown here: the service orders nothing by it (every task costs the same)."""
        return 0.0

    async def _call(self, function: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, function, *args)

    async def _answer(self, code: str, suite: FunctionalSuite, **fields: Any) -> dict[str, Any]:
        tests = Tests.of(suite).model_dump(mode="json", exclude_none=True)
        answer = await self._call(self.client.judge, {"code": code, "tests": tests, **fields})
        return answer

    async def judge(
        self,
        task_id: str,
        sample_index: int,
        code: str,
        suite: FunctionalSuite,
        stop_on_failure: bool = True,
        error: str | None = None,
    ) -> ExecutionResult:
        answer = await self._answer(
            code, suite, all_tests=not stop_on_failure, sample_index=sample_index
        )
        result = ExecutionResult.model_validate(answer["result"])
        result.task_id = task_id
        if not code.strip():
            result.first_failure = error
        return result

    evaluate = judge  # the same call: a blank program is `no_code` either way

    async def measure(
        self, task_id: str, code: str, suite: FunctionalSuite, repeats: int
    ) -> Measurement:
        answer = await self._answer(code, suite, repeats=repeats)
        if answer["measurement_error"]:
            raise CorebenchError(answer["measurement_error"])
        if not answer["passed"]:
            raise CorebenchError(f"{task_id}: {answer['verdict']} when judged again for timing")
        return Measurement.model_validate(answer["result"]["measurement"])

    async def run_examples(self, code: str, examples: list[Example]) -> list[TestOutcome]:
        sent = [
            {"input": e.expr, "output": e.expected} if e.mode == "stdio" else e.source
            for e in examples
        ]
        answer = await self._call(self.client.examples, code, sent)
        return [TestOutcome.model_validate(t) for t in answer["tests"]]
