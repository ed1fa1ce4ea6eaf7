"""Rows of a Hugging Face benchmark dataset, from the data folder or from the Hub, through the same
``datasets`` loading code either way (the ``json`` or ``parquet`` builder), so the conversion that
follows is tested on local fixture files written in the real schema."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corebench.harness.config import ENV_DATA_DIR, offline
from corebench.harness.errors import DatasetMissingError
from corebench.harness.metadata import file_fingerprint

LOCAL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".parquet")


@dataclass(frozen=True)
class HubDataset:
    """Where a benchmark's files live: ``folder`` inside the data folder holds ``<file>.jsonl``
    (or .jsonl.gz/.json/.parquet) per file stem; on the Hub, ``repo`` holds ``hub_files``."""

    benchmark: str
    folder: str
    repo: str
    hub_files: dict[str, str]  # file stem -> path inside the Hub repository

    def local_path(self, data_dir: Path, stem: str) -> Path | None:
        for suffix in LOCAL_SUFFIXES:
            path = data_dir / self.folder / f"{stem}{suffix}"
            if path.exists():
                return path
        return None

    def load(self, data_dir: Path | None, stems: list[str]) -> tuple[list[dict[str, Any]], dict]:
        """All rows of the files ``stems`` and a description of where they came from."""
        from datasets import disable_progress_bars, load_dataset

        disable_progress_bars()  # a run has its own progress display

        if data_dir is not None:
            paths = [self.local_path(data_dir, stem) for stem in stems]
            missing = [stem for stem, path in zip(stems, paths, strict=True) if path is None]
            if missing:
                raise DatasetMissingError(
                    f"{self.benchmark}: {self.folder}/{missing[0]}.jsonl (or .jsonl.gz, .json, "
                    f".parquet) not found in {data_dir} (the data folder from --data-dir or "
                    f"${ENV_DATA_DIR}); download it from https://huggingface.co/datasets/{self.repo}"
                )
            files = [str(p) for p in paths if p is not None]
            info = {"source": files, "sha256": [file_fingerprint(p) for p in files]}
        elif offline():
            raise DatasetMissingError(
                f"{self.benchmark}: offline and no data folder given; put "
                f"{self.folder}/{stems[0]}.jsonl in a folder and pass --data-dir or set "
                f"${ENV_DATA_DIR}"
            )
        else:
            files = [f"hf://datasets/{self.repo}/{self.hub_files[stem]}" for stem in stems]
            info = {"source": files}
        builder = "parquet" if files[0].endswith(".parquet") else "json"
        try:
            dataset = load_dataset(builder, data_files=files, split="train")
        except Exception as exc:  # network, schema or file errors: one line, with the cause
            raise DatasetMissingError(
                f"{self.benchmark}: cannot load {files[0]}: {type(exc).__name__}: {exc}"
            ) from exc
        return list(dataset), {"name": self.benchmark, "repo": self.repo, **info}
