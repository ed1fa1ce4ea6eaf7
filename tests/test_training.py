"""Training: settings, the training data, sandbox rewards, plans, and every method end to end
on the embedded model with tiny settings, its checkpoints then evaluated by the runner."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

import corebench.training.rollouts as rollouts_module
from corebench.harness import RunConfig, Task
from corebench.harness.decoding.precision import cpu_dtype
from corebench.harness.errors import CorebenchError, UnknownNameError
from corebench.harness.extract import extract_code
from corebench.harness.runner import Runner
from corebench.harness.store import Store
from corebench.harness.testsuite import assert_suite
from corebench.plugins.systems.corecode.outline import parse_plan
from corebench.training.data import TrainTask, load_train_data
from corebench.training.dispatch import drop_resume_states, model_spec, train
from corebench.training.models import local_checkpoint
from corebench.training.plans import template_plan
from corebench.training.rewards import (
    REWARDED_TESTS,
    RewardLog,
    authors_pair_reward,
    class_pair_reward,
    class_reward,
    measure_passing,
    pair_shape,
    pass_reward,
    rewarded_suite,
    run_tests,
)
from corebench.training.settings import EVALUATE_WITH, load_settings
from corebench.training.update_scoring import by_length

TESTS = ["assert double(2) == 4", "assert double(0) == 0", "assert double(-3) == -6"]


def train_task(entry_point: str, tests: list[str], reference: str = "") -> TrainTask:
    """A training task judged by asserts, as MBPP's train tasks are."""
    task = Task(task_id=f"t/{entry_point}", benchmark="t", prompt="-", entry_point=entry_point)
    return TrainTask(task, assert_suite(tests, reference, entry_point=entry_point))


def test_settings_from_toml_and_overrides(tmp_path):
    config = tmp_path / "train.toml"
    config.write_text('[train]\nsteps = 7\nmodel = "hf:/somewhere"\nlearning_rate = 2e-6\n')
    settings = load_settings("grpo", config, ["steps=3", "temperature=1", "out=x"])
    assert (settings.steps, settings.model, settings.learning_rate) == (3, "hf:/somewhere", 2e-6)
    assert settings.temperature == 1.0 and settings.out == "x"
    with pytest.raises(UnknownNameError, match="Did you mean 'steps'"):
        load_settings("grpo", None, ["step=3"])
    with pytest.raises(CorebenchError, match="training setting steps: input should be a valid int"):
        load_settings("grpo", None, ["steps=many"])
    with pytest.raises(CorebenchError, match="unknown reward 'test'. Did you mean 'tests'"):
        load_settings("magrpo", None, ["reward=test"])
    with pytest.raises(UnknownNameError, match="training method"):
        load_settings("ppo")
    assert load_settings("pta", None, ["lora_rank=8"]).lora_rank == 8
    assert load_settings("magrpo", None, ["lora_rank=8"]).lora_rank == 8
    with pytest.raises(CorebenchError, match="lora_rank: sft trains every weight"):
        load_settings("sft", None, ["lora_rank=8"])  # the SFT trainer trains every weight
    assert load_settings("magrpo", None, ['update_scoring="trl"']).update_scoring == "trl"
    assert load_settings("sft").update_scoring == "by-length"  # a default it does not read
    from corebench.training.update_scoring import UPDATE_ROWS, update_rows

    assert update_rows(load_settings("magrpo")) == UPDATE_ROWS  # on a CPU, by length
    assert update_rows(load_settings("grpo", None, ['update_scoring="trl"'])) is None
    assert update_rows(load_settings("grpo", None, ["use_cpu=false"])) is None
    with pytest.raises(CorebenchError, match="update_scoring: sft does not read it"):
        load_settings("sft", None, ['update_scoring="trl"'])


@pytest.mark.model  # converts the embedded GGUF on first use
def test_a_training_start_is_found_without_loading_its_weights(tmp_path, monkeypatch):
    """``local_checkpoint`` names the folder training starts from; loading the model there cost
    seconds per training run and per frozen partner, for a path."""
    from corebench.plugins.backends.transformers_backend import TransformersBackend

    def refuse(self):
        raise AssertionError("local_checkpoint loaded a model")

    monkeypatch.setattr(TransformersBackend, "load", refuse)
    embedded = local_checkpoint("embedded")  # the converted GGUF (converted here on first use)
    assert (embedded / "config.json").exists() and list(embedded.glob("*.safetensors"))
    (tmp_path / "ckpt").mkdir()
    for missing in ("ckpt", "missing"):  # a folder without a config.json, no folder
        with pytest.raises(CorebenchError, match="is no checkpoint folder on this machine"):
            local_checkpoint(f"hf:{tmp_path / missing}")
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    assert local_checkpoint(f"hf:{tmp_path / 'ckpt'}") == tmp_path / "ckpt"


def test_mbpp_train_split_excludes_evaluation_tasks(data_dir):
    settings = load_settings("grpo", None, [f"data_dir={json.dumps(str(data_dir))}"])
    data = load_train_data(settings)
    from corebench.plugins.benchmarks.evalplus_tasks import MbppPlus

    evaluated = {t.task_id for t in MbppPlus(data_dir).tasks()}
    ids = {t.task.task_id for t in data.tasks}
    assert not ids & evaluated and len(ids) > 250
    assert all(511 <= int(i.split("/")[1]) <= 974 for i in ids)
    assert data.overlaps and not ids & {
        o.train_id for o in data.overlaps
    }  # near-duplicates dropped


def test_mbpp_train_split_can_draw_on_every_original_split(data_dir):
    from corebench.plugins.benchmarks.evalplus_tasks import MbppPlus

    every = ["train", "validation", "test", "prompt"]
    settings = load_settings(
        "sft", None, data_dir=str(data_dir), benchmark_options={"train_from": every}
    )
    data = load_train_data(settings)
    evaluated = {t.task_id for t in MbppPlus(data_dir).tasks()}
    ids = {t.task.task_id for t in data.tasks}
    assert not ids & evaluated and len(ids) > 500  # about twice the default split's 289
    assert any(int(i.split("/")[1]) <= 510 for i in ids)  # test-split tasks MBPP+ left out
    assert not ids & {o.train_id for o in data.overlaps}  # near-duplicates still dropped
    with pytest.raises(UnknownNameError, match="original MBPP split 'tset'. Did you mean 'test'"):
        MbppPlus(data_dir, train_from=["tset"])


