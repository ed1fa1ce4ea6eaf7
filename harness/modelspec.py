"""One model-spec syntax for the CLI, configs and leaderboards.

embedded                      the default model
hf:PATH_OR_HUB_ID             a transformers checkpoint
openai:NAME@URL               an OpenAI-compatible server
vllm:ID?tensor_parallel_size=4   backend options after '?', '&'-separated
planner=hf:A,coder=hf:B       a model per role ('*' or a bare spec is the default)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import CorebenchError
from .options import parse_value, split_assignment

_ROLE = re.compile(r"^\s*([A-Za-z_*][\w-]*)\s*=\s*(.+?)\s*$")
DEFAULT_ROLE = "*"


@dataclass(frozen=True)
class ModelRef:
    backend: str
    target: str = ""
    options: tuple[tuple[str, str], ...] = ()

    def values(self) -> dict[str, Any]:
        """The backend options, decoded (``max_batch=8`` -> 8) for the backend's Options."""
        return {key: parse_value(raw) for key, raw in self.options}

    def __str__(self) -> str:
        text = f"{self.backend}:{self.target}" if self.target else self.backend
        return text + ("?" + "&".join(f"{k}={v}" for k, v in self.options) if self.options else "")


def parse_model_ref(text: str) -> ModelRef:
    text = text.strip()
    if not text:
        raise CorebenchError("empty model spec")
    text, _, query = text.partition("?")
    backend, _, target = text.partition(":")
    if not re.fullmatch(r"[A-Za-z][\w.-]*", backend):
        raise CorebenchError(f"bad model spec {text!r}: expected BACKEND or BACKEND:TARGET")
    options = tuple(
        split_assignment(item, "backend option in model spec")
        for item in filter(None, query.split("&"))
    )
    return ModelRef(backend, target, options)


def parse_model_spec(spec: str) -> dict[str, ModelRef]:
    """Role -> model. A spec without roles applies to every role (key '*')."""
    first = spec.split(",", 1)[0]
    if not _ROLE.match(first) or ":" in first.split("=", 1)[0]:
        return {DEFAULT_ROLE: parse_model_ref(spec)}
    roles: dict[str, ModelRef] = {}
    for part in spec.split(","):
        match = _ROLE.match(part)
        if not match:
            raise CorebenchError(f"bad model spec part {part!r}: expected ROLE=BACKEND[:TARGET]")
        role, ref = match.groups()
        if role in roles:
            raise CorebenchError(f"role {role!r} given twice in model spec {spec!r}")
        roles[role] = parse_model_ref(ref)
    return roles


def without_paths(spec: str) -> str:
    """A model spec for display: local paths reduced to their last part
    (``hf:/ckpt/run3/model`` -> ``hf:model``), Hub ids and names as written."""

    def short(ref: ModelRef) -> str:
        target = ref.target
        if target.startswith(("/", ".", "~")):
            target = target.rstrip("/").rsplit("/", 1)[-1]
        return f"{ref.backend}:{target}" if target else ref.backend

    try:
        roles = parse_model_spec(spec)
    except CorebenchError:
        return spec
    if set(roles) == {DEFAULT_ROLE}:
        return short(roles[DEFAULT_ROLE])
    return ",".join(f"{role}={short(ref)}" for role, ref in sorted(roles.items()))


def format_model_spec(roles: dict[str, ModelRef]) -> str:
    if set(roles) == {DEFAULT_ROLE}:
        return str(roles[DEFAULT_ROLE])
    return ",".join(f"{role}={ref}" for role, ref in sorted(roles.items()))
