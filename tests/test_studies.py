"""`corebench study`: a declared study checked up front, run to completion, resumed without
repeating anything, re-run where an entry changed, and reported with intervals and tests."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from corebench.harness.errors import CorebenchError
from corebench.harness.registry import default_plugins
from corebench.studies.execute import Layout
from corebench.studies.spec import load_study

CLI = [sys.executable, "-m", "corebench.harness.cli"]
ROOT = Path(__file__).resolve().parents[1]

# two base rows and one from a one-step GRPO checkpoint, on 3 MBPP+ tasks, one sample each
TINY = """
[study]
name = "tiny"
title = "A tiny study"
benchmark = "mbpp"
tasks = ["Mbpp/2", "Mbpp/3", "Mbpp/4"]
n = 1
k = [1]
max_new_tokens = 64
repeats = 1
seeds = [0, 1]  # the trained row: one GRPO run and one evaluation per seed
allow_confounds = ["sampling"]  # at the smoke scale cot writes less than the other rows

[scale.smoke]
n = 2
k = [1, 2]
run.cot = { max_new_tokens = 32 }

[[train]]
name = "grpo"
method = "grpo"
settings = { steps = 1, tasks_limit = 2, num_generations = 2, prompts_per_step = 1, max_completion_length = 16, save_steps = 1, eval_benchmarks = ["mbpp"] }

[[run]]
name = "direct"
system = "direct"

[[run]]
name = "cot"
label = "Chain of thought"
system = "cot"

[[run]]
name = "trained"
system = "direct"
model = "@grpo"

