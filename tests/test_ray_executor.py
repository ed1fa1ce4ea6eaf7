"""Sandbox work on a Ray cluster (`--executor ray`): a real local cluster of two nodes (separate
raylets on loopback, started here), each node's actor running the ordinary confined sandbox.
Verdicts are compared with a local executor's on the same samples."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

# Ray's servers listen on loopback only when it takes this machine for a one-host cluster.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray  # noqa: E402  (the `ray` extra is part of the test install)
from ray.cluster_utils import Cluster  # noqa: E402

from corebench.harness.config import ENV_EXECUTOR  # noqa: E402
from corebench.harness.errors import CorebenchError, UnknownNameError  # noqa: E402
from corebench.harness.evaluate import evaluate_samples  # noqa: E402
from corebench.harness.records import Verdict  # noqa: E402
from corebench.harness.sandbox import Executor, executor_for  # noqa: E402
from corebench.harness.sandbox import cluster as cluster_module  # noqa: E402
from corebench.harness.sandbox.cluster import RayExecutor  # noqa: E402
from corebench.harness.store import Store  # noqa: E402
from corebench.plugins.benchmarks.evalplus_tasks import MbppPlus  # noqa: E402

CLI = [sys.executable, "-m", "corebench.harness.cli"]
TASKS = [f"Mbpp/{n}" for n in (2, 3, 4, 6, 7, 8, 9, 11, 12, 14, 16, 17)]
HOSTILE = {  # appended to a reference: replaces its function with one that misbehaves
    "wrong": "\n\ndef {f}(*args):\n    return None\n",
    "raises": "\n\ndef {f}(*args):\n    raise ValueError('no')\n",
    "loops": "\n\ndef {f}(*args):\n    while True:\n        pass\n",
    "exits": "\nraise SystemExit(0)\n",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """Two nodes of one CPU each; this process is the driver."""
    client_port = free_port()
    local = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": False,
            "object_store_memory": 100 * 1024**2,
            "ray_client_server_port": client_port,
        },
    )
    local.add_node(num_cpus=1, object_store_memory=100 * 1024**2)
    local.wait_for_nodes()
    local.client_port = client_port
    assert local.address.startswith("127.0.0.1:"), local.address
    before = os.environ.get("RAY_ADDRESS")
    os.environ["RAY_ADDRESS"] = local.address
    ray.init(address=local.address, logging_level="ERROR", log_to_driver=False)
    yield local
    cluster_module.disconnect()
    ray.shutdown()
    local.shutdown()
    if before is None:
        os.environ.pop("RAY_ADDRESS", None)
    else:
        os.environ["RAY_ADDRESS"] = before


@pytest.fixture
def on_ray(cluster, monkeypatch) -> Iterator[None]:
    """Runs of this test send their sandbox work to the cluster's nodes (fresh actors)."""
    monkeypatch.setenv(ENV_EXECUTOR, "ray")
    yield
    cluster_module.disconnect()


@pytest.fixture(scope="module")
def samples(tmp_path_factory, data_dir) -> Path:
    """References of twelve MBPP+ tasks, and programs that fail in each way on four of them."""
    mbpp = MbppPlus(data_dir)
    rows = []
    for task_id in TASKS:
        suite = mbpp.test_suite(task_id)
        reference = suite.reference_code
        rows.append({"task_id": task_id, "solution": reference})
        if task_id in TASKS[:4]:
            for template in HOSTILE.values():
                rows.append(
                    {
                        "task_id": task_id,
                        "solution": reference + template.format(f=suite.entry_point),
                    }
                )
    path = tmp_path_factory.mktemp("samples") / "samples.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def judged(run_dir: Path) -> dict[tuple[str, int], tuple]:
    """Each sample's verdict, its verdict per suite, and every test's verdict."""
    with closing(Store(run_dir, create=False)) as store:
        return {
            (s.task_id, s.sample_index): (
                r.verdict.value,
                {name: v.value for name, v in r.suite_verdicts.items()},
                [(t.suite, t.index, t.verdict.value) for t in r.tests],
            )
            for s, r in store.samples()
        }


