"""Where sandbox work runs: one setting (``--executor``, ``$COREBENCH_EXECUTOR``) picks the local
executor, a Ray cluster's nodes, or a judging service; all offer the same calls."""

from __future__ import annotations

import os
from typing import Protocol

from ..config import ENV_EXECUTOR, ENV_JUDGE_URL
from ..errors import UnknownNameError
from ..examples import Example
from ..records import ExecutionResult, Measurement, TestOutcome
from ..testsuite import FunctionalSuite

KINDS = ("local", "ray", "ray://HOST:PORT", "http://HOST:PORT")


class SandboxExecutor(Protocol):
    """What ``run``, ``evaluate``, studies, systems and training rewards call."""

    mode: str  # how programs are confined (the same on every node)
    memory_bytes: int
    where: str  # local, ray ADDRESS, service URL
    timing_sessions: int  # measurements that may run at once (a CPU each, no judging beside)

    async def judge(
        self,
        task_id: str,
        sample_index: int,
        code: str,
        suite: FunctionalSuite,
        stop_on_failure: bool = True,
        error: str | None = None,
    ) -> ExecutionResult: ...

    async def measure(
        self, task_id: str, code: str, suite: FunctionalSuite, repeats: int
    ) -> Measurement: ...

    async def run_examples(self, code: str, examples: list[Example]) -> list[TestOutcome]: ...

    async def reference_cost(self, task_id: str, suite: FunctionalSuite) -> float: ...

    def close(self) -> None: ...


def executor_setting(setting: str | None = None) -> str:
    """The setting given, else ``$COREBENCH_EXECUTOR``, else the judging service at
    ``$COREBENCH_JUDGE_URL`` when set, else ``local``."""
    return setting or os.environ.get(ENV_EXECUTOR) or os.environ.get(ENV_JUDGE_URL) or "local"


def executor_for(setting: str | None = None, isolation: str | None = None) -> SandboxExecutor:
    """The executor a setting names (see :func:`executor_setting`)."""
    where = executor_setting(setting)
    if where == "local":
        from .executor import Executor

        return Executor(isolation=isolation)
    if where == "ray" or where.startswith("ray://"):
        from .cluster import RayExecutor

        return RayExecutor(None if where == "ray" else where, isolation=isolation)
    if where.startswith("http://"):
        from ..service.client import JudgeClient, RemoteExecutor

        return RemoteExecutor(JudgeClient(where))
    raise UnknownNameError("executor", where, KINDS)