def test_rewards_come_from_the_sandbox(tmp_path):
    programs = [
        "def double(x):\n    return 2 * x\n",
        "def double(x):\n    return x + 2\n",  # passes one test
        "def double(x):\n    raise ValueError\n",
        "def double(x) return",
        "",
    ]
    runs = run_tests([(p, train_task("double", TESTS)) for p in programs])
    assert [r.passed for r in runs] == [3, 1, 0, 0, 0]
    assert [r.pass_rate for r in runs] == pytest.approx([1, 1 / 3, 0, 0, 0])
    assert [pass_reward(r) for r in runs] == pytest.approx([2, 1 / 3, 0, 0, 0])
    assert [class_reward(r) for r in runs] == pytest.approx([0.8, 0.6, 0.0, 0.0, 0.0])
    assert [class_pair_reward(p, r) for p, r in zip(programs, runs, strict=True)] == pytest.approx(
        [0.8, 0.6, 0.2, 0.0, 0.0]
    )
    log = RewardLog(tmp_path / "rewards.txt", group=2)
    log.add([0.0, 1.0, 0.5])
    assert RewardLog(tmp_path / "rewards.txt", group=2).curve() == [
        {"step": 1, "reward": 0.5},
        {"step": 2, "reward": 0.5},
    ]


def test_magrpo_authors_reward_scores_a_pair_that_ignores_aux_lower_and_shape_alone_zero():
    from corebench.plugins.systems.helper_main import HelperMain

    helper = "def aux(x):\n    return x + x\n"
    mains = {
        "uses aux": "def double(x):\n    y = aux(x)\n    return y if x else 0\n",
        "thin wrapper": "def double(x):\n    return aux(x)\n",
        "drops aux's value": "def double(x):\n    aux(x)\n    return 2 * x\n",
        "ignores aux": "def double(x):\n    return 2 * x\n",
        "own aux": "def double(x):\n    def aux(v):\n        return 2 * v\n    return aux(x)\n",
        "wrong": "def double(x):\n    return aux(x) + 1\n",
        "two of three": "def double(x):\n    return aux(x) if x >= 0 else 0\n",
    }
    task = train_task("double", TESTS)
    programs = {name: HelperMain.program(helper, main) for name, main in mains.items()}
    runs = dict(zip(programs, run_tests([(p, task) for p in programs.values()]), strict=True))
    authors = {
        name: authors_pair_reward(pair_shape(helper, mains[name], "double"), code, runs[name])
        for name, code in programs.items()
    }
    simple = {name: class_pair_reward(code, runs[name]) for name, code in programs.items()}
    assert authors == pytest.approx(
        {
            "uses aux": 5.0,
            "thin wrapper": 4.0,
            "drops aux's value": 4.5,
            "ignores aux": 3.5,
            "own aux": 0.0,
            # until every test passes, only the share passed counts: no reward for shape alone
            "wrong": 0.0,
            "two of three": pytest.approx(2 / 3),
        }
    )
    # the simple reward cannot tell a collaborating pair from one agent doing the work
    assert simple["uses aux"] == simple["ignores aux"] == simple["own aux"] == pytest.approx(0.8)
    assert simple["wrong"] == pytest.approx(0.5)  # parses and runs: the class reward pays shape
    assert not pair_shape("def aux(x):\n    pass\n", mains["uses aux"], "double").aux_defined


STUBS = {  # programs that share many expected outputs with the reference, and solve nothing
    "HumanEval/13": "def greatest_common_divisor(a, b):\n    return 1\n",  # 559 of 991 tests
    "HumanEval/52": "def below_threshold(l, t):\n    return True\n",  # 209 of 425
    "Mbpp/2": "def similar_elements(test_tup1, test_tup2):\n    return ()\n",
}


@pytest.fixture(scope="module")
def stub_tasks(data_dir) -> dict[str, dict[str, TrainTask]]:
    """The stubs' tasks with the suites each reward runs (``rewarded_suite``)."""
    from corebench.harness.registry import default_plugins

    out: dict[str, dict[str, TrainTask]] = {"tests": {}, "class": {}}
    for name in ("humaneval", "mbpp"):
        bench = default_plugins().benchmarks.get(name).component(data_dir)
        for task in bench.tasks():
            if task.task_id in STUBS:
                for reward in out:
                    suite = rewarded_suite(bench.test_suite(task.task_id), task.task_id, reward)
                    out[reward][task.task_id] = TrainTask(task, suite)
    return out


def test_large_suites_are_rewarded_on_a_fixed_subset_with_every_base_test(stub_tasks, data_dir):
    from corebench.harness.registry import default_plugins

    full = (
        default_plugins().benchmarks.get("humaneval").component(data_dir).test_suite("HumanEval/13")
    )
    chosen = stub_tasks["tests"]["HumanEval/13"].suite
    assert full.size == 991 and chosen.size == REWARDED_TESTS
    assert chosen.inputs["base"] == full.inputs["base"]  # every base test
    plus = chosen.inputs["plus"]
    assert all(args in full.inputs["plus"] for args in plus)
    order = [full.inputs["plus"].index(args) for args in plus]
    assert order == sorted(order)  # in the suite's own order
    # the same subset every time (seeded by the task id), another for another task
    again = rewarded_suite(full, "HumanEval/13")
    assert (
        again.inputs == chosen.inputs
        and rewarded_suite(full, "HumanEval/14").inputs != chosen.inputs
    )
    # the class study's reward: the base tests (HumanEval's original ones) only
    assert stub_tasks["class"]["HumanEval/13"].suite.inputs == {"base": full.inputs["base"]}
    small = stub_tasks["tests"]["Mbpp/2"].suite
    assert small.size < REWARDED_TESTS and small.size == sum(map(len, small.inputs.values()))


def test_every_reward_ranks_a_stub_well_below_the_reference(stub_tasks):
    """A stub that matches hundreds of expected outputs earns less than half of the reference's
    reward under every method's default reward; under the class study's reward (kept only to
    reproduce that study) it still ranks below."""
    from corebench.plugins.systems.helper_main import HelperMain
    from corebench.training.corecode import planner_reward
    from corebench.training.grpo import code_reward, pta_reward

    class EchoCoder:  # a frozen coder that writes, from each plan, the answer's own code
        def answer(self, prompts):
            assert len(prompts) == len(answers)
            return answers

    for reward in ("tests", "class"):
        settings = load_settings("corecode", None, [f"reward={reward}", "efficiency_weight=0"])
        tasks = stub_tasks[reward]
        rows = [{"task": tasks[i]} for i in STUBS for _ in range(2)]
        codes = [c for i in STUBS for c in (tasks[i].reference, STUBS[i])]
        answers = [f"```python\n{c}```" for c in codes]
        scored = {
            "grpo / corecode coder": code_reward(settings)(answers, rows),
            "pta": pta_reward(settings, EchoCoder())(answers, rows),
            "corecode planner": planner_reward(settings, EchoCoder())(answers, rows),
        }
        entry = {i: tasks[i].task.entry_point for i in STUBS}
        # the helper writes the program as `aux`, the main agent calls it
        pairs = [
            (re.sub(rf"\b{entry[i]}\b", "aux", c),
             f"def {entry[i]}(*args):\n    value = aux(*args)\n    return value\n", tasks[i])
            for i in STUBS
            for c in (tasks[i].reference, STUBS[i])
        ]  # fmt: skip
        programs = [HelperMain.program(h, m) for h, m, _ in pairs]
        runs = run_tests([(p, t) for p, (_, _, t) in zip(programs, pairs, strict=True)])
        scored["magrpo"] = [
            authors_pair_reward(pair_shape(h, m, t.task.entry_point), p, r)
            if reward == "tests"
            else class_pair_reward(p, r)
            for (h, m, t), p, r in zip(pairs, programs, runs, strict=True)
        ]
        for method, values in scored.items():
            for task_id, (ref, stub) in zip(
                STUBS, zip(values[::2], values[1::2], strict=True), strict=True
            ):
                assert stub < ref, (reward, method, task_id, ref, stub)
                if reward == "tests":
                    assert stub <= 0.5 * ref, (method, task_id, ref, stub)


