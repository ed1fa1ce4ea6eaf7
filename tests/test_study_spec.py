"""Study files checked in full before anything runs (every mistake one line, all at once), and
studies whose compared rows differ only in what they compare: checkpoints served on the study's
backend family, sampling and backends alike unless the file allows otherwise, training as long
as evaluation."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from corebench.harness.errors import CorebenchError
from corebench.harness.records import RunConfig
from corebench.harness.registry import default_plugins
from corebench.harness.runner import check_run
from corebench.studies.spec import load_study

CLI = [sys.executable, "-m", "corebench.harness.cli"]

# a base row, a MapCoder row and a trained row on 2 MBPP+ tasks: loads as written
STUDY = """
[study]
name = "spec"
benchmark = "mbpp"
tasks = ["Mbpp/2", "Mbpp/3"]
max_new_tokens = 64

[scale.smoke]
n = 2
train = { save_steps = 1 }

[[train]]
name = "grpo"
method = "grpo"
settings = { steps = 1, num_generations = 2, eval_benchmarks = ["mbpp"] }

[[run]]
name = "direct"
system = "direct"

[[run]]
name = "mapcoder"
system = "mapcoder"
system_options = { k = 2 }

[[run]]
name = "trained"
system = "direct"
model = "@grpo"
"""


def write(tmp_path: Path, text: str, name: str = "study.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def mistakes(path: Path, data_dir: Path | None, scale: str = "smoke") -> list[str]:
    """The lines of the error loading ``path`` raises."""
    with pytest.raises(CorebenchError) as raised:
        load_study(path, scale, default_plugins(), data_dir)
    return str(raised.value).splitlines()


def test_the_study_loads_as_written(tmp_path, data_dir):
    study = load_study(write(tmp_path, STUDY), "smoke", default_plugins(), data_dir)
    assert [r.name for r in study.runs] == ["direct", "mapcoder", "trained"]


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (  # a training setting's name
            ("steps = 1,", "stepz = 1,"),
            r"\[\[train\]\] 'grpo' settings: unknown training setting 'stepz'. "
            r"Did you mean 'steps'",
        ),
        (  # a training setting's type
            ("steps = 1,", 'steps = "many",'),
            r"\[\[train\]\] 'grpo' settings: training setting steps: input should be a valid "
            r"integer \(got 'many'\)",
        ),
        (  # the scale's training settings are every step's
            ("save_steps = 1", "save_stepz = 1"),
            r"\[\[train\]\] 'grpo' settings: unknown training setting 'save_stepz'",
        ),
        (  # a model a step trains
            ("num_generations = 2,", 'num_generations = 2, model = "hff:x",'),
            r"\[\[train\]\] 'grpo' settings.model: unknown backend 'hff'. Did you mean 'hf'",
        ),
        (  # a step's benchmark
            ('eval_benchmarks = ["mbpp"]', 'eval_benchmarks = ["mbbp"]'),
            r"\[\[train\]\] 'grpo' settings.eval_benchmarks: unknown benchmark 'mbbp'",
        ),
        (  # a system
            ('system = "mapcoder"', 'system = "mapcodr"'),
            r"\[\[run\]\] 'mapcoder' system: unknown system 'mapcodr'. Did you mean 'mapcoder'",
        ),
        (  # a system option
            ("system_options = { k = 2 }", "system_options = { kk = 2 }"),
            r"\[\[run\]\] 'mapcoder' system_options: unknown system 'mapcoder' option 'kk'. "
            r"Did you mean 'k'",
        ),
        (  # a system option's type
            ("system_options = { k = 2 }", 'system_options = { k = "two" }'),
            r"\[\[run\]\] 'mapcoder' system_options: system 'mapcoder' option k: input should be "
            r"a valid integer",
        ),
        (  # a benchmark
            ('system = "mapcoder"', 'system = "mapcoder"\nbenchmark = "mbp"'),
            r"\[\[run\]\] 'mapcoder' benchmark: unknown benchmark 'mbp'. Did you mean 'mbpp'",
        ),
        (  # a split
            ('system = "mapcoder"', 'system = "mapcoder"\nsplit = "tset"'),
            r"\[\[run\]\] 'mapcoder' split: unknown mbpp split 'tset'. Did you mean 'test'",
        ),
        (  # a benchmark option
            ('system = "mapcoder"', 'system = "mapcoder"\nbenchmark_options = { level = 1 }'),
            r"\[\[run\]\] 'mapcoder' benchmark_options: unknown benchmark 'mbpp' option 'level'",
        ),
        (  # a task id, in [study]: one line for every run it reaches
            ('"Mbpp/3"]', '"Mbpp/99999"]'),
            r"\[\[run\]\] 'direct' tasks \(also \[\[run\]\] 'mapcoder' tasks, \[\[run\]\] "
            r"'trained' tasks\): unknown mbpp task 'Mbpp/99999'. Did you mean 'Mbpp/99'",
        ),
        (  # a backend
            ('system = "direct"\n\n', 'system = "direct"\nmodel = "hff:x"\n\n'),
            r"\[\[run\]\] 'direct' model: unknown backend 'hff'. Did you mean 'hf'",
        ),
        (  # a backend option
            ('system = "direct"\n\n', 'system = "direct"\nmodel = "hf:x?max_bach=2"\n\n'),
            r"\[\[run\]\] 'direct' model: unknown backend 'hf' option 'max_bach'. "
            r"Did you mean 'max_batch'",
        ),
        (  # a backend option's type, for a checkpoint's backend
            ('model = "@grpo"', 'model = "hf:@grpo?max_batch=many"'),
            r"\[\[run\]\] 'trained' model: backend 'hf' option max_batch: input should be a "
            r"valid integer \(got 'many'\)",
        ),
        (  # a role the system does not have
            ('model = "@grpo"', 'model = "planner=@grpo"'),
            r"\[\[run\]\] 'trained' model: system 'direct' has roles model; the model spec "
            r"names planner",
        ),
    ],
)
def test_each_kind_of_mistake_is_one_line_naming_the_file_entry_and_key(
    tmp_path, data_dir, change, line
):
    assert change[0] in STUDY
    path = write(tmp_path, STUDY.replace(*change))
    (found,) = mistakes(path, data_dir)
    assert found.startswith(f"{path} ")
    assert re.search(line, found), found


def test_a_missing_dataset_is_one_line_not_a_traceback(tmp_path):
    empty = tmp_path / "data"
    empty.mkdir()
    (found,) = mistakes(write(tmp_path, STUDY), empty)
    assert "[[run]] 'direct' benchmark (also [[run]] 'mapcoder' benchmark" in found
    assert "mbpp: MbppPlus-v0.2.0.jsonl.gz (or MbppPlus-v0.2.0.jsonl) not found in" in found


def test_three_mistakes_in_three_entries_are_three_lines_at_once(tmp_path, data_dir):
    text = (
        STUDY.replace("steps = 1,", "stepz = 1,")
        .replace("system_options = { k = 2 }", "system_options = { kk = 2 }")
        .replace('model = "@grpo"', 'model = "@grpo"\ntemperatur = 0.5')
    )
    path = write(tmp_path, text)
    lines = mistakes(path, data_dir)
    assert len(lines) == 3, lines
    assert {line.split(": ", 1)[0] for line in lines} == {
        f"{path} [[train]] 'grpo' settings",
        f"{path} [[run]] 'trained'",
        f"{path} [[run]] 'mapcoder' system_options",
    }
    assert "unknown key 'temperatur'. Did you mean 'temperature'" in "".join(lines)


def test_a_mistake_in_study_does_not_hide_the_entries_mistakes(tmp_path, data_dir):
    """[study] fails to load: the rest is still checked against its well-formed keys (here its
    benchmark and task ids, without which the run's system option would not be found)."""
    text = STUDY.replace("max_new_tokens = 64", "max_new_tokens = 64\ntemprature = 0.5")
    text = text.replace("system_options = { k = 2 }", "system_options = { kk = 2 }")
    text += '\n[[run]]\nname = "hot"\nsystem = "direkt"\ntemperature = 0.8\n'
    path = write(tmp_path, text)
    lines = mistakes(path, data_dir, "full")
    where = {line.split(": ", 1)[0] for line in lines}
    assert f"{path} [study]" in where, lines
    assert f"{path} [[run]] 'mapcoder' system_options" in where, lines
    assert any("unknown system 'direkt'" in line for line in lines), lines
    assert any("differ in sampling" in line and "'hot'" in line for line in lines), lines


def test_an_entry_that_does_not_load_is_not_reported_again_where_it_is_named(tmp_path, data_dir):
    text = STUDY.replace('name = "grpo"\nmethod = "grpo"', 'name = "grpo"\nmethod = "ppo"')
    text += '\n[[gain]]\npair = "mapcoder"\nroles = ["direct"]\n'
    text = text.replace('name = "direct"\nsystem = "direct"', 'name = "direct"\nsystm = "direct"')
    lines = mistakes(write(tmp_path, text), data_dir)
    assert len(lines) == 2, lines
    assert "[[train]] 'grpo' method: unknown training method 'ppo'" in lines[0]
    assert "[[run]] 'direct': unknown key 'systm'" in lines[1]


def test_check_run_finds_every_mistake_of_a_run_at_once(data_dir):
    config = RunConfig(
        benchmark="mbpp", split="tset", system="mapcoder", model="hf:x?max_bach=1",
        system_options={"kk": 2}, benchmark_options={},
    )  # fmt: skip
    problems = check_run(config, default_plugins(), data_dir)
    assert [field for field, _ in problems] == ["split", "system_options", "model"]


def test_nothing_trains_or_runs_when_a_later_run_has_a_mistake(tmp_path, data_dir):
    text = STUDY.replace("system_options = { k = 2 }", "system_options = { kk = 2 }")
    path, out = write(tmp_path, text), tmp_path / "out"
    for extra in ([], ["--report-only"]):
        done = subprocess.run(
            [*CLI, "study", str(path), "--scale", "smoke", "--out", str(out),
             "--data-dir", str(data_dir), *extra],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert "[[run]] 'mapcoder' system_options: unknown system 'mapcoder' option 'kk'" in (
            done.stderr
        )
        assert "not run yet" not in done.stderr  # --report-only checks the file first too
        assert not out.exists()  # no checkpoints/, no runs/


# --- checkpoints served like the study's model --------------------------------------------------


def served(tmp_path: Path, data_dir: Path, study_model: str, run_model: str = "@grpo") -> str:
    text = STUDY.replace("max_new_tokens = 64", f'max_new_tokens = 64\nmodel = "{study_model}"')
    text = text.replace('model = "@grpo"', f'model = "{run_model}"')
    study = load_study(write(tmp_path, text), "full", default_plugins(), data_dir)
    checkpoints = {"grpo": {"model": Path("/ckpt/grpo/model")}}
    return study.config(study.runs[2], checkpoints).model


@pytest.mark.parametrize(
    ("study_model", "model"),
    [
        ("embedded", "hf:/ckpt/grpo/model"),
        ("hf:Qwen/Qwen2.5-Coder-3B-Instruct?dtype=bfloat16", "hf:/ckpt/grpo/model?dtype=bfloat16"),
        ("vllm:Qwen/Qwen2.5-Coder-3B-Instruct", "vllm:/ckpt/grpo/model"),
        (
            "vllm:Qwen/Qwen2.5-Coder-3B-Instruct?tensor_parallel_size=2",
            "vllm:/ckpt/grpo/model?tensor_parallel_size=2",
        ),
    ],
)
def test_a_checkpoint_is_served_by_the_study_models_backend_family(
    tmp_path, data_dir, study_model, model
):
    assert served(tmp_path, data_dir, study_model) == model


def test_per_role_checkpoints_and_the_study_model_share_the_backend(tmp_path, data_dir):
    text = STUDY.replace("max_new_tokens = 64", 'max_new_tokens = 64\nmodel = "vllm:Q"')
    text = text.replace(
        '[[train]]\nname = "grpo"\nmethod = "grpo"',
        '[[train]]\nname = "sft"\nmethod = "sft"\nsettings = { model = "embedded" }\n\n'
        '[[train]]\nname = "grpo"\nmethod = "grpo"',
    )
    text = text.replace("settings = { steps = 1,", 'settings = { model = "@sft:coder", steps = 1,')
    text += '\n[[run]]\nname = "pair"\nsystem = "corecode"\n'
    text += 'model = "planner=@sft:planner,coder={model}"\n'
    study = load_study(write(tmp_path, text), "full", default_plugins(), data_dir)
    checkpoints = {"sft": {"planner": Path("/c/p"), "coder": Path("/c/c")}}
    assert study.config(study.runs[3], checkpoints).model == "planner=vllm:/c/p,coder=vllm:Q"
    grpo = next(t for t in study.train if t.name == "grpo")
    assert study.train_settings(grpo, checkpoints)["model"] == "hf:/c/c"  # trainers: hf


def test_an_openai_study_model_cannot_serve_a_checkpoint_unless_the_run_names_a_backend(
    tmp_path, data_dir
):
    model = "openai:qwen@http://127.0.0.1:9/v1"
    text = STUDY.replace("max_new_tokens = 64", f'max_new_tokens = 64\nmodel = "{model}"')
    (found,) = mistakes(write(tmp_path, text), data_dir, "full")
    assert (
        f"[[run]] 'trained' model: the study's model '{model}' cannot serve the checkpoint @grpo"
        in found
    )
    written = text.replace('model = "@grpo"', 'model = "hf:@grpo"')
    lines = mistakes(write(tmp_path, written), data_dir, "full")
    assert len(lines) == 2 and "[[run]] 'direct' against 'trained'" in lines[0]
    assert all("the rows differ in backend (openai vs hf)" in line for line in lines)
    allowed = written.replace(
        "max_new_tokens = 64", 'max_new_tokens = 64\nallow_confounds = ["backend"]'
    )
    study = load_study(write(tmp_path, allowed), "full", default_plugins(), data_dir)
    assert study.config(study.runs[2], {"grpo": {"model": Path("/c")}}).model == "hf:/c"


# --- compared rows differ only where the file says so -------------------------------------------


def test_rows_on_different_backends_are_refused_with_both_named(tmp_path, data_dir):
    text = STUDY.replace("max_new_tokens = 64", 'max_new_tokens = 64\nmodel = "vllm:Q"')
    text = text.replace('model = "@grpo"', 'model = "hf:@grpo"')
    lines = mistakes(write(tmp_path, text), data_dir, "full")
    assert lines == [
        f"{tmp_path / 'study.toml'} [[run]] 'direct' against 'trained' (without [[compare]], every "
        "pair of rows): the rows differ in backend (vllm vs hf); if that is meant, "
        'allow_confounds = ["backend"] in [study] (or plan the comparisons with [[compare]])',
        f"{tmp_path / 'study.toml'} [[run]] 'mapcoder' against 'trained' (without [[compare]], "
        "every pair of rows): the rows differ in backend (vllm vs hf); if that is meant, "
        'allow_confounds = ["backend"] in [study] (or plan the comparisons with [[compare]])',
    ]


def test_planned_comparisons_and_gains_are_the_compared_rows(tmp_path, data_dir):
    text = STUDY.replace('model = "@grpo"', 'model = "@grpo"\ntemperature = 0.5')
    text += '\n[[compare]]\nrow = "trained"\nagainst = "direct"\n'
    text += '\n[[compare]]\nrow = "mapcoder"\nagainst = "direct"\n'
    text += '\n[[gain]]\npair = "mapcoder"\nroles = ["trained"]\n'
    path = write(tmp_path, text)
    lines = mistakes(path, data_dir)
    assert lines == [
        f"{path} [[compare]] 'trained' against 'direct': the rows differ in sampling (temperature "
        '0.5 vs 0.0); if that is meant, allow_confounds = ["sampling"] in this entry or in [study]',
        f"{path} [[gain]] 'mapcoder' against 'trained': the rows differ in sampling (temperature "
        '0.0 vs 0.5); if that is meant, allow_confounds = ["sampling"] in this entry or in [study]',
    ]
    allowed = text.replace(
        'against = "direct"\n', 'against = "direct"\nallow_confounds = ["sampling"]\n', 1
    )
    allowed = allowed.replace(
        'roles = ["trained"]', 'roles = ["trained"]\nallow_confounds = ["sampling"]'
    )
    study = load_study(write(tmp_path, allowed), "smoke", default_plugins(), data_dir)
    assert study.comparisons() == [("trained", "direct"), ("mapcoder", "direct")]


def test_sampling_differences_are_named_and_allowed_study_wide(tmp_path, data_dir):
    text = STUDY.replace(
        "system_options = { k = 2 }", "system_options = { k = 2 }\ntop_p = 0.9\nmax_new_tokens = 32"
    )
    first, second = mistakes(write(tmp_path, text), data_dir)
    assert "[[run]] 'direct' against 'mapcoder'" in first and "[[run]] 'mapcoder' against" in second
    assert "the rows differ in sampling (top_p 0.95 vs 0.9, max_new_tokens 64 vs 32)" in first
    allowed = text.replace(
        "max_new_tokens = 64", 'max_new_tokens = 64\nallow_confounds = ["sampling"]'
    )
    assert load_study(write(tmp_path, allowed), "smoke", default_plugins(), data_dir)
    wrong = text.replace(
        "max_new_tokens = 64", 'max_new_tokens = 64\nallow_confounds = ["sampler"]'
    )
    # the misspelt allowance is reported, and so are the differences it did not allow
    found, *confounds = mistakes(write(tmp_path, wrong), data_dir)
    assert "[study]: key allow_confounds.0: input should be 'backend' or 'sampling'" in found
    assert confounds == [first, second]


# --- training as long as evaluation ---------------------------------------------------------------


def test_training_generates_as_much_as_the_evaluation_unless_set(tmp_path, data_dir):
    text = STUDY.replace("[scale.smoke]\n", "[scale.smoke]\nmax_new_tokens = 48\n")
    limits = {
        scale: load_study(write(tmp_path, text), scale, default_plugins(), data_dir)
        .train[0]
        .settings["max_completion_length"]
        for scale in ("full", "smoke")
    }
    assert limits == {"full": 64, "smoke": 48}
    step = text.replace("steps = 1,", "steps = 1, max_completion_length = 40,")
    study = load_study(write(tmp_path, step), "smoke", default_plugins(), data_dir)
    assert study.train[0].settings["max_completion_length"] == 40
    scale = text.replace("save_steps = 1", "save_steps = 1, max_completion_length = 24")
    study = load_study(write(tmp_path, scale), "smoke", default_plugins(), data_dir)
    assert study.train[0].settings["max_completion_length"] == 24


SEEDED = """
[study]
name = "seeded"
benchmark = "mbpp"
tasks = ["Mbpp/2", "Mbpp/3"]
max_new_tokens = 64
primary = "pass@1"
secondary = ["test_pass_rate"]
seeds = [0, 1, 2]

[[train]]
name = "sft"
method = "sft"
seeded = false
settings = { steps = 1, sft_roles = ["model"], eval_benchmarks = ["mbpp"] }

[[train]]
name = "grpo"
method = "grpo"
settings = { model = "@sft", steps = 1, num_generations = 2, eval_benchmarks = ["mbpp"] }

[[train]]
name = "again"
method = "sft"
seeded = false  # starts from a seeded step: seeded all the same
settings = { model = "@grpo", steps = 1, sft_roles = ["model"], eval_benchmarks = ["mbpp"] }

[[run]]
name = "base"
system = "direct"

[[run]]
name = "sft"
system = "direct"
model = "@sft"

[[run]]
name = "grpo"
system = "direct"
model = "@grpo"

[[run]]
name = "sampled"
system = "direct"
temperature = 0.8

[[compare]]
row = "grpo"
against = "sft"
"""


def test_seeds_reach_seeded_steps_and_the_rows_that_use_them(tmp_path, data_dir):
    study = load_study(write(tmp_path, SEEDED), data_dir=data_dir)
    assert study.header.metrics == ["pass@1", "test_pass_rate"]
    assert {t.name: study.seeded_step(t.name) for t in study.train} == {
        "sft": False, "grpo": True, "again": True
    }  # fmt: skip
    assert {r.name: study.seeds_of(r) for r in study.runs} == {
        "base": [None], "sft": [None], "grpo": [0, 1, 2], "sampled": [0, 1, 2]
    }  # fmt: skip
    one, two = study.for_seed(1), study.for_seed(2)
    steps = {t.name: t for t in one.train}
    assert "seed" not in steps["sft"].settings and steps["grpo"].settings["seed"] == 1
    # the cold start keeps its key (trained once); seeded steps and rows get one per seed
    assert (
        one.train_key(one.train[0])
        == two.train_key(two.train[0])
        == study.train_key(study.train[0])
    )
    assert one.train_key(one.train[1]) != two.train_key(two.train[1])
    runs = {
        r.name: (one.run_key(r), two.run_key(s)) for r, s in zip(one.runs, two.runs, strict=True)
    }
    assert runs["base"][0] == runs["base"][1] and runs["sft"][0] == runs["sft"][1]
    assert runs["grpo"][0] != runs["grpo"][1] and runs["sampled"][0] != runs["sampled"][1]
    assert [r.seed for r in one.runs] == [0, 0, 1, 1]  # unseeded rows keep the study's seed


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            'secondary = ["test_pass_rate"]',
            'secondary = ["pass@1"]',
            "pass@1 is the primary metric",
        ),
        ("seeds = [0, 1, 2]", "seeds = [0, 0]", "seeds lists a seed twice"),
        ('primary = "pass@1"', 'primary = "pass@2"', "key primary: input should be"),
        ("seeded = false", 'seeded = "no"', "key seeded: input should be a valid boolean"),
    ],
)
def test_metric_and_seed_mistakes_are_one_line(tmp_path, data_dir, old, new, message):
    with pytest.raises(CorebenchError, match=re.escape(message)) as raised:
        load_study(write(tmp_path, SEEDED.replace(old, new)), data_dir=data_dir)
    assert len(str(raised.value).splitlines()) == 1
