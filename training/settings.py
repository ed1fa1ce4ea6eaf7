"""Training settings: one dataclass, filled from a TOML file and ``--set KEY=VALUE`` overrides.

Defaults are sized for a CPU and the embedded model (a few minutes per dozen steps); the same
keys scale up on GPUs (``use_vllm``, larger ``num_generations`` and lengths, ``accelerate launch``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

from corebench.harness.errors import CorebenchError, UnknownNameError

# the system each method's checkpoints are evaluated with (recorded in every manifest)
EVALUATE_WITH = {
    "grpo": "direct",
    "pta": "cot",
    "magrpo": "helper-main",
    "corecode": "corecode",
    "sft": "corecode",
}
METHODS = tuple(EVALUATE_WITH)
PAIR_REWARDS = ("authors", "simple")


@dataclass
class TrainSettings:
    method: str = "grpo"
    model: str = "embedded"  # a model spec, as for `corebench run --model`
    out: str = "checkpoints/run"
    benchmark: str = "mbpp"  # whose train split feeds training
    benchmark_options: dict[str, Any] = field(default_factory=dict)  # as `corebench run -B`
    eval_benchmarks: list[str] = field(default_factory=lambda: ["mbpp", "humaneval"])
    data_dir: str | None = None
    tasks_limit: int | None = None  # first N training tasks (after the contamination check)
    exclude_overlaps: bool = True  # drop training tasks that overlap evaluation tasks
    allow_overlap: bool = False  # keep them instead (recorded in the manifest)
    seed: int = 0
    # optimisation (TRL names)
    steps: int = 10
    learning_rate: float = 1e-6
    num_generations: int = 4
    prompts_per_step: int = 2
    max_prompt_length: int = 512
    max_completion_length: int = 128
    temperature: float = 0.8
    beta: float = 0.0
    loss_type: str = "dapo"
    gradient_checkpointing: bool = False
    save_steps: int = 10  # checkpoints for resuming
    max_time_s: float | None = None  # stop after this long (checked after each step), then save
    # rewards
    tests_rewarded: int = 5  # +0.1 per passed test, up to this many
    pair_reward: str = "authors"  # magrpo: the MAGRPO authors' reward, or "simple" (class study)
    turns: int = 1  # magrpo: turns per episode; between turns the pair sees its example results
    plan_weight: float = 0.5  # pta / corecode planner: weight of the plan's outcome term
    efficiency_weight: float = 0.2  # corecode: speed (planner) and memory (coder) terms; 0 = off
    plan_quality_weight: float = 0.2  # corecode planner: outline followed, no code in the plan
    # corecode: alternate planner and coder phases, optionally from SFT checkpoints
    rounds: int = 1
    planner_model: str | None = None
    coder_model: str | None = None
    # sft
    epochs: float = 1.0
    plan_source: str = "template"  # "template" (from reference solutions) or a model spec
    sft_roles: list[str] = field(default_factory=lambda: ["planner", "coder"])
    # scale-out
    use_vllm: bool = False
    vllm_mode: str = "colocate"  # or "server" (`trl vllm-serve` on other GPUs)
    use_cpu: bool = True
    bf16: bool = False

    def validate(self) -> TrainSettings:
        if self.method not in METHODS:
            raise UnknownNameError("training method", self.method, METHODS)
        if self.pair_reward not in PAIR_REWARDS:
            raise UnknownNameError("pair reward", self.pair_reward, PAIR_REWARDS)
        if self.turns < 1:
            raise CorebenchError("turns must be at least 1")
        if self.num_generations < 2:
            raise CorebenchError("num_generations must be at least 2 (group-relative advantages)")
        return self


def _coerce(name: str, raw: str, default: Any) -> Any:
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if default is not None and not isinstance(value, type(default)):
        raise CorebenchError(
            f"training setting {name} takes a {type(default).__name__}, got {raw!r}"
        )
    return value


def load_settings(
    method: str, config: Path | None = None, overrides: list[str] | tuple[str, ...] = ()
) -> TrainSettings:
    """Settings from defaults, then the TOML file (a flat table, or a ``[train]`` table), then
    ``KEY=VALUE`` overrides; unknown keys are errors with a suggestion."""
    values: dict[str, Any] = {}
    if config is not None:
        try:
            data = tomllib.loads(Path(config).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise CorebenchError(f"cannot read training config {config}: {exc}") from exc
        values.update(data.get("train", data))
    defaults = {f.name: f for f in dataclasses.fields(TrainSettings)}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise CorebenchError(f"expected KEY=VALUE, got {item!r}")
        if key not in defaults:
            raise UnknownNameError("training setting", key, defaults)
        default = TrainSettings().__dict__[key]
        values[key] = _coerce(key, raw, default)
    unknown = set(values) - set(defaults)
    if unknown:
        raise UnknownNameError("training setting", sorted(unknown)[0], defaults)
    values["method"] = method
    return TrainSettings(**values).validate()
