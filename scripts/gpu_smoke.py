"""The training paths that run differently on a GPU, run on one: GRPO through TRL with CUDA
generation (``use_cpu = false``: corebench's decode engine is for CPUs), the tied-group drop on
CUDA tensors, validation by ``generate``, and MAGRPO's token-normalised loss and gradient
clipping on CUDA tensors against the same computation on the CPU. A tiny random Llama with the
embedded model's tokenizer stands in for a real model (its code is garbage, so its rewards are
all 0 and every group is dropped: what is checked is that the paths run and log, not learning).

    python scripts/gpu_smoke.py --tokenizer DIR --data-dir DIR [--out FOLDER]

Untrusted programs need bubblewrap; on a machine without it, run with
COREBENCH_ISOLATION=unsafe (a throwaway machine only). Prints one JSON object of what it saw.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path


def tiny_checkpoint(tokenizer_dir: Path, out: Path) -> Path:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def grpo_on_cuda(checkpoint: Path, data_dir: Path, out: Path) -> dict:
    import torch

    from corebench.training.dispatch import train
    from corebench.training.settings import load_settings

    settings = load_settings(
        "grpo", None, model=f"hf:{checkpoint}", out=str(out), data_dir=str(data_dir),
        use_cpu=False, bf16=True, steps=2, num_generations=4, prompts_per_step=2,
        max_completion_length=32, validation_tasks=4, validation_every=1,
        eval_benchmarks=["mbpp"], save_steps=2, learning_rate=1e-5,
    )  # fmt: skip
    checkpoints = train(settings)
    manifest = json.loads((checkpoints["model"] / "corebench_manifest.json").read_text())
    d = manifest["diagnostics"]
    return {
        "steps": manifest["steps"],
        "validation_curve": d["validation_curve"],
        "timing": d["timing"],
        "cuda_peak_bytes": torch.cuda.max_memory_allocated(),
    }


def magrpo_loss_on_cuda() -> dict:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from corebench.training.magrpo import GradNorms, group_loss

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1)  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    prompt = torch.tensor([1, 2, 3, 4])
    completions = [torch.tensor([5, 6, 7]), torch.tensor([8]), torch.tensor([9, 10, 11, 2])]
    advantages = torch.tensor([1.0, -0.5, 0.25])
    on_cpu = float(group_loss(model, prompt, completions, advantages))
    model = model.cuda()
    loss = group_loss(model, prompt.cuda(), [c.cuda() for c in completions], advantages.cuda())
    loss.backward()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with tempfile.TemporaryDirectory() as folder:
        norms = GradNorms(Path(folder) / "grad_norms.txt", 0, max_norm=1e-3)
        norms.record(optimizer)
        clipped = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in model.parameters()))
        logged = norms.values()
    return {"loss_cpu": on_cpu, "loss_cuda": float(loss), "grad_norm_logged": logged[0],
            "grad_norm_after_clip": clipped}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this script checks the GPU paths")
    with tempfile.TemporaryDirectory() as folder:
        root = args.out or Path(folder)
        checkpoint = tiny_checkpoint(args.tokenizer, root / "tiny")
        seen = {
            "device": torch.cuda.get_device_name(0),
            "grpo": grpo_on_cuda(checkpoint, args.data_dir.resolve(), root / "grpo"),
            "magrpo_loss": magrpo_loss_on_cuda(),
        }
    print(json.dumps(seen, indent=1))


if __name__ == "__main__":
    main()