def test_corecode_efficiency_terms_measure_against_the_reference(monkeypatch):
    from corebench.training import grpo
    from corebench.training.corecode import planner_reward
    from corebench.training.grpo import code_reward
    from corebench.training.rewards import memory_score, speed_score

    tests = ["assert total(300000) == 44999850000", "assert total(10) == 45"]
    reference = "def total(n):\n    return n * (n - 1) // 2\n"
    loop = "def total(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n"
    hungry = "def total(n):\n    return sum(list(range(n)))\n"  # a 300k-element list
    wrong = "def total(n):\n    return n\n"
    codes = [reference, loop, hungry, wrong]
    task = train_task("total", tests, reference)
    runs = run_tests([(c, task) for c in codes])
    measured = measure_passing([(c, task) for c in codes], runs)
    assert measured[3] is None and all(m is not None for m in measured[:3])
    speed = [speed_score(m) for m in measured]
    memory = [memory_score(m) for m in measured]
    assert speed[0] > 0.6 and speed[1] < 0.2 and speed[3] == 0.0, speed
    assert memory[0] > 0.6 and memory[1] > 0.6 and memory[2] < 0.2 and memory[3] == 0.0, memory

    # Each reward call measures anew. The rewards are checked against the measurements taken in
    # that same call (recorded as they pass by), so two timings of the same code never need to
    # agree; the orderings are checked against the separate measurement above, by wide margins.
    taken: list[list] = []
    measure = grpo.measure_passing

    def recording(programs, test_runs):
        taken.append(measure(programs, test_runs))
        return taken[-1]

    monkeypatch.setattr(grpo, "measure_passing", recording)

    # the coder's reward adds the memory term; the planner's, the speed of the coder's code
    settings = load_settings("corecode", None, ["efficiency_weight=0.2"])
    rows = [{"task": task}] * 4
    answers = [f"```python\n{c}```" for c in codes]
    coder = code_reward(settings, memory_score)(answers, rows)
    in_call = [memory_score(m) for m in taken[-1]]
    assert coder == pytest.approx([2 + 0.2 * m for m in in_call[:3]] + [0.0])
    assert coder[1] > coder[2] + 0.1  # same tests passed, a fraction of the memory

    class Coder:  # writes back the code a plan holds, or the program an honest plan names
        def answer(self, prompts):
            named = [re.search(r"the approach numbered (\d)", p) for p in prompts]
            return [
                answers[int(m[1])] if m else next(a for a in answers if a in p)
                for m, p in zip(named, prompts, strict=True)
            ]

    planner = planner_reward(settings, Coder())(answers, rows)
    in_call = [speed_score(m) for m in taken[-1]]
    expected = [2 + 0.2 * s for s in in_call[:3]] + [0.0]
    assert planner == pytest.approx(expected)  # code in the plan: no quality term
    assert planner[0] > planner[1] + 0.1
    honest = [
        "Input/Output: total receives n and gives back a number.\n"
        f"Steps:\n1. use the approach numbered {i}\nBranches: none\nLoops: none\n"
        "Final step: give back the sum.\nComplexity: as few steps as the approach needs."
        for i in range(4)
    ]
    assert all(not parse_plan(h).has_code and parse_plan(h).quality == 1 for h in honest)
    honest_rewards = planner_reward(settings, Coder())(honest, rows)
    in_call = [speed_score(m) for m in taken[-1]]
    # the same programs, so the same pass rates; the honest plans add the plan-quality term
    assert honest_rewards == pytest.approx([2.2 + 0.2 * s for s in in_call[:3]] + [0.2])
    assert len(taken) == 3  # one measurement per call above
    off = load_settings("corecode", None, ["efficiency_weight=0"])
    assert code_reward(off, memory_score)(answers, rows) == pytest.approx([2, 2, 2, 0])
    assert planner_reward(off, Coder())(answers, rows) == pytest.approx([2, 2, 2, 0])
    assert len(taken) == 3  # no weight, no measuring


def test_contest_train_split_feeds_training_with_its_own_suites(tmp_path):
    from pathlib import Path

    from corebench.training.grpo import code_reward

    fixtures = Path(__file__).parent / "fixtures" / "hf"
    settings = load_settings(
        "grpo",
        None,
        ["benchmark=apps", "eval_benchmarks=[]", f"data_dir={json.dumps(str(fixtures))}"],
    )
    data = load_train_data(settings)
    # APPS numbers train and test problems alike: train ids name their split; a train problem
    # that restates a test problem is found by the check against the benchmark's own test split
    assert [t.task.task_id for t in data.tasks] == ["APPS/train/1", "APPS/train/2"]
    assert [(o.train_id, o.eval_id, o.criterion) for o in data.overlaps] == [
        ("APPS/train/4001", "APPS/4001", "description"),
        ("APPS/train/4001", "APPS/4001", "code"),
    ]
    program, method = data.tasks
    assert program.suite.mode == "stdio" and program.reference.startswith("print(max(")
    rows = [{"task": program}] * 3 + [{"task": method}] * 2
    answers = [
        "```python\nprint(max(map(int, input().split())))\n```",
        "```python\nprint(min(map(int, input().split())))\n```",  # right on no test
        "```python\nimport sys\nxs = sys.stdin.read().split()\nprint(xs[1])\n```",  # one of two
        "```python\nclass Solution:\n    def reverseIt(self, s):\n        return s[::-1]\n```",
        "```python\nclass Solution:\n    def reverseIt(self, s):\n        return s\n```",
    ]
    off = load_settings("grpo", None, ["efficiency_weight=0"])
    assert code_reward(off)(answers, rows) == pytest.approx([2, 0, 0.5, 2, 0.5])


