"""Plugin discovery and the name registries for benchmarks, systems and backends.

Every plugin, built-in or third-party, is an entry point in the ``corebench`` group. A plugin
that fails to import, registers a duplicate name or registers something malformed produces one
warning naming the plugin and its distribution; the rest of corebench keeps working.
"""

from __future__ import annotations

import importlib.metadata as md
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pluggy

from . import hookspecs
from .backend import Backend
from .benchmark import Benchmark
from .config import ENTRY_POINT_GROUP, PLUGIN_PROJECT
from .errors import UnknownNameError
from .system import System


class PluginWarning(UserWarning):
    """A plugin could not be loaded or registered something unusable."""


@dataclass(frozen=True)
class Origin:
    plugin: str
    distribution: str
    version: str

    def __str__(self) -> str:
        return f"plugin {self.plugin!r} ({self.distribution} {self.version})"


@dataclass(frozen=True)
class Registered:
    name: str
    component: type
    description: str
    origin: Origin


@dataclass
class Registry:
    """Name -> component for one kind; unknown names get a "did you mean" error."""

    kind: str
    base: type
    entries: dict[str, Registered] = field(default_factory=dict)

    def add(self, component: Any, origin: Origin) -> None:
        if not (isinstance(component, type) and issubclass(component, self.base)):
            _warn(
                f"{origin} registered {component!r}, which is not a {self.base.__name__} subclass; ignored"
            )
            return
        name = getattr(component, "name", "")
        if not isinstance(name, str) or not name:
            _warn(f"{origin} registered {component.__name__} without a `name`; ignored")
            return
        if name in self.entries:
            first = self.entries[name].origin
            _warn(
                f"{origin} registered {self.kind} {name!r} again (first by {first}); kept the first"
            )
            return
        description = (getattr(component, "description", "") or (component.__doc__ or "")).strip()
        self.entries[name] = Registered(
            name, component, description.splitlines()[0] if description else "", origin
        )

    def get(self, name: str) -> Registered:
        try:
            return self.entries[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self.entries) from None

    def __iter__(self) -> Iterator[Registered]:
        return iter(sorted(self.entries.values(), key=lambda r: r.name))

    def __contains__(self, name: object) -> bool:
        return name in self.entries


@dataclass
class Plugins:
    benchmarks: Registry
    systems: Registry
    backends: Registry
    manager: pluggy.PluginManager

    def kinds(self) -> dict[str, Registry]:
        return {"benchmark": self.benchmarks, "system": self.systems, "backend": self.backends}


def _warn(message: str) -> None:
    warnings.warn(message, PluginWarning, stacklevel=3)


def _origin(ep: md.EntryPoint) -> Origin:
    dist = ep.dist
    return Origin(ep.name, dist.metadata["Name"] if dist else "?", dist.version if dist else "?")


def load_plugins(extra: Iterable[tuple[object, Origin]] = ()) -> Plugins:
    """Import every entry point of the ``corebench`` group and collect what the plugins register.

    ``extra`` registers additional plugin objects directly (used by tests and embedding code).
    """
    pm = pluggy.PluginManager(PLUGIN_PROJECT)
    pm.add_hookspecs(hookspecs)
    origins: dict[str, Origin] = {}
    candidates: list[tuple[object, Origin]] = []
    for ep in md.entry_points(group=ENTRY_POINT_GROUP):
        origin = _origin(ep)
        try:
            candidates.append((ep.load(), origin))
        except Exception as exc:  # a broken plugin must not break the rest
            _warn(f"{origin} failed to import: {type(exc).__name__}: {exc}")
    candidates.extend(extra)
    for plugin, origin in candidates:
        try:
            pm.register(plugin, name=origin.plugin)
            origins[origin.plugin] = origin
        except Exception as exc:
            _warn(f"{origin} could not be registered: {exc}")

    plugins = Plugins(
        Registry("benchmark", Benchmark),
        Registry("system", System),
        Registry("backend", Backend),
        pm,
    )
    hooks = [
        (plugins.benchmarks, pm.hook.register_benchmarks),
        (plugins.systems, pm.hook.register_systems),
        (plugins.backends, pm.hook.register_backends),
    ]
    for registry, hook in hooks:
        # Call each implementation on its own so that one raising plugin is isolated and every
        # registration is attributed to the plugin that made it.
        for impl in hook.get_hookimpls():  # registration order: the first name registered wins
            origin = origins.get(impl.plugin_name, Origin(impl.plugin_name, "?", "?"))
            try:
                impl.function(register=lambda component, o=origin, r=registry: r.add(component, o))
            except Exception as exc:
                _warn(f"{origin} raised in {hook.name}: {type(exc).__name__}: {exc}")
    return plugins


@cache
def default_plugins() -> Plugins:
    """The installed plugins, loaded once per process."""
    return load_plugins()
