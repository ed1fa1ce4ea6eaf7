"""MAGRPO with comlrl: a helper agent (``aux``) and a main agent trained jointly with one shared
reward on their combined program, group-relative advantages, decentralized execution. The reward
is corebench's correctness term with the MAGRPO authors' structure and collaboration terms once
every test passes (``reward = "tests"``, ``rewards.authors_pair_reward``), or the class study's
(``reward = "class"``: +0.2 parses, +0.3 runs, +0.1 per passed base test). The prompts are the
``helper-main`` system's (parallel mode).

comlrl's trainer is used with four of its steps replaced (``corebench_trainer``):

- **rollouts** through corebench's decode engine on the CPU (``rollouts.py``: a copy of
  each agent in the run's ``rollout_dtype``, continuous batching, a seeded generator per
  completion), each completion cut at its end of sequence token; validation's greedy answers
  from a float32 copy;
- **the loss**: comlrl sums each completion's token log-probabilities, padding after the end of
  sequence included, times its advantage. Summed over a few hundred tokens, the gradient is a
  few hundred times a token's, which is why the training-effect study's MAGRPO steps had a
  median gradient norm of 259 (TRL's GRPO: 0.77). Here, as in TRL's ``dapo`` loss, the
  advantage-weighted log-probabilities of the real completion tokens are divided by their
  count; on the CPU the completions are scored by length, as GRPO's are (``update_scoring``,
  ``update_scoring.by_length``), the output head on completion tokens only;
- **gradient clipping** at ``max_grad_norm`` (comlrl clips nothing), in the optimizer's pre-step
  hook that also logs each update's norm before clipping;
- **tied groups** (every completion rewarded alike, advantages zero) are left out of the update,
  as DAPO drops them; an update with none left is skipped.

Resuming: comlrl checkpoints a trainer (both agents, their optimizers, random states) at the end
of an epoch only, so the ``steps`` items are split into epochs of ``save_steps`` items; after a
kill, the same command resumes from the last epoch saved in ``trainer-state/`` and keeps the
rewards logged up to it. comlrl trains in one process (one device per agent): under a
multi-process launch it is refused.

With ``lora_rank``, each agent trains LoRA adapters of its own (``grpo.lora_config``: every
linear layer but the output head) over frozen weights, and is saved with them merged: a plain
checkpoint like any other.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

from corebench.harness.errors import CorebenchError
from corebench.harness.extract import extract_code

from .curriculum import filtered_tasks
from .data import TrainTask, load_train_data
from .diagnostics import diagnose
from .distributed import world_size
from .grpo import lora_config
from .manifest import write_manifest
from .models import local_checkpoint, pad_outside_prompts
from .progress import StepClock, StepLog, timing_summary, validation_curve
from .rewards import (
    RewardLog,
    authors_pair_reward,
    class_pair_reward,
    example_feedback,
    pair_shape,
    run_tests,
)
from .rollouts import Rollouts, is_lora, rollout_dtype, row_seed
from .settings import EVALUATE_WITH, TrainSettings
from .systems import system
from .update_scoring import by_length, update_rows

ROLES = ("helper", "main")
STATE = "trainer-state"  # comlrl's resumable checkpoints, one per finished epoch (the last kept)


def corebench_trainer(base: type) -> type:
    """comlrl's trainer with corebench's rollouts, loss, tied-group dropping and clock (module
    docstring), its dataset read one chunk of ``chunk`` items per epoch: epoch e trains items
    [e·chunk, (e+1)·chunk), so a checkpoint at each epoch's end is a point to resume from
    (``_on_checkpoint_train_start`` is comlrl's hook for aligning a subclass with the resumed
    epoch)."""
    import torch

    class CorebenchMAGRPO(base):
        chunk = 1
        _epoch = 0
        rollouts: list[Rollouts] | None = None  # one per agent; None: comlrl's generate
        validation_rollouts: list[Rollouts] | None = None  # float32, one per agent (with them)
        clock: StepClock | None = None
        update_rows: int | None = None  # group_loss's rows scored together; None: all at once
        seed = 0
        _calls: dict[tuple[int, int], int] = {}  # rollout batches per (step, agent)
        _clock_step = -1

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

        def _generate_completions(self, agent, batch_items, agent_idx=0,
                                  num_return_sequences=1, max_new_tokens=128,
                                  prompts_override=None, external_prompts=None, **kwargs):  # fmt: skip
            if self.rollouts is None or self.args.reference_kl_enabled or len(batch_items) != 1:
                return super()._generate_completions(
                    agent, batch_items, agent_idx=agent_idx,
                    num_return_sequences=num_return_sequences, max_new_tokens=max_new_tokens,
                    prompts_override=prompts_override, external_prompts=external_prompts,
                    **kwargs,
                )  # fmt: skip
            started = time.perf_counter()
            item = batch_items[0]
            step = int(item.get("step", 0))
            if self.clock is not None and step != self._clock_step:  # a step's first rollout
                self.clock.end(self._clock_step)
                self.clock.begin()
                self._clock_step = step
            if prompts_override is not None:
                prompt = prompts_override[0]
            elif external_prompts is None:
                prompt = self.formatters[agent_idx](item)
            else:
                given = external_prompts
                prompt = self.formatters[agent_idx](
                    item, external_prompts=given[0] if isinstance(given, (list, tuple)) else given
                )
            tokenizer = self.tokenizers[agent_idx]
            ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            calls = {k: v for k, v in self._calls.items() if k[0] == step}
            call = calls.get((step, agent_idx), -1) + 1
            calls[(step, agent_idx)] = call
            self._calls = calls
            seeds = [row_seed(self.seed, step, agent_idx, call, j)
                     for j in range(num_return_sequences)]  # fmt: skip
            completions = self.rollouts[agent_idx].sample(
                [ids] * num_return_sequences, max_new_tokens=max_new_tokens,
                temperature=self.args.temperature, top_p=self.args.top_p, seeds=seeds,
            )  # fmt: skip
            if self.clock is not None:
                self.clock.add("generation", time.perf_counter() - started)
                self.clock.generated(completions)
            tensors = [torch.tensor(c, dtype=torch.long) for c in completions]
            return {
                "prompts": [prompt],
                "batch_items": batch_items,
                "prompt_input_ids": torch.tensor([ids], dtype=torch.long),
                "prompt_attention_mask": torch.ones(1, len(ids), dtype=torch.long),
                "completions": [
                    [tokenizer.decode(c, skip_special_tokens=True) for c in completions]
                ],
                "completion_input_ids": [tensors],
                "completion_attention_mask": [[torch.ones(len(t)) for t in tensors]],
                "response_lens": [len(c) for c in completions],
                "reference_kls": [],
            }

        def _compute_loss_with_gradients(self, agent, completions_data, returns):
            """−Σ_i A_i Σ_t log π(token_it) / Σ_i T_i over the group's real completion tokens
            (TRL's ``dapo`` normalisation), advantages as comlrl computes them."""
            device = next(agent.parameters()).device
            returns_tensor = torch.tensor(returns, dtype=torch.float, device=device)
            advantages = self._compute_advantages(
                self._apply_reference_kl_to_returns(returns_tensor, completions_data)
            )
            if self.args.advantage_normalization and advantages.numel() > 1:
                advantages = (advantages - advantages.mean()) / advantages.std(
                    unbiased=False
                ).clamp(min=1e-6)
            prompt = completions_data["prompt_input_ids"][0].to(device)
            ids = completions_data["completion_input_ids"]
            completions = [t.to(device) for t in (ids[0] if isinstance(ids[0], list) else ids)]
            kept = [i for i, c in enumerate(completions[: len(advantages)]) if len(c)]
            if not kept:
                return torch.zeros((), device=device, requires_grad=True)
            agent.train()
            return group_loss(
                agent, prompt, [completions[i] for i in kept], advantages[kept], self.update_rows
            )

        def _update_from_samples(self, agent_idx, samples):
            varied = [s for s in samples if len(set(s.returns)) > 1]
            if varied:
                super()._update_from_samples(agent_idx, varied)

    return CorebenchMAGRPO


def group_loss(agent: Any, prompt: Any, completions: list[Any], advantages: Any,
               rows: int | None = None) -> Any:  # fmt: skip
    """The group's policy-gradient loss: each sequence is the prompt and its completion
    (right-padded), token t of completion i predicted at position len(prompt) + t − 1, the
    output head on completion positions only. ``rows``: scored ``by_length``, that many
    sequences at a time (the same to rounding); None: all in one forward pass."""
    import torch

    from corebench.harness.decoding.engine import accepts_argument

    lengths = [len(c) for c in completions]
    keep = max(lengths)
    width = len(prompt) + keep
    pad = 0
    inputs = torch.full((len(completions), width), pad, dtype=torch.long, device=prompt.device)
    mask = torch.zeros_like(inputs)
    for i, c in enumerate(completions):
        inputs[i, : len(prompt)] = prompt
        inputs[i, len(prompt) : len(prompt) + len(c)] = c
        mask[i, : len(prompt) + len(c)] = 1
    head_keeps = accepts_argument(agent.get_base_model() if is_lora(agent) else agent,
                                  "logits_to_keep")  # fmt: skip

    def score(ids: Any, ids_mask: Any, columns: int) -> tuple[Any, None, None]:
        """Log-probabilities of the last ``columns`` tokens of ``ids``."""
        extra = {"logits_to_keep": columns + 1} if head_keeps else {}
        logits = agent(input_ids=ids, attention_mask=ids_mask, use_cache=False, **extra).logits
        predicted = logits[:, -columns - 1 : -1, :].float()
        targets = ids[:, -columns:]
        logps = torch.log_softmax(predicted, dim=-1).gather(-1, targets.unsqueeze(-1))
        return logps.squeeze(-1), None, None

    logps = (by_length(score, inputs, mask, keep, rows) if rows else score(inputs, mask, keep))[0]
    token_mask = mask[:, len(prompt) :].float()
    weighted = (logps * token_mask).sum(dim=1) * advantages.to(logps.dtype)
    return -weighted.sum() / token_mask.sum().clamp(min=1.0)


class GradNorms:
    """Each optimizer update's gradient norm (both agents) before clipping it to ``max_norm``,
    appended to ``grad_norms.txt`` with the step it followed; a resumed run keeps those of the
    steps before its checkpoint."""

    def __init__(self, path: Path, keep_before: int, max_norm: float):
        self.log, self.step, self.max_norm = StepLog(path, keep_before), keep_before, max_norm

    def record(self, optimizer: Any, *_: Any) -> None:
        import torch

        params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        norm = float(torch.nn.utils.clip_grad_norm_(params, self.max_norm)) if params else 0.0
        self.log.add(self.step, norm)

    def values(self) -> list[float]:
        return [row[1] for row in self.log.rows()]


def latest_state(folder: Path) -> Path | None:
    """The newest comlrl checkpoint in ``folder`` (``checkpoint-N`` with its state file)."""
    found = [p for p in folder.glob("checkpoint-*") if (p / "training_state.pt").is_file()]
    return max(found, key=lambda p: int(p.name.split("-")[-1]), default=None)


def pair_system() -> Any:
    """``helper-main``: the pair is trained on its prompts and judged on its program."""
    return system(EVALUATE_WITH["magrpo"])


def pair_rewards(
    settings: TrainSettings, task: TrainTask, helper: list[str], main: list[str]
) -> list[float]:
    """The joint reward of each (helper answer, main answer) on the task's tests."""
    helpers = [extract_code(text, None).code for text in helper]
    mains = [task.code_from(text) for text in main]
    programs = [
        pair_system().program(h, m) if m.strip() else ""
        for h, m in zip(helpers, mains, strict=True)
    ]
    runs = run_tests([(code, task) for code in programs])
    if settings.reward == "class":
        return [
            class_pair_reward(code, run, settings.tests_rewarded)
            for code, run in zip(programs, runs, strict=True)
        ]
    return [
        authors_pair_reward(pair_shape(h, m, task.task.entry_point), code, run)
        for h, m, code, run in zip(helpers, mains, programs, runs, strict=True)
    ]


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
    base = local_checkpoint(settings.model)
    data = filtered_tasks(base, load_train_data(settings), settings)
    out = Path(settings.out)
    tasks = [t for t in data.tasks if t.task.entry_point]  # the pair writes functions
    held = [t for t in data.validation if t.task.entry_point]
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
    norms = GradNorms(out / "grad_norms.txt", done, settings.max_grad_norm)
    clock = StepClock(out / "timing.txt", done)
    validation = StepLog(out / "validation.txt", done)
    trainer: Any = None

    def validate(step: int) -> None:
        """The mean joint reward of both agents' greedy answers on the validation tasks."""
        started = time.perf_counter()
        answers = {}
        for index, role in enumerate(ROLES):
            prompts = [chat(pair_system().role_prompt(role, t.task)) for t in held]
            ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
            completions = trainer.validation_rollouts[index].sample(
                ids, max_new_tokens=settings.max_completion_length, temperature=0.0
            )
            answers[role] = [tokenizer.decode(c, skip_special_tokens=True) for c in completions]
        values = [
            pair_rewards(settings, t, [answers["helper"][i]], [answers["main"][i]])[0]
            for i, t in enumerate(held)
        ]
        validation.add(step, sum(values) / len(values))
        clock.add("validation", time.perf_counter() - started)

    def reward(helper: list[str], main: list[str], *, batch_items: Any = None) -> list[float]:
        step = norms.step = batch_items[0]["step"]
        due = held and trainer.rollouts and step % settings.validation_every == 0
        if due and (not validation.rows() or validation.rows()[-1][0] != step):
            validate(step)
        task = tasks[batch_items[0]["idx"]]
        values = clock.timed("reward", lambda: pair_rewards(settings, task, helper, main))
        log.add(values)
        return values

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
    if settings.lora_rank:  # each agent trains its own adapters; comlrl's AdamW skips the rest
        from peft import get_peft_model

        agents = [get_peft_model(agent, lora_config(settings)) for agent in agents]
    trainer_class = corebench_trainer(MAGRPOTrainer)
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
            top_p=settings.top_p,
            agent_learning_rate=settings.learning_rate,
            eval_interval=0,
            logging_steps=1,
        ),
    )
    trainer.clock, trainer.seed = clock, settings.seed
    trainer.update_rows = update_rows(settings)
    if settings.use_cpu and settings.rollouts == "engine":
        dtype = rollout_dtype(settings)
        trainer.rollouts = [Rollouts(agent, tokenizer, dtype=dtype) for agent in trainer.agents]
        if held:
            trainer.validation_rollouts = [
                Rollouts(agent, tokenizer, dtype="float32") for agent in trainer.agents
            ]
    for optimizer in trainer.optimizers:  # comlrl reports no gradient norms and clips none
        optimizer.register_step_pre_hook(norms.record)
    # bf16: mixed precision as TRL's bf16 does it (float32 weights and optimizer, bfloat16
    # matmuls), through autocast around comlrl's loop, which runs in this thread
    device = "cpu" if settings.use_cpu else "cuda"
    try:
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=settings.bf16):
            trainer.train(
                resume_from_checkpoint=str(resume) if resume else None,
                checkpoint_dir=str(out / STATE),
                checkpoint_total_limit=1,
            )
        clock.end(trainer._clock_step)
        if held and trainer.rollouts:
            validate(len(items))
    finally:
        for rollouts in (trainer.rollouts or []) + (trainer.validation_rollouts or []):
            rollouts.close()
    raw = out / "trainer"
    if settings.lora_rank:  # checkpoints like any other: each agent's adapters merged in
        trainer.agents = [agent.merge_and_unload() for agent in trainer.agents]
    trainer.save_model(str(raw))
    if replaced_pad is not None:
        tokenizer.pad_token = replaced_pad  # checkpoints keep the base model's tokenizer
    found = diagnose(log.rewards, settings.num_generations, per_step, norms.values())
    found["timing"] = timing_summary(clock.log.rows())
    found["validation_curve"] = validation_curve(validation.rows())
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
                "diagnostics": found,
            },
        )
        checkpoints[role] = final
    return checkpoints