@pytest.mark.parametrize(
    "manifest, warned",
    [
        ({"method": "sft", "role": "model"}, True),  # the direct SFT checkpoint writes code
        ({"method": "sft", "role": "coder"}, True),
        ({"method": "sft", "role": "planner"}, False),  # CoRe-Code's cold start on plans
        ({"method": "grpo", "role": "model"}, True),  # GRPO on the direct prompt: code too
        ({"method": "magrpo", "role": "helper"}, True),
        ({"method": "corecode", "role": "planner"}, False),
        (None, False),  # a checkpoint corebench did not train
    ],
)
def test_a_planner_started_from_a_checkpoint_that_writes_code_is_flagged(
    tmp_path, manifest, warned
):
    from corebench.harness.config import MANIFEST_NAME
    from corebench.training.corecode import planner_start_problem

    if manifest is not None:
        (tmp_path / MANIFEST_NAME).write_text(json.dumps(manifest))
    problem = planner_start_problem(tmp_path)
    assert (problem is not None) == warned
    if warned:
        assert f"{manifest['role']!r} role" in problem and "sft_roles" in problem


def test_train_corecode_warns_before_training_a_planner_that_writes_code(tmp_path, monkeypatch):
    """The warning comes from `train_corecode` itself, on a manifest `write_manifest` wrote for
    the direct SFT role, before any training starts (stopped here at the task filter)."""
    from types import SimpleNamespace

    from corebench.training import corecode
    from corebench.training.manifest import write_manifest
    from corebench.training.settings import TrainSettings

    settings = TrainSettings(method="sft", sft_roles=["model"])
    data = SimpleNamespace(source="mbpp:train", tasks=[], overlaps=[], validation=[], filtered={})
    write_manifest(tmp_path, settings=settings, role="model", base_model="embedded", data=data,
                   steps=1, reward_curve=[])  # fmt: skip

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(corecode, "local_checkpoint", lambda spec: tmp_path)
    monkeypatch.setattr(corecode, "filtered_tasks", stop)
    monkeypatch.setattr(corecode, "load_train_data", lambda settings: None)
    with pytest.warns(UserWarning, match="answers with code"), pytest.raises(Stop):
        corecode.train_corecode(TrainSettings(method="corecode", planner_model="hf:x"))


def test_corecode_trains_each_role_from_its_own_start(monkeypatch, tmp_path):
    """``planner_model`` and ``coder_model`` (as ``tune_validation.py corecode --model
    planner=...,coder=...`` sets them): the planner phase trains the planner's start beside the
    coder's start, frozen; the coder phase trains the coder's start beside the trained planner;
    the prompt filter asks the coder's start. Training itself is replaced: only which
    checkpoint goes where is checked."""
    from types import SimpleNamespace

    from corebench.training import corecode
    from corebench.training.grpo import Trained
    from corebench.training.settings import TrainSettings

    starts = {"hf:plans": tmp_path / "plans", "hf:sft": tmp_path / "sft"}
    seen: dict[str, object] = {"frozen": []}  # the frozen partners, in the order made

    class Frozen:
        def __init__(self, path, max_new_tokens):
            seen["frozen"].append(path)

        def answer(self, prompts):
            return [""] * len(prompts)

        def close(self):
            pass

    def phase(settings, out, *, model_path, **kwargs):
        seen[f"{out.name} phase"] = model_path
        (out / "model").mkdir(parents=True)
        return Trained(out / "model", [], 1, {})

    def filtered(model_path, data, settings):
        seen["filter"] = model_path
        return data

    data = SimpleNamespace(source="mbpp:train", tasks=[], overlaps=[], validation=[], filtered={})
    monkeypatch.setattr(corecode, "local_checkpoint", lambda spec: starts[spec])
    monkeypatch.setattr(corecode, "load_train_data", lambda settings: data)
    monkeypatch.setattr(corecode, "filtered_tasks", filtered)
    monkeypatch.setattr(corecode, "FrozenModel", Frozen)
    monkeypatch.setattr(corecode, "_phase", phase)
    settings = TrainSettings(method="corecode", planner_model="hf:plans", coder_model="hf:sft",
                             out=str(tmp_path / "out"), rounds=1)  # fmt: skip
    corecode.train_corecode(settings)
    assert seen == {
        "filter": tmp_path / "sft",
        "planner phase": tmp_path / "plans",
        "coder phase": tmp_path / "sft",
        # beside the planner phase: the coder's start; beside the coder: the trained planner
        "frozen": [tmp_path / "sft", tmp_path / "out" / "round1" / "planner" / "model"],
    }


def test_template_plan_follows_the_corecode_outline():
    task = train_task(
        "sum_evens",
        [],
        "def sum_evens(xs):\n    total = 0\n    for x in xs:\n        if x % 2 == 0:\n"
        "            total += x\n    return total\n",
    )
    plan = template_plan(task)
    outline = parse_plan(plan)
    assert outline.missing == [] and outline.code_lines == [] and outline.quality == 1
    assert "- if x % 2 == 0" in plan and "- over xs" in plan and "give back total" in plan
    assert outline.sections["Complexity"].startswith("about n steps")
    # what the outline parser counts as code in a plan
    coded = parse_plan(
        "Steps:\n1. for x in xs:\n2. total = total + x\n3. return sum(xs)\n"
        "```python\ndef f(xs):\n    return 0\n```\nFinal step: return the total."
    )
    assert coded.code_lines == [
        "for x in xs:",
        "total = total + x",
        "return sum(xs)",
        "def f(xs):",
        "return 0",
    ]
    assert coded.quality == 0 and coded.missing == [
        "Input/Output",
        "Branches",
        "Loops",
        "Complexity",
    ]


TINY = [
    "steps=2",
    "tasks_limit=2",
    "num_generations=2",
    "prompts_per_step=1",
    "max_completion_length=16",
    "save_steps=1",
]
# where a group's rewards differ, one step moves the weights. (The embedded model's direct
# answers to the first two training tasks, Mbpp/511 and Mbpp/512, pass no test: grpo's groups
# tie and its step must leave the weights.)
EFFECT = [
    "steps=1",
    "tasks_limit=2",
    "num_generations=4",
    "prompts_per_step=1",
    "max_completion_length=48",
    "learning_rate=1e-5",
]
# two training tasks held out, validated before the step and after it: GRPO's validation (with
# and without LoRA; PTA runs the same), MAGRPO's, SFT's held-out tasks; CoRe-Code's phases' (GRPO's
# with a frozen partner) are checked at a quarter of the tokens by tests/test_studies.py's smoke
# study
VALIDATED = ["validation_tasks=2", "validation_every=1"]
# answers long enough that a group's rewards differ, so that the branch that learns is exercised
# (asserted below): at 48 tokens MAGRPO's groups differed on an AVX512-BF16 CPU and tied on an
# Intel CPU with AMX, which samples other tokens in bfloat16; at 96 they differed on every CPU
# tried. (PTA's, the same there, tied on the AMX CPU at 96 too: that it learns exactly when they
# differ is checked; its update is GRPO's.) CoRe-Code's base coder writes code that runs from
# the base planner's plans on one of the two tasks only: both in the step
LEARNS = {
    "magrpo": ["max_completion_length=96"],
    "corecode": ["prompts_per_step=2", "max_completion_length=96"],
}


