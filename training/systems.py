"""The systems training serves, reached through the registry like any plugin: their prompts
(``System.role_prompt``) are what a checkpoint is trained on and later evaluated with."""

from __future__ import annotations

from corebench.harness.registry import default_plugins
from corebench.harness.system import System


def system(name: str) -> type[System]:
    """A registered system's class (``direct``, ``cot``, ``corecode``, ``helper-main``)."""
    return default_plugins().systems.get(name).component
