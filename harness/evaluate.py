"""`corebench evaluate`: judge an EvalPlus-style samples file (``task_id`` plus ``solution`` or
``completion``) with the same executor as ``corebench run``. The results form a normal run
directory, so ``corebench show``, ``export`` and the leaderboards read them too."""

from __future__ import annotations

import codecs
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .benchmark import Benchmark
from .errors import CorebenchError, UnknownNameError
from .metadata import file_fingerprint
from .recording import OnSample, Recorder
from .records import RunConfig, Solution
from .store import Store

# what a judged samples file records as its system: the programs were written elsewhere
SAMPLES_SYSTEM = "samples"


@dataclass(frozen=True)
class Sample:
    task_id: str
    index: int  # n-th sample of its task in the file
    code: str


def load_samples(path: Path, benchmark: Benchmark) -> list[Sample]:
    """Read and validate the whole file first: a malformed line is one error naming the line."""
    prompts = {t.task_id: t.prompt for t in benchmark.tasks()}
    counts: Counter[str] = Counter()
    samples = []
    for number, line in enumerate(_text_lines(path), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise CorebenchError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("task_id"), str):
            raise CorebenchError(f"{where}: expected an object with a string task_id")
        task_id = row["task_id"]
        if task_id not in prompts:
            raise UnknownNameError(f"{benchmark.name} task (at {where})", task_id, prompts)
        if isinstance(row.get("solution"), str):
            code = row["solution"]
        elif isinstance(row.get("completion"), str):
            code = (
                prompts[task_id] + row["completion"]
            )  # EvalPlus: a completion continues the prompt
        else:
            raise CorebenchError(f"{where}: needs a string 'solution' or 'completion'")
        samples.append(Sample(task_id, counts[task_id], code))
        counts[task_id] += 1
    if not samples:
        raise CorebenchError(f"{path}: no samples")
    return samples


def _text_lines(path: Path) -> list[str]:
    """The file's lines, decoded as UTF-8 (a leading byte-order mark is dropped, as editors on
    Windows write one); lines end at "\n" only, so a JSON string holding U+2028 stays one line.
    Bytes that are not UTF-8 are one error naming the line."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorebenchError(f"cannot read samples file {path}: {exc.strerror}") from None
    data = data.removeprefix(codecs.BOM_UTF8)
    lines = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        try:
            lines.append(raw.decode("utf-8").removesuffix("\r"))
        except UnicodeDecodeError as exc:
            raise CorebenchError(
                f"{path}:{number}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                f"{exc.start + 1}); save the file as UTF-8"
            ) from None
    return lines


async def evaluate_samples(
    benchmark: Benchmark,
    samples_path: Path,
    run_dir: Path,
    k: list[int],
    on_sample: OnSample | None = None,
    repeats: int = 0,
) -> int:
    """Judge every sample not yet judged in ``run_dir``; returns how many were judged now."""
    samples = load_samples(samples_path, benchmark)
    config = RunConfig(
        benchmark=benchmark.name,
        system=SAMPLES_SYSTEM,
        model=f"samples:{samples_path.name}@{file_fingerprint(samples_path)[:12]}",
        n=max(s.index for s in samples) + 1,
        k=k,
    )
    with Recorder(
        run_dir, benchmark, config, {"samples_file": str(samples_path)}, on_sample=on_sample
    ) as recorder:
        todo = set(recorder.pending((s.task_id, s.index) for s in samples))
        await recorder.judge_all(
            [
                Solution(task_id=s.task_id, sample_index=s.index, code=s.code)
                for s in samples
                if (s.task_id, s.index) in todo
            ]
        )
        await recorder.measure(repeats)
        return len(todo)


def write_reports(run_dir: Path) -> tuple[Path, Path, dict[str, Any]]:
    """results.jsonl (one line per sample, EvalPlus-like fields) and summary.json; returns their
    paths and the summary."""
    from .summary import summarize

    store = Store(run_dir, create=False)
    results_path, summary_path = run_dir / "results.jsonl", run_dir / "summary.json"
    with open(results_path, "w") as f:
        for solution, result in store.samples(tests=False):
            row = {
                "task_id": solution.task_id,
                "sample_index": solution.sample_index,
                "verdict": result.verdict.value,
                "base_status": result.suite_verdicts.get("base", result.verdict).value,
                "plus_status": result.verdict.value,
                "first_failure": result.first_failure,
                "runtime_s": result.runtime_s,
                "cpu_s": result.cpu_s,
                "peak_memory_bytes": result.peak_memory_bytes,
            }
            f.write(json.dumps(row) + "\n")
    summary = summarize(store)
    summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    store.close()
    return results_path, summary_path, summary