def changed_weight_names(checkpoint, base) -> list[str]:
    """The weights a checkpoint holds changed from ``base``'s (the same names: a plain model)."""
    from safetensors.torch import load_file

    trained, start = (
        load_file(checkpoint / "model.safetensors"),
        load_file(base / "model.safetensors"),
    )
    assert trained.keys() == start.keys()
    return [k for k in trained if not trained[k].equal(start[k])]


@pytest.mark.model
@pytest.mark.parametrize(
    "method", ["grpo", "grpo-lora", "pta", "magrpo", "magrpo-lora", "corecode", "sft"]
)
def test_method_trains_and_its_checkpoints_run(method, tmp_path, data_dir, monkeypatch):
    # "grpo-lora", "magrpo-lora": training rank-4 LoRA adapters, saved merged as plain
    # checkpoints (that trained adapters are merged right, in rollouts and in GRPO's save:
    # tests/test_rollouts.py)
    lora = ["lora_rank=4"] if method.endswith("-lora") else []
    method = method.removesuffix("-lora")
    validated = method not in ("pta", "corecode")  # see VALIDATED
    seen: list[str] = []  # what the MAGRPO reward is given to judge
    if method == "magrpo":
        import corebench.training.magrpo as magrpo

        def recording(text, entry_point, **kwargs):
            seen.append(text)
            return extract_code(text, entry_point, **kwargs)

        monkeypatch.setattr(magrpo, "extract_code", recording)
    decoded: list[tuple[str, float]] = []  # each rollout call's copy's dtype and temperature
    sample = rollouts_module.Rollouts.sample

    def recording_sample(self, prompt_ids, **options):
        decoded.append((str(self.shadow.dtype), options["temperature"]))
        return sample(self, prompt_ids, **options)

    monkeypatch.setattr(rollouts_module.Rollouts, "sample", recording_sample)
    settings = load_settings(
        method,
        None,
        [
            *EFFECT,
            *(VALIDATED if validated else []),
            *LEARNS.get(method, []),
            *lora,
            f"out={json.dumps(str(tmp_path / 'ckpt'))}",
            f"data_dir={json.dumps(str(data_dir))}",
        ],
    )
    checkpoints = train(settings)
    base = local_checkpoint(settings.model)
    for role, path in checkpoints.items():
        moved = changed_weight_names(path, base)
        learned = bool(moved)
        if method == "sft":
            assert learned, role
            continue
        # group-relative updates: a role learns exactly when one of its groups' rewards differ
        # (a group of equal rewards has zero advantages, so zero loss and gradient)
        found = json.loads((path / "corebench_manifest.json").read_text())["diagnostics"]
        assert learned == (found["groups_with_variance"] > 0), (role, found)
        if method in LEARNS and (method, role) != ("corecode", "planner"):
            assert learned, (role, found)  # the branch that learns, exercised
        if lora:  # adapters on the linear layers only: embeddings and norms never move
            assert all(name.endswith("_proj.weight") for name in moved), moved
            # MAGRPO's pair rewards differ here, so that check is not empty (GRPO's tie: EFFECT)
            assert learned or method == "grpo", (role, found)
    logs = sorted((tmp_path / "ckpt").rglob("rewards.txt"))
    assert len(logs) == {"sft": 0, "corecode": 2}.get(method, 1)
    for log in logs:  # every completion scored, within the reward's range
        rewards = [float(v) for v in log.read_text().split()]
        assert rewards and all(0.0 <= r <= 5.0 for r in rewards), (log, rewards)
    if method == "magrpo":  # comlrl once cut every completion to '' (pad token inside the prompt)
        assert seen and any(text.strip() for text in seen)
    roles = {
        "magrpo": ["helper", "main"],
        "corecode": ["planner", "coder"],
        "sft": ["planner", "coder"],
    }
    assert list(checkpoints) == roles.get(method, ["model"])
    for role, path in checkpoints.items():
        manifest = json.loads((path / "corebench_manifest.json").read_text())
        assert manifest["method"] == method and manifest["role"] == role
        assert manifest["data"]["source"] == "mbpp:train" and manifest["data"]["tasks"] == 2
        trained, held_out = manifest["data"]["training_tasks"], manifest["data"]["validation_tasks"]
        assert len(trained) == 2 and not set(trained) & set(held_out)
        assert (path / "config.json").exists()
        assert len(held_out) == (2 if validated else 0)
        if method != "sft":
            assert manifest["reward_curve"] and manifest["steps"] == 1
            found = manifest["diagnostics"]
            if validated:  # before the step and after it, on the held-out tasks
                assert [p["step"] for p in found["validation_curve"]] == [0, 1], found
            else:
                assert not found.get("validation_curve"), found
            # validation's greedy answers from a float32 copy of the policy (an update below
            # bfloat16's grid shows in validation), rollouts from one in the type this CPU
            # decodes fastest (bfloat16 only where it computes it natively)
            greedy = {dtype for dtype, t in decoded if t == 0}
            assert greedy == ({"torch.float32"} if validated else set()), decoded
            assert {dtype for dtype, t in decoded if t > 0} == {f"torch.{cpu_dtype()}"}, decoded
            assert manifest["rollout_dtype"] == cpu_dtype()
            assert found["timing"]["steps"] == 1 and found["timing"]["generation_s"] > 0
        else:
            assert manifest["loss_curve"]
    config = RunConfig(
        benchmark="mbpp", system=EVALUATE_WITH[method], model=model_spec(checkpoints),
        limit=1, max_new_tokens=16,
    )  # fmt: skip
    Runner(config, tmp_path / "run", data_dir=data_dir, repeats=0).run()
    store = Store(tmp_path / "run", create=False)
    models = store.metadata()["models"]
    assert all(m["manifest"]["method"] == method for m in models.values())
    assert len(list(store.samples())) == 1


