"""The scripts of ``measurements/`` as modules, for tests of the functions they define."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

MEASUREMENTS = Path(__file__).resolve().parents[1] / "measurements"


def load(name: str) -> ModuleType:
    """``measurements/NAME.py`` imported as the module ``NAME``."""
    spec = importlib.util.spec_from_file_location(name, MEASUREMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