[[gain]]
pair = "cot"
roles = ["direct"]
direct = "direct"
"""


def write(tmp_path: Path, text: str, name: str = "study.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def study(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "study", *args], capture_output=True, text=True, timeout=1800)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ('system = "cot"', 'sytem = "cot"'),
            "\\[\\[run\\]\\] 'cot': unknown key 'sytem'. Did you mean 'system'",
        ),
        (('system = "cot"', 'system = "cott"'), "unknown system 'cott'. Did you mean 'cot'"),
        (
            ('model = "@grpo"', 'model = "@grp"'),
            "\\[\\[run\\]\\] 'trained' model: unknown training step 'grp'. Did you mean 'grpo'",
        ),
        (
            ('model = "@grpo"', 'model = "@grpo:coder"'),
            "\\[\\[run\\]\\] 'trained' model: unknown role of @grpo 'coder'. .*Known: model",
        ),
        (
            ('method = "grpo"', 'method = "ppo"'),
            "\\[\\[train\\]\\] 'grpo' method: unknown training method 'ppo'",
        ),
        (
            ('roles = ["direct"]', 'roles = ["drect"]'),
            "\\[\\[gain\\]\\] 'cot' roles: unknown run 'drect'. Did you mean 'direct'",
        ),
        (
            ("max_new_tokens = 64", "max_new_tokens = 0"),
            "\\[study\\]: key max_new_tokens: input should be greater than or equal to 1",
        ),
        (("k = [1, 2]", 'k = "1,2"'), "\\[scale.smoke\\]: key k: input should be a valid list"),
    ],
)
def test_a_bad_study_file_is_one_line_naming_the_entry_and_key(tmp_path, data_dir, change, message):
    path = write(tmp_path, TINY.replace(*change))
    with pytest.raises(CorebenchError, match=message) as raised:
        load_study(path, "smoke", default_plugins(), data_dir)
    assert len(str(raised.value).splitlines()) == 1


def test_scales_override_the_study_and_unknown_scales_are_refused(tmp_path, data_dir):
    path = write(tmp_path, TINY)
    full, smoke = load_study(path, data_dir=data_dir), load_study(path, "smoke", data_dir=data_dir)
    assert [(r.n, r.k) for r in full.runs] == [(1, [1])] * 3
    assert [(r.n, r.k) for r in smoke.runs] == [(2, [1, 2])] * 3
    assert full.run_key(full.runs[0]) != smoke.run_key(smoke.runs[0])  # other samples
    assert [r.max_new_tokens for r in smoke.runs] == [64, 32, 64]  # one run's own override
    with pytest.raises(CorebenchError, match=r"\[scale.smoke\] run: unknown run 'cto'"):
        bad = write(tmp_path, TINY.replace("run.cot", "run.cto"), "bad.toml")
        load_study(bad, "smoke", data_dir=data_dir)
    with pytest.raises(CorebenchError, match="unknown scale .* 'smok'. Did you mean 'smoke'"):
        load_study(path, "smok", data_dir=data_dir)


@pytest.mark.model
def test_a_study_runs_resumes_and_reports(tmp_path, data_dir):
    path, out = write(tmp_path, TINY), tmp_path / "out"
    args = [str(path), "--out", str(out), "--data-dir", str(data_dir)]
    first = study(*args)
    assert first.returncode == 0, first.stderr
    assert "train grpo seed 0 (grpo)" in first.stderr and "train grpo seed 1 (grpo)" in first.stderr
    layout, spec = Layout(out), load_study(path)
    seeded = {seed: spec.for_seed(seed) for seed in (0, 1)}
    run_dirs = {(r.name, s): layout.run_dir(seeded[s], r) for s in (0, 1) for r in seeded[s].runs}
    assert len(set(run_dirs.values())) == 4  # direct and cot once, the trained row per seed
    configs = {}
    for key, run_dir in run_dirs.items():
        with sqlite3.connect(run_dir / "results.sqlite") as db:
            assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 3
            configs[key] = json.loads(db.execute("SELECT config FROM run").fetchone()[0])
            metadata = json.loads(db.execute("SELECT metadata FROM run").fetchone()[0])
        assert metadata["all_tests"] is True  # test pass rates count every test
    trained = {seed: configs["trained", seed] for seed in (0, 1)}
    assert [trained[s]["seed"] for s in (0, 1)] == [0, 1]  # sampling seed = training seed
    assert trained[0]["model"] != trained[1]["model"]  # each seed's own checkpoint
    assert all("checkpoints/grpo-" in trained[s]["model"] for s in (0, 1))
    # each finished step's resume states (one per trainer at save_steps = 1) are deleted
    assert not list((out / "checkpoints").rglob("checkpoint-*"))
    assert len(list((out / "checkpoints").glob("grpo-*/model/model.safetensors"))) == 2
    # the evidence: samples, results, settings per row (and seed), training logs, registration
    for stem in ("direct", "cot", "trained/seed-0", "trained/seed-1"):
        for suffix in (".jsonl", ".results.jsonl", ".run.json"):
            assert (out / f"{stem}{suffix}").exists(), stem + suffix
    samples = [json.loads(x) for x in (out / "trained/seed-1.jsonl").read_text().splitlines()]
    assert [set(x) for x in samples] == [{"task_id", "solution"}] * 3  # EvalPlus samples
    results = [json.loads(x) for x in (out / "direct.results.jsonl").read_text().splitlines()]
    assert all(len(r["tests"]) > 3 and set(r["tests"]) <= set("PWETMSVN.") for r in results)
    assert (out / "training/grpo/seed-0.json").exists() and (out / "study.toml").exists()
    registration = json.loads((out / "registration.json").read_text())
    assert registration["commit"] is None  # tmp_path is no repository: not pre-registered
    for exported in out.rglob("*"):
        if (
            exported.is_file()
            and not exported.is_relative_to(out / "runs")
            and not (exported.is_relative_to(out / "checkpoints"))
        ):
            assert str(tmp_path) not in exported.read_text(), exported
    report = (out / "report.md").read_text()
    assert "| Chain of thought | – | cot |" in report and "pass@1 95% CI" in report
    assert "| trained | 0 | direct |" in report and "| trained | 1 | direct |" in report
    assert "| direct − Chain of thought | pass@1 (primary) | 3 |" in report
    assert "crossed random effects (2 seeds × 3 tasks)" in report
    assert "Pre-registered: **no** (the study file was not committed" in report
    assert "Collaboration Gain" in report and "| Chain of thought | direct |" in report
    assert "<table>" in (out / "report.html").read_text()

    # again: everything is done, nothing is trained or generated twice
    again = study(*args)
    assert again.returncode == 0, again.stderr
    assert "train grpo seed 0: done" in again.stderr and "train grpo seed 1: done" in again.stderr
    assert again.stderr.count("0 new samples, 3 already done") == 4

    # the folder without its runs and checkpoints rewrites the same report from its evidence
    copy = tmp_path / "copy"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("runs", "checkpoints"))
    (copy / "report.md").unlink()
    only = study(str(copy / "study.toml"), "--out", str(copy), "--report-only")
    assert only.returncode == 0, only.stderr
    assert (copy / "report.md").read_bytes() == (out / "report.md").read_bytes()

    # carried to another machine by its evidence alone (a study longer than a session): a seed
    # whose rows were all exported is not trained or run again; one missing a row is, and the
    # earlier record of its training stays beside the new one
    carried = tmp_path / "carried"
    shutil.copytree(out, carried, ignore=shutil.ignore_patterns("runs", "checkpoints"))
    for suffix in (".jsonl", ".results.jsonl", ".run.json"):
        (carried / f"trained/seed-1{suffix}").unlink()
    resumed = study(str(path), "--out", str(carried), "--data-dir", str(data_dir))
    assert resumed.returncode == 0, resumed.stderr
    assert f"seed 0: every row's evidence is in {carried}, from an earlier start" in resumed.stderr
    assert "seed 0 (grpo)" not in resumed.stderr and "run direct" not in resumed.stderr
    assert "train grpo seed 1 (grpo)" in resumed.stderr
    assert "run trained seed 1: 3 new samples" in resumed.stderr
    assert len(list((carried / "runs").iterdir())) == 1  # seed 1's trained row alone
    assert (carried / "direct.jsonl").read_bytes() == (out / "direct.jsonl").read_bytes()
    assert (carried / "training/grpo/seed-0.json").read_bytes() == (
        out / "training/grpo/seed-0.json"
    ).read_bytes()
    # seed 1's earlier training made no row that stands: its record is replaced, not kept
    assert sorted(p.name for p in (carried / "training/grpo").iterdir()) == [
        "seed-0.json",
        "seed-1.json",
    ]
    assert (carried / "training/grpo/seed-1.json").read_bytes() != (
        out / "training/grpo/seed-1.json"
    ).read_bytes()
    report = (carried / "report.md").read_text()
    assert "| grpo | 0 | grpo |" in report and "| grpo | 1 | grpo |" in report
    assert "earlier start" not in report

    (copy / "trained/seed-1.results.jsonl").unlink()
    missing = study(str(copy / "study.toml"), "--out", str(copy), "--report-only")
    assert missing.returncode != 0 and "not run yet: trained seed 1" in missing.stderr
    # evidence from another version of a row is refused, not reported under the new file
    direct = next(r for r in seeded[0].runs if r.name == "direct")
    assert json.loads((out / "direct.run.json").read_text())["run_key"] == seeded[0].run_key(direct)
    (copy / "study.toml").write_text(
        TINY.replace(
            'label = "Chain of thought"', 'label = "Chain of thought"\nmax_new_tokens = 48'
        )
    )
    stale = study(str(copy / "study.toml"), "--out", str(copy), "--report-only")
    assert stale.returncode != 0 and "cot (stale: the row changed since)" in stale.stderr

    # a changed entry runs again in its own folder; the others stay as they are
    changed = write(
        tmp_path, TINY.replace('label = "Chain of thought"', 'label = "CoT"\ntemperature = 0.5')
    )
    third = study(str(changed), "--out", str(out), "--data-dir", str(data_dir))
    assert third.returncode == 0, third.stderr
    # sampled now, cot runs once per seed; the other rows are done
    assert "run cot seed 0: 3 new samples" in third.stderr
    assert "run cot seed 1: 3 new samples" in third.stderr
    assert third.stderr.count("3 already done") == 3
    assert len(list((out / "runs").iterdir())) == 6


def test_a_carried_study_refuses_to_retrain_a_start_that_a_kept_row_ran_once_from(
    tmp_path, monkeypatch
):
    """Carried over sessions, a study trains its once-for-all-seeds steps again for the seeds
    still to run. A row run once from such a step (greedy, run under the first seed) stays as the
    earlier start made it: pairing the new seeds with it would pair two trainings of the start,
    so that is refused before anything trains; a row sampled per seed is run again with them."""
    from corebench.studies import evidence, execute

    text = """
    [study]
    name = "carry"
    benchmark = "mbpp"
    tasks = ["Mbpp/2"]
    seeds = [0, 1]
    temperature = TEMPERATURE

    [[train]]
    name = "sft"
    method = "sft"
    seeded = false
    settings = { sft_roles = ["model"] }

    [[train]]
    name = "grpo"
    method = "grpo"
    settings = { model = "@sft" }

    [[run]]
    name = "start"
    system = "direct"
    model = "@sft"

    [[run]]
    name = "trained"
    system = "direct"
    model = "@grpo"
    """

    def carried(temperature: str) -> tuple:
        """The study, and a folder holding what an earlier start exported for seed 0 (its rows
        and the rows run once), without working folders."""
        spec = load_study(write(tmp_path, text.replace("TEMPERATURE", temperature), "s.toml"))
        root, first = tmp_path / f"out-{temperature}", spec.for_seed(0)
        for run in first.runs:
            stem = evidence.row_stem(root, run.name, 0 if spec.seeded(run) else None)
            stem.parent.mkdir(parents=True, exist_ok=True)
            sample = {"task_id": "Mbpp/2", "solution": ""}
            stem.with_name(stem.name + ".jsonl").write_text(json.dumps(sample) + "\n")
            stem.with_name(stem.name + ".results.jsonl").write_text("{}\n")
            run_json = {"run_key": first.run_key(run)}
            stem.with_name(stem.name + ".run.json").write_text(json.dumps(run_json))
        return spec, Layout(root)

    def no_training(settings):
        raise AssertionError(f"trained {settings.out}")

    monkeypatch.setattr(execute, "train_in_child", no_training)
    said: list[str] = []
    spec, layout = carried("0.0")
    trained = next(r for r in spec.runs if r.name == "trained")
    assert spec.steps_behind(trained) == {"grpo", "sft"}  # through the step grpo starts from
    assert execute.carried_seeds(spec, layout) == {0}
    with pytest.raises(CorebenchError, match=r"step 'sft' was .* rows run once from it \(start\)"):
        execute.run_study(spec, layout, say=said.append)
    assert said == []  # refused before anything ran
    spec, layout = carried("0.6")  # every row sampled per seed: seed 1 trains its own start
    assert execute.carried_seeds(spec, layout) == {0}
    with pytest.raises(AssertionError, match="trained .*checkpoints/sft-"):
        execute.run_study(spec, layout, say=said.append)
    assert said[0] == f"seed 0: every row's evidence is in {layout.root}, from an earlier start"
    assert said[1].startswith("train sft (sft) -> ")


def sleeper(marker: Path) -> str:
    """Python that marks that it has started, then sleeps for two minutes."""
    return f"import pathlib, time; pathlib.Path({str(marker)!r}).touch(); time.sleep(120)"


def assert_killing_the_parent_ends_the_child(script: str, marker: Path, kind: str = "") -> None:
    """Run ``script`` in a process whose one child (``kind`` in its command line) runs
    ``sleeper(marker)``; once the marker is there, SIGKILL the process: the child must be gone
    within 20 s."""
    parent = subprocess.Popen([sys.executable, "-c", script])
    children: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), "the child never reached its target"
        kids = psutil.Process(parent.pid).children()
        children = [c for c in kids if kind in " ".join(c.cmdline())]
        assert len(children) == 1 and children[0].is_running()
        parent.kill()
        parent.wait()
        _, alive = psutil.wait_procs(children, timeout=20)
        assert not alive, f"the child outlived its parent: {alive}"
    finally:
        parent.kill()
        for child in children:
            if child.is_running():
                child.kill()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_step_s_process_ends_when_the_study_s_process_is_killed(tmp_path):
    """A training step runs in a spawned child (``execute.in_child``); ``kill STUDY_PID`` once
    left that child training on, an orphan at full CPU, for 11 minutes. Here the child's target
    marks that it has started, then sleeps; once it runs, the study's process is killed with
    SIGKILL, and the child must be gone."""
    marker = tmp_path / "started"
    script = (
        f"from corebench.studies.execute import in_child\nin_child(exec, {sleeper(marker)!r})\n"
    )
    assert_killing_the_parent_ends_the_child(script, marker, kind="spawn_main")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_command_started_with_end_with_parent_ends_when_its_parent_is_killed(tmp_path):
    """``measurements/tune_validation.py`` runs each training as a ``corebench train`` command;
    killing the script once left that command training on. Started with ``preexec_fn`` a
    ``partial(end_with_parent, PID)``, the command (another interpreter, after ``exec``) marks
    that it runs and sleeps; its parent is killed with SIGKILL, and the command must be gone."""
    marker = tmp_path / "started"
    script = (
        "import functools, os, subprocess, sys\n"
        "from corebench.studies.execute import end_with_parent\n"
        "tied = functools.partial(end_with_parent, os.getpid())\n"
        f"subprocess.run([sys.executable, '-c', {sleeper(marker)!r}], preexec_fn=tied)\n"
    )
    assert_killing_the_parent_ends_the_child(script, marker)


def test_shipped_studies_are_valid_at_both_scales(data_dir):
    files = sorted((ROOT / "studies").glob("*.toml"))
    assert len(files) >= 8 and ROOT / "studies" / "grpo-from-sft-float32.toml" in files
    for path in files:
        for scale in ("full", "smoke"):
            spec = load_study(path, scale, default_plugins(), data_dir)
            assert spec.runs and spec.header.k


@pytest.mark.model
def test_the_training_effect_study_runs_at_its_smoke_scale(tmp_path, data_dir):
    """The hours-long study's steps at seconds scale: the SFT cold starts (the direct one and
    CoRe-Code's planner's), then GRPO, MAGRPO and CoRe-Code from them for its one seed, seven
    rows on three MBPP+ tasks, the planned comparisons Holm-corrected, and what training
    logged, validation included. Pooling over seeds is test_a_study_runs_resumes_and_reports's;
    that a cold start's key is the same for every seed is tests/test_study_spec.py's, but no
    test now trains one cold start for two seeds end to end."""
    path, out = ROOT / "studies" / "training-effect.toml", tmp_path / "out"
    done = study(str(path), "--scale", "smoke", "--out", str(out), "--data-dir", str(data_dir))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("train sft (sft)") == 1  # the cold start, unseeded
    assert done.stderr.count("train sft-planner (sft)") == 1  # CoRe-Code's planner's
    for step in ("grpo", "magrpo", "corecode"):
        assert done.stderr.count(f"train {step} seed 0 ({step})") == 1
    spec = load_study(path, "smoke", default_plugins(), data_dir)
    assert spec.header.seeds == [0]
    layout = Layout(out)
    for seed in spec.header.seeds:
        seeded = spec.for_seed(seed)
        for run in seeded.runs:
            with sqlite3.connect(layout.run_dir(seeded, run) / "results.sqlite") as db:
                assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 3
    grpo = json.loads((out / "training" / "grpo" / "seed-0.json").read_text())["model"]
    manifest = grpo["manifest"]
    assert manifest["base_model"].startswith("hf:checkpoints/sft-")  # from the SFT checkpoint
    assert manifest["settings"]["seed"] == 0 and manifest["settings"]["max_completion_length"] == 24
    diagnostics = manifest["diagnostics"]
    assert diagnostics["groups"] == 1 and len(diagnostics["validation_curve"]) == 2  # steps 0, 1
    assert diagnostics["timing"]["steps"] == 1 and grpo["logs"]["validation"]
    assert len(manifest["data"]["validation_tasks"]) == 2
    report = (out / "report.md").read_text()
    for compared in ("SFT then GRPO (direct) − SFT (direct)",
                     "MAGRPO pair (from SFT) − SFT checkpoint as a helper/main pair",
                     "CoRe-Code planner and coder (from SFT) − SFT checkpoints as CoRe-Code's "
                     "planner and coder"):  # fmt: skip
        # one seed, one greedy sample per task: exact McNemar in pass@1, sign-flip in the rate
        primary = next(x for x in report.splitlines() if f"| {compared} | pass@1 (" in x)
        assert primary.startswith(f"| {compared} | pass@1 (primary) | 3 |"), primary
        assert "| exact McNemar |" in primary, primary
        secondary = f"| {compared} | test_pass_rate (secondary) | 3 |"
        assert "| sign-flip permutation (exact) |" in report.split(secondary)[1].split("\n")[0]
    assert "| SFT (direct) − Base model (direct) | pass@1 (primary) | 3 |" in report
    assert "## Training" in report and "| sft | – | sft | model | 1 |" in report
    assert "| magrpo | 0 | magrpo | main | 1 |" in report
    assert "| corecode | 0 | corecode | planner |" in report
    assert "| sft-planner | – | sft | planner | 1 |" in report
    corecode = json.loads((out / "training" / "corecode" / "seed-0.json").read_text())
    magrpo = json.loads((out / "training" / "magrpo" / "seed-0.json").read_text())
    # MAGRPO's validation (the pair's) and each CoRe-Code phase's, before the step and after it
    curves = [magrpo["main"]["manifest"]["diagnostics"]] + [
        p["diagnostics"] for p in corecode["coder"]["manifest"]["phases"]
    ]
    assert len(curves) == 3, curves
    for found in curves:
        assert [p["step"] for p in found["validation_curve"]] == [0, 1], found
    bases = {role: corecode[role]["manifest"]["base_model"] for role in ("planner", "coder")}
    assert bases["planner"].startswith("hf:checkpoints/sft-planner-"), bases  # its own cold start
    assert bases["coder"].startswith("hf:checkpoints/sft-") and "planner" not in bases["coder"]
    assert "Pre-registered: **no** (scale smoke" in report


KILLED = """
[study]
name = "killed"
benchmark = "mbpp"
tasks = ["Mbpp/2", "Mbpp/3", "Mbpp/4", "Mbpp/6", "Mbpp/7"]
n = 3
temperature = 0.7
max_new_tokens = 48
repeats = 0

