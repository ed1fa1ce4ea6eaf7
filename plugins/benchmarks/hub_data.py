"""Rows of a Hugging Face benchmark dataset, from the data folder or from the Hub, through the same
``datasets`` loading code either way (the ``json`` or ``parquet`` builder), so the conversion that
follows is tested on local fixture files written in the real schema."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corebench.harness.metadata import file_fingerprint
from corebench.plugins.benchmarks.sources import DataFile, unreadable

LOCAL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".parquet")


@dataclass(frozen=True)
class HubDataset:
    """Where a benchmark's files live: ``folder`` inside the data folder holds ``<file>.jsonl``
    (or .jsonl.gz/.json/.parquet) per file stem; on the Hub, ``repo`` holds ``hub_files``."""

    benchmark: str
    folder: str
    repo: str
    hub_files: dict[str, str]  # file stem -> path inside the Hub repository

    def file(self, stem: str) -> DataFile:
        return DataFile(
            self.benchmark,
            tuple(f"{self.folder}/{stem}{suffix}" for suffix in LOCAL_SUFFIXES),
            f"https://huggingface.co/datasets/{self.repo}",
            fetch=lambda: f"hf://datasets/{self.repo}/{self.hub_files[stem]}",
        )

    def load(self, data_dir: Path | None, stems: list[str]) -> tuple[list[dict[str, Any]], dict]:
        """All rows of the files ``stems`` and a description of where they came from."""
        from datasets import disable_progress_bars, load_dataset

        disable_progress_bars()  # a run has its own progress display

        located = [self.file(stem).locate(data_dir) for stem in stems]
        files = [str(where) for where, _ in located]
        info: dict[str, Any] = {"source": files}
        if data_dir is not None:
            info["sha256"] = [file_fingerprint(p) for p in files]
        builder = "parquet" if files[0].endswith(".parquet") else "json"
        try:
            dataset = load_dataset(builder, data_files=files, split="train")
        except Exception as exc:  # network, schema or file errors: one line, with the cause
            raise unreadable(self.benchmark, files[0], exc) from exc
        return list(dataset), {"name": self.benchmark, "repo": self.repo, **info}
