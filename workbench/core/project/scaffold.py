"""`workbench new`: pick a scaffold, render it into a new project, never overwrite.

Scaffolds live in the top-level `scaffolds/` folder (shipped as the package
data `workbench.scaffolds`): one folder each, holding `kernel.py`,
`scaffold.toml` and optionally `workbench.toml`. scaffold.toml says

    family = "row"          # elementwise | row | gemm | attention
    summary = "..."
    aliases = ["rms_norm"]
    rename = "rmsnorm"      # identifier prefix replaced by the project's name
    template = false        # true for the four family skeletons

Plugins add scaffolds through the `workbench_register_scaffolds` hook.
"""

from __future__ import annotations

import keyword
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FAMILIES = ("elementwise", "row", "gemm", "attention")
NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
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

# [tolerance.bfloat16]           # any of float32, tf32, float16, bfloat16
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

    def files(self) -> dict[str, str]:
        """The project files this scaffold writes, by name (kernel.py, workbench.toml, .gitignore)."""
        out = {"kernel.py": (self.directory / "kernel.py").read_text(encoding="utf-8")}
        toml = self.directory / "workbench.toml"
        out["workbench.toml"] = toml.read_text(encoding="utf-8") if toml.is_file() else DEFAULT_PROJECT_TOML
        out[".gitignore"] = PROJECT_GITIGNORE
        return out


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
                    aliases=tuple(meta.get("aliases", ())))


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

    def template(self, family: str) -> Scaffold:
        for s in self.scaffolds:
            if s.template and s.family == family:
                return s
        for s in self.scaffolds:
            if s.family == family:
                return s
        raise ScaffoldError(f"no scaffold for template {family!r}")

    def known_names(self) -> list[str]:
        return sorted(s.name for s in self.scaffolds if not s.template)

    def choose(self, name: str, template: str | None) -> Scaffold:
        if template is not None:
            if template in self.by_name and template not in FAMILIES:
                return self.by_name[template]
            if template not in FAMILIES:
                raise ScaffoldError(f"unknown template {template!r}; templates: {', '.join(FAMILIES)}")
            known = self.by_name.get(name.lower())
            return known if known is not None and known.family == template else self.template(template)
        known = self.by_name.get(name.lower())
        if known is None:
            raise ScaffoldError(
                f"no scaffold is known for {name!r}: pass --template with one of {', '.join(FAMILIES)}\n"
                f"known names: {', '.join(self.known_names())}")
        return known


def validate_name(name: str) -> None:
    if not name or "/" in name or "\\" in name or name in (".", "..") or ".." in name:
        raise ScaffoldError(f"invalid project name {name!r}: no path separators or '..'")
    if not NAME_PATTERN.match(name):
        raise ScaffoldError(f"invalid project name {name!r}: use letters, digits and '_', starting with a letter "
                            "or '_' (at most 64 characters)")
    if keyword.iskeyword(name):
        raise ScaffoldError(f"invalid project name {name!r}: it is a Python keyword")


def render(scaffold: Scaffold, name: str) -> dict[str, str]:
    files = scaffold.files()
    if name != scaffold.rename:
        pattern = re.compile(rf"\b{re.escape(scaffold.rename)}(?=_|\b)")
        files["kernel.py"] = pattern.sub(name, files["kernel.py"])
    return files


def create_project(name: str, parent: Path, scaffold: Scaffold) -> Path:
    """Write a new project folder `parent/name`; refuse if it exists. All or nothing."""
    validate_name(name)
    parent = parent.expanduser()
    target = parent / name
    if target.exists() or target.is_symlink():
        raise ScaffoldError(f"{target} already exists; nothing was written (pick another name or remove it)")
    files = render(scaffold, name)
    parent.mkdir(parents=True, exist_ok=True)
    # Build the project in a temporary folder beside it, then rename into place:
    # an interrupted `new` leaves no half-written project.
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=parent))
    try:
        for filename, text in files.items():
            (staging / filename).write_text(text, encoding="utf-8")
        try:
            os.rename(staging, target)  # fails rather than replaces if target appeared meanwhile (non-empty)
        except OSError as exc:
            raise ScaffoldError(f"{target} could not be created: {exc}; nothing was written") from None
    finally:
        if staging.exists():
            for child in staging.iterdir():
                child.unlink()
            staging.rmdir()
    return target
