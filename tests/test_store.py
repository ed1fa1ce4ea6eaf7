"""results.sqlite: schema versions and ordered migrations (runs stored by older versions open)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from corebench.harness import ExecutionResult, RunConfig, Solution, TestOutcome, Verdict
from corebench.harness.errors import CorebenchError
from corebench.harness.store import SCHEMA_VERSION, Store
from corebench.harness.summary import summarize

# The tables as corebench wrote them before schema versions existed (user_version 0), with
# metadata naming the unsafe isolation by its old name.
BEFORE_VERSIONS = """
CREATE TABLE run (id INTEGER PRIMARY KEY CHECK (id = 1), config TEXT NOT NULL, metadata TEXT NOT NULL);
CREATE TABLE solutions (task_id TEXT NOT NULL, sample_index INTEGER NOT NULL, solution TEXT NOT NULL,
    PRIMARY KEY (task_id, sample_index));
CREATE TABLE results (task_id TEXT NOT NULL, sample_index INTEGER NOT NULL, verdict TEXT NOT NULL,
    result TEXT NOT NULL, PRIMARY KEY (task_id, sample_index));
"""


MEASURED = {
    "runtime_s": 0.002,
    "cpu_s": 0.002,
    "peak_memory_bytes": 1 << 20,
    "reference_runtime_s": 0.004,
    "reference_cpu_s": 0.004,
    "reference_peak_memory_bytes": 1 << 20,
    "runtime_ratio": 0.5,
    "memory_ratio": 1.0,
}


def old_run(run_dir, isolation: str = "rlimits") -> None:
    run_dir.mkdir()
    config = RunConfig(benchmark="mbpp", system="direct", model="embedded", k=[1])
    solution = Solution(task_id="Mbpp/2", sample_index=0, code="def f(): pass\n")
    result = ExecutionResult(task_id="Mbpp/2", sample_index=0, verdict=Verdict.passed)
    stored = result.model_dump(mode="json", exclude={"measurement"})
    # the runtime and memory of a passing solution, under the name they had then
    stored["efficiency"] = {**MEASURED, "repeats": 5}
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        db.executescript(BEFORE_VERSIONS)
        db.execute(
            "INSERT INTO run VALUES (1, ?, ?)",
            (
                config.model_dump_json(),
                json.dumps({"isolation": isolation, "efficiency_repeats": 5}),
            ),
        )
        db.execute("INSERT INTO solutions VALUES ('Mbpp/2', 0, ?)", (solution.model_dump_json(),))
        db.execute("INSERT INTO results VALUES ('Mbpp/2', 0, 'passed', ?)", (json.dumps(stored),))


def user_version(run_dir) -> int:
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        return db.execute("PRAGMA user_version").fetchone()[0]


def test_a_run_stored_before_schema_versions_is_migrated_and_opens(tmp_path):
    run_dir = tmp_path / "old"
    old_run(run_dir)
    assert user_version(run_dir) == 0
    store = Store(run_dir, create=False)
    assert user_version(run_dir) == SCHEMA_VERSION >= 3
    assert store.metadata()["isolation"] == "unsafe"  # migration 2
    assert store.metadata()["measurement_repeats"] == 5  # migration 3
    [(solution, result)] = list(store.samples())
    assert solution.task_id == "Mbpp/2"
    assert result.measurement is not None and result.measurement.runtime_s == 0.002
    summary = summarize(store)
    assert summary["samples"] == 1 and summary["isolation"] == "unsafe"
    assert summary["efficiency"]["measured"] == 1  # the ratios read the migrated measurement
    store.close()
    Store(run_dir, create=False).close()  # opening again changes nothing
    assert user_version(run_dir) == SCHEMA_VERSION


def test_a_new_store_starts_at_the_current_version(tmp_path):
    Store(tmp_path / "new").close()
    assert user_version(tmp_path / "new") == SCHEMA_VERSION


def test_a_store_from_a_newer_corebench_is_refused_untouched(tmp_path):
    run_dir = tmp_path / "future"
    old_run(run_dir, isolation="bwrap")
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(CorebenchError, match="newer corebench .* upgrade corebench"):
        Store(run_dir, create=False)
    assert user_version(run_dir) == SCHEMA_VERSION + 1


def test_results_read_without_their_test_outcomes_keep_everything_else(tmp_path):
    store = Store(tmp_path / "run")
    store.open_run(RunConfig(benchmark="mbpp", system="direct", model="embedded", k=[1]), {})
    outcomes = [
        TestOutcome(suite="base", index=0, verdict=Verdict.passed),
        TestOutcome(suite="plus", index=0, verdict=Verdict.wrong_answer, detail="got 1"),
    ]
    result = ExecutionResult(
        task_id="Mbpp/2",
        sample_index=0,
        verdict=Verdict.wrong_answer,
        suite_verdicts={"base": Verdict.passed, "plus": Verdict.wrong_answer},
        first_failure="plus test 0: got 1",
        tests=outcomes,
        cpu_s=0.5,
    )
    store.save_solution(Solution(task_id="Mbpp/2", sample_index=0, code="def f(): pass\n"))
    store.save_result(result)
    [(_, whole)] = list(store.samples())
    [(_, light)] = list(store.samples(tests=False))
    assert whole == result and whole.tests == outcomes
    assert light.tests == [] and light == result.model_copy(update={"tests": []})
    store.close()
