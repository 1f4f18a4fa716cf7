"""An installed (non-editable) copy finds its scaffolds as package data, holds every module, and builds
without setuptools warnings (`make demo` once printed ~640 lines of them)."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECTS = [ROOT / "pyproject.toml", *sorted((ROOT / "plugins").glob("*/pyproject.toml"))]
# What setuptools says when the configuration is off: a package left out of `packages` (its files then ship
# as data, or not at all), the license as a table (deprecated since setuptools 77).
SETUPTOOLS_WARNINGS = re.compile(r"SetuptoolsDeprecationWarning|BuildBackendWarning|absent from the `packages`|_Warning:|"
                                 r"`project\.license` as a TOML table")


def _source_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def test_pyproject_lists_every_package_and_scaffold_and_an_spdx_license():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    code = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "workbench").rglob("*.py")
            if "__pycache__" not in p.parts}
    scaffolds = {f"workbench.scaffolds.{d.name}" for d in (ROOT / "scaffolds").iterdir() if (d / "kernel.py").is_file()}
    assert code | scaffolds | {"workbench.scaffolds"} == listed
    for path in PYPROJECTS:
        data = tomllib.loads(path.read_text())
        assert data["project"]["license"] == "Apache-2.0", path  # SPDX string, not a table
        (requirement,) = data["build-system"]["requires"]
        assert re.fullmatch(r"setuptools>=(\d+)", requirement) and int(requirement.split(">=")[1]) >= 77, path


@pytest.mark.slow
def test_installed_copy_ships_the_scaffolds_and_every_module_without_warnings(tmp_path):
    # A clean copy of the sources: an in-tree build/ left from an older layout would ship its stale files.
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".workbench", "projects", "tests", "plugins",
        "benchmarks", "*.html", ".pytest_cache"))
    target = tmp_path / "site"
    build = subprocess.run([sys.executable, "-m", "pip", "install", "-v", "--no-deps", "--no-build-isolation",
                            "--target", str(target), str(source)], capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr[-2000:]
    warned = sorted({line.strip() for line in (build.stdout + build.stderr).splitlines()
                     if SETUPTOOLS_WARNINGS.search(line)})
    assert warned == []
    installed = target / "workbench"
    assert set(_source_files(ROOT / "scaffolds")) <= set(_source_files(installed / "scaffolds"))
    modules = [f for f in _source_files(ROOT / "workbench") if f.endswith((".py", ".tcss"))]
    assert set(modules) <= set(_source_files(installed))  # core/run/child/ was once left out
    probe = subprocess.run(
        [sys.executable, "-c", "from workbench.core.project.scaffold import scaffolds_root, builtin_scaffolds;"
                               "import workbench.core.run.child.worker;"
                               "print(scaffolds_root()); print(sorted(s.name for s in builtin_scaffolds()))"],
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    assert probe.returncode == 0, probe.stderr
    root, names = probe.stdout.splitlines()
    assert root.startswith(str(target))
    assert "rmsnorm" in names and "gemm" in names and "attention" in names