[[run]]
name = "direct"
system = "direct"

[[run]]
name = "cot"
system = "cot"
"""


@pytest.mark.model
def test_a_study_killed_mid_run_loses_and_repeats_nothing(tmp_path, data_dir):
    import os
    import signal
    import time

    path, out = write(tmp_path, KILLED), tmp_path / "out"
    spec = load_study(path)
    first_run = Layout(out).run_dir(spec, spec.runs[0])
    proc = subprocess.Popen(
        [*CLI, "study", str(path), "--out", str(out), "--data-dir", str(data_dir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip

    def finished() -> dict[tuple[str, int], str]:
        try:
            with sqlite3.connect(first_run / "results.sqlite") as db:
                rows = db.execute(
                    "SELECT r.task_id, r.sample_index, s.solution FROM results r "
                    "JOIN solutions s USING (task_id, sample_index)"
                ).fetchall()
        except sqlite3.OperationalError:  # not created yet
            return {}
        return {(t, i): solution for t, i, solution in rows}

    deadline = time.monotonic() + 600
    while not finished() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = finished()
    assert 0 < len(before) < 15, "killed after some samples of the first run, before its end"
    # a report from the folder now names the row as unfinished instead of reporting part of it
    partial = study(str(path), "--out", str(out), "--report-only", "--data-dir", str(data_dir))
    assert partial.returncode != 0 and "not run yet: direct (unfinished), cot" in partial.stderr

    again = study(str(path), "--out", str(out), "--data-dir", str(data_dir))
    assert again.returncode == 0, again.stderr
    assert f"run direct: {15 - len(before)} new samples, {len(before)} already done" in again.stderr
    after = finished()
    assert len(after) == 15 and all(after[key] == before[key] for key in before)


def test_tuning_s_sampled_evaluation_refuses_a_start_it_cannot_load_in_float32_before_training(
    tmp_path,
):
    """``tune_validation.py --sampled`` evaluates ``hf:`` checkpoints in float32: a start it
    cannot evaluate so is refused before any run trains, not after hours of training."""
    script = ROOT / "measurements" / "tune_validation.py"
    base = ROOT / "studies" / "tuning" / "grpo.toml"
    for start, named in ((["--model", "embedded"], "'embedded'"), ([], "no --model")):
        result = subprocess.run(
            [sys.executable, str(script), "grpo", "--base", str(base), "--out", str(tmp_path),
             *start, "--try", "steps=1", "--sampled", "2"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode != 0
        assert "evaluates hf: checkpoints in float32, not" in result.stderr
        assert named in result.stderr
        assert not list(tmp_path.iterdir())  # nothing trained


def load_tune_validation():  # a script, not a module of the package
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "tune_validation", ROOT / "measurements" / "tune_validation.py"
    )
    tune = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tune)
    return tune


def test_tuning_s_sampled_evaluation_asks_for_float32_whatever_the_spec_says():
    tune = load_tune_validation()
    assert tune.in_float32("hf:ckpt/model") == "hf:ckpt/model?dtype=float32"
    assert tune.in_float32("hf:m?dtype=bfloat16&max_batch=4") == "hf:m?max_batch=4&dtype=float32"
    pair = "main=hf:b?dtype=bfloat16,helper=hf:a"  # a pair: every role's checkpoint
    assert tune.in_float32(pair) == "helper=hf:a?dtype=float32,main=hf:b?dtype=float32"
    for spec in ("helper=hf:a,main=embedded", "embedded", "(no --model)", ""):
        with pytest.raises(SystemExit, match=f"in float32, not {re.escape(repr(spec))}"):
            tune.in_float32(spec)


def test_tuning_refuses_a_start_given_by_role_or_malformed_before_training(tmp_path):
    """One line of error, no traceback, and nothing trained."""
    script = ROOT / "measurements" / "tune_validation.py"
    for model, said in (
        ("helper=hf:a,main=hf:b", "--model is one checkpoint, every role's start, not "
         "'helper=hf:a,main=hf:b'"),
        ("x=", "--model: bad model spec 'x='"),
    ):  # fmt: skip
        result = subprocess.run(
            [sys.executable, str(script), "magrpo", "--base", str(ROOT / "studies" / "tuning" /
             "magrpo.toml"), "--out", str(tmp_path), "--model", model, "--try", "steps=1"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode != 0
        assert said in result.stderr and "Traceback" not in result.stderr, result.stderr
        assert not list(tmp_path.iterdir())  # nothing trained


def test_tuning_starts_corecode_s_roles_from_one_checkpoint_or_each_from_its_own():
    """CoRe-Code's studies start the planner from its own SFT on plans and the coder from the
    direct SFT: ``--model planner=...,coder=...`` trains from those (its settings
    ``planner_model`` and ``coder_model``); one checkpoint starts every role, as for the other
    methods; a per-role start that leaves a role out, or names a role of another method, is
    refused before training."""
    tune = load_tune_validation()
    assert tune.start_settings("grpo", "hf:a") == tune.start_settings("grpo", "*=hf:a")
    assert tune.start_settings("grpo", "hf:a") == {"model": "hf:a"}
    assert tune.start_settings("magrpo", None) == {}
    assert tune.start_settings("corecode", "hf:a?dtype=float32") == {
        "planner_model": "hf:a?dtype=float32", "coder_model": "hf:a?dtype=float32"
    }  # fmt: skip
    assert tune.start_settings("corecode", "planner=hf:plans/model,coder=hf:sft/model") == {
        "coder_model": "hf:sft/model", "planner_model": "hf:plans/model"
    }  # fmt: skip
    for method, spec, said in (
        ("corecode", "planner=hf:a", "one per role (planner, coder), not 'planner=hf:a'"),
        ("corecode", "planner=hf:a,coder=hf:b,x=hf:c", "one per role (planner, coder)"),
        ("grpo", "planner=hf:a,coder=hf:b", "every role's start, not 'planner=hf:a,coder=hf:b'"),
    ):
        with pytest.raises(SystemExit, match=re.escape(said)):
            tune.start_settings(method, spec)


def test_a_pair_s_tuning_run_is_finished_only_when_both_roles_saved_their_checkpoints(tmp_path):
    """A MAGRPO run killed between its helper's and its main agent's manifests is trained
    again (training resumes), not evaluated with a role missing."""
    tune = load_tune_validation()
    (tmp_path / "helper").mkdir()
    (tmp_path / "helper" / "corebench_manifest.json").write_text("{}")
    assert not tune.finished(tmp_path, "magrpo")
    (tmp_path / "main").mkdir()
    (tmp_path / "main" / "corebench_manifest.json").write_text("{}")
    assert tune.finished(tmp_path, "magrpo") and not tune.finished(tmp_path, "grpo")


def test_tuning_does_not_reuse_a_run_trained_from_another_start(tmp_path):
    """A run's folder is named by its overrides: the same overrides from another ``--model``
    find a finished run trained from the old start, which is refused, not reused; from the
    same start it is reused. The manifest is the one training writes."""
    from types import SimpleNamespace

    from corebench.training.manifest import write_manifest
    from corebench.training.settings import TrainSettings

    tune = load_tune_validation()
    data = SimpleNamespace(source="mbpp:train", tasks=[], overlaps=[], validation=[], filtered={})
    for role, start in (("coder", "hf:sft"), ("planner", "hf:plans")):
        (tmp_path / role).mkdir()
        settings = TrainSettings(method="corecode", planner_model="hf:plans", coder_model="hf:sft")
        write_manifest(tmp_path / role, settings=settings, role=role, base_model=start,
                       data=data, steps=1, reward_curve=[])  # fmt: skip
    tune.check_start(tmp_path, tune.start_settings("corecode", "planner=hf:plans,coder=hf:sft"))
    for other, said in (
        ("hf:sft", "trained from planner_model='hf:plans', not 'hf:sft'"),
        ("planner=hf:plans2,coder=hf:sft", "not 'hf:plans2'"),
    ):
        with pytest.raises(SystemExit, match=re.escape(said)):
            tune.check_start(tmp_path, tune.start_settings("corecode", other))


def test_tuning_refuses_to_resume_a_run_begun_from_another_start_before_any_training(tmp_path):
    """A killed run's folder holds the start it was begun from (``START_RECORD``, written
    before training): the same ``--try`` from another ``--model`` is refused by the script,
    before any training, and its folder left as it was."""
    tune = load_tune_validation()
    folder = tune.run_folder(tmp_path, ["steps=1"])
    folder.mkdir()
    (folder / tune.START_RECORD).write_text(json.dumps({"model": "hf:a"}))
    tune.check_start(folder, {"model": "hf:a"})  # the same start resumes
    result = subprocess.run(
        [sys.executable, str(ROOT / "measurements" / "tune_validation.py"), "grpo", "--base",
         str(ROOT / "studies" / "tuning" / "grpo.toml"), "--out", str(tmp_path), "--model",
         "hf:b", "--try", "steps=1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert "was trained from model='hf:a', not 'hf:b'" in result.stderr
    assert [p.name for p in folder.iterdir()] == [tune.START_RECORD]  # nothing trained


def test_tuning_refuses_to_compare_runs_evaluated_by_different_systems_against_one_start(
    tmp_path,
):
    import argparse

    tune = load_tune_validation()
    data = {"validation_tasks": ["t1"]}
    args = argparse.Namespace(sampled=1, max_new_tokens=8, out=tmp_path, model="hf:x")
    for evaluations in (
        [("helper-main", {"turns": 1}), ("helper-main", {"turns": 2})],
        [("direct", {}), ("helper-main", {})],
    ):
        rows = [
            {"manifest": {"data": data, "evaluate_with": system, "system_options": options}}
            for system, options in evaluations
        ]
        with pytest.raises(SystemExit, match="evaluated by different systems or options"):
            tune.sampled(rows, args)
    assert not list(tmp_path.iterdir())  # nothing sampled


def test_tuning_evaluates_a_run_s_every_checkpoint_by_role(tmp_path):
    """A finished run's model spec names each checkpoint it saved (a folder with a manifest)
    by its role; the run's evaluation folders, without one, are not checkpoints."""
    tune = load_tune_validation()
    for role in ("main", "helper", "sampled-n4"):
        (tmp_path / "pair" / role).mkdir(parents=True)
        if role != "sampled-n4":
            (tmp_path / "pair" / role / "corebench_manifest.json").write_text("{}")
    (tmp_path / "one" / "model").mkdir(parents=True)
    (tmp_path / "one" / "model" / "corebench_manifest.json").write_text("{}")
    pair = tmp_path / "pair"
    assert tune.trained_spec(pair) == f"helper=hf:{pair / 'helper'},main=hf:{pair / 'main'}"
    assert tune.trained_spec(tmp_path / "one") == f"hf:{tmp_path / 'one' / 'model'}"
    assert tune.checkpoint_of(pair) == pair / "helper" and tune.checkpoint_of(tmp_path) is None


