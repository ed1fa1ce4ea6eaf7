"""Training settings: one options model, filled from a TOML file and ``--set KEY=VALUE`` overrides.

Defaults are sized for a CPU and the embedded model (a few minutes per dozen steps); the same
keys scale up on GPUs (``use_vllm``, larger ``num_generations`` and lengths, ``accelerate launch``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

from pydantic import Field, model_validator

from corebench.harness import config as C
from corebench.harness.errors import CorebenchError, UnknownNameError
from corebench.harness.options import Options, parse_assignments, validate_options
from corebench.harness.records import RunConfig

# the system each method's checkpoints are evaluated with (recorded in every manifest)
EVALUATE_WITH = {
    "grpo": "direct",
    "pta": "cot",
    "magrpo": "helper-main",
    "corecode": "corecode",
    "sft": "corecode",
}
METHODS = tuple(EVALUATE_WITH)
RL_METHODS = ("grpo", "pta", "corecode", "magrpo")  # all but SFT: a policy-gradient update
TRL_GRPO_METHODS = ("grpo", "pta", "corecode")  # trained by TRL's GRPOTrainer (run_grpo)
SINGLE_MODEL_SYSTEM = EVALUATE_WITH["grpo"]  # SFT's `model` role answers `direct`'s prompt


def evaluated_with(method: str, roles: list[str] | tuple[str, ...]) -> str:
    """The system a method's checkpoints (these roles) are evaluated with."""
    if method == "sft" and list(roles) == ["model"]:
        return SINGLE_MODEL_SYSTEM
    return EVALUATE_WITH[method]


# "tests": the share of the suite's tests passed plus a bonus for passing them all (every method);
# "class": the MAGRPO class study's rewards, on the base tests only (reproductions of that study)
REWARDS = ("tests", "class")
SFT_ROLES = ("planner", "coder", "model")
# which training tasks the prompt filter keeps (training/curriculum.py RULES)
FilterRule = Literal["sometimes_solved", "scores_differ"]
# training generates as much as evaluation lets a model write, unless told otherwise
EVALUATION_MAX_NEW_TOKENS: int = RunConfig.model_fields["max_new_tokens"].default


