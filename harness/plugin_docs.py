"""The plugin reference in docs/plugins.md, generated from the code it documents:
the hooks in ``hookspecs.py``, the base classes' API and the record types.

    python -m corebench.harness.plugin_docs          # print it
    python -m corebench.harness.plugin_docs --write  # refresh docs/plugins.md between its markers
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

from pydantic import BaseModel

from . import hookspecs, records
from .backend import Backend, BatchingBackend
from .benchmark import Benchmark
from .context import SolveContext
from .examples import Example
from .system import System
from .testsuite import FunctionalSuite

BEGIN, END = "<!-- reference:begin -->", "<!-- reference:end -->"
RECORDS = [
    records.Task,
    records.GenerationRequest,
    records.Generation,
    records.Message,
    records.ModelCall,
    records.Solution,
    records.ExecutionResult,
    records.TestOutcome,
]


def _doc(obj: object) -> str:
    return inspect.cleandoc(obj.__doc__ or "").split("\n\n")[0].replace("\n", " ")


def _members(cls: type) -> list[str]:
    lines = [
        f"- `{name}` (class attribute, required)"
        for name in cls.__dict__.get("__annotations__", {})
        if name not in cls.__dict__ and not name.startswith("_")
    ]
    for name, member in cls.__dict__.items():
        if name.startswith("_") and name != "__init__":
            continue
        if inspect.isfunction(member) or isinstance(member, property):
            fn = member.fget if isinstance(member, property) else member
            signature = "" if isinstance(member, property) else str(inspect.signature(fn))
            doc = _doc(fn)
            lines.append(f"- `{name}{signature}`" + (f": {doc}" if doc else ""))
        elif inspect.isclass(member) and name == "Options":
            doc = _doc(member)
            lines.append(f"- `class {name}`" + (f": {doc}" if doc else ""))
        elif not callable(member) and name in cls.__dict__.get("__annotations__", {}):
            lines.append(f"- `{name}` (class attribute) = `{member!r}`")
    return lines


def reference() -> str:
    out = ["## Hooks", ""]
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if name.startswith("register_"):
            out.append(f"- `{name}{inspect.signature(fn)}`: {_doc(fn)}")
    out += ["", "## Base classes", ""]
    for cls in (Benchmark, System, Backend, BatchingBackend, SolveContext):
        out += [f"### `{cls.__name__}`", "", _doc(cls), "", *_members(cls), ""]
    out += ["## Records", ""]
    for model in RECORDS:
        out += [f"### `{model.__name__}`", "", _doc(model), ""]
        assert issubclass(model, BaseModel)
        for field, info in model.model_fields.items():
            out.append(f"- `{field}`: `{_type_name(info.annotation)}`")
        out.append("")
    for cls in (FunctionalSuite, Example):
        out += [f"### `{cls.__name__}`", "", _doc(cls), ""]
        out += [f"- `{f}`: `{t}`" for f, t in cls.__annotations__.items()]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _type_name(annotation: object) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    return text or str(annotation).replace("typing.", "").replace("corebench.harness.records.", "")


def docs_path() -> Path:
    return Path(__file__).resolve().parents[1] / "docs" / "plugins.md"


def refresh(text: str) -> str:
    """``text`` with the part between the markers replaced by the current reference."""
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{reference()}{END}{tail}"


if __name__ == "__main__":
    if "--write" in sys.argv:
        path = docs_path()
        path.write_text(refresh(path.read_text()))
    else:
        print(reference())
