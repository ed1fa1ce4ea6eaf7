"""MBPP+ references judged here and on a local Ray cluster started here, alternating; prints the
time of each, what the cluster costs per program, whether every verdict agrees, and what a worker
killed mid-run costs (nothing may be lost).

    .venv/bin/python measurements/ray_cluster.py [--tasks 378] [--rounds 2] [--nodes 2]
        [--data-dir ../shared/data]

The cluster has ``--nodes`` nodes sharing this machine's CPUs (with 2 cores and 2 nodes, one CPU
each), so it cannot be faster than the local executor here: the difference is the price of
dispatch through Ray (object store, actor calls, results back), which a cluster of real machines
pays per program too. Each run is `corebench evaluate`'s own path (``evaluate_samples``) into a
fresh run directory; reference caches are warm after the first round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import tempfile
import time
from contextlib import closing
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from corebench.harness.config import ENV_EXECUTOR, data_dir_setting  # noqa: E402
from corebench.harness.evaluate import evaluate_samples  # noqa: E402
from corebench.harness.sandbox import cluster as cluster_module  # noqa: E402
from corebench.harness.store import Store  # noqa: E402
from corebench.plugins.benchmarks.evalplus_tasks import MbppPlus  # noqa: E402


def verdicts(run_dir: Path) -> dict[str, str]:
    with closing(Store(run_dir, create=False)) as store:
        return {s.task_id: r.verdict.value for s, r in store.samples()}


def timed(where: str, mbpp: MbppPlus, samples: Path, run_dir: Path, on_sample=None) -> float:
    os.environ[ENV_EXECUTOR] = where
    started = time.perf_counter()
    asyncio.run(evaluate_samples(mbpp, samples, run_dir, [1], on_sample=on_sample))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=378)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--data-dir", type=Path)
    args = parser.parse_args()
    mbpp = MbppPlus(data_dir_setting(args.data_dir))
    tasks = [t.task_id for t in mbpp.tasks()][: args.tasks]
    work = Path(tempfile.mkdtemp(prefix="ray-measure-"))
    samples = work / "samples.jsonl"
    samples.write_text(
        "".join(
            json.dumps({"task_id": t, "solution": mbpp.test_suite(t).reference_code}) + "\n"
            for t in tasks
        )
    )
    cpus = os.cpu_count() or 1
    per_node = max(1, cpus // args.nodes)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": per_node, "include_dashboard": False},
    )
    for _ in range(args.nodes - 1):
        cluster.add_node(num_cpus=per_node)
    cluster.wait_for_nodes()
    os.environ["RAY_ADDRESS"] = cluster.address
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    print(f"{len(tasks)} MBPP+ references; local executor ({cpus} workers) against a Ray cluster "
          f"of {args.nodes} nodes × {per_node} CPUs on this machine ({cluster.address})")  # fmt: skip
    try:
        timed("local", mbpp, samples, work / "warm")  # reference caches, both sides use them
        expected = verdicts(work / "warm")
        for round_ in range(1, args.rounds + 1):
            local = timed("local", mbpp, samples, work / f"local{round_}")
            on_ray = timed("ray", mbpp, samples, work / f"ray{round_}")
            same = verdicts(work / f"local{round_}") == verdicts(work / f"ray{round_}") == expected
            print(
                f"round {round_}: local {local:.1f} s ({len(tasks) / local:.1f} programs/s), "
                f"ray {on_ray:.1f} s ({len(tasks) / on_ray:.1f} programs/s), "
                f"{1000 * (on_ray - local) / len(tasks):+.1f} ms per program; "
                f"verdicts {'identical' if same else 'DIFFER'}"
            )
        killed: list[int] = []

        def kill_once(_solution, _result) -> None:
            if not killed:
                ours = cluster_module.connect(None, None)
                busy = max(ours.nodes, key=lambda n: n.in_flight)
                os.kill(busy.info["pid"], signal.SIGKILL)
                killed.append(busy.info["pid"])

        on_ray = timed("ray", mbpp, samples, work / "killed", on_sample=kill_once)
        ours = cluster_module.connect(None, None)
        got = verdicts(work / "killed")
        print(
            f"a worker killed after the first sample: {on_ray:.1f} s, {len(got)}/{len(tasks)} "
            f"samples judged, verdicts {'identical' if got == expected else 'DIFFER'}, "
            f"{ours.lost_calls} calls sent again, {ours.replaced} actor replaced"
        )
    finally:
        cluster_module.disconnect()
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
