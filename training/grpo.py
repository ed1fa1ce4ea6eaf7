"""GRPO with TRL for one policy: plain (``grpo``) and plan-then-act (``pta``).

``run_grpo`` is the one place a TRL GRPOTrainer is built; the CoRe-Code phases use it too.
The prompts are the evaluation systems' own templates, so a checkpoint trained here is evaluated
with exactly what it learned (``grpo`` -> system ``direct``, ``pta`` -> system ``cot``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from corebench.harness.records import Measurement

from .curriculum import filtered_tasks
from .data import TrainTask, load_train_data
from .diagnostics import diagnose
from .distributed import is_main_process, wait_for_everyone, world_size
from .manifest import write_manifest
from .models import FrozenModel, local_checkpoint
from .progress import StepClock, StepLog, timing_summary, validation_curve
from .rewards import RewardLog, TestRun, correctness, measure_passing, run_tests
from .rollouts import ROLLOUT_BATCH
from .settings import EVALUATE_WITH, TrainSettings
from .systems import system
from .update_scoring import by_length, update_rows

# reward(completions, rows) -> one float per completion; rows are the dataset rows it answers
RewardFn = Callable[[list[str], list[dict[str, Any]]], list[float]]
# a measured program's efficiency score in [0, 1] (rewards.speed_score, rewards.memory_score)
EfficiencyTerm = Callable[[Measurement | None], float]


def grpo_config(settings: TrainSettings, output_dir: Path):
    """TRL's GRPOConfig from our settings (CPU defaults; vLLM generation when asked)."""
    from trl import GRPOConfig

    step = settings.num_generations * settings.prompts_per_step  # completions a step
    batch = settings.update_batch or step  # the update's forward/backward batch
    return GRPOConfig(
        output_dir=str(output_dir),
        max_steps=settings.steps,
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=step // batch,  # one generation batch (a step) per update
        num_generations=settings.num_generations,
        max_completion_length=settings.max_completion_length,
        learning_rate=settings.learning_rate,
        beta=settings.beta,
        loss_type=settings.loss_type,
        temperature=settings.temperature,
        top_p=settings.top_p,
        max_grad_norm=settings.max_grad_norm,
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


def lora_config(settings: TrainSettings):
    """PEFT's LoRA settings when ``lora_rank`` asks for adapters (None: every weight trains):
    every linear layer but the output head, no dropout, as TRL's LoRA-without-regret recipe
    trains RL."""
    if not settings.lora_rank:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=settings.lora_rank, lora_alpha=settings.lora_alpha, lora_dropout=0.0,
        target_modules="all-linear", task_type="CAUSAL_LM",
    )  # fmt: skip


def engine_rollouts(settings: TrainSettings) -> bool:
    """Whether rollouts go through corebench's decode engine: on the CPU, unless TRL's own
    path is asked for (``rollouts = "trl"``); vLLM's when ``use_vllm``."""
    return settings.use_cpu and not settings.use_vllm and settings.rollouts == "engine"