# per method: the file that shows a checkpoint was saved, the log a resumed run keeps (a reward
# log, or for SFT the trainer state's log history), and the role whose manifest is checked
RESUMABLE = {
    "grpo": ("trainer/checkpoint-1/trainer_state.json", "rewards.txt", "model"),
    "corecode": ("round1/coder/trainer/checkpoint-1/trainer_state.json",
                 "round1/coder/rewards.txt", "coder"),
    "magrpo": ("trainer-state/checkpoint-1/training_state.pt", "rewards.txt", "main"),
    "sft": ("planner-trainer/checkpoint-1/trainer_state.json",
            "planner-trainer/checkpoint-1/trainer_state.json", "planner"),
}  # fmt: skip


@pytest.mark.model
@pytest.mark.parametrize("method", list(RESUMABLE))
def test_training_resumes_after_a_kill(method, tmp_path, data_dir):
    out = tmp_path / "ckpt"
    command = [
        sys.executable, "-m", "corebench.harness.cli", "train", method, "--out", str(out),
        "--data-dir", str(data_dir), *(f"--set={item}" for item in TINY),
    ]  # fmt: skip
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    saved_name, log_name, role = RESUMABLE[method]
    saved, log = out / saved_name, out / log_name
    deadline = time.monotonic() + 600
    while not saved.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    first.kill()
    first.wait()
    assert saved.exists(), "no checkpoint before the kill"
    assert not (out / role / "corebench_manifest.json").exists(), "finished before the kill"
    # mark step 1's log: a resumed run keeps it, one started over would not
    if method == "sft":
        state = json.loads(log.read_text())
        state["log_history"][0]["loss"] = 9.0
        log.write_text(json.dumps(state))
    else:
        group = 2  # num_generations x prompts_per_step (magrpo: num_generations)
        rewards = log.read_text().split()
        log.write_text("9\n" * group + "".join(f"{v}\n" for v in rewards[group:]))
    planner_record = out / "round1" / "planner" / "phase.json"
    planner_done = planner_record.stat().st_mtime_ns if method == "corecode" else None

    subprocess.run(command, check=True, capture_output=True)
    manifest = json.loads((out / role / "corebench_manifest.json").read_text())
    assert manifest["steps"] == 2
    if method == "sft":
        assert [e["loss"] for e in manifest["loss_curve"]][0] == 9.0
    else:
        assert manifest["reward_curve"][0] == {"step": 1, "reward": 9.0}
        assert len(manifest["reward_curve"]) == 2
        assert len(log.read_text().split()) == 2 * 2  # step 1's kept, step 2's once
    if method == "corecode":  # the planner phase had finished: not redone, its curve counts
        assert planner_record.stat().st_mtime_ns == planner_done
        planner = json.loads((out / "planner" / "corebench_manifest.json").read_text())
        assert planner["steps"] == 2 and len(planner["reward_curve"]) == 2
        assert [(p["role"], p["steps"]) for p in planner["phases"]] == [
            ("planner", 2),
            ("coder", 2),
        ]


def test_only_the_trainers_resume_states_are_dropped(tmp_path):
    states = [tmp_path / "trainer/checkpoint-2", tmp_path / "trainer-state/checkpoint-4",
              tmp_path / "planner-trainer/checkpoint-116",
              tmp_path / "round1/planner/trainer/checkpoint-10"]  # fmt: skip
    kept = [tmp_path / "planner/config.json", tmp_path / "trainer/checkpoint-notes/a.txt",
            tmp_path / "round1/planner/model/model.safetensors",
            tmp_path / "start/checkpoint-500/model.safetensors"]  # fmt: skip
    for path in [s / "optimizer.pt" for s in states] + kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    (tmp_path / "trainer/checkpoint-3").write_text("a file, not a state")
    outside = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    (outside / "checkpoint-7").mkdir(parents=True)
    (tmp_path / "trainer/checkpoint-7").symlink_to(outside / "checkpoint-7")
    (outside / "trainer/checkpoint-5").mkdir(parents=True)  # another run's trainer, linked in
    (tmp_path / "round1/coder").mkdir(parents=True)
    (tmp_path / "round1/coder/trainer").symlink_to(outside / "trainer")
    assert drop_resume_states(tmp_path) == 4
    assert not any(s.exists() for s in states)
    assert all(k.exists() for k in kept) and (tmp_path / "trainer/checkpoint-3").is_file()
    # links are not followed out of the folder, nor removed
    assert (outside / "checkpoint-7").is_dir() and (outside / "trainer/checkpoint-5").is_dir()
    assert (tmp_path / "trainer").is_dir()  # the trainer's other files are its own


@pytest.mark.model
def test_two_processes_write_each_file_once_and_log_every_reward(tmp_path, data_dir):
    """`accelerate launch --multi_gpu --num_processes 2` on a machine without GPUs: two CPU
    processes (gloo). Each scores its own completions; the reward log holds both processes'
    rewards, written by one process; one manifest."""
    out = tmp_path / "ckpt"
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", "0", "-m", "corebench.harness.cli", "train", "grpo",
        "--out", str(out), "--data-dir", str(data_dir), *(f"--set={item}" for item in TINY),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((out / "model" / "corebench_manifest.json").read_text())
    assert manifest["processes"] == 2
    rewards = (out / "rewards.txt").read_text().split()
    # 2 steps x (num_generations 2 x prompts_per_step 1) per process x 2 processes, each once;
    # the curve's steps average both processes' rewards (one process's alone: one point of 4)
    assert len(rewards) == 2 * 2 * 2
    assert [p["step"] for p in manifest["reward_curve"]] == [1, 2]
    for point, start in zip(manifest["reward_curve"], (0, 4), strict=True):
        assert point["reward"] == pytest.approx(sum(map(float, rewards[start : start + 4])) / 4)
    assert manifest["steps"] == 2
    assert (out / "model" / "config.json").exists()


@pytest.mark.model
def test_multi_turn_magrpo_feeds_the_sandbox_results_back(tmp_path, data_dir, monkeypatch):
    import corebench.training.magrpo as magrpo

    checks: list[tuple[str, str]] = []  # (program, feedback) of every transition between turns

    def recording(programs):
        out = real(programs)
        checks.extend((c, f) for (c, _), (_, f) in zip(programs, out, strict=True))
        return out

    real = magrpo.example_feedback
    monkeypatch.setattr(magrpo, "example_feedback", recording)
    settings = load_settings(
        "magrpo",
        None,
        [
            *TINY,
            "steps=1",
            "turns=2",
            f"out={json.dumps(str(tmp_path / 'ckpt'))}",
            f"data_dir={json.dumps(str(data_dir))}",
        ],
    )
    checkpoints = train(settings)
    # aligned joint actions: 2 at turn 1, each expanded into 2 more at turn 2
    assert len(checks) == 2
    assert all(f.startswith(("passed: assert", "failed: assert")) for _, f in checks), checks
    rewards = (tmp_path / "ckpt" / "rewards.txt").read_text().split()
    assert len(rewards) == 2 + 4
    manifest = json.loads((checkpoints["main"] / "corebench_manifest.json").read_text())
    assert manifest["steps"] == 1 and manifest["system_options"] == {"turns": 2}
    assert manifest["settings"]["reward"] == "tests"


