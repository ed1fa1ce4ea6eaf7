"""SFT cold start with TRL's SFTTrainer: the planner learns plans (task -> plan), the coder learns
to follow them (task + plan -> reference solution). The plan dataset is saved with ``datasets``."""

from __future__ import annotations

import os
from pathlib import Path

from .data import load_train_data
from .grpo import last_checkpoint
from .manifest import write_manifest
from .models import local_checkpoint
from .plans import coder_prompt, make_plans, planner_prompt
from .settings import EVALUATE_WITH, TrainSettings


def train_sft(settings: TrainSettings) -> dict[str, Path]:
    os.environ.setdefault("WANDB_MODE", "disabled")
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    data = load_train_data(settings)
    base = local_checkpoint(settings.model)
    out = Path(settings.out)
    plans = make_plans(data.tasks, settings.plan_source, settings.max_completion_length)
    kept = [(t, p) for t, p in zip(data.tasks, plans, strict=True) if p and t.reference]
    plan_set = Dataset.from_list(
        [
            {"task_id": t.task.task_id, "prompt": t.task.prompt, "plan": p, "code": t.reference}
            for t, p in kept
        ]
    )
    plan_set.save_to_disk(str(out / "plans"))
    examples = {
        "planner": [(planner_prompt(t), p) for t, p in kept],
        "coder": [(coder_prompt(t, p), f"```python\n{t.reference.strip()}\n```") for t, p in kept],
    }
    tokenizer = AutoTokenizer.from_pretrained(base)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    checkpoints = {}
    for role in settings.sft_roles:
        dataset = Dataset.from_list(
            [
                {"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]}
                for q, a in examples[role]
            ]
        )
        trainer_dir = out / f"{role}-trainer"
        trainer = SFTTrainer(
            model=str(base),
            args=SFTConfig(
                output_dir=str(trainer_dir),
                max_steps=settings.steps,
                per_device_train_batch_size=settings.prompts_per_step,
                learning_rate=settings.learning_rate,
                max_length=settings.max_prompt_length + settings.max_completion_length,
                assistant_only_loss=False,
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
        trainer.save_model(str(final))
        tokenizer.save_pretrained(final)
        losses = [
            {"step": e["step"], "loss": e["loss"]} for e in trainer.state.log_history if "loss" in e
        ]
        write_manifest(
            final,
            settings=settings,
            role=role,
            base_model=settings.model,
            data=data,
            steps=int(trainer.state.global_step),
            reward_curve=[],
            extra={
                "evaluate_with": EVALUATE_WITH["sft"],
                "loss_curve": losses,
                "plans": {"source": settings.plan_source, "examples": len(kept)},
            },
        )
        checkpoints[role] = final
    return checkpoints
