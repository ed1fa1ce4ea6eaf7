"""`corebench evaluate` on EvalPlus-style samples files."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from corebench.harness import recording as recording_module
from corebench.harness.config import JUDGING_AHEAD_PER_WORKER
from corebench.harness.errors import CorebenchError, MeasurementRefused
from corebench.harness.evaluate import evaluate_samples, load_samples
from corebench.harness.sandbox import Executor
from corebench.harness.store import Store
from corebench.plugins.benchmarks.evalplus_tasks import MbppPlus

CLI = [sys.executable, "-m", "corebench.harness.cli"]


@pytest.fixture
def mbpp(data_dir):
    return MbppPlus(data_dir)


def write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(
    "rows, message",
    [
        (['{"task_id": "Mbpp/2", "solution": '], r"samples.jsonl:1: not valid JSON"),
        (
            [{"task_id": "Mbpp/2", "solution": "x"}, {"task_id": "Mbpp/3"}],
            r"samples.jsonl:2: needs a string 'solution' or 'completion'",
        ),
        (
            [{"task_id": "Mbpp/9999", "solution": "x"}],
            r"unknown mbpp task \(at .*samples.jsonl:1\) 'Mbpp/9999'",
        ),
        ([["not", "an", "object"]], r"expected an object with a string task_id"),
        ([], r"no samples"),
    ],
)
def test_malformed_samples_file_is_one_clear_error(tmp_path, mbpp, rows, message):
    with pytest.raises(CorebenchError, match=message):
        load_samples(write(tmp_path / "samples.jsonl", rows), mbpp)


def test_a_byte_order_mark_and_windows_line_ends_are_accepted(tmp_path, mbpp):
    row = {"task_id": "Mbpp/2", "solution": "def f():\n    return '\u2028'\n"}
    path = tmp_path / "samples.jsonl"
    # as Notepad saves it: a BOM, CRLF line ends; and a raw U+2028 inside a JSON string
    text = json.dumps(row, ensure_ascii=False) + "\r\n" + json.dumps(row) + "\r\n"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    samples = load_samples(path, mbpp)
    assert [(s.task_id, s.index) for s in samples] == [("Mbpp/2", 0), ("Mbpp/2", 1)]
    assert samples[0].code == samples[1].code == row["solution"]


def test_invalid_utf8_is_one_line_naming_the_file_and_the_line(tmp_path, data_dir):
    path = tmp_path / "samples.jsonl"
    good = json.dumps({"task_id": "Mbpp/2", "solution": "x = 1"}).encode()
    path.write_bytes(good + b"\n" + good[:-3] + b"\xe9\xff" + b'"}\n')  # Latin-1 bytes on line 2
    with pytest.raises(CorebenchError, match=r"samples.jsonl:2: not valid UTF-8 \(byte 0xe9"):
        load_samples(path, MbppPlus(data_dir))
    args = [*CLI, "evaluate", "--bench", "mbpp", "--samples", str(path)]
    args += ["--out", str(tmp_path / "ev"), "--repeats", "0", "--data-dir", str(data_dir)]
    ran = subprocess.run(args, capture_output=True, text=True)
    assert ran.returncode != 0 and "Traceback" not in ran.stderr, ran.stderr
    errors = [line for line in ran.stderr.splitlines() if "UTF-8" in line]
    assert len(errors) == 1 and "samples.jsonl:2" in errors[0], ran.stderr


def test_completion_continues_the_prompt_and_samples_are_numbered_per_task(tmp_path, mbpp):
    rows = [
        {
            "task_id": "Mbpp/2",
            "completion": "def similar_elements(a, b):\n    return set(a) & set(b)\n",
        },
        {"task_id": "Mbpp/2", "solution": "def similar_elements(a, b):\n    return ()\n"},
    ]
    samples = load_samples(write(tmp_path / "samples.jsonl", rows), mbpp)
    assert [s.index for s in samples] == [0, 1]
    assert samples[0].code.startswith('"""\nWrite a function to find the shared elements')


