"""How many training seeds, or tasks, a committed study would need before an effect of the size
it saw is detectable: its planned comparisons pooled over seeds, projected to other designs.

    COREBENCH_DATA_DIR=../shared/data .venv/bin/python measurements/study_power.py \\
        docs/studies/grpo-from-sft --seeds 3 5 10 20 --tasks 378 1000 --samples 1 4

For each primary comparison the study pools over training seeds, the variance components the
report's crossed random-effects test estimated (between seeds, between tasks, residual) give
the standard error and degrees of freedom another number of seeds and tasks would have
(``stats.crossed_design``), and from them the minimum detectable effect at 80 % power, at the
study's own Holm family level (``stats.minimum_detectable``). The study's own design comes
first and reproduces the report's MDE. The last line per task count says how many seeds would
make the observed difference itself the MDE, or that no number of seeds would with these tasks
(the task component alone, σ²_b / T, keeps the standard error above a floor).

``--samples`` projects each row taking that many times more samples per task and seed (their
per-task mean compared): the residual component divided by it, which is the most they can buy
(exact only where the residual is all sampling noise; a study of one sample per task cannot
tell sampling noise from training runs differing task by task), so those MDEs are lower
bounds. Greedy rows (temperature 0) are not projected: another sample is the same sample.
Where the seed component was estimated at 0, seeds and samples trade one for one (3 seeds of 2
samples project as 6 seeds of 1).

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


def seeds_needed(pooled: Pooled, tasks: int, family: int, samples: int = 1) -> int | None:
    """The fewest seeds (up to MOST_SEEDS) whose MDE is at most the observed difference."""
    for seeds in range(2, MOST_SEEDS + 1):
        se, df = crossed_design(pooled, seeds, tasks, samples)
        if minimum_detectable(se, df, family) <= abs(pooled.difference):
            return seeds
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--seeds", type=int, nargs="+", default=[3, 5, 10, 20])
    parser.add_argument("--tasks", type=int, nargs="+", default=[])
    parser.add_argument("--samples", type=int, nargs="+", default=[1],
                        help="times the study's samples per task and seed (an upper bound on "
                        "what they buy)")  # fmt: skip
    args = parser.parse_args()
    if min(args.seeds + args.tasks) < 2:
        parser.error("a crossed design needs at least two seeds and two tasks")
    if min(args.samples) < 1:
        parser.error("--samples counts samples: 1 or more")
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
        greedy = all(r.temperature == 0 for r in study.runs if r.name in (c.row, c.against))
        if greedy and max(args.samples) > 1:  # another greedy sample is the same sample
            print("  greedy rows (temperature 0): more samples per task are the same sample")
        for samples in dict.fromkeys([1, *([] if greedy else args.samples)]):
            times = f" × {samples} samples (at best)" if samples > 1 else ""
            for tasks in dict.fromkeys([pooled.tasks, *args.tasks]):
                for seeds in dict.fromkeys([pooled.seeds, *args.seeds]):
                    se, df = crossed_design(pooled, seeds, tasks, samples)
                    mde = minimum_detectable(se, df, len(primary))
                    design = (seeds, tasks, samples)
                    here = " (the study)" if design == (pooled.seeds, pooled.tasks, 1) else ""
                    print(f"  {seeds:>3} seeds × {tasks:>5} tasks{times}: SE {100 * se:.2f}, "
                          f"df {df:6.1f}, MDE {100 * mde:.2f}{here}")  # fmt: skip
                needed = seeds_needed(pooled, tasks, len(primary), samples)
                print(
                    f"  with {tasks} tasks{times}, {abs(100 * pooled.difference):.2f} points is "
                    "detectable "
                    + (
                        f"from {needed} seeds"
                        if needed
                        else f"with no number of seeds ≤ {MOST_SEEDS}"
                    )
                )


if __name__ == "__main__":
    main()
