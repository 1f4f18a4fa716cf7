"""`workbench new`: pick a scaffold, render it into a new project, never overwrite.

Scaffolds live in the top-level `scaffolds/` folder (shipped as the package
data `workbench.scaffolds`): one folder each, holding `kernel.py`,
`scaffold.toml` and optionally `workbench.toml`. scaffold.toml says

    family = "row"          # elementwise | row | gemm | attention
    summary = "..."
    aliases = ["rms_norm"]
    rename = "rmsnorm"      # identifier prefix replaced by the project's name
    template = false        # true for the four family skeletons
    backward_of = "rmsnorm" # a training variant (forward and backward kernels) of this scaffold:
                            # `workbench new rmsnorm --backward` picks it

Plugins add scaffolds through the `workbench_register_scaffolds` hook.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import keyword
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from ..fsutil import shared_mode

FAMILIES = ("elementwise", "row", "gemm", "attention")
NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# A project's name becomes its launcher's (`def <name>(...)` in kernel.py, which imports torch and
# triton), and its folder's: a name that is a module kernel.py may import, or a builtin it calls,
# would be shadowed by that launcher. Refused: these, the standard library's modules, the builtins.
SHADOWED_MODULES = frozenset({"torch", "triton", "numpy", "np", "tl"})
PROJECT_GITIGNORE = ".workbench/\n__pycache__/\n"
DEFAULT_PROJECT_TOML = """\
# Kernel Workbench project settings. Every key is optional; the defaults are shown.

[verify]
# fp32_precision = "ieee"        # "tf32" when tl.dot on fp32 inputs uses TF32 (widens fp32 tolerances)
# deterministic = false          # true: two runs that differ bit for bit fail
# inplace = false                # true: the kernel may modify its inputs
# timeout_s = 60                 # per case on a GPU
# interpret_timeout_s = 300      # per case under the Triton interpreter
# interpret_max_elements = 4194304
# fixed_params = []              # parameters generated edge cases keep as they are (["k"] for a top-k)
# torch_compile = "check"        # GPU: torch.compile(fullgraph=True) of kernel_fn, reported beside the
#                                # verdict; "require" fails the verdict on it, "off" skips it
# cuda_graph = "check"           # GPU: CUDA-graph capture and replay (the same three modes)
# noncontiguous = "check"        # kernel_fn on transposed / strided copies of the inputs (the same modes)
# storage_offset = "require"     # kernel_fn on inputs 16 bytes into their storage (the same modes)
# guard_regions = true           # inputs and allocations inside guard margins (out-of-bounds stores)
# seed = 482913                  # the inputs' seed (default: a new one each run, said in the report)

# [tolerance.bfloat16]           # float32, tf32, float16, bfloat16, float8_e4m3fn, float8_e5m2, int*, bool (exact)
# rtol = 1e-2
# atol = 1e-2
# rel_norm = 1e-2                # bound on ||out - ref|| / ||ref||
"""


class ScaffoldError(Exception):
    """The name or the destination is refused; nothing was written."""


@dataclass(frozen=True)
class Scaffold:
    name: str
    family: str
    summary: str
    directory: Path
    rename: str
    template: bool = False
    aliases: tuple[str, ...] = field(default_factory=tuple)
    backward_of: str = ""  # the scaffold this one is the training variant of

    def files(self) -> dict[str, str]:
        """The project files this scaffold writes, by name (kernel.py, workbench.toml, .gitignore, AGENTS.md)."""
        out = {"kernel.py": (self.directory / "kernel.py").read_text(encoding="utf-8")}
        toml = self.directory / "workbench.toml"
        out["workbench.toml"] = toml.read_text(encoding="utf-8") if toml.is_file() else DEFAULT_PROJECT_TOML
        out[".gitignore"] = PROJECT_GITIGNORE
        out["AGENTS.md"] = (scaffolds_root() / AGENTS_GUIDE).read_text(encoding="utf-8")  # render() names it
        return out


AGENTS_GUIDE = "AGENTS.md"  # scaffolds/AGENTS.md: the project's guide for coding agents, `{project}` its name


def scaffolds_root() -> Path:
    """The scaffolds: installed as package data (workbench/scaffolds), else the source tree's scaffolds/."""
    package = Path(__file__).resolve().parents[2]  # workbench/
    installed = package / "scaffolds"
    if installed.is_dir():
        return installed
    return package.parent / "scaffolds"


