"""A study folder as evidence: the registration record (a study file committed, unchanged,
before the run began, in a real git repository), portable exports, and every committed study
folder's report rewritten byte for byte from its files alone."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import measurement_scripts
import pytest

from corebench.harness.config import MANIFEST_NAME
from corebench.studies.evidence import (
    STUDY_FILE,
    WORKING,
    export_training,
    portable,
    preregistered,
    read_earlier_trainings,
    read_registration,
    read_training,
    register,
    sha256,
)

CLI = [sys.executable, "-m", "corebench.harness.cli"]
ROOT = Path(__file__).resolve().parents[1]
STUDY = '[study]\nname = "s"\n\n[[run]]\nname = "direct"\nsystem = "direct"\n'


def git(repo: Path, *args: str, when: datetime | None = None) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(repo), "PATH": "/usr/bin:/bin"}  # fmt: skip
    if when is not None:
        env["GIT_COMMITTER_DATE"] = env["GIT_AUTHOR_DATE"] = when.isoformat()
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def repo(tmp_path):
    folder = tmp_path / "repo"
    (folder / "studies").mkdir(parents=True)
    git(folder, "init", "-q")
    return folder


def commit(repo: Path, text: str, when: datetime | None = None) -> Path:
    path = repo / "studies" / "s.toml"
    path.write_text(text)
    git(repo, "add", "studies/s.toml")
    git(repo, "commit", "-q", "-m", "study", when=when)
    return path


def test_a_study_committed_before_its_run_is_preregistered(repo, tmp_path):
    path = commit(repo, STUDY, datetime.now(timezone.utc) - timedelta(hours=1))
    out = tmp_path / "out"
    record = register(path, out, "full")
    assert record["path"] == "studies/s.toml" and record["matches_commit"]
    assert record["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert (out / STUDY_FILE).read_text() == STUDY  # the file as run, in the folder
    assert preregistered(record, sha256(path)) == (
        True, "committed before the run began, and run as committed"
    )  # fmt: skip
    # the committed folder leaves out the working folders
    assert (out / ".gitignore").read_text().splitlines() == [f"/{w}/" for w in WORKING]
    # a resumed run keeps the first start
    again = register(path, out, "full")
    assert again["started"] == record["started"] and read_registration(out) == again
    assert len(again["starts"]) == 2 and preregistered(again, sha256(path))[0]
    # resumed from an edited file (even one committed later): no longer pre-registered
    edited = commit(repo, STUDY + "# a new row\n", datetime.now(timezone.utc))
    third = register(edited, out, "full")
    assert preregistered(third, record["sha256"]) == (
        False, "the study file changed between the run's starts"
    )  # fmt: skip


def test_edited_late_or_uncommitted_study_files_are_not_preregistered(repo, tmp_path):
    path = commit(repo, STUDY, datetime.now(timezone.utc) - timedelta(hours=1))
    path.write_text(STUDY + "# changed after the commit\n")
    record = register(path, tmp_path / "edited", "full")
    assert preregistered(record, sha256(path)) == (
        False, "the study file as run differs from its last commit"
    )  # fmt: skip

    late = commit(
        repo, STUDY + "# a later commit\n", datetime.now(timezone.utc) + timedelta(hours=1)
    )
    record = register(late, tmp_path / "late", "full")
    assert preregistered(record, sha256(late))[1] == (
        "the study file's last commit is later than the run's start"
    )

    loose = tmp_path / "loose.toml"
    loose.write_text(STUDY)
    record = register(loose, tmp_path / "loose", "full")
    assert record["commit"] is None
    assert not preregistered(record, sha256(loose))[0]

    path = commit(repo, STUDY, datetime.now(timezone.utc) - timedelta(hours=1))
    smoke = register(path, tmp_path / "smoke", "smoke")
    assert preregistered(smoke, sha256(path)) == (
        False, "scale smoke: only full-scale runs are registered results"
    )  # fmt: skip
    full = register(path, tmp_path / "given", "full")
    assert preregistered(full, "0" * 64) == (False, "the study file given differs from the one run")
    assert preregistered(None, sha256(path))[0] is False


def test_evidence_holds_no_machine_path_and_no_relative_path_to_the_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "study"
    assert portable("grpo from hf:study/checkpoints/sft-1/model, 2 steps", Path("study")) == (
        "grpo from hf:checkpoints/sft-1/model, 2 steps"
    )  # a relative --out: the folder as the working folder names it
    assert portable("other/study/x and study-old/y", root) == "other/study/x and study-old/y"
    value = {
        "out": f"{root}/checkpoints/grpo-1/model",
        "model": f"hf:{root}/checkpoints/sft-2/model",
        "data": "/home/someone/shared/data",
        "spec": "helper=hf:/x/y/helper,main=hf:/x/y/main",
        "plain": ["embedded", 3, None],
        "root": f"at {root}, and {root}-old/x",  # the root itself; a sibling is another folder
        "url": "http://127.0.0.1:8000/v1/models",
    }
    assert portable(value, root) == {
        "out": "checkpoints/grpo-1/model",
        "model": "hf:checkpoints/sft-2/model",
        "data": "data",
        "spec": "helper=hf:helper,main=hf:main",
        "plain": ["embedded", 3, None],
        "root": "at ., and x",
        "url": "http://127.0.0.1:8000/v1/models",
    }


def test_a_step_trained_again_keeps_its_earlier_record_only_where_rows_it_made_stand(tmp_path):
    """A study carried over sessions by its evidence trains a step trained once for all seeds
    again in a later start (``keep_earlier``: seeds it made were skipped): the earlier record
    stays. Otherwise a second training of the same step replaces it, and a record of another
    version of the step (another key: its folder's name) is stale, earlier ones with it."""
    root = tmp_path / "study"

    def export(created: str, key: str, keep_earlier: bool = False) -> None:
        folder = tmp_path / created / "model"
        folder.mkdir(parents=True, exist_ok=True)
        # the data folder differs by machine and session: not part of the step's key
        settings = {"out": f"checkpoints/sft-{key}", "data_dir": created}
        (folder / MANIFEST_NAME).write_text(json.dumps({"created": created, "settings": settings}))
        (folder.parent / "rewards.txt").write_text("0.5\n1.0\n")
        export_training(root, "sft", None, {"model": folder}, keep_earlier=keep_earlier)

    def created(record: dict) -> str:
        return record["model"]["manifest"]["created"]

    export("a", "k1")
    export("a", "k1", keep_earlier=True)  # the same training exported again: nothing kept twice
    assert read_earlier_trainings(root, "sft", None) == []
    export("b", "k1")  # trained again, no row of "a" kept: replaced
    assert read_earlier_trainings(root, "sft", None) == []
    export("c", "k1", keep_earlier=True)
    export("d", "k1", keep_earlier=True)
    assert [created(r) for r in read_earlier_trainings(root, "sft", None)] == ["b", "c"]
    assert created(read_training(root, "sft", None)) == "d"
    assert read_training(root, "sft", None)["model"]["logs"]["rewards"] == [0.5, 1.0]
    export("e", "k2", keep_earlier=True)  # another version of the step: its records are stale
    assert read_earlier_trainings(root, "sft", None) == []
    assert created(read_training(root, "sft", None)) == "e"
    assert sorted(p.name for p in (root / "training").iterdir()) == ["sft.json"]


def committed_folders(finished: bool = True) -> list[Path]:
    """The study folders under docs/studies/: finished ones (with their report) or, with
    ``finished=False``, those a study longer than a session left to be run on (no report)."""
    folders = (p.parent for p in (ROOT / "docs" / "studies").glob("*/" + STUDY_FILE))
    return sorted(p for p in folders if (p / "report.md").exists() == finished)


def test_every_committed_study_folder_is_one_the_report_can_be_rebuilt_from():
    """The tests below run on each folder they find: they must find them all."""
    folders = sorted(p for p in (ROOT / "docs" / "studies").iterdir() if p.is_dir())
    assert folders and folders == sorted(committed_folders() + committed_folders(False))
    for folder in folders:
        assert (folder / "registration.json").exists()


def working_copy(folder: Path, tmp_path: Path) -> Path:
    """A copy of a committed study folder as a clone has it: no runs or checkpoints."""
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns(*WORKING))
    return copy