def test_a_tuning_table_row_gives_pass_at_1_the_paired_difference_and_tasks_better_and_worse():
    """Shares of 4 samples on three tasks: the start passes 0, 2/4, 4/4 (50.0 %), the run 2/4,
    2/4, 3/4 (58.3 %): +8.3 points, one task better, one worse; the interval and p are those of
    ``stats.paired`` on the same per-task shares, run minus start."""
    from corebench.leaderboards.stats import paired

    tune = load_tune_validation()
    start, run = {"a": 0.0, "b": 0.5, "c": 1.0}, {"a": 0.5, "b": 0.5, "c": 0.75}
    cells = tune.difference_row("x=1", run, start, 4, with_start=True).strip("| ").split(" | ")
    expected = paired([0.5, 0.5, 0.75], [0.0, 0.5, 1.0], binary=False)
    assert cells[:5] == ["`x=1`", "3", "50.0", "58.3", f"+8.3 [{100 * expected.low:+.1f}, "
                         f"{100 * expected.high:+.1f}]"]  # fmt: skip
    assert cells[5:] == ["1 / 1", expected.test, f"{expected.p:.3f}"]
    assert tune.difference_row("x=1", run, start, 4).count(" | ") == 5  # without the start's


def test_tuning_pools_runs_that_differ_only_in_their_seeds_per_task_against_one_start(capsys):
    """Two seeds of one setting (overrides in another order, seed 0 from the base file, each
    in its own folder, one manifest older and lacking a setting) pool into one row: per task
    the mean of their shares, tested as the studies pool seeds (``stats.crossed``), one sample
    each (where a single run's row would be McNemar's). A seed given twice counts once; a run
    at another rate, with another value of a setting, or on another start, pools with no one,
    nor do two runs alike only to a third."""
    import numpy as np

    from corebench.leaderboards.stats import crossed

    tune = load_tune_validation()
    start, other_start = {"a": 0.0, "b": 1.0, "c": 1.0}, {"a": 1.0, "b": 1.0, "c": 1.0}
    first, second = {"a": 1.0, "b": 1.0, "c": 0.0}, {"a": 1.0, "b": 1.0, "c": 1.0}
    lr1 = {"lr": 1, "steps": 4}
    runs = [  # an older manifest lacks "filter"; each run has its own folder, "out"
        ("lr=1 steps=4", {**lr1, "seed": 0, "out": "a"}, first, start),
        ("steps=4 seed=1 lr=1", {**lr1, "seed": 1, "out": "b", "filter": "x"}, second, start),
        ("lr=1 steps=4 seed=1", {**lr1, "seed": 1}, first, start),  # seed 1 again: not counted
        ("lr=2 seed=1 steps=4", {"lr": 2, "steps": 4, "seed": 1}, first, start),
        ("lr=1 steps=4 seed=2", {**lr1, "seed": 2}, first, other_start),
    ]
    assert tune.pooled_runs(runs) == [("lr=1 steps=4", [first, second], start)]
    tune.print_pooled(runs, 1, with_start=True)
    [row] = capsys.readouterr().out.splitlines()
    cells = row.strip("| ").split(" | ")
    expected = crossed(np.array([[1.0, 0.0, -1.0], [1.0, 0.0, 0.0]]))
    assert cells[:4] == ["`lr=1 steps=4, 2 seeds pooled`", "3", "66.7", "83.3"]
    assert cells[4] == f"{100 * expected.difference:+.1f} [{100 * expected.low:+.1f}, " \
                       f"{100 * expected.high:+.1f}]"  # fmt: skip
    assert cells[5:] == ["1 / 1", expected.test, f"{expected.p:.3f}"]
    assert tune.pooled_runs(runs[2:]) == []  # one seed a setting and start: nothing pooled
    other_filter = ("lr=1 seed=3 steps=4", {**lr1, "seed": 3, "filter": "y"}, first, start)
    assert tune.pooled_runs([runs[1], other_filter]) == []
    # the older run alike to both, these two not to each other: each pools with it alone
    [(_, pooled, _)] = tune.pooled_runs([runs[0], runs[1], other_filter])
    assert pooled == [first, second]


