"""SFT cold start with TRL's SFTTrainer, on a benchmark's train split with its reference solutions:
the planner learns plans (task -> plan), the coder learns to follow them (task + plan -> reference
solution), and a single model (role ``model``, evaluated with ``direct``) learns to answer the
task prompt with the reference solution. The loss is on the answer only (prompt-completion
rows). The plan dataset is saved with ``datasets``. ``epochs`` passes over the data, unless
``steps`` is set, which then caps the optimisation steps."""

from __future__ import annotations

import os
from pathlib import Path

from .data import load_train_data
from .distributed import is_main_process, wait_for_everyone
from .grpo import last_checkpoint
from .manifest import write_manifest
from .models import local_checkpoint
from .plans import coder_prompt, make_plans, planner_prompt
from .settings import TrainSettings, evaluated_with
from .systems import system

PLAN_ROLES = ("planner", "coder")  # the roles whose data needs plans


def fenced(code: str) -> str:
    """A reference solution as the answer a code role gives: one Python code block."""
    return f"```python\n{code.strip()}\n```"


def train_sft(settings: TrainSettings) -> dict[str, Path]:
    os.environ.setdefault("WANDB_MODE", "disabled")
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    data = load_train_data(settings)
    base = local_checkpoint(settings.model)
    out = Path(settings.out)
    solved = [t for t in data.tasks if t.reference]
    examples = {}
    if set(settings.sft_roles) & set(PLAN_ROLES):
        plans = make_plans(solved, settings.plan_source, settings.max_completion_length)
        kept = [(t, p) for t, p in zip(solved, plans, strict=True) if p]
        plan_set = Dataset.from_list(
            [
                {"task_id": t.task.task_id, "prompt": t.task.prompt, "plan": p, "code": t.reference}
                for t, p in kept
            ]
        )
        if is_main_process():
            plan_set.save_to_disk(str(out / "plans"))
        examples["planner"] = [(planner_prompt(t), p) for t, p in kept]
        examples["coder"] = [(coder_prompt(t, p), fenced(t.reference)) for t, p in kept]
    direct = system(evaluated_with("sft", ["model"])).role_prompt
    examples["model"] = [(direct("model", t.task), fenced(t.reference)) for t in solved]
    tokenizer = AutoTokenizer.from_pretrained(base)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    checkpoints = {}
    for role in settings.sft_roles:
        dataset = Dataset.from_list(
            [
                {
                    "prompt": [{"role": "user", "content": q}],
                    "completion": [{"role": "assistant", "content": a}],
                }
                for q, a in examples[role]
            ]
        )
        trainer_dir = out / f"{role}-trainer"
        trainer = SFTTrainer(
            model=str(base),
            args=SFTConfig(
                output_dir=str(trainer_dir),
                num_train_epochs=settings.epochs,
                max_steps=settings.steps if "steps" in settings.model_fields_set else -1,
                per_device_train_batch_size=settings.prompts_per_step,
                learning_rate=settings.learning_rate,
                max_length=settings.max_prompt_length + settings.max_completion_length,
                completion_only_loss=True,
                logging_steps=1,
                save_strategy="steps",
                save_steps=settings.save_steps,
                save_total_limit=1,
                report_to="none",
                seed=settings.seed,
                use_cpu=settings.use_cpu,
                bf16=settings.bf16,
                disable_tqdm=True,
            ),
            train_dataset=dataset,
            processing_class=tokenizer,
        )
        resume = last_checkpoint(trainer_dir)
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        final = out / role
        trainer.save_model(str(final))  # the main process only (transformers' should_save)
        losses = [
            {"step": e["step"], "loss": e["loss"]} for e in trainer.state.log_history if "loss" in e
        ]
        if is_main_process():
            tokenizer.save_pretrained(final)
            write_manifest(
                final,
                settings=settings,
                role=role,
                base_model=settings.model,
                data=data,
                steps=int(trainer.state.global_step),
                reward_curve=[],
                extra={
                    "evaluate_with": evaluated_with("sft", [role]),
                    "loss_curve": losses,
                    "examples": len(examples[role]),
                    **({"plans": {"source": settings.plan_source}} if role in PLAN_ROLES else {}),
                },
            )
        wait_for_everyone()  # one role's files are complete before any process goes on
        checkpoints[role] = final
    return checkpoints
