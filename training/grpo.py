"""GRPO with TRL for one policy: plain (``grpo``) and plan-then-act (``pta``).

``run_grpo`` is the one place a TRL GRPOTrainer is built; the CoRe-Code phases use it too.
The prompts are the evaluation systems' own templates, so a checkpoint trained here is evaluated
with exactly what it learned (``grpo`` -> system ``direct``, ``pta`` -> system ``cot``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from corebench.harness.records import Measurement

from .data import TrainData, TrainTask, load_train_data
from .diagnostics import diagnose
from .distributed import is_main_process, wait_for_everyone, world_size
from .manifest import write_manifest
from .models import FrozenModel, local_checkpoint
from .rewards import RewardLog, TestRun, correctness, measure_passing, run_tests
from .settings import EVALUATE_WITH, TrainSettings
from .systems import system

# reward(completions, rows) -> one float per completion; rows are the dataset rows it answers
RewardFn = Callable[[list[str], list[dict[str, Any]]], list[float]]
# a measured program's efficiency score in [0, 1] (rewards.speed_score, rewards.memory_score)
EfficiencyTerm = Callable[[Measurement | None], float]


def grpo_config(settings: TrainSettings, output_dir: Path):
    """TRL's GRPOConfig from our settings (CPU defaults; vLLM generation when asked)."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(output_dir),
        max_steps=settings.steps,
        per_device_train_batch_size=settings.num_generations * settings.prompts_per_step,
        num_generations=settings.num_generations,
        max_completion_length=settings.max_completion_length,
        learning_rate=settings.learning_rate,
        beta=settings.beta,
        loss_type=settings.loss_type,
        temperature=settings.temperature,
        gradient_checkpointing=settings.gradient_checkpointing,
        logging_steps=1,
        save_strategy="steps",
        save_steps=settings.save_steps,
        save_total_limit=1,  # the latest checkpoint is enough to resume
        report_to="none",
        seed=settings.seed,
        use_cpu=settings.use_cpu,
        bf16=settings.bf16,
        use_vllm=settings.use_vllm,
        vllm_mode=settings.vllm_mode,
        disable_tqdm=True,
    )


def time_limit(seconds: float):
    """A TRL/transformers callback that ends training cleanly once ``seconds`` have passed."""
    import time

    from transformers import TrainerCallback

    class TimeLimit(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            self.started = time.monotonic()

        def on_step_end(self, args, state, control, **kwargs):
            if time.monotonic() - self.started >= seconds:
                control.should_training_stop = True
                control.should_save = True

    return TimeLimit()


def last_checkpoint(output_dir: Path) -> Path | None:
    checkpoints = sorted(
        (p for p in output_dir.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
        key=lambda p: int(p.name.split("-")[-1]),
    )
    return checkpoints[-1] if checkpoints else None


class Trained(NamedTuple):
    """What a GRPO run leaves: the model, its reward curve, the steps done, and what its rewards
    and gradients say about whether it could learn (``diagnostics.diagnose``)."""

    model: Path
    curve: list[dict[str, float]]
    steps: int
    diagnostics: dict[str, Any]


def run_grpo(
    settings: TrainSettings,
    *,
    model_path: Path,
    rows: list[dict[str, Any]],
    reward: RewardFn,
    out: Path,
) -> Trained:
    """Train ``model_path`` on ``rows`` (each with a ``prompt`` string) with ``reward``.

    Resumes from the last checkpoint in ``out/trainer``; saves the final model to ``out/model``.
    """
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    os.environ.setdefault("WANDB_MODE", "disabled")
    trainer_dir = out / "trainer"
    # one step's rewards: every process's completions (``RewardLog.add`` gathers them)
    group = settings.num_generations * settings.prompts_per_step * world_size()
    log = RewardLog(out / "rewards.txt", group)
    resume = last_checkpoint(trainer_dir)
    # steps after the checkpoint are done again: drop their rewards (all of them, from scratch)
    log.keep(int(resume.name.split("-")[-1]) * group if resume else 0)
    dataset = Dataset.from_list(
        [
            {"prompt": [{"role": "user", "content": r["prompt"]}], "row": i}
            for i, r in enumerate(rows)
        ]
    )

    def reward_func(completions, row, **_: Any) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        values = reward(texts, [rows[i] for i in row])
        log.add(values)
        return values

    reward_func.__name__ = "sandbox_reward"
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype="float32")
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward_func],
        args=grpo_config(settings, trainer_dir),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[time_limit(settings.max_time_s)] if settings.max_time_s else None,
    )
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    final = out / "model"
    trainer.save_model(str(final))  # the main process only (transformers' should_save)
    if is_main_process():
        tokenizer.save_pretrained(final)
    wait_for_everyone()  # the others may load the checkpoint next (a CoRe-Code phase)
    norms = [e["grad_norm"] for e in trainer.state.log_history if "grad_norm" in e]
    found = diagnose(log.rewards, settings.num_generations, group, norms)
    return Trained(final, log.curve(), int(trainer.state.global_step), found)


