"""Scale-out: the same training settings under ``accelerate launch`` on GPUs (DeepSpeed ZeRO),
with TRL's vLLM generation (``use_vllm=true``, ``vllm_mode=colocate`` or ``server``).

``accelerate_config`` writes a config file ``accelerate launch --config_file`` reads; the launch
command it prints runs ``corebench train`` unchanged, only the settings differ.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml


def accelerate_config(processes: int, zero_stage: int = 3, machines: int = 1) -> dict[str, Any]:
    """A multi-GPU DeepSpeed config in accelerate's own format (bf16, ZeRO ``zero_stage``)."""
    return {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "DEEPSPEED",
        "deepspeed_config": {
            "zero_stage": zero_stage,
            "zero3_init_flag": zero_stage == 3,
            "zero3_save_16bit_model": zero_stage == 3,
            "offload_optimizer_device": "none",
            "offload_param_device": "none",
        },
        "mixed_precision": "bf16",
        "num_machines": machines,
        "num_processes": processes * machines,
        "machine_rank": 0,
        "main_training_function": "main",
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
    }


def write_accelerate_config(path: Path, processes: int, zero_stage: int = 3) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(accelerate_config(processes, zero_stage), sort_keys=True))
    return path


def launch_command(
    config_file: Path,
    method: str,
    settings_file: Path | None,
    overrides: Sequence[str] = (),
    flags: dict[str, str] | None = None,
) -> str:
    """The command that trains ``method`` on GPUs with this accelerate config, carrying the
    user's own settings (``--config``, every ``--set``, and ``flags`` such as ``out`` as the
    command's own options) after the GPU defaults."""
    parts = [
        "accelerate launch",
        f"--config_file {shlex.quote(str(config_file))}",
        "-m corebench.harness.cli train",
        method,
    ]
    if settings_file:
        parts.append(f"--config {shlex.quote(str(settings_file))}")
    gpu = ["use_cpu=false", "bf16=true", "use_vllm=true"]
    parts += [f"--set {shlex.quote(item)}" for item in [*gpu, *overrides]]
    parts += [
        f"--{key.replace('_', '-')} {shlex.quote(value)}" for key, value in (flags or {}).items()
    ]
    return " ".join(parts)
