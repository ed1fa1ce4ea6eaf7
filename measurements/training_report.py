"""Report a training run: its reward curve (plot) and pass@1 before vs after on held-out tasks.

    python measurements/training_report.py CHECKPOINT_DIR BEFORE_RUN AFTER_RUN --plot docs/x.svg

BEFORE_RUN and AFTER_RUN are `corebench run` directories of the base model and the trained
checkpoint on the same tasks; pass@1 comes with its exact 95 % interval over tasks, and the
paired difference with the sign-flip permutation test's p and interval (leaderboards/stats.py).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from corebench.harness.config import MANIFEST_NAME
from corebench.leaderboards import collect_runs, leaderboard_table
from corebench.leaderboards.stats import paired
from corebench.training.manifest import plot_reward_curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()

    manifest = json.loads((args.checkpoint / MANIFEST_NAME).read_text())
    curve = manifest["reward_curve"]
    rewards = [p["reward"] for p in curve]
    tenth = max(1, len(rewards) // 10)
    print(
        f"method {manifest['method']}, base {manifest['base_model']}, steps {manifest['steps']}, "
        f"data {manifest['data']['source']} ({manifest['data']['tasks']} tasks)"
    )
    print(
        f"mean reward: first {tenth} steps {np.mean(rewards[:tenth]):.3f}, "
        f"last {tenth} steps {np.mean(rewards[-tenth:]):.3f}"
    )
    if args.plot:
        plot_reward_curve(
            {manifest["method"]: curve},
            args.plot,
            f"{manifest['method']} on {manifest['data']['source']}, {manifest['base_model']}",
        )
        print(f"wrote {args.plot}")

    runs = [collect_runs([path], details=False)[0] for path in (args.before, args.after)]
    table = leaderboard_table(runs)
    for _, row in table.iterrows():
        print(
            f"{row['runs']:<28} tasks {row['tasks']:>3}  pass@1 {100 * row['pass@1']:5.1f}% "
            f"[{100 * row['pass@1_ci_low']:.1f}, {100 * row['pass@1_ci_high']:.1f}]  "
            f"base tests {100 * row['pass@1_base']:5.1f}%"
        )
    per_task = [r.samples.groupby("task_id")["passed"].mean().to_dict() for r in runs]
    tasks = sorted(set(per_task[0]) & set(per_task[1]))
    diff = paired(
        np.array([per_task[1][t] for t in tasks]), np.array([per_task[0][t] for t in tasks])
    )
    print(
        f"after - before: {100 * diff.difference:+.1f} points "
        f"[{100 * diff.low:+.1f}, {100 * diff.high:+.1f}] (paired, 95 %), p {diff.p:.3g} ({diff.test})"
    )


if __name__ == "__main__":
    main()