def code_rows(data: TrainData, system_name: str) -> list[dict[str, Any]]:
    """One row per training task, the prompt the system gives its one role."""
    prompt = system(system_name).role_prompt
    return [{"prompt": prompt("model", t.task), "task": t} for t in data.tasks]


def judge(
    codes: list[str],
    tasks: list[TrainTask],
    efficiency_term: EfficiencyTerm | None = None,
    weight: float = 0.0,
) -> tuple[list[TestRun], list[float]]:
    """Each code's test run and its efficiency bonus: ``weight`` × ``efficiency_term`` for code
    that passes every test (measured against the task's reference), else 0; no measuring at all
    without a term or a positive weight."""
    programs = list(zip(codes, tasks, strict=True))
    runs = run_tests(programs)
    if efficiency_term is None or weight <= 0:
        return runs, [0.0] * len(runs)
    return runs, [weight * efficiency_term(m) for m in measure_passing(programs, runs)]


def code_reward(settings: TrainSettings, efficiency_term: EfficiencyTerm | None = None) -> RewardFn:
    """The extracted program's correctness (``rewards.correctness`` under ``settings.reward``);
    with ``efficiency_term``, plus ``efficiency_weight`` × its score for a program passing every
    test."""

    def reward(texts: list[str], rows: list[dict[str, Any]]) -> list[float]:
        tasks: list[TrainTask] = [r["task"] for r in rows]
        codes = [t.code_from(x) for x, t in zip(texts, tasks, strict=True)]
        runs, bonus = judge(codes, tasks, efficiency_term, settings.efficiency_weight)
        return [
            correctness(r, settings.reward, settings.tests_rewarded) + b
            for r, b in zip(runs, bonus, strict=True)
        ]

    return reward


def plan_part(answer: str) -> str:
    """The reasoning before the first code block of a plan-then-act answer."""
    return answer.split("```", 1)[0].strip()


def pta_reward(settings: TrainSettings, coder: FrozenModel) -> RewardFn:
    """Plan-then-act: the answer's own code is rewarded as in GRPO, and its plan by its outcome:
    ``plan_weight`` × the correctness of the code a frozen coder writes from the plan alone."""
    act = code_reward(settings)

    def reward(texts: list[str], rows: list[dict[str, Any]]) -> list[float]:
        tasks: list[TrainTask] = [r["task"] for r in rows]
        coder_prompt = system("corecode").role_prompt
        prompts = [
            coder_prompt("coder", t.task, plan=plan_part(x) or "(no plan)")
            for x, t in zip(texts, tasks, strict=True)
        ]
        codes = [t.code_from(a) for a, t in zip(coder.answer(prompts), tasks, strict=True)]
        plan_runs, _ = judge(codes, tasks)
        return [
            r + settings.plan_weight * correctness(p, settings.reward, settings.tests_rewarded)
            for r, p in zip(act(texts, rows), plan_runs, strict=True)
        ]

    return reward


def train_grpo(settings: TrainSettings) -> dict[str, Path]:
    """``grpo`` (system ``direct``) or ``pta`` (system ``cot``): one checkpoint, role ``model``."""
    data = load_train_data(settings)
    base = local_checkpoint(settings.model)
    out = Path(settings.out)
    coder = None
    if settings.method == "pta":
        coder = FrozenModel(base, settings.max_completion_length)
        reward = pta_reward(settings, coder)
    else:
        reward = code_reward(settings)
    rows = code_rows(data, EVALUATE_WITH[settings.method])
    try:
        trained = run_grpo(settings, model_path=base, rows=rows, reward=reward, out=out)
    finally:
        if coder is not None:
            coder.close()
    if is_main_process():
        write_manifest(
            trained.model,
            settings=settings,
            role="model",
            base_model=settings.model,
            data=data,
            steps=trained.steps,
            reward_curve=trained.curve,
            extra={
                "evaluate_with": EVALUATE_WITH[settings.method],
                "diagnostics": trained.diagnostics,
            },
        )
    return {"model": trained.model}