@pytest.mark.model
@pytest.mark.parametrize("method", ["grpo", "magrpo", "corecode"])
def test_tuning_s_evaluation_on_training_tasks_samples_the_tasks_the_run_trained_on(
    method, tmp_path, data_dir
):
    """``tune_validation.py --sampled 1 --on-training-tasks``: one step from the embedded model
    on three training tasks (no filter), two held out; the start and the run are each sampled on
    the two validation tasks and, separately, on exactly the three tasks the run's manifest
    names, each folder with its own model (MAGRPO's: the trained helper and main, by role, in
    the `helper-main` system the start plays both roles of; CoRe-Code's: planner and coder, each
    started from its own checkpoint, the start pair evaluated as given), and both tables are
    printed."""
    from corebench.harness.modelspec import parse_model_spec
    from corebench.harness.store import Store
    from corebench.training.models import local_checkpoint

    tune = load_tune_validation()
    start = f"hf:{local_checkpoint('embedded')}"
    if method == "corecode":  # the planner from a checkpoint of its own (here: another path)
        (tmp_path / "planner-start").symlink_to(local_checkpoint("embedded"))
        start = f"planner=hf:{tmp_path / 'planner-start'},coder={start}"
    # float32 (the bases train in bfloat16, which a CPU without it emulates several times slower)
    tried = ("steps=1 num_generations=2 prompts_per_step=3 filter_samples=0 validation_tasks=2 "
             "tasks_limit=3 max_completion_length=16 validation_every=1 save_steps=1 "
             "bf16=false")  # fmt: skip
    result = subprocess.run(
        [sys.executable, str(ROOT / "measurements" / "tune_validation.py"), method,
         "--base", str(ROOT / "studies" / "tuning" / f"{method}.toml"), "--out", str(tmp_path),
         "--model", start, "--try", tried, "--sampled", "1", "--on-training-tasks",
         "--max-new-tokens", "16"],
        capture_output=True, text=True, timeout=1200,
        env={**os.environ, "COREBENCH_DATA_DIR": str(data_dir), "WANDB_MODE": "disabled",
             "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = tmp_path.glob("try-*")
    checkpoint = tune.checkpoint_of(run)
    manifest = json.loads((checkpoint / "corebench_manifest.json").read_text())
    data = manifest["data"]
    trained, held_out = data["training_tasks"], data["validation_tasks"]
    assert len(trained) == 3 and len(held_out) == 2 and not set(trained) & set(held_out)
    if method == "corecode":  # each role trained from the start given for it
        for role, began in parse_model_spec(start).items():
            saved = json.loads((run / role / "corebench_manifest.json").read_text())
            assert saved["base_model"] == str(began), role
    (training_start,) = tmp_path.glob("training-start-*-n1")
    evaluation = {"grpo": ["direct", {}], "magrpo": ["helper-main", {"turns": 1}],
                  "corecode": ["corecode", {}]}[method]  # fmt: skip
    assert tune.evaluation_of(manifest) == evaluation
    validation_start = tmp_path / f"sampled-start-{tune.key_of(evaluation)}-n1"  # per system
    started, ran = tune.in_float32(start), tune.in_float32(tune.trained_spec(run))
    roles = {"grpo": ["model"], "magrpo": ["helper", "main"], "corecode": ["coder", "planner"]}[
        method
    ]
    assert ran == ",".join(f"{r}=hf:{run / r}?dtype=float32" for r in roles).removeprefix("model=")
    for folder, tasks, model in (
        (training_start, trained, started),
        (run / "training-n1", trained, ran),
        (validation_start, held_out, started),
        (run / "sampled-n1", held_out, ran),
    ):
        store = Store(folder, create=False)
        try:
            found = sorted(s.task_id for s, _ in store.samples(tests=False))
            config = store.config()
            assert found == sorted(tasks) and config.model == model, folder
            assert config.system == evaluation[0]
        finally:
            store.close()
    validation, training = result.stdout.split("each run drew its training prompts from")
    assert "on the 2 validation tasks" in validation and f"| `{tried}` | 3 | " in training


def test_tuning_s_table_gives_corecode_a_row_per_phase_never_one_phase_against_another():
    """A planner phase's validation reward (plan quality and speed terms in it) and a coder
    phase's are different rewards: each phase's row runs from its own first validation to its
    own last. A one-phase method has one row, from its manifest's diagnostics."""
    tune = load_tune_validation()

    def diagnostics(curve, first, last, tau, step_s):
        return {"validation_curve": [{"step": i * 10, "reward": r} for i, r in enumerate(curve)],
                "reward_first_quarter": first, "reward_last_quarter": last, "trend_tau": tau,
                "timing": {"total_s": step_s}}  # fmt: skip

    planner = diagnostics([0.333, 0.419, 0.439], 1.09, 0.80, -0.39, 95.0)
    coder = diagnostics([0.244, 0.250, 0.256], 0.48, 0.03, -0.44, 76.4)
    corecode = {
        "steps": 20,
        "diagnostics": coder,
        "phases": [
            {"round": 1, "role": "planner", "steps": 20, "diagnostics": planner},
            {"round": 1, "role": "coder", "steps": 20, "diagnostics": coder},
        ],
    }
    assert tune.training_lines("lr=1e-4", corecode) == [
        "| `lr=1e-4` planner phase 1 | 20 | 0.333 → 0.439 (+0.106) | 1.090 → 0.800 | -0.39 | 95.0 |",
        "| `lr=1e-4` coder phase 1 | 20 | 0.244 → 0.256 (+0.012) | 0.480 → 0.030 | -0.44 | 76.4 |",
    ]
    grpo = {"steps": 40, "diagnostics": diagnostics([0.3, 0.5], 0.4, 0.9, 0.2, 20.0)}
    assert tune.training_lines("a", grpo) == [
        "| `a` | 40 | 0.300 → 0.500 (+0.200) | 0.400 → 0.900 | 0.20 | 20.0 |"
    ]
    assert tune.training_lines("b", {"steps": 0}) == [
        "| `b` | 0 | nan → nan (+nan) | – → – | – | – |"
    ]