@pytest.mark.model
def test_grpo_trains_on_apps_programs_and_the_checkpoint_runs_there(tmp_path):
    from pathlib import Path

    fixtures = Path(__file__).parent / "fixtures" / "hf"
    out = tmp_path / "ckpt"
    settings = load_settings(
        "grpo",
        None,
        [
            *TINY,
            "benchmark=apps",
            "eval_benchmarks=[]",
            f"out={json.dumps(str(out))}",
            f"data_dir={json.dumps(str(fixtures))}",
        ],
    )
    checkpoints = train(settings)
    manifest = json.loads((checkpoints["model"] / "corebench_manifest.json").read_text())
    assert manifest["data"]["source"] == "apps:train" and manifest["data"]["tasks"] == 2
    assert len(manifest["reward_curve"]) == 2
    config = RunConfig(benchmark="apps", system="direct", model=model_spec(checkpoints), limit=1,
                       max_new_tokens=16)  # fmt: skip
    Runner(config, tmp_path / "run", data_dir=fixtures, repeats=0).run()
    assert len(list(Store(tmp_path / "run", create=False).samples())) == 1


def test_scale_out_configs_validate_on_cpu(tmp_path):
    from accelerate.commands.config.config_args import load_config_from_file

    from corebench.training.grpo import grpo_config
    from corebench.training.scaleout import launch_command, write_accelerate_config

    path = write_accelerate_config(tmp_path / "accelerate.yaml", processes=8)
    loaded = load_config_from_file(str(path))
    assert loaded.num_processes == 8 and loaded.distributed_type == "DEEPSPEED"
    assert loaded.deepspeed_config["zero_stage"] == 3
    command = launch_command(path, "grpo", None)
    assert command.startswith("accelerate launch --config_file") and "use_vllm=true" in command
    settings = load_settings("grpo", None, ["use_vllm=true", "vllm_mode=server", "use_cpu=false"])
    args = grpo_config(settings, tmp_path / "out")
    assert args.use_vllm and args.vllm_mode == "server"
    assert args.per_device_train_batch_size % args.num_generations == 0


def test_humaneval_training_uses_its_train_split_checked_against_the_heldout_one(data_dir):
    settings = load_settings(
        "magrpo",
        None,
        benchmark="humaneval",
        eval_benchmarks=["humaneval"],
        eval_split="heldout",
        data_dir=str(data_dir),
    )
    data = load_train_data(settings)
    # the 124 train tasks less three near variants of held-out ones (test_benchmarks.py)
    assert len(data.tasks) == 121 and {o.train_id for o in data.overlaps} == {
        "HumanEval/29",
        "HumanEval/43",
        "HumanEval/142",
    }
    # checked against the whole test split instead, every training task is an evaluation task
    with pytest.raises(CorebenchError, match="124 training tasks are near duplicates"):
        load_train_data(
            settings.model_copy(update={"eval_split": "test", "exclude_overlaps": False})
        )


def test_update_batch_splits_a_step_into_accumulated_passes_or_refuses_a_bad_size(tmp_path):
    from corebench.training.grpo import grpo_config

    whole = grpo_config(load_settings("grpo", None, ["num_generations=8"]), tmp_path)
    split = grpo_config(
        load_settings("grpo", None, ["num_generations=8", "update_batch=4"]), tmp_path
    )
    assert (whole.per_device_train_batch_size, whole.gradient_accumulation_steps) == (16, 1)
    assert (split.per_device_train_batch_size, split.gradient_accumulation_steps) == (4, 4)
    # one generation batch, the step's 2 prompts × 8 completions, per optimisation step either way
    assert whole.generation_batch_size == split.generation_batch_size == 16
    with pytest.raises(CorebenchError, match="update_batch 5 does not divide a step's 16"):
        load_settings("grpo", None, ["num_generations=8", "update_batch=5"])
    with pytest.raises(CorebenchError, match="under loss_type bnpo"):
        load_settings("grpo", None, ["update_batch=4", "loss_type=bnpo"])
    with pytest.raises(CorebenchError, match="magrpo does not read it"):
        load_settings("magrpo", None, ["update_batch=4"])


