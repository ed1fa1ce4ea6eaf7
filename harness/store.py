"""The results store: one SQLite database per run directory.

A sample is finished when its execution result is stored. Solutions and results are written in
their own transactions as soon as they exist, keyed by (task, sample), so a run killed at any
point resumes with nothing lost and nothing duplicated.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .config import RESULTS_DB
from .errors import CorebenchError
from .records import ExecutionResult, RunConfig, Solution

# --- schema: ordered migrations ----------------------------------------------------------------
# MIGRATIONS[i] takes a database at schema version i to i + 1 (``PRAGMA user_version``). Version 0
# is a new file; a file from before versions were recorded (its tables, user_version 0) is 1.
# Never edit a migration that has shipped: append one.


def _tables(db: sqlite3.Connection) -> None:
    """1: the run (config, metadata), solutions and results keyed by (task, sample)."""
    # one statement at a time: executescript would commit the migration's transaction
    for statement in (
        """CREATE TABLE IF NOT EXISTS run (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            config TEXT NOT NULL,
            metadata TEXT NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS solutions (
            task_id TEXT NOT NULL,
            sample_index INTEGER NOT NULL,
            solution TEXT NOT NULL,
            PRIMARY KEY (task_id, sample_index)
        )""",
        """CREATE TABLE IF NOT EXISTS results (
            task_id TEXT NOT NULL,
            sample_index INTEGER NOT NULL,
            verdict TEXT NOT NULL,
            result TEXT NOT NULL,
            PRIMARY KEY (task_id, sample_index)
        )""",
    ):
        db.execute(statement)


def _unsafe_isolation_name(db: sqlite3.Connection) -> None:
    """2: the isolation without bubblewrap is recorded as ``unsafe`` (it was ``rlimits``)."""
    row = db.execute("SELECT metadata FROM run").fetchone()
    if row is None:
        return
    metadata = json.loads(row[0])
    if metadata.get("isolation") == "rlimits":
        metadata["isolation"] = "unsafe"
        db.execute("UPDATE run SET metadata = ?", (json.dumps(metadata),))


def _measurement_name(db: sqlite3.Connection) -> None:
    """3: a passing solution's runtime and memory are its ``measurement`` (they were its
    ``efficiency``, a word now kept for scores against the reference), and the run's
    ``measurement_repeats`` (``efficiency_repeats``)."""
    rows = db.execute("SELECT task_id, sample_index, result FROM results").fetchall()
    for task_id, index, text in rows:
        result = json.loads(text)
        if "efficiency" in result:
            result["measurement"] = result.pop("efficiency")
            db.execute(
                "UPDATE results SET result = ? WHERE task_id = ? AND sample_index = ?",
                (json.dumps(result), task_id, index),
            )
    row = db.execute("SELECT metadata FROM run").fetchone()
    if row is not None:
        metadata = json.loads(row[0])
        if "efficiency_repeats" in metadata:
            metadata["measurement_repeats"] = metadata.pop("efficiency_repeats")
            db.execute("UPDATE run SET metadata = ?", (json.dumps(metadata),))


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    _tables,
    _unsafe_isolation_name,
    _measurement_name,
]
SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(db: sqlite3.Connection) -> int:
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if (
        version == 0
        and db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'run'"
        ).fetchone()
    ):
        return 1  # stored before schema versions were recorded
    return version


def migrate(db: sqlite3.Connection, path: Path) -> None:
    """Bring ``db`` to SCHEMA_VERSION, one migration per transaction (a kill between two leaves a
    valid older version that the next open continues from)."""
    while True:
        db.execute("BEGIN IMMEDIATE")  # one process migrates; the others wait and re-read
        try:
            version = schema_version(db)
            if version > SCHEMA_VERSION:
                raise CorebenchError(
                    f"{path} was written by a newer corebench (results schema {version}; this "
                    f"version reads up to {SCHEMA_VERSION}): upgrade corebench to open it"
                )
            if version == SCHEMA_VERSION:
                db.execute("COMMIT")
                return
            MIGRATIONS[version](db)
            db.execute(f"PRAGMA user_version = {version + 1}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise


class Store:
    def __init__(self, run_dir: str | Path, *, create: bool = True):
        self.run_dir = Path(run_dir)
        path = self.run_dir / RESULTS_DB
        if not create and not path.exists():
            raise CorebenchError(
                f"{self.run_dir} is not a corebench run directory (no {RESULTS_DB})"
            )
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, isolation_level=None)  # autocommit; explicit transactions
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")  # durable across process kills
        try:
            migrate(self.db, path)
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()

    # --- run -------------------------------------------------------------------------------------------
    def open_run(self, config: RunConfig, metadata: dict[str, Any]) -> None:
        """Record a new run, or check that ``config`` continues the one already here."""
        row = self.db.execute("SELECT config FROM run").fetchone()
        if row is None:
            self.db.execute(
                "INSERT INTO run (id, config, metadata) VALUES (1, ?, ?)",
                (config.model_dump_json(), json.dumps(metadata)),
            )
            return
        stored = RunConfig.model_validate_json(row[0])
        if stored.identity() != config.identity():
            diff = {
                k: (v, config.identity()[k])
                for k, v in stored.identity().items()
                if config.identity()[k] != v
            }
            raise CorebenchError(
                f"{self.run_dir} holds a different run ({', '.join(f'{k}: {a!r} vs {b!r}' for k, (a, b) in diff.items())}); "
                "choose another --out"
            )
        if stored.k != config.k:  # k only changes the report
            self.db.execute("UPDATE run SET config = ?", (config.model_dump_json(),))

    def update_metadata(self, **fields: Any) -> None:
        metadata = self.metadata()
        metadata.update(fields)
        self.db.execute("UPDATE run SET metadata = ?", (json.dumps(metadata),))

    def config(self) -> RunConfig:
        row = self.db.execute("SELECT config FROM run").fetchone()
        if row is None:
            raise CorebenchError(f"{self.run_dir} holds no run yet")
        return RunConfig.model_validate_json(row[0])

    def metadata(self) -> dict[str, Any]:
        row = self.db.execute("SELECT metadata FROM run").fetchone()
        return json.loads(row[0]) if row else {}

    # --- samples -----------------------------------------------------------------------------------------
    def save_solution(self, solution: Solution) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO solutions VALUES (?, ?, ?)",
            (solution.task_id, solution.sample_index, solution.model_dump_json()),
        )

    def save_result(self, result: ExecutionResult) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?)",
            (result.task_id, result.sample_index, result.verdict.value, result.model_dump_json()),
        )

    def solution(self, task_id: str, sample_index: int) -> Solution | None:
        row = self.db.execute(
            "SELECT solution FROM solutions WHERE task_id = ? AND sample_index = ?",
            (task_id, sample_index),
        ).fetchone()
        return Solution.model_validate_json(row[0]) if row else None

    def finished(self) -> set[tuple[str, int]]:
        return {(t, i) for t, i in self.db.execute("SELECT task_id, sample_index FROM results")}

    def samples(self, tests: bool = True) -> Iterator[tuple[Solution, ExecutionResult]]:
        """Every finished sample with its solution, in task order. ``tests=False`` leaves out
        each result's per-test outcomes (SQLite drops them before they are read): what a
        summary needs, a fraction of the reading on suites of a thousand tests."""
        result = "r.result" if tests else "json_remove(r.result, '$.tests')"
        rows = self.db.execute(
            f"SELECT s.solution, {result} FROM results r JOIN solutions s "
            "USING (task_id, sample_index) ORDER BY r.task_id, r.sample_index"
        )
        for solution, result in rows:
            yield (
                Solution.model_validate_json(solution),
                ExecutionResult.model_validate_json(result),
            )
