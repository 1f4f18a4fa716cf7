"""core/'s layers (workbench/core/__init__.py): each imports only those before it, and no module
imports itself back through a cycle. Lazy imports inside functions count: they cycle all the same."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "workbench" / "core"
# Lower first. A module may import its own layer and the layers before it.
LAYERS = [
    {"events", "exit_codes", "fsutil", "heap", "verdict", "text"},
    {"project"},
    {"stage"},
    {"verify"},
    {"timing"},
    {"run"},
    {"live"},
]


def module_name(path: Path) -> str:
    parts = ["workbench", "core", *path.relative_to(CORE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes under `if TYPE_CHECKING:`: imports for annotations, never run."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (getattr(node.test, "id", None) == "TYPE_CHECKING"
                                         or getattr(node.test, "attr", None) == "TYPE_CHECKING"):
            skipped |= {id(inner) for statement in node.body for inner in ast.walk(statement)}
    return skipped


def core_imports(path: Path, annotations: bool = False) -> set[str]:
    """The workbench.core modules a file imports (resolved to modules, not to names in them); imports under
    `if TYPE_CHECKING:` are for annotations and count only with `annotations`."""
    name = module_name(path)
    found = set()
    for module, names in workbench_imports(path, name, annotations):
        # `from pkg import mod` names a module when pkg/mod.py exists.
        for target in [module] + [f"{module}.{alias}" for alias in names]:
            if target.startswith("workbench.core.") and module_path(target) is not None:
                found.add(target)
    found.discard(name)
    return found


def module_path(name: str) -> Path | None:
    rel = Path(*name.split(".")[2:])
    for candidate in (CORE / rel.with_suffix(".py"), CORE / rel / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def layer_of(name: str) -> int:
    top = name.split(".")[2]
    for rank, members in enumerate(LAYERS):
        if top in members:
            return rank
    raise AssertionError(f"{name} belongs to no layer: add its top-level name to LAYERS and to core/__init__.py")


def import_graph(annotations: bool = False) -> dict[str, set[str]]:
    return {module_name(path): core_imports(path, annotations) for path in sorted(CORE.rglob("*.py"))}


def backward_imports(graph: dict[str, set[str]]) -> list[str]:
    return [f"{source} imports {target} (layer {layer_of(target)} above {layer_of(source)})"
            for source, targets in sorted(graph.items()) for target in sorted(targets)
            if layer_of(target) > layer_of(source)]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every module that reaches itself, with one path that does (a package and its own modules excepted:
    a package's __init__ re-exporting its modules is not a cycle)."""
    found = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start and not (start.startswith(node + ".") or node.startswith(start + ".")):
                    found.append(path + [nxt])
                    stack = []
                    break
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    return found


def test_every_core_module_has_a_layer_and_the_layers_hold():
    graph = import_graph()
    assert len(graph) > 25  # the walk found the tree
    assert backward_imports(graph) == []


def test_core_has_no_import_cycle():
    assert cycles(import_graph()) == []


def test_not_even_the_annotations_go_backwards_or_round():
    """Imports under `if TYPE_CHECKING:` run never, but they are how a reader finds the code: they hold the layers
    too (stage.py names the compile pool by a protocol, the strategies their runner by one)."""
    graph = import_graph(annotations=True)
    assert backward_imports(graph) == [] and cycles(graph) == []


def test_each_subpackage_says_what_it_owns_and_may_import():
    for package in sorted(p for p in CORE.iterdir() if (p / "__init__.py").is_file()):
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
        assert doc and ("may import" in doc.lower() or "top layer" in doc.lower()), package.name


def test_the_checks_catch_a_backward_import_and_a_cycle():
    """The two checks on a made-up graph: verify importing run, and a -> b -> a."""
    graph = {
        "workbench.core.verify.battery": {"workbench.core.run.child.worker"},
        "workbench.core.run.child.worker": {"workbench.core.verify.battery"},
        "workbench.core.events": set(),
    }
    assert backward_imports(graph) == ["workbench.core.verify.battery imports workbench.core.run.child.worker "
                                       "(layer 5 above 3)"]
    assert ["workbench.core.run.child.worker", "workbench.core.verify.battery", "workbench.core.run.child.worker"] in cycles(graph)
    with pytest.raises(AssertionError, match="no layer"):
        layer_of("workbench.core.newthing")


def test_relative_and_lazy_imports_are_seen(tmp_path):
    """The parser resolves `from ..x import y` and imports inside functions."""
    graph = import_graph()
    assert "workbench.core.stage" in graph["workbench.core.verify.battery"]
    # run/child/worker.py imports the config inside a function.
    assert "workbench.core.project.config" in graph["workbench.core.run.child.worker"]


