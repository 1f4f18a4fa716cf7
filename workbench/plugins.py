"""The plugin-manager factory: built-ins, entry points (group "workbench"), project-local plugins.

    pm = make_plugin_manager()                       # built-ins + installed plugins
    pm = make_plugin_manager(autoload=False)         # built-ins only
    pm = make_plugin_manager(project_dir=Path(...))  # + that project's workbench_plugin.py, if any
    loaded_plugins(pm)                               # [(name, origin)], what `workbench plugins` prints

Autoloading of installed plugins is off when ``autoload=False`` or when the environment sets
``WORKBENCH_DISABLE_PLUGIN_AUTOLOAD=1``; the CLI's ``--no-plugins`` turns off both installed
and project-local plugins. A third-party distribution declares

    [project.entry-points.workbench]
    foo = "workbench_foo"

and its module implements hooks of :mod:`workbench.hookspecs` with ``@workbench.hookimpl``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
from pathlib import Path
from typing import Any

import pluggy

from . import hookspecs

PROJECT_PLUGIN_FILE = "workbench_plugin.py"
ENTRY_POINT_GROUP = "workbench"
DISABLE_AUTOLOAD_ENV = "WORKBENCH_DISABLE_PLUGIN_AUTOLOAD"
BUILTIN_PLUGINS = (
    "workbench.builtin.scaffolding",
    "workbench.builtin.verifying",
    "workbench.builtin.benchmarking",
    "workbench.builtin.watching",
    "workbench.builtin.inspecting",
    "workbench.builtin.profiling",
)


class PluginError(Exception):
    """A plugin failed to load; the message names the plugin and where it comes from."""


class WorkbenchPluginManager(pluggy.PluginManager):
    """A pluggy manager that remembers where each plugin came from (for `workbench plugins`)."""

    def __init__(self) -> None:
        super().__init__("workbench")
        self.add_hookspecs(hookspecs)
        self.origins: dict[str, str] = {}


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
        raise PluginError(f"plugin {name!r} ({pm.origins.get(name, 'registered')}): {exc}") from None
    return pm


def load_entry_point_plugins(pm: WorkbenchPluginManager, group: str = ENTRY_POINT_GROUP) -> None:
    """Register the module behind every entry point of `group` (first distribution wins a name)."""
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            if ep.group != group or pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
                continue
            origin = f"{dist.metadata['Name']} {dist.version}"
            try:
                pm.register(ep.load(), name=ep.name)
            except Exception as exc:  # noqa: BLE001 - a broken third-party plugin is named, then reported
                raise PluginError(f"plugin {ep.name!r} from {origin} (entry point {ep.value!r}) failed to load: "
                                  f"{type(exc).__name__}: {exc}") from exc
            pm.origins[ep.name] = origin


def load_project_plugin(pm: WorkbenchPluginManager, project_dir: Path) -> Any | None:
    """Register `project_dir/workbench_plugin.py`, if there is one; returns the module."""
    path = Path(project_dir).resolve() / PROJECT_PLUGIN_FILE
    if not path.is_file():
        return None
    name = f"project:{path}"
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


def loaded_plugins(pm: pluggy.PluginManager) -> list[tuple[str, str]]:
    """(name, where it comes from) for each registered plugin, in registration order."""
    origins = getattr(pm, "origins", {})
    dists = {id(plugin): f"{dist.project_name} {dist.version}" for plugin, dist in pm.list_plugin_distinfo()}
    rows = []
    for name, plugin in pm.list_name_plugin():
        if plugin is None:  # blocked
            continue
        origin = origins.get(name) or dists.get(id(plugin)) or ("built-in" if name in BUILTIN_PLUGINS else
                                                               "registered")
        rows.append((name, origin))
    return rows
