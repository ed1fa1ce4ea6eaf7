"""``corebench sandbox serve``: the judging service over HTTP (standard library server).

    GET  /health          status, isolation, workers, capacity, programs judged (no token needed)
    GET  /metrics         Prometheus text: requests, programs by verdict, in flight, latency
    POST /v1/judge        one program  -> its answer
    POST /v1/judge/batch  {"suites", "items"} -> {"results": [answer, ...]} in order
    POST /v1/examples     a program on visible examples -> {"passed", "tests", "feedback"}

Errors are JSON ``{"error": message}``: 400 unreadable JSON, 401 missing or wrong token, 404
unknown path, benchmark or task (with a suggestion), 405 wrong method, 409 an id reused for a
different request, 411/413 missing or too large a body, 422 a request that does not validate,
429 (with ``Retry-After``) when the service is full, 503 when the sandbox could not start.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import BaseModel, ValidationError

from ..config import MAX_REQUEST_BYTES, SERVICE_PORT
from ..errors import CorebenchError
from .core import JudgeService, RequestError
from .wire import BatchRequest, ExamplesRequest, JudgeRequest

RETRY_AFTER_S = 1


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


class JudgeServer:
    """``service`` on ``host:port`` (port 0: any free one). Bound anywhere but loopback it needs
    a bearer ``token``: whoever reaches it can run programs on this machine."""

    def __init__(
        self,
        service: JudgeService,
        host: str = "127.0.0.1",
        port: int = SERVICE_PORT,
        token: str | None = None,
    ):
        if not token and not is_loopback(host):
            raise CorebenchError(
                f"the judging service runs programs for whoever reaches it: bound to {host} it "
                "needs a token (--token or COREBENCH_JUDGE_TOKEN)"
            )
        self.service, self.token = service, token
        self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        """Make ``serve_forever`` return (from a signal handler or another thread)."""
        threading.Thread(target=self.httpd.shutdown, daemon=True).start()

    def close(self, drain_s: float = 600.0) -> None:
        """After ``serve_forever``: let admitted programs finish (up to ``drain_s``), then close."""
        deadline = time.monotonic() + drain_s
        while self.service.in_flight and time.monotonic() < deadline:
            time.sleep(0.05)
        self.httpd.server_close()
        self.service.close()

    # --- one request -----------------------------------------------------------------------------
    def handle(self, method: str, path: str, headers: Any, body: bytes | None) -> tuple[int, Any]:
        """(status, JSON-able answer or text) for one request; ``body`` None: none was sent."""
        route = ROUTES.get(path)
        if route is None:
            raise RequestError(404, f"no such path {path!r}; paths: {', '.join(sorted(ROUTES))}")
        if method != route:
            raise RequestError(405, f"{path} takes {route}")
        if (
            path != "/health"
            and self.token
            and not hmac.compare_digest(
                headers.get("Authorization", "").encode(), f"Bearer {self.token}".encode()
            )
        ):
            raise RequestError(401, "missing or wrong bearer token")
        if method == "GET":
            return 200, self.service.health() if path == "/health" else self.service.metrics_text()
        data = _parse(body)
        if path == "/v1/judge":
            item = _validate(JudgeRequest, data)
            if item.suite is not None:
                raise RequestError(422, "suite names a batch's suites: use /v1/judge/batch")
            [answer] = self.service.judge(self.service.resolve(BatchRequest(items=[item])))
            if "error" in answer:
                raise RequestError(503, answer["error"])
            return 200, answer
        if path == "/v1/judge/batch":
            batch = _validate(BatchRequest, data)
            return 200, {"results": self.service.judge(self.service.resolve(batch))}
        return 200, self.service.examples(_validate(ExamplesRequest, data))


# How deeply a request body may nest: a request's own structure takes about 8 levels, a test's
# values the rest; deeper data would exhaust the recursion of the decoders behind the parser.
MAX_DEPTH = 100
ROUTES = {  # path -> the method it takes
    "/health": "GET",
    "/metrics": "GET",
    "/v1/judge": "POST",
    "/v1/judge/batch": "POST",
    "/v1/examples": "POST",
}


def _parse(body: bytes | None) -> Any:
    if body is None:
        raise RequestError(411, "a POST needs a body with a Content-Length")
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(400, f"the body is not JSON: {exc}") from None
    except RecursionError:
        raise RequestError(400, f"the body nests deeper than {MAX_DEPTH} levels") from None
    if _depth(data) > MAX_DEPTH:
        raise RequestError(400, f"the body nests deeper than {MAX_DEPTH} levels")
    return data


def _depth(data: Any) -> int:
    """How deeply JSON data nests (iteratively: no recursion to exhaust)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            deepest = max(deepest, depth)
            stack.extend((item, depth + 1) for item in value if isinstance(item, (dict, list)))
    return deepest


def _validate(model: type[BaseModel], data: Any) -> Any:
    if not isinstance(data, dict):
        raise RequestError(400, "the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise RequestError(422, f"invalid request: {problems}") from None


def _handler(server: JudgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: a client's requests share a connection

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
            pass

        def do_GET(self) -> None:  # noqa: N802
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._serve("POST")

        def _serve(self, method: str) -> None:
            start = time.perf_counter()
            path = self.path.split("?", 1)[0]
            try:
                body = self._body() if method == "POST" else None
                status, payload = server.handle(method, path, self.headers, body)
            except RequestError as exc:
                status, payload = exc.status, {"error": str(exc)}
            except Exception as exc:  # noqa: BLE001 - a bug: the client still gets an answer
                status, payload = 500, {"error": f"internal error: {type(exc).__name__}: {exc}"}
            server.service.metrics.request(
                path if path in ROUTES else "other", status, time.perf_counter() - start
            )
            self._send(status, payload)

        def _body(self) -> bytes | None:
            length = self.headers.get("Content-Length")
            if length is None:
                self.close_connection = True  # where the body would end is unknown
                return None
            try:
                size = int(length)
            except ValueError:
                raise RequestError(400, "Content-Length is not a number") from None
            if size > MAX_REQUEST_BYTES or size < 0:
                self.close_connection = True  # the body is not read
                raise RequestError(413, f"body of {size} bytes; at most {MAX_REQUEST_BYTES}")
            return self.rfile.read(size)

        def _send(self, status: int, payload: Any) -> None:
            if isinstance(payload, str):
                data, kind = payload.encode(), "text/plain; version=0.0.4"
            else:
                data, kind = json.dumps(payload).encode(), "application/json"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            if status == 429:
                self.send_header("Retry-After", str(RETRY_AFTER_S))
            if status == 405:
                self.send_header("Allow", ROUTES.get(self.path.split("?", 1)[0], "GET"))
            self.end_headers()
            self.wfile.write(data)

    return Handler
