"""Every tunable constant of corebench in one place.

Modules import names from here instead of writing literals, so a reader finds the defaults
(and the environment variables that override them) in one file.
"""

from __future__ import annotations

import os
from pathlib import Path

# --- plugins ---------------------------------------------------------------------------------
ENTRY_POINT_GROUP = "corebench"
PLUGIN_PROJECT = "corebench"  # pluggy project name (hook markers)

# --- locations ---------------------------------------------------------------------------------
ENV_DATA_DIR = "COREBENCH_DATA_DIR"  # folder with offline copies of benchmark files
ENV_CACHE_DIR = "COREBENCH_CACHE_DIR"  # converted models, reference outputs
DEFAULT_RUNS_DIR = Path("runs")
RESULTS_DB = "results.sqlite"


def cache_dir() -> Path:
    """Where corebench keeps derived files (converted models, reference outputs)."""
    base = os.environ.get(ENV_CACHE_DIR) or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "corebench"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir_setting(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The data folder: the explicit argument, else $COREBENCH_DATA_DIR, else None (download)."""
    value = explicit or os.environ.get(ENV_DATA_DIR)
    return Path(value).expanduser().resolve() if value else None


def offline() -> bool:
    """True when the user asked for no network (Hugging Face's own switches)."""
    return any(
        os.environ.get(v, "") not in ("", "0") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


# --- runs ----------------------------------------------------------------------------------------
DEFAULT_MODEL = "embedded"
DEFAULT_N = 1
DEFAULT_K = (1,)
DEFAULT_TEMPERATURE = 0.0
DEFAULT_TOP_P = 0.95
DEFAULT_MAX_NEW_TOKENS = 512
DEFAULT_SEED = 0
DEFAULT_CONCURRENCY = 128  # tasks x samples in flight at once (what lets backends batch)
DEFAULT_MAX_CALLS_PER_SAMPLE = 64  # budget a system cannot exceed per sample
DEFAULT_MAX_TOKENS_PER_SAMPLE = 32_768  # completion tokens per sample, all calls together

# --- batching (local backends) ----------------------------------------------------------------
# Rows a local backend decodes together: on a 2-core CPU a sampled float32 row of SmolLM2-135M
# decoded 1.39x the tokens per second at 128 as at 32, the same completions
# (measurements/sampled_rows.py --compare batch). Each row holds its own key/value cache: lower
# it (?max_batch=N) for a large model.
DEFAULT_MAX_BATCH = 128
OPENAI_MAX_IN_FLIGHT = 16  # concurrent requests one OpenAI-compatible backend sends
MANIFEST_NAME = "corebench_manifest.json"  # written by `corebench train` next to a checkpoint
BATCH_SETTLE_TICKS = 8  # event-loop turns to wait for more requests before a batch starts

# --- sandbox ---------------------------------------------------------------------------------------
TIME_LIMIT_FACTOR = 4.0  # per-test limit = max(floor, factor x reference CPU time), as EvalPlus
MIN_TIME_LIMIT_S = 1.0  # per-test floor
DEFAULT_TEST_TIME_LIMIT_S = 6.0  # per test when a suite has no reference to time (LiveCodeBench's)
REFERENCE_CPU_LIMIT_S = 60.0  # per call of a reference solution
REFERENCE_TIMING_WARMUP = 1  # untimed reference calls per test before the timed ones (time limits)
REFERENCE_TIMING_REPEATS = 3  # timed reference calls per test; the median sets the time limit
REFERENCES_KEPT = 4096  # reference outputs and timings an executor keeps in memory (LRU)
REFERENCE_TIMING_BUDGET_S = 1.0  # a test stops repeating once its timed calls used this much CPU
STDIO_FLOAT_TOLERANCE = 1e-6  # stdin/stdout checkers: numbers this close (abs or rel) are equal
WALL_SLACK_FACTOR = 3.0  # wall-clock backstop = slack x sum(CPU limits) + start-up allowance
EXAMPLE_TIME_LIMIT_S = 2.0  # CPU seconds per visible example a debugging agent runs
STARTUP_ALLOWANCE_S = 5.0  # interpreter start and the solution's own imports
MAX_TOTAL_TIME_S = 120.0  # no solution runs longer than this, whatever its tests
# Young objects the harness allocates between cyclic garbage collections (Python's default 700).
# Judging allocates a few small acyclic records per test; at 700 the collector took a fifth of
# the harness's CPU on HumanEval+ (measurements/versus_evalplus.py), at 50,000 about none.
GC_YOUNG_THRESHOLD = 50_000
DEFAULT_MEMORY_LIMIT_BYTES = 4 * 1024**3  # capped further by RAM and cgroup limits
MAX_OUTPUT_BYTES = 64 * 1024  # captured stdout/stderr kept per solution
MAX_RESULT_BYTES = 256 * 1024**2  # what a child may report back (outputs of all tests)
MAX_FILE_BYTES = 16 * 1024**2  # largest file a solution may write
MAX_PROCESSES = 64  # per sandbox (RLIMIT_NPROC; bubblewrap's pid namespace as well)
ENV_ISOLATION = "COREBENCH_ISOLATION"  # auto (bubblewrap, or refuse) | bwrap | unsafe
ENV_ENGINE = "COREBENCH_ENGINE"  # fork (a zygote forks each judging child) | exec (fresh bwrap)
ENV_CGROUP = "COREBENCH_CGROUP"  # where timing sessions make memory cgroups (sandbox/cgroups.py)
JUDGING_AHEAD_PER_WORKER = 2  # solutions prepared ahead per slot (stored, encoded, reference read)

# --- measurement phase (passing solutions only, one per timing CPU at a time) ---------------------
# timing sessions at once, each on a CPU of its own, with no judging beside them (default: one
# per CPU this process may use, at most the executor's workers; 1 restores one at a time)
ENV_TIMING_SESSIONS = "COREBENCH_TIMING_SESSIONS"
DEFAULT_REPEATS = 5  # timed runs per measured test at least; the median counts
MEASUREMENT_INPUTS = 3  # tests measured per task: those the reference spends the most CPU on
MEASUREMENT_WARMUP = 0  # untimed runs per measured test (every run is a fresh process anyway)
MEASUREMENT_PRECISION = 0.03  # more runs until half the IQR of a test's runs is this share of ...
MEASUREMENT_RESOLUTION_S = 50e-6  # ... their median (or this, a run's own noise), ...
MEASUREMENT_MAX_REPEATS_FACTOR = 3  # ... up to this many times the repeats asked
MEASUREMENT_EXTRA_BUDGET_S = 1.0  # ... and this many CPU seconds of extra runs per test
MEASUREMENT_REPEATS_TRAINING = 3  # timed runs per measured test for training's efficiency rewards
MEASUREMENT_FIXED_LAYOUT = True  # timed children run without address-space randomization
# memory ratios floor both sides here: a memory cgroup charges pages in per-CPU batches of 64
# (256 KiB with 4 KiB pages), so a peak is known to about that; below 1 MiB, peaks are noise
MEMORY_FLOOR_BYTES = 1024**2
# Calibrated CPU seconds: CPU seconds scaled to a machine that runs the sandbox child's fixed
# calibration work (`child.calibration_work`) in this long; about the 2-core CI machine's speed.
CALIBRATION_REFERENCE_S = 28e-6
CALIBRATION_SAMPLE_S = 0.002  # one calibration sample before and one after each test's timed calls

# --- judging service (`corebench sandbox serve`) ----------------------------------------------------
SERVICE_PORT = 8100  # default port (loopback by default)
ENV_JUDGE_URL = "COREBENCH_JUDGE_URL"  # training rewards and the reward functions judge there
ENV_JUDGE_TOKEN = "COREBENCH_JUDGE_TOKEN"  # bearer token; required when not bound to loopback
SERVICE_PENDING_PER_WORKER = 8  # programs admitted (running or waiting) per sandbox slot; then 429
MAX_SERVICE_REPEATS = 20  # timed calls per test a request may ask for
MAX_REQUEST_BYTES = 64 * 1024**2  # a larger request body is refused (413)
SERVICE_REMEMBERED_IDS = 100_000  # finished request ids kept to answer retries without judging

# --- where sandbox work runs (`--executor`) -------------------------------------------------------
# local (this machine's sandbox) | ray (the Ray cluster at $RAY_ADDRESS, or a new one on this
# machine) | ray://HOST:PORT (a cluster through Ray Client) | http://HOST:PORT (a judging service)
ENV_EXECUTOR = "COREBENCH_EXECUTOR"
RAY_ATTEMPTS = 3  # nodes a call is sent to before its failure is reported
RAY_NODE_QUEUE = 2  # calls sent to a node per worker slot it has (the rest wait in the driver)
RAY_START_TIMEOUT_S = 60.0  # a node's sandbox actor that has not started by then is left out

# --- leaderboards -----------------------------------------------------------------------------
TRACE_CHARS = 2000  # per prompt or completion kept for the HTML page's per-task view

# --- training -------------------------------------------------------------------------------------
# near duplicates of evaluation tasks in training data (`corebench decontaminate`, training's
# `decontaminate_*` settings): the least similarity that flags a pair, per criterion
NEAR_DUPLICATE_DESCRIPTION = 0.9  # difflib ratio of the prompts' prose
NEAR_DUPLICATE_CODE = 0.9  # difflib ratio of the reference solutions' canonical source tokens
# code shorter than this is not compared: one-liners differ by one token (len(x) and max(x): 0.9)
NEAR_DUPLICATE_CODE_MIN_TOKENS = 20
NEAR_DUPLICATE_TESTS = 0.6  # share of the training task's tests the evaluation task has (2 of 3)
