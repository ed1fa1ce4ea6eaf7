"""Where a built-in benchmark's files come from, declared once per benchmark, with one set of
rules and messages for all of them:

1. a data folder is given (``--data-dir`` or ``$COREBENCH_DATA_DIR``): the file must be there
   (the first of its accepted names); nothing is downloaded;
2. no data folder and offline (``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``): an error saying
   which file to put where;
3. no data folder, online: the source's own download (EvalPlus's release cache, the Hugging Face
   Hub); a failed download is the same kind of error, with its cause.

Every error is a ``DatasetMissingError``: one line naming the benchmark, the file and what to do.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corebench.harness.config import ENV_DATA_DIR, offline
from corebench.harness.errors import DatasetMissingError

PUT_IT_THERE = f"put it in a folder and pass --data-dir or set ${ENV_DATA_DIR}"


@dataclass(frozen=True)
class DataFile:
    """One file of a benchmark: its accepted names inside the data folder (first found wins),
    where to get it (for messages), and how to fetch it when online (returns what the
    benchmark's reader takes: a local path or a URL)."""

    benchmark: str
    names: tuple[str, ...]
    origin: str
    fetch: Callable[[], Any] | None = None

    def locate(self, data_dir: Path | None) -> tuple[Any, bool]:
        """(a local path, True) or (what ``fetch`` returned, False), by the rules above."""
        if data_dir is not None:
            for name in self.names:
                if (data_dir / name).exists():
                    return data_dir / name, True
            others = f" (or {', '.join(self.names[1:])})" if len(self.names) > 1 else ""
            raise DatasetMissingError(
                f"{self.benchmark}: {self.names[0]}{others} not found in {data_dir} (the data folder from "
                f"--data-dir or ${ENV_DATA_DIR}); get it from {self.origin}"
            )
        if offline() or self.fetch is None:
            raise DatasetMissingError(
                f"{self.benchmark}: offline and no data folder given; {self.names[0]} is needed: "
                f"{PUT_IT_THERE} (get it from {self.origin})"
            )
        try:
            return self.fetch(), False
        except Exception as exc:
            raise DatasetMissingError(
                f"{self.benchmark}: could not download {self.names[0]} "
                f"({type(exc).__name__}: {exc}); {PUT_IT_THERE}"
            ) from exc


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file, gzipped or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def unreadable(benchmark: str, where: object, exc: BaseException) -> DatasetMissingError:
    """The one message for a file that was found but cannot be read."""
    return DatasetMissingError(f"{benchmark}: cannot read {where}: {type(exc).__name__}: {exc}")