def trainer_class():
    """TRL's GRPOTrainer with corebench's rollouts, DAPO's dropping of tied groups, the update
    scored by length on a CPU (``update_scoring``), and a clock on generation (built on first
    use: importing TRL takes seconds)."""
    from trl import GRPOTrainer

    from .rollouts import row_seed

    class CorebenchGRPOTrainer(GRPOTrainer):
        rollouts = None  # a Rollouts over the policy, or None for TRL's own generation
        validation_rollouts = None  # a float32 one for validation (with ``rollouts``)
        clock: StepClock | None = None
        drop_tied_groups = True
        update_rows: int | None = None  # score the update by_length, this many rows at a time
        _calls = (-1, 0)  # (step, rollout batches generated in it)

        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations,
                                  has_tool_images=False):  # fmt: skip
            started = time.perf_counter()
            try:
                if self.rollouts is None or images is not None:
                    completions, logprobs = super()._generate_single_turn(
                        prompt_ids, images, multimodal_fields, num_generations, has_tool_images
                    )
                    if self.clock is not None:
                        self.clock.generated(completions)
                    return completions, logprobs
                step = self.state.global_step
                call = self._calls[1] + 1 if self._calls[0] == step else 0
                self._calls = (step, call)
                seeds = [row_seed(self.args.seed, step, call, i) for i in range(len(prompt_ids))]
                completions = self.rollouts.sample(
                    prompt_ids, max_new_tokens=self.max_completion_length,
                    temperature=self.temperature, top_p=self.top_p, seeds=seeds,
                )  # fmt: skip
                if self.clock is not None:
                    self.clock.generated(completions)
                return completions, None
            finally:
                if self.clock is not None:
                    self.clock.add("generation", time.perf_counter() - started)

        def _get_per_token_logps_and_entropies(
            self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
        ):
            """TRL's, computed by_length where ``update_rows`` is set (text models)."""
            base = super()._get_per_token_logps_and_entropies
            plain = {"batch_size", "compute_entropy", "compute_aux_loss"}
            if (
                not self.update_rows
                or args
                or kwargs.get("compute_aux_loss")
                or getattr(self, "aux_loss_enabled", False)  # a mixture of experts: TRL's own
                or any(v is not None for k, v in kwargs.items() if k not in plain)  # images
            ):
                return base(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
            entropy = {k: kwargs[k] for k in ("compute_entropy",) if k in kwargs}

            def score(ids, mask, keep):
                return base(model, ids, mask, keep, **entropy)

            rows = min(self.update_rows, kwargs.get("batch_size") or self.update_rows)
            return by_length(score, input_ids, attention_mask, logits_to_keep, rows)

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            if self.drop_tied_groups and drop_tied(out, self.num_generations):
                # the loss divides by the tokens of every process, as TRL counts them
                out["num_items_in_batch"] = self.accelerator.gather(
                    out["completion_mask"].sum()
                ).sum()
            return out

    return CorebenchGRPOTrainer


def drop_tied(batch: dict[str, Any], group: int) -> int:
    """Leave the groups whose advantages are all zero (their rewards tied) out of the loss:
    their completion masks zeroed and the token count the loss divides by recounted (this
    process's; the trainer gathers every process's). Returns how many groups were dropped."""
    advantages = batch["advantages"].view(-1, group)
    tied = (advantages == 0).all(dim=1)
    if not bool(tied.any()):
        return 0
    rows = tied.repeat_interleave(group)
    batch["completion_mask"] = batch["completion_mask"] * (~rows).unsqueeze(1).to(
        batch["completion_mask"].dtype
    )
    batch["num_items_in_batch"] = batch["completion_mask"].sum()
    return int(tied.sum())


def step_callbacks(clock: StepClock, validate: Callable[[int], None] | None, every: int):
    """A transformers callback that times each step and validates every ``every`` steps (from
    step 0, before any update) and at the end."""
    from transformers import TrainerCallback

    class Steps(TrainerCallback):
        validated = -1

        def _validate(self, step: int) -> None:
            if validate is not None and step != self.validated:
                self.validated = step
                validate(step)

        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step % every == 0:
                self._validate(state.global_step)
            clock.begin()

        def on_step_end(self, args, state, control, **kwargs):
            clock.end(state.global_step)

        def on_train_end(self, args, state, control, **kwargs):
            self._validate(state.global_step)

    return Steps()


def time_limit(seconds: float):
    """A TRL/transformers callback that ends training cleanly once ``seconds`` have passed."""
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
    """What a GRPO run leaves: the model, its reward curve, the steps done, and what its rewards,
    gradients, validation and clock say about whether and how fast it learned
    (``diagnostics.diagnose``, ``progress``)."""

    model: Path
    curve: list[dict[str, float]]
    steps: int
    diagnostics: dict[str, Any]


def greedy_texts(
    trainer: Any, tokenizer: Any, prompts: list[str], max_new_tokens: int
) -> list[str]:
    """Greedy completions of chat prompts from the trainer's current policy: through its float32
    validation rollouts where it has them, else ``generate`` in batches."""
    import torch

    chats = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False
        )
        for p in prompts
    ]
    ids = [tokenizer(c, add_special_tokens=False)["input_ids"] for c in chats]
    if trainer.validation_rollouts is not None:
        outs = trainer.validation_rollouts.sample(
            ids, max_new_tokens=max_new_tokens, temperature=0.0
        )
    else:
        model, outs = trainer.accelerator.unwrap_model(trainer.model), []
        was_training = model.training
        model.eval()
        side = tokenizer.padding_side
        tokenizer.padding_side = "left"
        try:
            for start in range(0, len(chats), ROLLOUT_BATCH):
                batch = tokenizer(
                    chats[start : start + ROLLOUT_BATCH], return_tensors="pt", padding=True,
                    add_special_tokens=False,
                ).to(model.device)  # fmt: skip
                with torch.no_grad():
                    out = model.generate(
                        **batch, max_new_tokens=max_new_tokens, do_sample=False,
                        pad_token_id=tokenizer.pad_token_id,
                    )  # fmt: skip
                outs += out[:, batch["input_ids"].shape[1] :].tolist()
        finally:
            tokenizer.padding_side = side
            model.train(was_training)
    return [tokenizer.decode(o, skip_special_tokens=True) for o in outs]


