"""How many training seeds, or tasks, a committed study would need before an effect of the size
it saw is detectable: its planned comparisons pooled over seeds, projected to other designs.

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python measurements/study_power.py \\
        docs/studies/grpo-from-sft --seeds 3 5 10 20 --tasks 378 1000

For each primary comparison the study pools over training seeds, the variance components the
report's crossed random-effects test estimated (between seeds, between tasks, residual) give
the standard error and degrees of freedom another number of seeds and tasks would have
(``stats.crossed_design``), and from them the minimum detectable effect at 80 % power, at the
study's own Holm family level (``stats.minimum_detectable``). The study's own design comes
first and reproduces the report's MDE. The last line per task count says how many seeds would
make the observed difference itself the MDE, or that no number of seeds would with these tasks
(the task component alone, σ²_b / T, keeps the standard error above a floor).

The components are estimates taken as known: the seed component from the study's few seeds
(2 degrees of freedom with 3), and where it was truncated to 0 the projections assume training
runs do not vary at all, which flatters designs with more seeds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from corebench.harness import config as C
from corebench.harness.registry import default_plugins
from corebench.leaderboards.stats import Pooled, crossed, crossed_design, minimum_detectable
from corebench.studies import evidence
from corebench.studies.report import arms, build_report, seed_differences
from corebench.studies.spec import load_study

MOST_SEEDS = 200  # the search for the seeds that make the observed difference detectable


def seeds_needed(pooled: Pooled, tasks: int, family: int) -> int | None:
    """The fewest seeds (up to MOST_SEEDS) whose MDE is at most the observed difference."""
    for seeds in range(2, MOST_SEEDS + 1):
        se, df = crossed_design(pooled, seeds, tasks)
        if minimum_detectable(se, df, family) <= abs(pooled.difference):
            return seeds
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--seeds", type=int, nargs="+", default=[3, 5, 10, 20])
    parser.add_argument("--tasks", type=int, nargs="+", default=[])
    args = parser.parse_args()
    if min(args.seeds + args.tasks) < 2:
        parser.error("a crossed design needs at least two seeds and two tasks")
    root = args.folder
    registration = evidence.read_registration(root)
    if registration is None:
        parser.error(f"{root} holds no {evidence.REGISTRATION}: not a study folder that has run")
    scale = registration["scale"]
    study_file = root / evidence.STUDY_FILE
    study = load_study(study_file, scale, default_plugins(), C.data_dir_setting())
    report = build_report(study, root, study_file)
    by_arm = arms(report.rows)
    primary = [c for c in report.comparisons if c.primary and c.result.p is not None]
    labels = {r.name: r.label or r.name for r in study.runs}
    pooled_over_seeds = [c for c in primary if len(c.per_seed) >= 2]
    if not pooled_over_seeds:
        print("no primary comparison in this study is pooled over two or more training seeds")
    for c in pooled_over_seeds:
        pooled = crossed(seed_differences(by_arm[c.row], by_arm[c.against], c.metric))
        print(
            f"{labels[c.row]} − {labels[c.against]}, {c.metric} (points; Holm family of "
            f"{len(primary)}): {100 * pooled.difference:+.2f}, SE {100 * pooled.se:.2f}; "
            f"variance between seeds {1e4 * pooled.seed_variance:.2f}, between tasks "
            f"{1e4 * pooled.task_variance:.1f}, residual {1e4 * pooled.residual_variance:.1f}"
        )
        if pooled.se == 0:
            print("  every difference is alike: no variance to size an effect by")
            continue
        for tasks in dict.fromkeys([pooled.tasks, *args.tasks]):
            for seeds in dict.fromkeys([pooled.seeds, *args.seeds]):
                se, df = crossed_design(pooled, seeds, tasks)
                mde = minimum_detectable(se, df, len(primary))
                here = " (the study)" if (seeds, tasks) == (pooled.seeds, pooled.tasks) else ""
                print(f"  {seeds:>3} seeds × {tasks:>5} tasks: SE {100 * se:.2f}, df {df:6.1f}, "
                      f"MDE {100 * mde:.2f}{here}")  # fmt: skip
            needed = seeds_needed(pooled, tasks, len(primary))
            print(
                f"  with {tasks} tasks, {abs(100 * pooled.difference):.2f} points is detectable "
                + (f"from {needed} seeds" if needed else f"with no number of seeds ≤ {MOST_SEEDS}")
            )


if __name__ == "__main__":
    main()
