"""Which floating-point type decodes fastest where: bfloat16 only where the hardware computes it.

A CPU computes bfloat16 natively with AVX512-BF16 or AMX; elsewhere (AVX-512 or AVX2 alone)
torch emulates it, and float32 is the faster type. Measured on a 2-core AVX-512 CPU without
either (``measurements/cpu_precision.py``): the decode engine at batch 32, 319 tokens/s in
float32 and 119 in bfloat16; a forward and backward pass of 8 × 300 tokens through the
embedded SmolLM2-135M, 9.4 s in float32 and 34.8 s under bfloat16 autocast.
"""

from __future__ import annotations

from typing import Literal

Dtype = Literal["bfloat16", "float32"]


def native_bfloat16(device: str = "cpu") -> bool:
    """Whether ``device`` computes bfloat16 natively (a CUDA GPU that supports it; a CPU with
    AVX512-BF16 or AMX)."""
    import torch

    if device.startswith("cuda"):  # not counting the emulation older GPUs offer
        if not torch.cuda.is_available():
            return False
        with torch.cuda.device(torch.device(device)):
            return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def cpu_dtype() -> Dtype:
    """The type the CPU decodes fastest: bfloat16 where it computes it natively, else float32."""
    return "bfloat16" if native_bfloat16("cpu") else "float32"
