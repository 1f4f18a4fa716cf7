"""The plugin manager factory: built-ins, entry points (group "workbench"), project-local plugins.

    pm = make_plugin_manager()                       # built-ins + installed plugins
    pm = make_plugin_manager(autoload=False)         # built-ins only (also WORKBENCH_DISABLE_PLUGIN_AUTOLOAD=1)
    pm = make_plugin_manager(project_dir=Path(...))  # + the project's workbench_plugin.py, if any
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pluggy

from . import hookspecs

PROJECT_PLUGIN_FILE = "workbench_plugin.py"
ENTRY_POINT_GROUP = "workbench"
BUILTIN_PLUGINS = (
    "workbench.builtin.scaffolding",
    "workbench.builtin.verifying",
    "workbench.builtin.inspecting",
)


class PluginError(Exception):
    """A plugin failed to load; names the plugin."""


def make_plugin_manager(autoload: bool | None = None, project_dir: Path | None = None) -> pluggy.PluginManager:
    pm = pluggy.PluginManager("workbench")
    pm.add_hookspecs(hookspecs)
    for name in BUILTIN_PLUGINS:
        module = importlib.import_module(name)
        pm.register(module, name=name)
    if autoload is None:
        autoload = os.environ.get("WORKBENCH_DISABLE_PLUGIN_AUTOLOAD", "") in ("", "0")
    if autoload:
        try:
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
        except Exception as exc:  # noqa: BLE001 - a broken third-party plugin is named, not fatal to import
            raise PluginError(f"a plugin of entry-point group {ENTRY_POINT_GROUP!r} failed to load: "
                              f"{type(exc).__name__}: {exc}") from exc
    if project_dir is not None:
        load_project_plugin(pm, project_dir)
    return pm


def load_project_plugin(pm: pluggy.PluginManager, project_dir: Path) -> Any | None:
    path = project_dir / PROJECT_PLUGIN_FILE
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
    except Exception as exc:  # noqa: BLE001
        raise PluginError(f"{path}: the project plugin failed to load: {type(exc).__name__}: {exc}") from exc
    pm.register(module, name=name)
    return module


def loaded_plugins(pm: pluggy.PluginManager) -> list[tuple[str, str]]:
    """(name, where it comes from) for each registered plugin, built-ins first."""
    dists = {id(plugin): f"{dist.project_name} {dist.version}" for plugin, dist in pm.list_plugin_distinfo()}
    rows = []
    for name, plugin in pm.list_name_plugin():
        if plugin is None:
            continue
        origin = "built-in" if name in BUILTIN_PLUGINS else dists.get(id(plugin), "project" if
                                                                      name.startswith("project:") else "registered")
        rows.append((name, origin))
    return rows