def run_grpo(
    settings: TrainSettings,
    *,
    model_path: Path,
    rows: list[dict[str, Any]],
    reward: RewardFn,
    out: Path,
    validation_rows: list[dict[str, Any]] = (),
) -> Trained:
    """Train ``model_path`` on ``rows`` (each with a ``prompt`` string) with ``reward``; every
    ``validation_every`` steps, the mean ``reward`` of greedy completions of
    ``validation_rows`` is logged.

    Resumes from the last checkpoint in ``out/trainer``; saves the final model to ``out/model``.
    """
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .rollouts import Rollouts, rollout_dtype

    os.environ.setdefault("WANDB_MODE", "disabled")
    trainer_dir = out / "trainer"
    # one step's rewards: every process's completions (``RewardLog.add`` gathers them)
    group = settings.num_generations * settings.prompts_per_step * world_size()
    log = RewardLog(out / "rewards.txt", group)
    resume = last_checkpoint(trainer_dir)
    resumed = int(resume.name.split("-")[-1]) if resume else 0
    # steps after the checkpoint are done again: drop their rewards (all of them, from scratch)
    log.keep(resumed * group)
    clock = StepClock(out / "timing.txt", resumed)
    validation = StepLog(out / "validation.txt", resumed)
    dataset = Dataset.from_list(
        [
            {"prompt": [{"role": "user", "content": r["prompt"]}], "row": i}
            for i, r in enumerate(rows)
        ]
    )

    def reward_func(completions, row, **_: Any) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        values = clock.timed("reward", lambda: reward(texts, [rows[i] for i in row]))
        log.add(values)
        return values

    reward_func.__name__ = "sandbox_reward"
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype="float32")
    trainer: Any = None

    def validate(step: int) -> None:
        texts = greedy_texts(
            trainer, tokenizer, [r["prompt"] for r in validation_rows],
            settings.max_completion_length,
        )  # fmt: skip
        values = reward(texts, list(validation_rows))
        validation.add(step, sum(values) / len(values))

    callbacks = [step_callbacks(clock, validate if validation_rows else None,
                                settings.validation_every)]  # fmt: skip
    if settings.max_time_s:
        callbacks.append(time_limit(settings.max_time_s))
    trainer = trainer_class()(
        model=model,
        reward_funcs=[reward_func],
        args=grpo_config(settings, trainer_dir),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=callbacks,
        peft_config=lora_config(settings),
    )
    trainer.clock, trainer.drop_tied_groups = clock, settings.drop_tied_groups
    trainer.update_rows = update_rows(settings)
    if engine_rollouts(settings):
        trainer.rollouts = Rollouts(trainer.model, tokenizer, dtype=rollout_dtype(settings))
        if validation_rows:
            trainer.validation_rollouts = Rollouts(trainer.model, tokenizer, dtype="float32")
    try:
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    finally:
        for rollouts in (trainer.rollouts, trainer.validation_rollouts):
            if rollouts is not None:
                rollouts.close()
    final = out / "model"
    if settings.lora_rank:  # a checkpoint like any other: the adapters merged into the weights
        save_merged(trainer, model_path, out / "adapters", final)
    else:
        trainer.save_model(str(final))  # the main process only (transformers' should_save)
    if is_main_process():
        tokenizer.save_pretrained(final)
    wait_for_everyone()  # the others may load the checkpoint next (a CoRe-Code phase)
    norms = [e["grad_norm"] for e in trainer.state.log_history if "grad_norm" in e]
    found = diagnose(log.rewards, settings.num_generations, group, norms)
    found["timing"] = timing_summary(clock.log.rows())
    found["validation_curve"] = validation_curve(validation.rows())
    return Trained(final, log.curve(), int(trainer.state.global_step), found)


def save_merged(trainer: Any, model_path: Path, adapters: Path, final: Path) -> None:
    """Save a LoRA policy as a plain checkpoint: its adapters (gathered from every process, as
    sharded training needs), then, on the main process, the start's weights with them merged."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    trainer.save_model(str(adapters))
    wait_for_everyone()
    if is_main_process():
        start = AutoModelForCausalLM.from_pretrained(model_path, dtype="float32")
        PeftModel.from_pretrained(start, adapters).merge_and_unload().save_pretrained(final)


def code_rows(tasks: list[TrainTask], system_name: str) -> list[dict[str, Any]]:
    """One row per task, the prompt the system gives its one role."""
    prompt = system(system_name).role_prompt
    return [{"prompt": prompt("model", t.task), "task": t} for t in tasks]


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
    base = local_checkpoint(settings.model)
    data = filtered_tasks(base, load_train_data(settings), settings)
    out = Path(settings.out)
    coder = None
    if settings.method == "pta":
        coder = FrozenModel(base, settings.max_completion_length)
        reward = pta_reward(settings, coder)
    else:
        reward = code_reward(settings)
    evaluated = EVALUATE_WITH[settings.method]
    try:
        trained = run_grpo(
            settings, model_path=base, rows=code_rows(data.tasks, evaluated), reward=reward,
            out=out, validation_rows=code_rows(data.validation, evaluated),
        )  # fmt: skip
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
            extra={"evaluate_with": evaluated, "diagnostics": trained.diagnostics},
        )
    return {"model": trained.model}