def tiny_llama(tokenizer):
    """A one-layer Llama of width 16 over ``tokenizer``'s vocabulary: seconds to train."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)  # fmt: skip
    return LlamaForCausalLM(config)


def tiny_checkpoint(folder):
    """``tiny_llama`` over the embedded model's tokenizer, saved in ``folder`` (for hf:PATH)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(local_checkpoint("embedded"))
    tiny_llama(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def one_grpo_step(out, options: list[str], passes: int = 1, update_rows: int | None = None,
                  watch=None):  # fmt: skip
    """One step of corebench's GRPO trainer (tied groups dropped, TRL's generation) on a tiny
    model, 2 prompts × 4 completions in ``passes`` accumulated passes: its completions, sorted,
    and its weight change (plain SGD without clipping, so the change is the learning rate times
    the gradient). ``watch(model)`` is called before training."""
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer

    from corebench.training.grpo import grpo_config, trainer_class

    tokenizer = AutoTokenizer.from_pretrained(local_checkpoint("embedded"))
    rows = Dataset.from_list(
        [{"prompt": "def add(a, b):"}, {"prompt": "def multiply(first, second, third):"}]
    )
    texts: list[str] = []
    lengths: list[int] = []

    def reward(completions, completion_ids, **_):  # varies within a group: advantages not all 0
        texts.extend(completions)
        lengths.extend(map(len, completion_ids))
        return [float(sum(map(ord, c)) % 7) for c in completions]

    torch.manual_seed(0)
    model = tiny_llama(tokenizer)
    if watch is not None:
        watch(model)
    start = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    settings = load_settings(
        "grpo", None,
        ["steps=1", "num_generations=4", "max_completion_length=12", "learning_rate=0.1", *options],
    )  # fmt: skip
    args = grpo_config(settings, out)
    args.optim, args.max_grad_norm = "sgd", 0.0  # clipping could hide a scale error
    trainer = trainer_class()(model=model, reward_funcs=[reward], args=args,
                              train_dataset=rows, processing_class=tokenizer)  # fmt: skip
    trainer.update_rows = update_rows
    trainer.train()
    assert trainer.args.gradient_accumulation_steps == passes
    end = torch.cat([p.detach().flatten() for p in model.parameters()])
    return sorted(texts), end - start, sorted(lengths)


@pytest.mark.model  # the embedded model's tokenizer
def test_update_batch_gives_the_same_update_as_the_whole_batch(tmp_path):
    """The step's completions in one pass or accumulated over 4 passes of 2: the same
    completions (one generation batch, same seed) and the same weight change to rounding."""
    import torch

    whole_texts, whole, _ = one_grpo_step(tmp_path / "whole", [])
    split_texts, split, _ = one_grpo_step(tmp_path / "split", ["update_batch=2"], passes=4)
    assert whole_texts == split_texts and len(whole_texts) == 8
    assert whole.norm() > 0  # a step that changed nothing would match trivially
    torch.testing.assert_close(split, whole, rtol=1e-4, atol=1e-7)


@pytest.mark.model  # the embedded model's tokenizer
def test_an_update_scored_by_length_is_trls_update(tmp_path, monkeypatch):
    """The trainer's update scored through the override (by_length, 3 rows at a time, the
    output head on completion tokens only) changes the weights as TRL's scoring of the whole
    batch does, from the same completions."""
    import torch

    from corebench.training import grpo

    groups: list[int] = []

    def counted(score, ids, mask, keep, rows):
        groups.append(ids.shape[0])
        return by_length(score, ids, mask, keep, rows)

    monkeypatch.setattr(grpo, "by_length", counted)
    trl_texts, trl, _ = one_grpo_step(tmp_path / "trl", [])
    assert groups == []
    texts, grouped, lengths = one_grpo_step(tmp_path / "by-length", [], update_rows=3)
    assert texts == trl_texts and len(texts) == 8
    assert lengths == [12] * 8  # a random model's completions all reach the cap: the groups
    # are not cut here (tests/test_update_scoring.py cuts them), only split and scored apart
    assert groups == [8]  # the update's one pass went through by_length
    assert trl.norm() > 0
    torch.testing.assert_close(grouped, trl, rtol=1e-4, atol=1e-7)


@pytest.mark.model  # the embedded model's tokenizer
def test_bf16_trains_the_update_under_bfloat16_autocast(tmp_path):
    """``bf16 = true`` reaches the update: its forward passes with gradients run in bfloat16
    over the float32 weights, which the step moves (the studies' smoke scale trains in float32,
    so this is where CI sees it)."""
    import torch

    seen: set[torch.dtype] = set()  # the MLP's output type in forward passes with gradients
    models = []

    def watch(model):
        models.append(model)
        model.model.layers[0].mlp.down_proj.register_forward_hook(
            lambda _m, _i, out: seen.add(out.dtype) if torch.is_grad_enabled() else None
        )

    _, changed, _ = one_grpo_step(tmp_path / "bf16", ["bf16=true"], watch=watch)
    assert seen == {torch.bfloat16}
    assert changed.norm() > 0 and all(p.dtype == torch.float32 for p in models[0].parameters())
    seen.clear()
    one_grpo_step(tmp_path / "float32", [], watch=watch)
    assert seen == {torch.float32}


@pytest.mark.model  # the embedded model's tokenizer
def test_magrpo_bf16_runs_comlrls_loop_under_bfloat16_autocast(tmp_path, data_dir, monkeypatch):
    """``bf16 = true`` reaches MAGRPO's training loop: comlrl's ``train`` runs inside bfloat16
    autocast, where an agent's forward passes with gradients compute in bfloat16 over float32
    weights; without it, in float32. (comlrl's loop itself is replaced here by that forward.)"""
    import torch
    from comlrl.trainers.reinforce import MAGRPOTrainer

    from corebench.training.magrpo import train_magrpo

    tiny = tiny_checkpoint(tmp_path / "tiny")
    seen: dict[str, set] = {}

    class Stopped(Exception):
        pass

    def loop(self, *args, **kwargs):
        agent = self.agents[0]
        outputs: set[torch.dtype] = set()
        agent.model.layers[0].mlp.down_proj.register_forward_hook(
            lambda _m, _i, out: outputs.add(out.dtype)
        )
        with torch.enable_grad():
            agent(input_ids=torch.tensor([[1, 2, 3]]))
        seen["outputs"], seen["weights"] = outputs, {p.dtype for p in agent.parameters()}
        raise Stopped

    monkeypatch.setattr(MAGRPOTrainer, "train", loop)
    for bf16, expected in ((True, torch.bfloat16), (False, torch.float32)):
        settings = load_settings(
            "magrpo", None,
            [f"model=hf:{tiny}", f"out={tmp_path / str(bf16)}", f"bf16={str(bf16).lower()}",
             "steps=1", "tasks_limit=2", "filter_samples=0", "validation_tasks=0",
             f"data_dir={data_dir}"],
        )  # fmt: skip
        with pytest.raises(Stopped):
            train_magrpo(settings)
        assert seen.pop("outputs") == {expected}
        assert seen.pop("weights") == {torch.float32}


@pytest.mark.model  # the embedded model's tokenizer
def test_sft_bf16_trains_under_bfloat16_autocast(tmp_path, data_dir, monkeypatch):
    """``bf16 = true`` reaches SFT's loss (TRL's ``SFTConfig(bf16=...)``): its forward passes
    compute in bfloat16 over float32 weights, which the step moves; without it, in float32."""
    import torch
    from safetensors.torch import load_file
    from trl import SFTTrainer

    from corebench.training.sft import train_sft

    tiny = tiny_checkpoint(tmp_path / "tiny")
    seen: dict[str, set] = {"outputs": set(), "weights": set()}
    compute_loss = SFTTrainer.compute_loss

    def watched(self, model, *args, **kwargs):
        hook = model.model.layers[0].mlp.down_proj.register_forward_hook(
            lambda _m, _i, out: seen["outputs"].add(out.dtype)
        )
        seen["weights"] |= {p.dtype for p in model.parameters()}
        try:
            return compute_loss(self, model, *args, **kwargs)
        finally:
            hook.remove()

    monkeypatch.setattr(SFTTrainer, "compute_loss", watched)
    before = load_file(tiny / "model.safetensors")
    for bf16, expected in ((True, torch.bfloat16), (False, torch.float32)):
        settings = load_settings(
            "sft", None,
            [f"model=hf:{tiny}", f"out={tmp_path / str(bf16)}", f"bf16={str(bf16).lower()}",
             "steps=1", "tasks_limit=2", "prompts_per_step=2", "validation_tasks=0",
             'sft_roles=["model"]', "learning_rate=0.01", f"data_dir={data_dir}"],
        )  # fmt: skip
        final = train_sft(settings)["model"]
        assert seen["outputs"] == {expected} and seen["weights"] == {torch.float32}
        after = load_file(final / "model.safetensors")
        assert any(not torch.equal(after[name], before[name]) for name in before)
        seen["outputs"].clear()
        seen["weights"].clear()