@pytest.fixture(scope="module")
def local_verdicts(samples, data_dir, tmp_path_factory) -> dict:
    run_dir = tmp_path_factory.mktemp("local")
    previous = os.environ.pop(ENV_EXECUTOR, None)
    try:
        asyncio.run(evaluate_samples(MbppPlus(data_dir), samples, run_dir, [1]))
    finally:
        if previous is not None:
            os.environ[ENV_EXECUTOR] = previous
    verdicts = judged(run_dir)
    assert {v[0] for v in verdicts.values()} >= {"passed", "wrong_answer", "timeout"}
    return verdicts


def test_verdicts_on_a_two_node_cluster_are_the_local_ones(
    on_ray, samples, data_dir, tmp_path, local_verdicts
):
    run_dir = tmp_path / "run"
    asyncio.run(evaluate_samples(MbppPlus(data_dir), samples, run_dir, [1]))
    assert judged(run_dir) == local_verdicts
    cluster = cluster_module.connect(None, None)
    assert len(cluster.nodes) == 2 and len({n.info["pid"] for n in cluster.nodes}) == 2
    assert cluster.lost_calls == 0
    with closing(Store(run_dir, create=False)) as store:
        meta = store.metadata()
    assert meta["executor"].startswith("ray 127.0.0.1:") and meta["isolation"] == cluster.mode


def test_a_worker_killed_mid_run_loses_no_sample(
    on_ray, samples, data_dir, tmp_path, local_verdicts
):
    killed: list[int] = []

    def kill_a_busy_worker(_solution, _result) -> None:
        if killed:
            return
        cluster = cluster_module.connect(None, None)
        busy = max(cluster.nodes, key=lambda n: n.in_flight)
        assert busy.in_flight > 0
        os.kill(busy.info["pid"], signal.SIGKILL)
        killed.append(busy.info["pid"])

    run_dir = tmp_path / "run"
    asyncio.run(
        evaluate_samples(MbppPlus(data_dir), samples, run_dir, [1], on_sample=kill_a_busy_worker)
    )
    cluster = cluster_module.connect(None, None)
    assert killed and cluster.replaced == 1 and cluster.lost_calls >= 1
    assert killed[0] not in {n.info["pid"] for n in cluster.nodes}  # replaced on its node
    assert len(cluster.nodes) == 2
    assert judged(run_dir) == local_verdicts


def test_a_node_lost_mid_run_loses_no_sample(
    cluster, on_ray, samples, data_dir, tmp_path, local_verdicts
):
    third = cluster.add_node(num_cpus=1, object_store_memory=100 * 1024**2)
    cluster.wait_for_nodes()
    removed: list[str] = []

    def remove_the_third_node(_solution, _result) -> None:
        ours = cluster_module.connect(None, None)
        node = next((n for n in ours.nodes if n.node_id == third.node_id), None)
        if not removed and node is not None and node.in_flight > 0:
            cluster.remove_node(third)
            removed.append(third.node_id)

    run_dir = tmp_path / "run"
    asyncio.run(
        evaluate_samples(MbppPlus(data_dir), samples, run_dir, [1], on_sample=remove_the_third_node)
    )
    ours = cluster_module.connect(None, None)
    assert removed and ours.lost_calls >= 1
    assert {n.node_id for n in ours.nodes}.isdisjoint(removed) and len(ours.nodes) == 2
    assert judged(run_dir) == local_verdicts


def test_measurements_time_solution_and_reference_on_one_node(on_ray, data_dir, tmp_path):
    """Each solution is timed on one node, its reference beside it on the same node."""
    mbpp = MbppPlus(data_dir)
    rows = [{"task_id": t, "solution": mbpp.test_suite(t).reference_code} for t in TASKS[:4]]
    samples = tmp_path / "references.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_dir = tmp_path / "run"
    asyncio.run(evaluate_samples(mbpp, samples, run_dir, [1], repeats=3))
    with closing(Store(run_dir, create=False)) as store:
        measured = [r.measurement for _, r in store.samples()]
    assert all(m is not None for m in measured)
    # the reference's own code as the solution: the two timings on one node agree
    assert all(0.5 < m.runtime_ratio < 2.0 for m in measured), [m.runtime_ratio for m in measured]
    cluster = cluster_module.connect(None, None)
    timed = ray.get([n.actor.references_timed.remote() for n in cluster.nodes])
    assert sum(timed) == len(rows)  # one timing session per solution, on one node
    assert cluster_module.connect(None, None).nodes and RayExecutor().timing_sessions == 2


