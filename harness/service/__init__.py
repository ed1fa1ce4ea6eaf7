"""The judging service: the sandbox behind HTTP, for RL trainers and other hosts.

``core.py`` admits and judges (one :class:`~corebench.harness.sandbox.Executor`), ``http.py``
serves it (``corebench sandbox serve``), ``wire.py`` holds the request formats, ``client.py``
the clients, ``metrics.py`` the counters. ``docs/design.md`` describes the protocol.
"""

from .client import JudgeClient, RemoteExecutor, ServiceError
from .core import JudgeService, RequestError
from .http import JudgeServer

__all__ = [
    "JudgeClient",
    "JudgeServer",
    "JudgeService",
    "RemoteExecutor",
    "RequestError",
    "ServiceError",
]