def load_scaffold(directory: Path) -> Scaffold:
    meta = tomllib.loads((directory / "scaffold.toml").read_text(encoding="utf-8"))
    family = meta.get("family", "")
    if family not in FAMILIES:
        raise ScaffoldError(f"{directory}/scaffold.toml: family {family!r} is not one of {', '.join(FAMILIES)}")
    return Scaffold(name=directory.name, family=family, summary=meta.get("summary", ""), directory=directory,
                    rename=meta.get("rename", directory.name), template=bool(meta.get("template", False)),
                    aliases=tuple(meta.get("aliases", ())), backward_of=meta.get("backward_of", ""))


def builtin_scaffolds() -> list[Scaffold]:
    root = scaffolds_root()
    return [load_scaffold(d) for d in sorted(root.iterdir()) if (d / "scaffold.toml").is_file()]


class Catalog:
    """Every scaffold by name and alias; templates by family."""

    def __init__(self, scaffolds: list[Scaffold]):
        self.scaffolds = list(scaffolds)
        self.by_name: dict[str, Scaffold] = {}
        for s in self.scaffolds:
            for key in (s.name, *s.aliases):
                self.by_name.setdefault(key.lower(), s)

    @classmethod
    def installed(cls, register_hook: Callable[..., Any] | None = None) -> "Catalog":
        """The built-in scaffolds and those plugins register (`pm.hook.workbench_register_scaffolds`)."""
        scaffolds = builtin_scaffolds()
        if register_hook is not None:
            register_hook(register=scaffolds.append)
        return cls(scaffolds)

    def template(self, family: str) -> Scaffold:
        for s in self.scaffolds:
            if s.template and s.family == family:
                return s
        for s in self.scaffolds:
            if s.family == family:
                return s
        raise ScaffoldError(f"no scaffold for template {family!r}")

    def training_variant(self, name: str, template: str | None) -> Scaffold:
        """The training scaffold (forward and backward kernels) for a known op: NAME's, else --template's."""
        variants = {s.backward_of.lower(): s for s in self.scaffolds if s.backward_of}
        offered = ", ".join(sorted(variants)) or "none"
        for key in (name, template):
            known = self.by_name.get(key.lower()) if key else None
            if known is None:
                continue
            if known.backward_of:
                return known  # already a training scaffold
            if known.name.lower() in variants:
                return variants[known.name.lower()]
        asked = template if template and template in self.by_name else name
        raise ScaffoldError(f"--backward: no training scaffold for {_shown(asked)}; the ops with one: {offered} "
                            "(or write the backward yourself: docs/TRAINING.md)")

    def known_names(self) -> list[str]:
        return sorted(s.name for s in self.scaffolds if not s.template)

    def choose(self, name: str, template: str | None, backward: bool = False) -> Scaffold:
        """The scaffold `workbench new NAME [--template T] [--backward]` renders."""
        if backward:
            return self.training_variant(name, template)
        if template is not None:
            if template in self.by_name and template not in FAMILIES:
                return self.by_name[template]
            if template not in FAMILIES:
                raise ScaffoldError(f"unknown template {_shown(template)}; templates: {', '.join(FAMILIES)}")
            return self.template(template)  # asked for by name: the template, even for a known op's name
        known = self.by_name.get(name.lower())
        if known is None:
            raise ScaffoldError(
                f"no scaffold is known for {_shown(name)}: pass --template with one of {', '.join(FAMILIES)}\n"
                f"known names: {', '.join(self.known_names())}")
        return known


def _shown(name: str) -> str:
    """The name as a message shows it: a long one cut short, with its length."""
    return repr(name) if len(name) <= 64 else f"{name[:32]!r}... ({len(name)} characters)"


def validate_name(name: str) -> None:
    if not name or "/" in name or "\\" in name or name in (".", "..") or ".." in name:
        raise ScaffoldError(f"invalid project name {_shown(name)}: no path separators or '..'")
    if not NAME_PATTERN.match(name):
        raise ScaffoldError(f"invalid project name {_shown(name)}: use letters, digits and '_', starting with a "
                            "letter or '_' (at most 64 characters)")
    if keyword.iskeyword(name):
        raise ScaffoldError(f"invalid project name {name!r}: it is a Python keyword")
    if name.startswith("__") and name.endswith("__"):
        raise ScaffoldError(f"invalid project name {name!r}: names in __double_underscores__ are Python's")
    if name in SHADOWED_MODULES or name in sys.stdlib_module_names:
        what = ("a module of the standard library" if name in sys.stdlib_module_names
                else "the name of a module kernel.py may import")
        raise ScaffoldError(f"invalid project name {name!r}: it is {what}, which the project's launcher "
                            f"`def {name}(...)` in kernel.py would shadow; pick another name")
    if name in vars(builtins):
        raise ScaffoldError(f"invalid project name {name!r}: it is a Python builtin, which the project's launcher "
                            f"`def {name}(...)` in kernel.py would shadow; pick another name")