def test_evaluate_cli_judges_writes_reports_and_resumes(tmp_path, data_dir, mbpp):
    problems = mbpp.problems
    rows = [
        {"task_id": t, "solution": problems[t]["prompt"] + problems[t]["canonical_solution"]}
        for t in ("Mbpp/2", "Mbpp/3")
    ]
    rows.append(
        {"task_id": "Mbpp/4", "solution": "def heap_queue_largest(nums, n):\n    return nums[:n]\n"}
    )
    samples = write(tmp_path / "samples.jsonl", rows)
    args = [
        *CLI,
        "evaluate",
        "--bench",
        "mbpp",
        "--samples",
        str(samples),
        "--out",
        str(tmp_path / "ev"),
        "--data-dir",
        str(data_dir),
    ]
    first = subprocess.run(args, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert "judged 3 samples" in first.stderr
    results = [
        json.loads(line) for line in (tmp_path / "ev" / "results.jsonl").read_text().splitlines()
    ]
    assert [r["verdict"] for r in results] == ["passed", "passed", "wrong_answer"]
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert summary["pass@k"]["1"] == pytest.approx(2 / 3)
    assert summary["efficiency"]["measured"] == 2  # the references, against themselves
    assert 0.2 < summary["efficiency"]["net"] < 5
    again = subprocess.run(args, capture_output=True, text=True)
    assert again.returncode == 0 and "judged 0 samples" in again.stderr


def test_samples_are_judged_slowest_reference_first(tmp_path, mbpp, monkeypatch):
    # the order follows the references' measured CPU time (read back from the reference cache the
    # evaluation filled), so a slow task never runs alone at the end of an evaluation
    started = []

    class Recording(Executor):
        async def evaluate(self, task_id, *args, **kwargs):
            started.append(task_id)
            return await super().evaluate(task_id, *args, **kwargs)

    monkeypatch.setattr(
        recording_module, "executor_for", lambda isolation: Recording(isolation=isolation)
    )
    # references measured here at about 4, 30 and 90 ms of CPU: given cheapest first
    tasks = ["Mbpp/85", "Mbpp/67", "Mbpp/96"]
    rows = [
        {
            "task_id": t,
            "solution": mbpp.problems[t]["prompt"] + mbpp.problems[t]["canonical_solution"],
        }
        for t in tasks
    ]
    samples = write(tmp_path / "samples.jsonl", rows)
    judged = asyncio.run(evaluate_samples(mbpp, samples, tmp_path / "run", k=[1]))

    async def costs() -> dict[str, float]:
        executor = Executor()
        refs = {t: await executor.reference(t, mbpp.test_suite(t)) for t in tasks}
        return {t: sum(c for times in r.cpu_s.values() for c in times) for t, r in refs.items()}

    cost = asyncio.run(costs())
    slowest_first = sorted(tasks, key=cost.__getitem__, reverse=True)
    assert slowest_first == tasks[::-1] and min(cost.values()) > 0
    assert judged == len(tasks) and started == slowest_first


def test_samples_are_prepared_just_ahead_of_a_free_slot(tmp_path, mbpp, monkeypatch):
    # preparing every sample first (storing it, encoding its inputs, reading its reference) kept
    # the machine idle for a second before the first program of an MBPP+ evaluation started
    in_flight, most = 0, 0

    class Counting(Executor):
        async def evaluate(self, *args, **kwargs):
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            try:
                return await super().evaluate(*args, **kwargs)
            finally:
                in_flight -= 1

    monkeypatch.setattr(
        recording_module,
        "executor_for",
        lambda isolation: Counting(workers=1, isolation=isolation),
    )
    tasks = ["Mbpp/85", "Mbpp/67", "Mbpp/96", "Mbpp/2", "Mbpp/3"]
    rows = [
        {
            "task_id": t,
            "solution": mbpp.problems[t]["prompt"] + mbpp.problems[t]["canonical_solution"],
        }
        for t in tasks
    ]
    samples = write(tmp_path / "samples.jsonl", rows)
    assert asyncio.run(evaluate_samples(mbpp, samples, tmp_path / "run", k=[1])) == len(tasks)
    assert most == JUDGING_AHEAD_PER_WORKER  # one slot: that many samples under way at most


def test_only_the_programs_own_refusals_are_kept_and_others_are_tried_again(
    tmp_path, mbpp, monkeypatch
):
    # a refusal the program caused is stored (a resume would meet the same program); a failure
    # of the machine or of the reference is only warned about, and measured on the next resume
    class Failing(Executor):
        async def measure(self, task_id, *args, **kwargs):
            if task_id == "Mbpp/2":
                raise MeasurementRefused("a wrong answer on test 0 while timed")
            raise CorebenchError("the measurement phase could not start: no CPU")

    monkeypatch.setattr(
        recording_module, "executor_for", lambda isolation: Failing(isolation=isolation)
    )
    rows = [
        {
            "task_id": t,
            "solution": mbpp.problems[t]["prompt"] + mbpp.problems[t]["canonical_solution"],
        }
        for t in ("Mbpp/2", "Mbpp/3")
    ]
    samples = write(tmp_path / "samples.jsonl", rows)
    with pytest.warns(UserWarning, match="not measured"):
        asyncio.run(evaluate_samples(mbpp, samples, tmp_path / "run", k=[1], repeats=1))
    stored = {s.task_id: r for s, r in Store(tmp_path / "run", create=False).samples()}
    assert stored["Mbpp/2"].measurement_refused == "a wrong answer on test 0 while timed"
    assert stored["Mbpp/3"].passed and stored["Mbpp/3"].measurement_refused is None
    probe = Executor()
    first = probe.timing_sessions  # what the run above had (the default)
    probe.close()
    assert Store(tmp_path / "run", create=False).metadata()["timing_sessions"] == [first]
    # the next resume measures what the machine could not, one solution at a time
    monkeypatch.setattr(
        recording_module,
        "executor_for",
        lambda isolation: Executor(isolation=isolation, timing_sessions=1),
    )
    asyncio.run(evaluate_samples(mbpp, samples, tmp_path / "run", k=[1], repeats=1))
    stored = {s.task_id: r for s, r in Store(tmp_path / "run", create=False).samples()}
    assert stored["Mbpp/3"].measurement is not None and stored["Mbpp/2"].measurement is None
    # every count the run's measurements were taken with
    metadata = Store(tmp_path / "run", create=False).metadata()
    assert metadata["timing_sessions"] == sorted({first, 1})