class TrainSettings(Options):
    """Every training setting, typed; unknown keys are refused with a suggestion."""

    method: str = "grpo"
    model: str = Field("embedded", description="a model spec, as for `corebench run --model`")
    out: str = "checkpoints/run"
    benchmark: str = Field("mbpp", description="whose train split feeds training")
    benchmark_options: dict[str, Any] = Field({}, description="as `corebench run -B`")
    eval_benchmarks: list[str] = ["mbpp", "humaneval"]
    eval_split: str = Field(
        "test",
        description="the split checkpoints are evaluated on, where a benchmark has it "
        "(humaneval: heldout); the contamination check compares training tasks with it",
    )
    data_dir: str | None = None
    tasks_limit: int | None = Field(
        None, description="first N training tasks (after the contamination check)"
    )
    exclude_overlaps: bool = Field(
        True, description="drop training tasks that are near duplicates of evaluation tasks"
    )
    decontaminate_description: float = Field(
        C.NEAR_DUPLICATE_DESCRIPTION, ge=0, le=1, description="near duplicate: prose similarity"
    )
    decontaminate_code: float = Field(
        C.NEAR_DUPLICATE_CODE, ge=0, le=1, description="near duplicate: syntax-tree similarity"
    )
    decontaminate_tests: float = Field(
        C.NEAR_DUPLICATE_TESTS, ge=0, le=1, description="near duplicate: share of tests shared"
    )
    allow_overlap: bool = Field(False, description="keep them instead (recorded in the manifest)")
    seed: int = 0
    # optimisation (TRL names)
    steps: int = 10
    learning_rate: float = 1e-6
    num_generations: int = 4
    prompts_per_step: int = Field(
        2,
        ge=1,
        description="prompts per optimisation step (SFT: examples); MAGRPO takes one prompt a "
        "step (comlrl) and does not read it",
    )
    update_batch: int | None = Field(
        None,
        ge=1,
        description="completions per forward and backward pass of a GRPO update (grpo, pta, "
        "corecode): the step's num_generations × prompts_per_step completions are split into "
        "batches of this size and their gradients accumulated (TRL's gradient accumulation), so "
        "the update is the same (to rounding; not under loss_type bnpo, refused) and its peak "
        "memory smaller; unset: all at once",
    )
    max_prompt_length: int = 512
    max_completion_length: int = Field(
        EVALUATION_MAX_NEW_TOKENS,
        description="tokens per completion; the evaluation's own limit unless set (a study: its "
        "max_new_tokens)",
    )
    temperature: float = 0.8
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling of rollouts")
    beta: float = 0.0
    loss_type: str = "dapo"
    max_grad_norm: float = Field(1.0, gt=0, description="gradients clipped to this norm")
    lora_rank: int = Field(
        0,
        ge=0,
        description="train LoRA adapters of this rank on every linear layer but the output head "
        "instead of every weight (0: full fine-tune); grpo, pta, corecode, magrpo. Saved merged",
    )
    lora_alpha: float = Field(
        32, gt=0, description="LoRA's scale: an adapter's update is multiplied by alpha / rank"
    )
    rollouts: Literal["engine", "trl"] = Field(
        "engine",
        description="on the CPU: corebench's decode engine (a copy of the weights in "
        "rollout_dtype, continuous batching, seeded rows) or TRL's own generate; vLLM when "
        "use_vllm",
    )
    update_scoring: Literal["by-length", "trl"] = Field(
        "by-length",
        description="how an update (grpo, pta, corecode, magrpo) computes its completions' "
        "log-probabilities on the CPU: by-length (a few rows of like length at a time, each "
        "group cut after the last column it uses, the output head on completion tokens only; "
        "the same to rounding) or trl (the whole batch padded to its longest row: TRL's own, "
        "and for magrpo one forward pass per group)",
    )
    rollout_dtype: Literal["auto", "bfloat16", "float32"] = Field(
        "auto",
        description="the type the engine's rollouts and the prompt filter decode in on the CPU: "
        "auto is bfloat16 where the CPU computes it natively (AVX512-BF16 or AMX), else float32; "
        "a resumed run keeps the type it started with",
    )
    drop_tied_groups: bool = Field(
        True,
        description="leave groups whose rewards all tie out of the loss (DAPO's dynamic "
        "sampling, without resampling): their advantages are zero and only dilute the rest",
    )
    filter_samples: int = Field(
        0,
        ge=0,
        description="keep only the training tasks filter_keeps names, judging this many samples "
        "from the start checkpoint at the training temperature (0: no filter)",
    )
    filter_keeps: FilterRule = Field(
        "sometimes_solved",
        description="the filter keeps tasks some but not all samples solve (sometimes_solved), "
        "or whose samples pass different shares of tests (scores_differ: partial credit too)",
    )
    filter_tasks: int | None = Field(
        None,
        ge=1,
        description="examine only this many training tasks (a fixed sample) for the filter",
    )
    validation_tasks: int = Field(
        0,
        ge=0,
        description="hold out this many training tasks (a fixed sample, whatever the seed) and "
        "log the mean reward of greedy completions on them",
    )
    validation_every: int = Field(10, ge=1, description="optimisation steps between validations")
    gradient_checkpointing: bool = False
    save_steps: int = Field(10, description="checkpoints for resuming")
    max_time_s: float | None = Field(
        None, description="stop after this long (checked after each step), then save"
    )
    # rewards
    reward: str = Field(
        "tests",
        description='"tests": share of tests passed + a bonus for passing all (magrpo: with the '
        "MAGRPO authors' structure terms); \"class\": the class study's, on the base tests",
    )
    tests_rewarded: int = Field(
        5, description='reward "class": +0.1 per passed base test, up to this many'
    )
    turns: int = Field(
        1, description="magrpo: turns per episode; between turns the pair sees its example results"
    )
    plan_weight: float = Field(
        0.5, description="pta / corecode planner: weight of the plan's outcome term"
    )
    efficiency_weight: float = Field(
        0.2, description="corecode: speed (planner) and memory (coder) terms; 0 = off"
    )
    plan_quality_weight: float = Field(
        0.2, description="corecode planner: outline followed, no code in the plan"
    )
    # corecode: alternate planner and coder phases, optionally from SFT checkpoints
    rounds: int = 1
    planner_model: str | None = None
    coder_model: str | None = None
    # sft
    epochs: float = 1.0
    plan_source: str = Field(
        "template", description='"template" (from reference solutions) or a model spec'
    )
    sft_roles: list[str] = Field(
        ["planner", "coder"],
        description='sft: roles to train ("planner", "coder": CoRe-Code; "model": direct)',
    )
    judge_url: str | None = Field(
        None,
        description="judge rewards' programs on this judging service (`corebench sandbox serve`) "
        "instead of a local sandbox; its token comes from $COREBENCH_JUDGE_TOKEN",
    )
    executor: str | None = Field(
        None,
        description="where rewards' programs run, as `--executor` says: local, ray (the cluster "
        "at $RAY_ADDRESS), ray://HOST:PORT, or http://HOST:PORT (a judging service)",
    )
    # scale-out
    use_vllm: bool = False
    vllm_mode: str = Field("colocate", description='or "server" (`trl vllm-serve` on other GPUs)')
    use_cpu: bool = True
    bf16: bool = False

    @model_validator(mode="after")
    def _known_choices(self) -> TrainSettings:
        if self.method not in METHODS:
            raise UnknownNameError("training method", self.method, METHODS)
        if self.reward not in REWARDS:
            raise UnknownNameError("reward", self.reward, REWARDS)
        for role in self.sft_roles:
            if role not in SFT_ROLES:
                raise UnknownNameError("sft role", role, SFT_ROLES)
        if self.turns < 1:
            raise CorebenchError("turns must be at least 1")
        if self.num_generations < 2:
            raise CorebenchError("num_generations must be at least 2 (group-relative advantages)")
        if self.update_batch:
            self._check_update_batch(self.update_batch)
        if "update_scoring" in self.model_fields_set and self.method not in RL_METHODS:
            raise CorebenchError(
                f"update_scoring: {self.method} does not read it; it is how the update of "
                f"{', '.join(RL_METHODS)} scores its completions"
            )
        if self.lora_rank and self.method not in RL_METHODS:
            raise CorebenchError(
                f"lora_rank: {self.method} trains every weight; LoRA is for {', '.join(RL_METHODS)}"
            )
        return self

    def _check_update_batch(self, batch: int) -> None:
        if self.method not in TRL_GRPO_METHODS:
            raise CorebenchError(
                f"update_batch: {self.method} does not read it; it splits the update of "
                f"{', '.join(TRL_GRPO_METHODS)}"
            )
        step = self.num_generations * self.prompts_per_step
        if step % batch:
            raise CorebenchError(
                f"update_batch {batch} does not divide a step's {step} completions "
                "(num_generations × prompts_per_step)"
            )
        if self.loss_type == "bnpo":  # TRL averages bnpo's per-pass token means: another update
            raise CorebenchError("update_batch changes the update under loss_type bnpo")


def load_settings(
    method: str,
    config: Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    **values: Any,
) -> TrainSettings:
    """Settings from defaults, then the TOML file (a flat table, or a ``[train]`` table), then
    ``KEY=VALUE`` overrides, then ``values`` (typed, from the command's own flags); unknown keys
    are errors with a suggestion."""
    merged: dict[str, Any] = {}
    if config is not None:
        try:
            data = tomllib.loads(Path(config).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise CorebenchError(f"cannot read training config {config}: {exc}") from exc
        merged.update(data.get("train", data))
    merged.update(parse_assignments(overrides, "training setting"))
    merged.update(values)
    merged["method"] = method
    return validate_options("training setting", TrainSettings, merged)
