"""Sandbox work spread over a Ray cluster (``--executor ray`` or ``ray://HOST:PORT``).

Every node runs one ``SandboxNode`` actor holding an ordinary :class:`Executor`: the same
confined children, zygotes, reference cache and timing sessions as a local run, with as many
worker slots as the CPUs it reserves on its node. ``RayExecutor`` offers the executor's calls
(``judge``, ``evaluate``, ``measure``, ``run_examples``, ``reference_cost``) and sends each one,
whole, to the least busy node:

- a suite travels once per run to the object store; nodes need no dataset;
- a measurement (the solution and its reference, their runs alternating) runs on one node, with
  no judging there, so the ratio compares the two programs on the same machine; a node times as
  many solutions at once as it has timing sessions (a CPU each);
- a call whose actor or node dies is sent again to another (judging has no side effects beyond
  each node's reference cache), so a lost worker loses no sample; after ``RAY_ATTEMPTS`` lost
  nodes the call fails with the reason.

Ray is an optional extra (``pip install 'corebench[ray]'``), imported only here.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

from ..bounded import Bounded
from ..config import RAY_ATTEMPTS, RAY_NODE_QUEUE, RAY_START_TIMEOUT_S
from ..errors import CorebenchError
from ..examples import Example
from ..records import ExecutionResult, Measurement, TestOutcome
from ..testsuite import FunctionalSuite
from .cgroups import RSS_ACCOUNTING

_CLUSTERS: dict[tuple[str, str | None], Cluster] = {}  # one connection and actor set per process


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise CorebenchError("the ray executor needs Ray: pip install 'corebench[ray]'") from None
    return ray


def _lost_errors() -> tuple[type[BaseException], ...]:
    """What Ray raises when the actor or node answering a call is gone."""
    exceptions = _ray().exceptions
    return (
        exceptions.RayActorError,  # died, or unavailable while restarting
        exceptions.WorkerCrashedError,
        exceptions.NodeDiedError,
        exceptions.ObjectLostError,
    )


class SandboxNode:
    """One node's sandbox: a local Executor, driven through Ray (an async actor)."""

    def __init__(self, isolation: str | None, workers: int):
        from .executor import Executor

        self.executor = Executor(workers=workers, isolation=isolation)

    async def describe(self) -> dict[str, Any]:
        return {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "mode": self.executor.mode,
            "engine": self.executor.engine,
            "workers": self.executor.workers,
            "timing_sessions": self.executor.timing_sessions,
            "memory_bytes": self.executor.memory_bytes,
            "memory_accounting": self.executor.memory_accounting,
        }

    async def references_timed(self) -> int:
        """Measurements this node has completed (each a solution timed beside its reference)."""
        return self.executor.timings

    async def judge(self, *args: Any, **kwargs: Any) -> ExecutionResult:
        return await self.executor.judge(*args, **kwargs)

    async def measure(self, *args: Any) -> Measurement:
        return await self.executor.measure(*args)

    async def run_examples(self, code: str, examples: list[Example]) -> list[TestOutcome]:
        return await self.executor.run_examples(code, examples)

    async def reference_cost(self, task_id: str, suite: FunctionalSuite) -> float:
        return await self.executor.reference_cost(task_id, suite)


@dataclass
class Node:
    """A node's actor as the driver sees it."""

    node_id: str
    actor: Any
    workers: int
    info: dict[str, Any] = field(default_factory=dict)
    in_flight: int = 0
    alive: bool = True