def test_training_rewards_judge_on_the_cluster(on_ray, data_dir):
    from corebench.training.data import TrainTask
    from corebench.training.rewards import run_tests

    mbpp = MbppPlus(data_dir)
    task = next(t for t in mbpp.tasks() if t.task_id == "Mbpp/2")
    train_task = TrainTask(task, mbpp.test_suite("Mbpp/2"))
    loops = "def similar_elements(a, b):\n    while True:\n        pass\n"
    programs = [train_task.reference, "def similar_elements(a, b):\n    return ()\n", loops]
    on_cluster = run_tests([(p, train_task) for p in programs])
    assert cluster_module.connect(None, None).nodes  # the cluster judged them
    os.environ.pop(ENV_EXECUTOR)
    here = run_tests([(p, train_task) for p in programs])
    assert [(r.passed, r.total, r.runs) for r in on_cluster] == [
        (r.passed, r.total, r.runs) for r in here
    ]
    assert here[0].pass_rate == 1.0 and here[1].runs and not here[2].runs
    # the loop really loops: its first test times out, on the cluster as here
    assert [o.verdict for o in on_cluster[2].outcomes] == [Verdict.timeout], on_cluster[2]
    assert [o.verdict for o in here[2].outcomes] == [Verdict.timeout], here[2]


def test_evaluate_cli_through_ray_client(cluster, samples, tmp_path, local_verdicts, data_dir):
    """`corebench evaluate --executor ray://HOST:PORT` from another process (Ray Client)."""
    cluster_module.disconnect()  # this process's actors would hold every CPU
    address = f"ray://127.0.0.1:{cluster.client_port}"
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", ENV_EXECUTOR)}
    done = subprocess.run(
        [*CLI, "evaluate", "--bench", "mbpp", "--samples", str(samples), "--out", str(run_dir),
         "--executor", address, "--repeats", "0", "--data-dir", str(data_dir)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert judged(run_dir) == local_verdicts
    with closing(Store(run_dir, create=False)) as store:
        assert store.metadata()["executor"] == f"ray {address}"


def test_unknown_executor_is_one_clear_error(tmp_path, samples):
    with pytest.raises(UnknownNameError, match="unknown executor 'rya'. Did you mean 'ray'"):
        executor_for("rya")
    done = subprocess.run(
        [*CLI, "evaluate", "--bench", "mbpp", "--samples", str(samples), "--out",
         str(tmp_path / "run"), "--executor", "cluster"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "'cluster' is none of: local, ray" in done.stderr
    assert not (tmp_path / "run").exists()


def test_a_node_whose_sandbox_cannot_start_is_one_clear_error(cluster):
    """Each node starts its sandbox as --isolation says, and its own error is the one reported."""
    cluster_module.disconnect()
    with pytest.raises(CorebenchError, match="did not start: .*unknown isolation 'docker'"):
        cluster_module.Cluster(None, "docker")
    assert isinstance(executor_for("local"), Executor)


def test_judging_service_in_front_of_the_cluster(on_ray, data_dir):
    """`corebench sandbox serve --executor ray`: the service's programs run on the nodes."""
    import threading

    from corebench.harness.service import JudgeClient, JudgeServer, JudgeService

    service = JudgeService(executor_for(), data_dir=data_dir)
    server = JudgeServer(service, "127.0.0.1", 0, None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = JudgeClient(server.url)
        assert client.health()["engine"] == "ray" and client.health()["workers"] == 2
        task = {"benchmark": "mbpp", "task_id": "Mbpp/2"}
        wrong = "def similar_elements(a, b):\n    return ()\n"
        answers = client.judge_batch(
            [{"code": MbppPlus(data_dir).test_suite("Mbpp/2").reference_code, "task": task},
             {"code": wrong, "task": task}]
        )  # fmt: skip
        assert [a["verdict"] for a in answers] == ["passed", "wrong_answer"]
    finally:
        server.stop()
        thread.join(timeout=30)
        server.close()