def _module_names(source: str) -> list[str]:
    """The names kernel.py binds at module level: its imports, functions, classes and assignments
    (inside module-level `if`, `try`, `with` and `for` blocks too, never inside a function or class)."""
    try:
        statements = list(ast.parse(source).body)
    except SyntaxError:
        return []
    names: list[str] = []
    while statements:
        node = statements.pop(0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [a.asname or a.name.split(".")[0] for a in node.names if a.name != "*"]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With)):
            targets = (node.targets if isinstance(node, ast.Assign) else
                       [item.optional_vars for item in node.items if item.optional_vars] if isinstance(node, ast.With)
                       else [node.target])
            for target in targets:
                names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
        for block in ("body", "orelse", "finalbody", "handlers"):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                statements += [child for child in getattr(node, block, []) if isinstance(child, ast.AST)]
        if isinstance(node, ast.ExceptHandler) and node.name:
            names.append(node.name)
    return names


def render(scaffold: Scaffold, name: str) -> dict[str, str]:
    files = scaffold.files()
    files["AGENTS.md"] = files["AGENTS.md"].replace("{project}", name)
    if name != scaffold.rename:
        pattern = re.compile(rf"\b{re.escape(scaffold.rename)}(?=_|\b)")
        # Renaming must not make two of kernel.py's names one (`get_inputs` as a row project's name would
        # turn its launcher into a second get_inputs).
        renamed: dict[str, str] = {}
        for original in dict.fromkeys(_module_names(files["kernel.py"])):
            new = pattern.sub(name, original)
            if new in renamed and renamed[new] != original:
                source = original if original != new else renamed[new]
                raise ScaffoldError(f"invalid project name {name!r}: the {scaffold.name} scaffold's kernel.py "
                                    f"already has `{new}`, which renaming its `{source}` to `{new}` would "
                                    "shadow; pick another name")
            renamed[new] = original
        files["kernel.py"] = pattern.sub(name, files["kernel.py"])
    return files


def create_project(name: str, parent: Path, scaffold: Scaffold) -> Path:
    """Write a new project folder `parent/name`; refuse if it exists. All or nothing: on any refusal or
    error (a file where the folder should be, a folder that cannot be written, a name too long for the
    file system) nothing is left behind, not even the folders made for it."""
    validate_name(name)
    files = render(scaffold, name)
    parent = parent.expanduser()
    target = parent / name
    try:
        if target.exists() or target.is_symlink():
            raise ScaffoldError(f"{target} already exists; nothing was written (pick another name or remove it)")
        if parent.exists() and not parent.is_dir():
            raise ScaffoldError(f"cannot create {target}: {parent} is a file, not a folder; nothing was written")
    except OSError as exc:
        raise ScaffoldError(f"cannot create {target}: {exc.strerror or exc}; nothing was written") from None
    made: list[Path] = []  # the folders this call creates, outermost first (removed again on failure)
    staging: Path | None = None
    done = False
    try:
        missing = parent
        while not missing.exists():
            made.insert(0, missing)
            if missing.parent == missing:
                break
            missing = missing.parent
        parent.mkdir(parents=True, exist_ok=True)
        # Build the project in a temporary folder beside it, then rename into place:
        # an interrupted `new` leaves no half-written project.
        staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=parent))
        os.chmod(staging, shared_mode(directory=True))  # mkdtemp's 0700 would keep a teammate out
        for filename, text in files.items():
            (staging / filename).write_text(text, encoding="utf-8")
        os.rename(staging, target)  # fails rather than replaces if target appeared meanwhile (non-empty)
        done = True
    except OSError as exc:
        raise ScaffoldError(f"cannot create {target}: {exc.strerror or exc}; nothing was written") from None
    finally:
        with contextlib.suppress(OSError):
            if staging is not None and staging.exists():
                for child in staging.iterdir():
                    child.unlink()
                staging.rmdir()
        if not done:
            for folder in reversed(made):
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only if empty: never anything this call did not make
    return target