def report_only(folder: Path, copy: Path, data_dir: Path) -> subprocess.CompletedProcess[str]:
    """``corebench study COPY/study.toml --out COPY --report-only`` at the folder's scale."""
    scale = json.loads((folder / "registration.json").read_text())["scale"]
    return subprocess.run(
        [*CLI, "study", str(copy / STUDY_FILE), "--scale", scale, "--out", str(copy),
         "--report-only", "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def missing_rows_of(folder: Path, copy: Path, data_dir: Path) -> list[str]:
    """``--report-only`` on a copy of an unfinished folder: it must refuse, write no report, and
    name the rows not run yet (``NAME`` or ``NAME seed S``), which are returned."""
    done = report_only(folder, copy, data_dir)
    assert done.returncode != 0, done.stderr[-2000:]
    assert not (copy / "report.md").exists()
    named = re.search(r"not run yet: (.*) \(run without --report-only\)", done.stderr)
    assert named, done.stderr[-2000:]
    rows = named.group(1).split(", ")
    # missing, not stale: evidence from another version of a row would be named "(stale: ...)"
    assert all(re.fullmatch(r"\S+( seed \d+)?", row) for row in rows), rows
    return rows


@pytest.mark.parametrize("folder", committed_folders(False), ids=lambda p: p.name)
def test_an_unfinished_committed_study_folder_reports_nothing_and_names_its_missing_rows(
    folder, tmp_path, data_dir
):
    """A study committed part-way (to run on in a later session) holds no report, and none can
    be built from it: no comparison is shown before the study is done."""
    copy = working_copy(folder, tmp_path)
    for exported in folder.rglob("*"):  # no machine's folders in its evidence either
        if exported.is_file():
            assert str(ROOT) not in exported.read_text(), exported
    for row in missing_rows_of(folder, copy, data_dir):
        name, _, seed = row.partition(" seed ")
        stem = copy / name / f"seed-{seed}" if seed else copy / name
        assert not stem.with_name(stem.name + ".jsonl").exists(), row


def test_a_folder_missing_one_row_names_exactly_that_row(tmp_path, data_dir):
    """The check above, on a finished folder with one row's evidence and its report removed."""
    folder = ROOT / "docs" / "studies" / "grpo-lora-learned-replication"
    copy = working_copy(folder, tmp_path)
    (copy / "report.md").unlink()
    (copy / "grpo" / "seed-13.results.jsonl").unlink()
    assert missing_rows_of(folder, copy, data_dir) == ["grpo seed 13"]


@pytest.mark.parametrize("folder", committed_folders(), ids=lambda p: p.name)
def test_committed_study_folders_rewrite_their_reports_byte_for_byte(folder, tmp_path, data_dir):
    """`corebench study FOLDER/study.toml --out COPY --report-only` on a copy without runs or
    checkpoints: the same report.md, byte for byte, and no machine path in it."""
    copy = working_copy(folder, tmp_path)
    (copy / "report.md").unlink()
    done = report_only(folder, copy, data_dir)
    assert done.returncode == 0, done.stderr[-2000:]
    rewritten = (copy / "report.md").read_bytes()
    assert rewritten == (folder / "report.md").read_bytes()
    assert str(tmp_path).encode() not in rewritten and str(ROOT).encode() not in rewritten


def test_evalplus_results_are_read_in_the_samples_files_order_and_checked(tmp_path):
    """``rejudge_study.verdicts_of``: a task's j-th result is its j-th line in the samples file
    (two samples per task, interleaved with another task's), and results judged on another data
    file or on other solutions are refused rather than misaligned."""
    verdicts_of = measurement_scripts.load("rejudge_study").verdicts_of
    data = tmp_path / "data.jsonl.gz"
    data.write_bytes(b"the data file")
    lines = [("Mbpp/2", "a"), ("Mbpp/3", "b"), ("Mbpp/2", "c"), ("Mbpp/3", "d")]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps({"task_id": t, "solution": s}) + "\n" for t, s in lines))

    def result(solution: str, base: str, plus: str) -> dict:
        return {"solution": solution, "base_status": base, "plus_status": plus}

    results = {
        "hash": hashlib.md5(b"the data file").hexdigest(),
        "eval": {
            "Mbpp/2": [result("a", "pass", "fail"), result("c", "pass", "pass")],
            "Mbpp/3": [result("b", "pass", "fail"), result("d", "pass", "pass")],
        },
    }
    # file order a, b, c, d; the results' own order (a, c, b, d) would give [F, T, F, T]
    assert verdicts_of(samples, results, data) == [False, False, True, True]
    with pytest.raises(SystemExit, match="another data file"):
        verdicts_of(samples, {**results, "hash": "0" * 32}, data)
    swapped = {**results["eval"], "Mbpp/2": results["eval"]["Mbpp/2"][::-1]}
    with pytest.raises(SystemExit, match=r"samples.jsonl:1: .*another solution"):
        verdicts_of(samples, {**results, "eval": swapped}, data)
