"""core/'s layers (workbench/core/__init__.py): each imports only those before it, and no module
imports itself back through a cycle. Lazy imports inside functions count: they cycle all the same."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "workbench" / "core"
# Lower first. A module may import its own layer and the layers before it.
LAYERS = [
    {"events", "fsutil", "stage"},
    {"project"},
    {"verify"},
    {"timing"},
    {"run"},
    {"live"},
]


def module_name(path: Path) -> str:
    parts = ["workbench", "core", *path.relative_to(CORE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def core_imports(path: Path) -> set[str]:
    """The workbench.core modules a file imports (resolved to modules, not to names in them)."""
    name = module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + (node.module.split(".") if node.module else []))
            # `from pkg import mod` names a module when pkg/mod.py exists.
            targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
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


def import_graph() -> dict[str, set[str]]:
    return {module_name(path): core_imports(path) for path in sorted(CORE.rglob("*.py"))}


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


def test_each_subpackage_says_what_it_owns_and_may_import():
    for package in sorted(p for p in CORE.iterdir() if (p / "__init__.py").is_file()):
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
        assert doc and ("may import" in doc.lower() or "top layer" in doc.lower()), package.name


def test_the_checks_catch_a_backward_import_and_a_cycle():
    """The two checks on a made-up graph: verify importing run, and a -> b -> a."""
    graph = {
        "workbench.core.verify.battery": {"workbench.core.run.worker"},
        "workbench.core.run.worker": {"workbench.core.verify.battery"},
        "workbench.core.events": set(),
    }
    assert backward_imports(graph) == ["workbench.core.verify.battery imports workbench.core.run.worker "
                                       "(layer 4 above 2)"]
    assert ["workbench.core.run.worker", "workbench.core.verify.battery", "workbench.core.run.worker"] in cycles(graph)
    with pytest.raises(AssertionError, match="no layer"):
        layer_of("workbench.core.newthing")


def test_relative_and_lazy_imports_are_seen(tmp_path):
    """The parser resolves `from ..x import y` and imports inside functions."""
    graph = import_graph()
    assert "workbench.core.stage" in graph["workbench.core.verify.battery"]
    # run/worker.py imports the config inside a function.
    assert "workbench.core.project.config" in graph["workbench.core.run.worker"]
