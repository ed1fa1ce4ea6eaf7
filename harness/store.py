"""The results store: one SQLite database per run directory.

A sample is finished when its execution result is stored. Solutions and results are written in
their own transactions as soon as they exist, keyed by (task, sample), so a run killed at any
point resumes with nothing lost and nothing duplicated.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .config import RESULTS_DB
from .errors import CorebenchError
from .records import ExecutionResult, RunConfig, Solution

SCHEMA = """
CREATE TABLE IF NOT EXISTS run (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    config TEXT NOT NULL,
    metadata TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS solutions (
    task_id TEXT NOT NULL,
    sample_index INTEGER NOT NULL,
    solution TEXT NOT NULL,
    PRIMARY KEY (task_id, sample_index)
);
CREATE TABLE IF NOT EXISTS results (
    task_id TEXT NOT NULL,
    sample_index INTEGER NOT NULL,
    verdict TEXT NOT NULL,
    result TEXT NOT NULL,
    PRIMARY KEY (task_id, sample_index)
);
"""


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
        self.db.executescript(SCHEMA)

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

    def samples(self) -> Iterator[tuple[Solution, ExecutionResult]]:
        """Every finished sample with its solution, in task order."""
        rows = self.db.execute(
            "SELECT s.solution, r.result FROM results r JOIN solutions s USING (task_id, sample_index) "
            "ORDER BY r.task_id, r.sample_index"
        )
        for solution, result in rows:
            yield (
                Solution.model_validate_json(solution),
                ExecutionResult.model_validate_json(result),
            )