# -- outside core: the UI, the commands and the plugins (docs/ARCHITECTURE.md, "The shape") --------------------

PACKAGE = CORE.parent
# Ranks of workbench's parts outside core/: a part may import core and the ranks at or before its own.
OUTER = {
    "commands": 1, "hookspecs": 1, "profiling": 1, "plugins": 1, "reports": 1,
    "tui": 2,
    "builtin": 3,
    "cli": 4, "pytest_plugin": 4, "__main__": 4, "__init__": 1,
}
# What a plugin distribution may import: these modules (and `workbench.core.<package>` as a package, never one
# of its submodules), and no name starting with "_".
PUBLIC = {"workbench", "workbench.commands", "workbench.hookspecs", "workbench.profiling", "workbench.reports",
          "workbench.tui.panels", "workbench.core.events", "workbench.core.verdict", "workbench.core.text",
          "workbench.core.stage", "workbench.core.project", "workbench.core.run", "workbench.core.verify",
          "workbench.core.timing", "workbench.core.live"}


def workbench_imports(path: Path, module: str, annotations: bool = False) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for each `workbench...` import of a file, lazy ones included
    (those for annotations only, under `if TYPE_CHECKING:`, with `annotations`)."""
    package = module.split(".")[:-1] if not path.name == "__init__.py" else module.split(".")
    found = []
    tree = ast.parse(path.read_text(), str(path))
    annotations_only = set() if annotations else type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in annotations_only:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names if alias.name.startswith("workbench")]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + (node.module.split(".") if node.module else []))
            if target.startswith("workbench"):
                found.append((target, [alias.name for alias in node.names]))
    return found


def outer_part(name: str) -> str:
    """workbench.tui.widgets.bench -> tui; workbench.reports -> reports."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_the_ui_the_commands_and_the_reports_import_only_the_core_and_what_comes_before_them():
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if CORE in path.parents:
            continue
        module = ".".join(("workbench", *path.relative_to(PACKAGE).with_suffix("").parts))
        module = module.removesuffix(".__init__")
        rank = OUTER[outer_part(module)]
        for target, _ in workbench_imports(path, module):
            part = outer_part(target)
            if part == "core" or target == "workbench":
                continue
            if OUTER.get(part, 99) > rank:
                problems.append(f"{module} imports {target}")
    assert problems == []


def test_the_core_imports_nothing_outside_it():
    problems = [f"{module_name(path)} imports {target}" for path in sorted(CORE.rglob("*.py"))
                for target, _ in workbench_imports(path, module_name(path)) if not target.startswith("workbench.core")]
    assert problems == []


def test_plugins_use_the_public_api_only():
    plugins = CORE.parents[1] / "plugins"
    sources = sorted(p for p in plugins.glob("*/workbench_*/*.py"))
    assert len(sources) > 8  # the walk found the three distributions
    problems = []
    for path in sources:
        for target, names in workbench_imports(path, f"{path.parent.name}.{path.stem}"):
            if not target.startswith("workbench.") and target != "workbench":
                continue  # the plugin's own modules
            if target not in PUBLIC:
                problems.append(f"{path.relative_to(plugins)} imports {target}")
            problems += [f"{path.relative_to(plugins)} imports the private {target}.{n}" for n in names
                         if n.startswith("_")]
    assert problems == []


def test_the_public_api_check_catches_a_submodule_and_a_private_name(tmp_path):
    plugin = tmp_path / "workbench_x"
    plugin.mkdir()
    (plugin / "bad.py").write_text("from workbench.core.run.workers import WorkerProcess\n"
                                   "from workbench.core.run import _EXPORTS\n")
    found = workbench_imports(plugin / "bad.py", "workbench_x.bad")
    assert ("workbench.core.run.workers", ["WorkerProcess"]) in found and "workbench.core.run.workers" not in PUBLIC
    assert ("workbench.core.run", ["_EXPORTS"]) in found


def test_exit_codes_are_defined_in_one_file():
    """workbench/core/exit_codes.py holds every exit status; elsewhere they are imported, never defined."""
    root = CORE.parents[1]
    defined = []
    for path in [*(root / "workbench").rglob("*.py"), *(root / "plugins").rglob("*.py")]:
        if "build" in path.parts or path.name == "exit_codes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                defined += [f"{path.relative_to(root)}: {n.id}" for n in names
                            if isinstance(n, ast.Name) and n.id.startswith("EXIT_")]
    assert defined == []