class Cluster:
    """The connection to a Ray cluster and one sandbox actor per node with CPUs."""

    def __init__(self, address: str | None, isolation: str | None):
        self.address, self.isolation = address, isolation
        if address is None and not os.environ.get("RAY_ADDRESS"):
            # a new cluster of this machine only: Ray's servers then listen on loopback, not on
            # every interface (its clusters have no authentication by default); read by Ray
            # when it is imported
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        ray = _ray()
        if not ray.is_initialized():
            _init(ray, address)
        self._actor_class = ray.remote(SandboxNode)
        self.nodes: list[Node] = []
        self.replaced = 0  # actors lost and replaced (or left out, with their node)
        self.lost_calls = 0  # calls whose node was lost while they ran (each sent again)
        self._lock = threading.Lock()
        self._start(self._alive_nodes())
        if not self.nodes:
            raise CorebenchError(f"no Ray node with free CPUs answered in {RAY_START_TIMEOUT_S} s")
        modes = {n.info["mode"] for n in self.nodes}
        if len(modes) > 1:
            raise CorebenchError(f"Ray nodes confine programs differently: {sorted(modes)}")
        self.mode = modes.pop()
        # the weakest of the nodes' (a node without a memory cgroup counts resident memory only)
        accounting = {n.info.get("memory_accounting") for n in self.nodes}
        if RSS_ACCOUNTING in accounting or len(accounting) > 1:
            self.memory_accounting = RSS_ACCOUNTING if RSS_ACCOUNTING in accounting else None
        else:
            self.memory_accounting = accounting.pop()

    def _alive_nodes(self) -> list[dict[str, Any]]:
        return [
            n
            for n in _ray().nodes()
            if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1
        ]

    def _actor(self, node_id: str, workers: int) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return self._actor_class.options(
            num_cpus=workers,  # the node's CPUs are the sandbox's: no other Ray work beside timing
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            max_restarts=0,  # a dead actor is replaced by the driver, which resends its calls
        ).remote(self.isolation, workers)

    def _start(self, described: list[dict[str, Any]], strict: bool = True) -> None:
        """An actor on each given node; those that start in time join ``nodes``. A sandbox that
        fails to start is an error when ``strict`` (at startup), else a warning (a replacement
        on a node that is going away)."""
        ray = _ray()
        starting = []
        for node in described:
            workers = int(node["Resources"]["CPU"])
            starting.append(Node(node["NodeID"], self._actor(node["NodeID"], workers), workers))
        if not starting:
            return
        refs = {n.actor.describe.remote(): n for n in starting}
        ready, pending = ray.wait(list(refs), num_returns=len(refs), timeout=RAY_START_TIMEOUT_S)
        for ref in ready:
            node = refs[ref]
            try:
                node.info = ray.get(ref)
            except _lost_errors() as exc:  # e.g. no bubblewrap there: the actor's own error
                why = f"the sandbox on Ray node {node.node_id[:8]} did not start: {_last_line(exc)}"
                if strict:
                    raise CorebenchError(why) from None
                warnings.warn(f"{why}; it is left out", stacklevel=2)
                continue
            self.nodes.append(node)
        for ref in pending:
            node = refs[ref]
            warnings.warn(
                f"Ray node {node.node_id[:8]}: no sandbox within {RAY_START_TIMEOUT_S} s "
                f"(are {node.workers} CPUs free there?); it is left out",
                stacklevel=2,
            )
            ray.kill(node.actor)

    def lost(self, node: Node) -> None:
        """A node's actor is gone: forget it, and start actors on live nodes without one."""
        with self._lock:
            if not node.alive:
                return
            node.alive = False
            self.nodes = [n for n in self.nodes if n.alive]
            self.replaced += 1
            serving = {n.node_id for n in self.nodes}
            self._start(
                [n for n in self._alive_nodes() if n["NodeID"] not in serving], strict=False
            )

    def close(self) -> None:
        """Stop every node's actor (their CPUs are free again)."""
        ray = _ray()
        for node in self.nodes:
            ray.kill(node.actor)
        self.nodes = []

    @property
    def workers(self) -> int:
        return sum(n.workers for n in self.nodes)

    @property
    def memory_bytes(self) -> int:
        return min((n.info["memory_bytes"] for n in self.nodes), default=0)


def _last_line(exc: BaseException) -> str:
    """The line of a Ray error that names the original one (its traceback comes first)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    named = [line for line in lines if "Error: " in line and not line.startswith("ray.")]
    return (named or lines or [type(exc).__name__])[-1]


def _init(ray: Any, address: str | None) -> None:
    """Connect to (or start) the cluster. A Ray Client connection is tried up to
    ``RAY_ATTEMPTS`` times: the head's client proxy sometimes fails to start the per-client
    server (it exits at once; seen once in a fresh-clone CI run), and a new attempt starts
    another."""
    for attempt in range(1, RAY_ATTEMPTS + 1):
        try:
            ray.init(
                address=address,
                logging_level="ERROR",
                log_to_driver=False,
                include_dashboard=False if address is None else None,
            )
            return
        # Ray Client raises ConnectionAbortedError("Starting Ray client server failed")
        except ConnectionError as exc:
            if not (address or "").startswith("ray://") or attempt == RAY_ATTEMPTS:
                where = address or os.environ.get("RAY_ADDRESS") or "a new local cluster"
                raise CorebenchError(f"cannot connect to Ray at {where}: {exc}") from None
            time.sleep(1.0)


def connect(address: str | None, isolation: str | None) -> Cluster:
    """The process's cluster for ``address`` (None: ``$RAY_ADDRESS``, or a new local one)."""
    key = (address or os.environ.get("RAY_ADDRESS") or "local", isolation)
    cluster = _CLUSTERS.get(key)
    if cluster is None or not cluster.nodes:
        cluster = _CLUSTERS[key] = Cluster(address, isolation)
    return cluster


