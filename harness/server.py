"""`corebench serve`: an OpenAI-compatible chat endpoint in front of any corebench backend.

Concurrent HTTP requests reach the backend together, so a local backend batches them. Used to
test the `openai` backend against a real server, and to share one loaded model between runs.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import ValidationError

from .backend import Backend
from .records import GenerationRequest, Message


class ModelServer:
    """Serves ``backend`` under the model name ``model_name`` on ``host:port`` (port 0: any free)."""

    def __init__(self, backend: Backend, model_name: str, host: str = "127.0.0.1", port: int = 0):
        self.backend = backend
        self.model_name = model_name
        self.loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.httpd = ThreadingHTTPServer((host, port), self._handler())
        self.httpd.daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def serve_forever(self) -> None:
        self._loop_thread.start()
        try:
            self.httpd.serve_forever()
        finally:
            self.httpd.server_close()
            self.loop.call_soon_threadsafe(self.loop.stop)

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        request = GenerationRequest(
            messages=[Message(**m) for m in body["messages"]],
            max_new_tokens=int(body.get("max_tokens") or body.get("max_completion_tokens") or 512),
            temperature=float(body.get("temperature") or 0.0),
            top_p=float(body.get("top_p") or 1.0),
            stop=[body["stop"]]
            if isinstance(body.get("stop"), str)
            else list(body.get("stop") or []),
            seed=body.get("seed"),
        )
        result = asyncio.run_coroutine_threadsafe(
            self.backend.generate(request), self.loop
        ).result()
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": result.text},
                    "finish_reason": result.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.completion_tokens,
                "total_tokens": result.prompt_tokens + result.completion_tokens,
            },
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(
                        200,
                        {"object": "list", "data": [{"id": server.model_name, "object": "model"}]},
                    )
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                    if body.get("model") != server.model_name:
                        self._send(
                            404,
                            {"error": {"message": f"model {body.get('model')!r} is not served"}},
                        )
                        return
                    self._send(200, server.complete(body))
                except (ValueError, KeyError, TypeError, ValidationError) as exc:
                    self._send(400, {"error": {"message": f"bad request: {exc}"}})
                except Exception as exc:  # the backend failed: report, keep serving
                    self._send(500, {"error": {"message": f"{type(exc).__name__}: {exc}"}})

        return Handler
