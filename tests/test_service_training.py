"""Training against the judging service: corebench's own rewards pointed at it, TRL's
GRPOTrainer calling its reward function, and verl's reward hook; a real service on loopback."""

from __future__ import annotations

import json

import pytest
from test_service import ADD, Running

from corebench.harness.config import ENV_JUDGE_URL
from corebench.harness.registry import default_plugins
from corebench.training.data import TrainTask
from corebench.training.rewards import example_feedback, measure_passing, run_tests
from corebench.training.service_rewards import JudgeReward, compute_score


@pytest.fixture(scope="module")
def running(data_dir):
    service = Running(data_dir=data_dir)
    yield service
    service.close()


@pytest.fixture(scope="module")
def mbpp_tasks(data_dir) -> list[TrainTask]:
    mbpp = default_plugins().benchmarks.get("mbpp").component(data_dir)
    tasks = {t.task_id: t for t in mbpp.tasks()}
    return [TrainTask(tasks[i], mbpp.test_suite(i)) for i in ("Mbpp/2", "Mbpp/3")]


def test_rewards_on_the_service_equal_rewards_on_the_local_sandbox(
    running, mbpp_tasks, monkeypatch
):
    two, three = mbpp_tasks
    programs = [
        (two.reference, two),
        ("def similar_elements(a, b):\n    return tuple(a)\n", two),
        (three.reference, three),
        ("def is_not_prime(n):\n    return n % 2 == 0\n", three),
        ("", three),
    ]
    monkeypatch.delenv(ENV_JUDGE_URL, raising=False)
    local = run_tests(programs)
    local_feedback = example_feedback([(c, t.task) for c, t in programs[:2]])
    before = running.client().health()["programs_judged"]
    monkeypatch.setenv(ENV_JUDGE_URL, running.url)
    remote = run_tests(programs)
    assert running.client().health()["programs_judged"] == before + len(programs)
    assert [(r.passed, r.total, r.runs) for r in remote] == [
        (r.passed, r.total, r.runs) for r in local
    ]
    assert [[o.verdict for o in r.outcomes] for r in remote] == [
        [o.verdict for o in r.outcomes] for r in local
    ]
    assert remote[0].pass_rate == 1.0 and 0 < remote[3].pass_rate < 1 and remote[4].total
    assert example_feedback([(c, t.task) for c, t in programs[:2]]) == local_feedback
    measured = measure_passing(programs[:2], remote[:2])
    assert measured[0] is not None and measured[0].runtime_ratio > 0
    assert measured[1] is None  # it failed a test: not measured


def test_verl_compute_score_reads_tests_or_a_task_from_the_ground_truth(running, monkeypatch):
    monkeypatch.setenv(ENV_JUDGE_URL, running.url)
    good = "```python\ndef add(a, b):\n    return a + b\n```"
    half = "```python\ndef add(a, b):\n    return 3 if a == 1 else 0\n```"
    # the training reward: the share of tests passed, +1 for passing them all
    assert compute_score("inline", good, json.dumps(ADD)) == 2.0
    assert compute_score("inline", half, ADD, {"index": 0}) == pytest.approx(1 / 3)
    task = {"task": {"benchmark": "mbpp", "task_id": "Mbpp/2"}}
    code = "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n"
    assert compute_score("mbpp", code, task) == 2.0


def test_the_trl_reward_scores_each_completion_of_a_batch(running):
    reward = JudgeReward(running.url, benchmark="mbpp")
    completions = [
        [{"role": "assistant", "content": "```python\ndef add(a, b):\n    return a + b\n```"}],
        [{"role": "assistant", "content": "no code here"}],
        [{"role": "assistant", "content": "def similar_elements(a, b):\n    return ()\n"}],
    ]
    values = reward(
        prompts=["p"] * 3,
        completions=completions,
        completion_ids=[[1]] * 3,
        task_id=[None, None, "Mbpp/2"],
        tests=[ADD, ADD, None],
        trainer_state=None,
    )
    # all 3 tests passed: 1 + 1; no code: 0; a stub that passes Mbpp/2's tests expecting no
    # common element (29 of 111) earns their share only, well below a correct program
    assert values[0] == pytest.approx(2.0) and values[1] == 0.0
    assert 0.2 < values[2] < 0.3
    rate = JudgeReward(running.url, benchmark="mbpp", score="pass_rate")(
        completions=completions[2:], task_id=["Mbpp/2"]
    )
    assert rate[0] == pytest.approx(values[2])
    assert reward.__name__ == "corebench_tests"


@pytest.mark.model
def test_trl_grpo_trainer_trains_with_the_service_reward(running, mbpp_tasks, tmp_path):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    from corebench.training.grpo import grpo_config
    from corebench.training.models import local_checkpoint
    from corebench.training.settings import load_settings

    base = local_checkpoint("embedded")
    settings = load_settings(
        "grpo", None, ["steps=1", "num_generations=2", "max_completion_length=32"]
    )
    rows = Dataset.from_list(
        [
            {"prompt": [{"role": "user", "content": t.task.prompt}], "task_id": t.task.task_id}
            for t in mbpp_tasks
        ]
    )
    before = running.client().health()["programs_judged"]
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(base, dtype="float32"),
        reward_funcs=[JudgeReward(running.url, benchmark="mbpp")],
        args=grpo_config(settings, tmp_path),
        train_dataset=rows,
        processing_class=AutoTokenizer.from_pretrained(base),
    )
    trainer.train()
    judged = running.client().health()["programs_judged"] - before
    assert judged == settings.num_generations * settings.prompts_per_step  # one per completion
    logged = [h for h in trainer.state.log_history if "rewards/corebench_tests/mean" in h]
    assert logged, trainer.state.log_history


@pytest.mark.model
def test_corebench_train_points_its_rewards_at_the_service(running, data_dir, tmp_path):
    from corebench.training.dispatch import train
    from corebench.training.settings import load_settings

    settings = load_settings(
        "grpo",
        None,
        [
            "steps=1",
            "tasks_limit=2",
            "num_generations=2",
            "prompts_per_step=1",
            "max_completion_length=32",
            f"out={json.dumps(str(tmp_path / 'ckpt'))}",
            f"data_dir={json.dumps(str(data_dir))}",
            f"judge_url={json.dumps(running.url)}",
        ],
    )
    before = running.client().health()["programs_judged"]
    train(settings)
    [log] = (tmp_path / "ckpt").rglob("rewards.txt")
    rewards = log.read_text().split()
    assert running.client().health()["programs_judged"] - before == len(rewards) == 2
