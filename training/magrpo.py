"""MAGRPO with comlrl: a helper agent (``aux``) and a main agent trained jointly with one shared
reward on their combined program, group-relative advantages, decentralized execution. The reward
is the MAGRPO authors' structure terms (so main must use ``aux``) with corebench's correctness
term (``reward = "tests"``), or the class study's (``reward = "class"``: +0.2 parses, +0.3 runs,
+0.1 per passed base test). The prompts are the ``helper-main`` system's (parallel mode).

Resuming: comlrl checkpoints a trainer (both agents, their optimizers, random states) at the end
of an epoch only, so the ``steps`` items are split into epochs of ``save_steps`` items
(``Chunked``); after a kill, the same command resumes from the last epoch saved in
``trainer-state/`` and keeps the rewards logged up to it. comlrl trains in one process (one
device per agent): under a multi-process launch it is refused.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path
from typing import Any

from corebench.harness.errors import CorebenchError
from corebench.harness.extract import extract_code

from .data import load_train_data
from .diagnostics import diagnose
from .distributed import world_size
from .manifest import write_manifest
from .models import local_checkpoint, pad_outside_prompts
from .rewards import (
    RewardLog,
    authors_pair_reward,
    class_pair_reward,
    example_feedback,
    pair_shape,
    run_tests,
)
from .settings import EVALUATE_WITH, TrainSettings
from .systems import system

ROLES = ("helper", "main")
STATE = "trainer-state"  # comlrl's resumable checkpoints, one per finished epoch (the last kept)


def chunked_trainer(base: type) -> type:
    """comlrl's trainer, its dataset read one chunk of ``chunk`` items per epoch: epoch e trains
    items [e·chunk, (e+1)·chunk), so a checkpoint at each epoch's end is a point to resume from.
    ``_on_checkpoint_train_start`` is comlrl's hook for aligning a subclass with the resumed
    epoch."""

    class Chunked(base):
        chunk = 1
        _epoch = 0

        def _on_checkpoint_train_start(self, start_epoch: int, total_epochs: int) -> None:
            self._epoch = start_epoch

        def get_train_dataloader(self):
            from torch.utils.data import DataLoader, Subset

            start = self._epoch * self.chunk
            self._epoch += 1
            part = range(start, min(start + self.chunk, len(self.train_dataset)))
            return DataLoader(
                Subset(self.train_dataset, list(part)),
                batch_size=1,
                collate_fn=lambda examples: examples,
                shuffle=False,
            )

    return Chunked


class GradNorms:
    """Each optimizer update's gradient norm (both agents), appended to a file with the step it
    followed; a resumed run keeps those of the steps before its checkpoint."""

    def __init__(self, path: Path, keep_before: int):
        self.path, self.step = path, keep_before
        lines = path.read_text().splitlines() if path.exists() else []
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{x}\n" for x in lines if int(x.split()[0]) < keep_before))

    def record(self, optimizer: Any, *_: Any) -> None:
        import torch

        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        norm = (
            float(
                torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(x) for x in grads]))
            )
            if grads
            else 0.0
        )
        with open(self.path, "a") as f:
            f.write(f"{self.step} {norm:.6g}\n")

    def values(self) -> list[float]:
        return [float(x.split()[1]) for x in self.path.read_text().splitlines()]


def latest_state(folder: Path) -> Path | None:
    """The newest comlrl checkpoint in ``folder`` (``checkpoint-N`` with its state file)."""
    found = [p for p in folder.glob("checkpoint-*") if (p / "training_state.pt").is_file()]
    return max(found, key=lambda p: int(p.name.split("-")[-1]), default=None)


def pair_system() -> Any:
    """``helper-main``: the pair is trained on its prompts and judged on its program."""
    return system(EVALUATE_WITH["magrpo"])


def train_magrpo(settings: TrainSettings) -> dict[str, Path]:
    os.environ.setdefault("WANDB_MODE", "disabled")  # comlrl imports wandb
    import torch
    from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed

    if world_size() > 1:
        raise CorebenchError(
            "magrpo trains with comlrl, in one process (one device per agent); run `corebench "
            "train magrpo` without a multi-process launcher"
        )
    data = load_train_data(settings)
    base = local_checkpoint(settings.model)
    out = Path(settings.out)
    tasks = [t for t in data.tasks if t.task.entry_point]  # the pair writes functions
    if not tasks:
        raise CorebenchError(
            f"magrpo trains a helper and a main function; {data.source} has only "
            "stdin/stdout programs (use grpo, pta, corecode or sft)"
        )
    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.padding_side = "left"

    def chat(text: str) -> str:
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
        )

    replaced_pad = pad_outside_prompts(
        tokenizer, chat(pair_system().role_prompt("main", tasks[0].task))
    )

    # comlrl takes one dataset item per step; cycle through the tasks for `steps` steps
    # ("prompt" names the task: comlrl hands it to the transition between turns)
    items = [
        {"idx": s % len(tasks), "prompt": str(s % len(tasks)), "step": s}
        for s in range(settings.steps)
    ]
    # per step: G joint answers at turn 1, and each branch G more at every later turn
    per_step = sum(settings.num_generations**turn for turn in range(1, settings.turns + 1))
    # each chunk is one comlrl epoch, whose end also applies a part-filled rollout buffer
    # (comlrl's rollout_buffer_size, 2): an odd save_steps changes when updates happen
    chunk = max(1, min(settings.save_steps, settings.steps))
    resume = latest_state(out / STATE)
    log = RewardLog(out / "rewards.txt", per_step)
    # rewards logged after the checkpoint resumed from are given again: keep those before it
    done = int(resume.name.split("-")[-1]) * chunk if resume else 0
    log.keep(done * per_step)
    norms = GradNorms(out / "grad_norms.txt", done)

    def reward(helper: list[str], main: list[str], *, batch_items: Any = None) -> list[float]:
        task = tasks[batch_items[0]["idx"]]
        norms.step = batch_items[0]["step"]
        helpers = [extract_code(text, None).code for text in helper]
        mains = [task.code_from(text) for text in main]
        values = [
            pair_system().program(h, m) if m.strip() else ""
            for h, m in zip(helpers, mains, strict=True)
        ]
        runs = run_tests([(code, task) for code in values])
        if settings.reward == "class":
            rewards = [
                class_pair_reward(code, run, settings.tests_rewarded)
                for code, run in zip(values, runs, strict=True)
            ]
        else:
            rewards = [
                authors_pair_reward(pair_shape(h, m, task.task.entry_point), code, run)
                for h, m, code, run in zip(helpers, mains, values, runs, strict=True)
            ]
        log.add(rewards)
        return rewards

    set_seed(settings.seed)  # comlrl has no seed setting: sampling and init follow torch's

    def transition(*, prompt: str, agent_completions: list[str], **_: Any) -> list[str]:
        """Between turns: the pair's program on the task's visible examples, fed back to both
        agents in the prompts the `helper-main` system uses for its later turns."""
        task = tasks[int(prompt)]
        helper_code = extract_code(agent_completions[0], None).code
        main_code = task.code_from(agent_completions[1])
        [(_, feedback)] = example_feedback(
            [(pair_system().program(helper_code, main_code), task.task)]
        )
        seen = {"helper_code": helper_code, "main_code": main_code, "feedback": feedback}
        return [pair_system().role_prompt(role, task.task, **seen) for role in ROLES]

    agents = [AutoModelForCausalLM.from_pretrained(base, dtype="float32") for _ in ROLES]
    trainer_class = chunked_trainer(MAGRPOTrainer)
    trainer_class.chunk = chunk
    trainer = trainer_class(
        agents=agents,
        num_agents=len(ROLES),
        tokenizer=tokenizer,
        train_dataset=Dataset.from_list(items),
        reward_func=reward,
        formatters=[
            lambda item, external_prompts=None: chat(
                external_prompts or pair_system().role_prompt("helper", tasks[item["idx"]].task)
            ),
            lambda item, external_prompts=None: chat(
                external_prompts or pair_system().role_prompt("main", tasks[item["idx"]].task)
            ),
        ],
        external_transition=transition if settings.turns > 1 else None,
        args=MAGRPOConfig(
            num_turns=settings.turns,
            early_termination_threshold=None,  # every branch gets its H turns
            num_train_epochs=math.ceil(len(items) / chunk),
            num_generations=settings.num_generations,
            max_new_tokens=settings.max_completion_length,
            temperature=settings.temperature,
            top_p=1.0,
            agent_learning_rate=settings.learning_rate,
            eval_interval=0,
            logging_steps=1,
        ),
    )
    for optimizer in trainer.optimizers:  # comlrl reports no gradient norms: read them
        optimizer.register_step_pre_hook(norms.record)
    # bf16: mixed precision as TRL's bf16 does it (float32 weights and optimizer, bfloat16
    # matmuls), through autocast around comlrl's loop, which runs in this thread
    device = "cpu" if settings.use_cpu else "cuda"
    with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=settings.bf16):
        trainer.train(
            resume_from_checkpoint=str(resume) if resume else None,
            checkpoint_dir=str(out / STATE),
            checkpoint_total_limit=1,
        )
    raw = out / "trainer"
    trainer.save_model(str(raw))
    if replaced_pad is not None:
        tokenizer.pad_token = replaced_pad  # checkpoints keep the base model's tokenizer
    checkpoints = {}
    for index, role in enumerate(ROLES):
        final = out / role
        shutil.rmtree(final, ignore_errors=True)
        shutil.move(str(raw / f"agent_{index}"), final)
        tokenizer.save_pretrained(final)
        write_manifest(
            final,
            settings=settings,
            role=role,
            base_model=settings.model,
            data=data,
            steps=len(log.curve()),  # steps taken (each logs its rewards), not asked for
            reward_curve=log.curve(),
            extra={
                "evaluate_with": EVALUATE_WITH["magrpo"],
                "system_options": {"turns": settings.turns},
                "trainer": "comlrl.MAGRPOTrainer",
                "diagnostics": diagnose(
                    log.rewards, settings.num_generations, per_step, norms.values()
                ),
            },
        )
        checkpoints[role] = final
    return checkpoints
