"""The plugin-manager factory: built-ins, entry points (group "workbench"), project-local plugins.

    pm = make_plugin_manager()                       # built-ins + installed plugins
    pm = make_plugin_manager(autoload=False)         # built-ins only
    pm = make_plugin_manager(project_dir=Path(...))  # + that project's workbench_plugin.py, if any
    plugin_sources(pm)                               # [PluginSource], what `workbench plugins` prints
    loaded_plugins(pm)                               # [(name, origin)], the short form of the same

Installed plugins are loaded the way pytest and tox load theirs: by pluggy's own
``pm.load_setuptools_entrypoints("workbench")``, so ``pm.list_plugin_distinfo()`` names the
distribution (and version) of each. Autoloading of installed plugins is off when
``autoload=False`` or when the environment sets ``WORKBENCH_DISABLE_PLUGIN_AUTOLOAD=1``; the CLI's
``--no-plugins`` turns off both installed and project-local plugins. A third-party distribution
declares

    [project.entry-points.workbench]
    foo = "workbench_foo"

and its module implements hooks of :mod:`workbench.hookspecs` with ``@workbench.hookimpl``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pluggy

from . import hookspecs
from .core.project.config import PLUGIN_TABLES

PROJECT_PLUGIN_FILE = "workbench_plugin.py"
PROJECT_PLUGIN_PREFIX = "project:"
ENTRY_POINT_GROUP = "workbench"
DISABLE_AUTOLOAD_ENV = "WORKBENCH_DISABLE_PLUGIN_AUTOLOAD"
BUILTIN_PLUGINS = (
    "workbench.builtin.scaffolding",
    "workbench.builtin.verifying",
    "workbench.builtin.benchmarking",
    "workbench.builtin.compiling",
    "workbench.builtin.watching",
    "workbench.builtin.inspecting",
    "workbench.builtin.profiling",
)


class PluginError(Exception):
    """A plugin failed to load; the message names the plugin and where it comes from."""


class WorkbenchPluginManager(pluggy.PluginManager):
    """A pluggy manager with the workbench's hookspecs.

    ``origins`` records the plugins pluggy has no distribution for: the built-ins ("built-in")
    and a project's own plugin ("project"); installed plugins are in ``list_plugin_distinfo()``.
    """

    def __init__(self) -> None:
        super().__init__("workbench")
        self.add_hookspecs(hookspecs)
        self.origins: dict[str, str] = {}

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        """pluggy's register; a plugin's workbench.toml tables (workbench_register_config_tables) are known from
        here on, in this process, so a workbench.toml read later may hold them."""
        registered = super().register(plugin, name)
        claim = getattr(plugin, "workbench_register_config_tables", None)
        if registered is not None and callable(claim):
            claim(register=PLUGIN_TABLES.add)
        return registered


def make_plugin_manager(autoload: bool | None = None, project_dir: Path | None = None) -> WorkbenchPluginManager:
    """A fresh manager holding the built-ins, then (autoload) installed plugins, then the project's own."""
    pm = WorkbenchPluginManager()
    for name in BUILTIN_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
        pm.origins[name] = "built-in"
    if autoload is None:
        autoload = os.environ.get(DISABLE_AUTOLOAD_ENV, "") in ("", "0")
    if autoload:
        load_entry_point_plugins(pm)
    if project_dir is not None:
        load_project_plugin(pm, project_dir)
    try:
        pm.check_pending()  # a misspelt hook name would otherwise never be called
    except pluggy.PluginValidationError as exc:
        name = pm.get_name(exc.plugin) or "?"
        source = next((s for s in plugin_sources(pm) if s.name == name), None)
        raise PluginError(f"plugin {name!r} ({source.describe() if source else 'registered'}): {exc}") from None
    return pm


def load_entry_point_plugins(pm: pluggy.PluginManager, group: str = ENTRY_POINT_GROUP) -> int:
    """Register the module behind every entry point of `group`, through pluggy's own loader.

    pluggy skips a name already registered or blocked (so the first distribution wins a name) and
    records each plugin's distribution (``pm.list_plugin_distinfo()``). A plugin that fails to import
    or to register is reported as a :class:`PluginError` naming it, its distribution and its entry
    point. Returns the number of plugins loaded.
    """
    skipped = {name for name, _ in pm.list_name_plugin()}  # registered or blocked: pluggy passes them by
    loaded_before = len(pm.list_plugin_distinfo())
    try:
        return pm.load_setuptools_entrypoints(group)
    except Exception as exc:  # noqa: BLE001 - a broken third-party plugin is named, then reported
        # pluggy raises the plugin's own exception. It loads the entry points it does not skip one
        # by one and records each in list_plugin_distinfo() once registered: the one that failed is
        # the next of them after those recorded by this call.
        loaded = len(pm.list_plugin_distinfo()) - loaded_before
        failed = next(itertools.islice(_entry_points_to_load(group, skipped), loaded, None), None)
        error = f"{type(exc).__name__}: " + "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        if failed is None:
            raise PluginError(f"a plugin of entry-point group {group!r} failed to load: {error}") from exc
        dist, ep = failed
        raise PluginError(f"plugin {ep.name!r} from {dist.metadata['Name']} {dist.version} "
                          f"(entry point {ep.value!r}) failed to load: {error}") from exc


