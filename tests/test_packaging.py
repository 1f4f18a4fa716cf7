"""An installed (non-editable) copy finds its scaffolds as package data."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_installed_copy_ships_the_scaffolds(tmp_path):
    target = tmp_path / "site"
    build = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                            "--target", str(target), str(ROOT)], capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr[-2000:]
    probe = subprocess.run(
        [sys.executable, "-c", "from workbench.core.project.scaffold import scaffolds_root, builtin_scaffolds;"
                               "print(scaffolds_root()); print(sorted(s.name for s in builtin_scaffolds()))"],
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    assert probe.returncode == 0, probe.stderr
    root, names = probe.stdout.splitlines()
    assert root.startswith(str(target))
    assert "rmsnorm" in names and "gemm" in names and "attention" in names