def disconnect() -> None:
    """Stop the actors of every cluster this process connected to."""
    while _CLUSTERS:
        _CLUSTERS.popitem()[1].close()


class RayExecutor:
    """The executor's calls, answered by sandbox actors on a Ray cluster's nodes."""

    def __init__(self, address: str | None = None, isolation: str | None = None):
        self.cluster = connect(address, isolation)
        self.mode = self.cluster.mode
        self.memory_accounting = self.cluster.memory_accounting
        self.engine = "ray"
        self.where = f"ray {address or os.environ.get('RAY_ADDRESS') or 'local'}"
        self._suites: Bounded[int, tuple[FunctionalSuite, Any]] = Bounded(1024)
        self._changed: asyncio.Condition | None = None

    @property
    def workers(self) -> int:
        return self.cluster.workers

    @property
    def memory_bytes(self) -> int:
        return self.cluster.memory_bytes

    @property
    def timing_sessions(self) -> int:
        """How many measurements may run at once: each node's timing sessions."""
        return max(1, sum(n.info.get("timing_sessions", 1) for n in self.cluster.nodes))

    def close(self) -> None:
        """Nothing to stop: the nodes' actors serve every executor of this process."""

    # --- dispatch ------------------------------------------------------------------------------
    def _shared(self, suite: FunctionalSuite) -> Any:
        """The suite in the object store, put there once."""
        kept = self._suites.get(id(suite))
        if kept is None or kept[0] is not suite:
            kept = self._suites[id(suite)] = (suite, _ray().put(suite))
        return kept[1]

    async def _node(self) -> Node:
        """The least busy live node with room in its queue (waits for one)."""
        if self._changed is None:
            self._changed = asyncio.Condition()
        async with self._changed:
            while True:
                if not self.cluster.nodes:
                    raise CorebenchError("no Ray node is left to run sandbox work")
                node = min(self.cluster.nodes, key=lambda n: n.in_flight / n.workers)
                if node.in_flight < RAY_NODE_QUEUE * node.workers:
                    node.in_flight += 1
                    return node
                await self._changed.wait()

    async def _done(self, node: Node) -> None:
        assert self._changed is not None
        async with self._changed:
            node.in_flight -= 1
            self._changed.notify_all()

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``method`` on some node's actor; sent again elsewhere when that node is lost."""
        reasons: list[str] = []
        for _ in range(RAY_ATTEMPTS):
            node = await self._node()
            try:
                ref = getattr(node.actor, method).remote(*args, **kwargs)
                return await asyncio.wrap_future(ref.future())
            except _ray().exceptions.RayTaskError as exc:  # the call itself raised: its error
                raise (exc.cause if isinstance(exc.cause, Exception) else exc) from None
            except _lost_errors() as exc:
                reasons.append(f"{node.info.get('host', '?')}: {type(exc).__name__}")
                await asyncio.to_thread(self.cluster.lost, node)
                self.cluster.lost_calls += 1
            finally:
                await self._done(node)
        raise CorebenchError(f"sandbox work lost on {RAY_ATTEMPTS} Ray nodes: {'; '.join(reasons)}")

    # --- the executor's calls ------------------------------------------------------------------
    async def judge(
        self,
        task_id: str,
        sample_index: int,
        code: str,
        suite: FunctionalSuite,
        stop_on_failure: bool = True,
        error: str | None = None,
    ) -> ExecutionResult:
        return await self._call(
            "judge", task_id, sample_index, code, self._shared(suite), stop_on_failure, error
        )

    evaluate = judge  # the same call: a blank program is `no_code` either way

    async def measure(
        self, task_id: str, code: str, suite: FunctionalSuite, repeats: int
    ) -> Measurement:
        return await self._call("measure", task_id, code, self._shared(suite), repeats)

    async def run_examples(self, code: str, examples: list[Example]) -> list[TestOutcome]:
        return await self._call("run_examples", code, examples)

    async def reference_cost(self, task_id: str, suite: FunctionalSuite) -> float:
        return await self._call("reference_cost", task_id, self._shared(suite))