def _entry_points_to_load(group: str, skipped: set[str]) -> Iterator[tuple[importlib.metadata.Distribution, Any]]:
    """(distribution, entry point) in the order pluggy's load_setuptools_entrypoints loads them."""
    seen = set(skipped)
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            if ep.group != group or ep.name in seen:
                continue
            seen.add(ep.name)  # a later distribution's entry point of the same name is skipped
            yield dist, ep


def load_project_plugin(pm: pluggy.PluginManager, project_dir: Path) -> Any | None:
    """Register `project_dir/workbench_plugin.py`, if there is one; returns the module."""
    path = Path(project_dir).resolve() / PROJECT_PLUGIN_FILE
    if not path.is_file():
        return None
    name = f"{PROJECT_PLUGIN_PREFIX}{path}"
    if pm.get_plugin(name) is not None:
        return pm.get_plugin(name)
    spec = importlib.util.spec_from_file_location(f"workbench_project_plugin_{abs(hash(str(path)))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        pm.register(module, name=name)
    except Exception as exc:  # noqa: BLE001
        raise PluginError(f"{path}: the project plugin failed to load: {type(exc).__name__}: {exc}") from exc
    if hasattr(pm, "origins"):
        pm.origins[name] = "project"
    return module


@dataclass(frozen=True)
class PluginSource:
    """Where one registered plugin comes from.

    kind: "built-in", "project" (``file`` is its workbench_plugin.py), "installed" (``distribution``,
    ``version`` and ``entry_point``, as pluggy's ``list_plugin_distinfo()`` has them), or
    "registered" (handed to ``pm.register`` by code: tests, embedding applications).
    """

    name: str
    kind: str
    distribution: str | None = None
    version: str | None = None
    entry_point: str | None = None
    file: str | None = None

    @property
    def origin(self) -> str:
        """The short form: "built-in", "project", "registered", or "<distribution> <version>"."""
        return f"{self.distribution} {self.version}" if self.kind == "installed" else self.kind

    def describe(self) -> str:
        """The origin with its entry point or file, on one line."""
        if self.entry_point:
            return f"{self.origin}, entry point {self.entry_point!r}"
        if self.file:
            return f"{self.origin}, {self.file}"
        return self.origin


def plugin_sources(pm: pluggy.PluginManager) -> list[PluginSource]:
    """Where each registered plugin comes from, in registration order (blocked names left out)."""
    origins = getattr(pm, "origins", {})
    dists = {id(plugin): dist for plugin, dist in pm.list_plugin_distinfo()}
    sources = []
    for name, plugin in pm.list_name_plugin():
        if plugin is None:  # blocked
            continue
        dist = dists.get(id(plugin))
        if dist is not None:
            eps = [ep for ep in dist.entry_points if ep.name == name]
            ep = next((ep for ep in eps if ep.group == ENTRY_POINT_GROUP), eps[0] if eps else None)
            sources.append(PluginSource(name, "installed", distribution=dist.project_name, version=dist.version,
                                        entry_point=ep.value if ep is not None else None))
        elif origins.get(name) == "project" or name.startswith(PROJECT_PLUGIN_PREFIX):
            file = getattr(plugin, "__file__", None) or name.removeprefix(PROJECT_PLUGIN_PREFIX)
            sources.append(PluginSource(name, "project", file=str(file)))
        elif origins.get(name) == "built-in" or name in BUILTIN_PLUGINS:
            sources.append(PluginSource(name, "built-in"))
        else:
            sources.append(PluginSource(name, origins.get(name) or "registered"))
    return sources


def loaded_plugins(pm: pluggy.PluginManager) -> list[tuple[str, str]]:
    """(name, where it comes from) for each registered plugin, in registration order."""
    return [(source.name, source.origin) for source in plugin_sources(pm)]
