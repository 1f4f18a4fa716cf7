"""workbench-ncu, workbench-sanitizer and workbench-ray are distributions of their own that register through the
entry-point group "workbench": installed beside the workbench, they appear without any code change."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_installed_plugins_register_through_their_entry_points(tmp_path):
    target = tmp_path / "site"
    plugins = [str(ROOT / "plugins" / name) for name in ("mcp", "ncu", "ray", "sanitizer")]
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-v", "--no-deps", "--no-build-isolation",
                              "--target", str(target), *plugins], capture_output=True, text=True, cwd=tmp_path)
    assert install.returncode == 0, install.stderr[-2000:]
    assert "`project.license` as a TOML table" not in install.stdout + install.stderr  # an SPDX string now
    env = {"PYTHONPATH": f"{target}:{ROOT}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    probe = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m;"
                               "print(sorted((e.name, e.value, e.dist.metadata['Name'], str(e.dist.requires)) "
                               "for e in m.entry_points(group='workbench')))"],
        capture_output=True, text=True, cwd=tmp_path, env=env)
    assert probe.returncode == 0, probe.stderr
    found = eval(probe.stdout)  # noqa: S307 - our own repr
    assert [(name, value, dist) for name, value, dist, _ in found] == [
        ("mcp", "workbench_mcp", "workbench-mcp"), ("ncu", "workbench_ncu", "workbench-ncu"), ("ray", "workbench_ray", "workbench-ray"),
        ("sanitizer", "workbench_sanitizer", "workbench-sanitizer")]
    assert all("kernel-workbench" in requires for *_, requires in found)

    listing = subprocess.run([sys.executable, "-m", "workbench.cli", "plugins"], capture_output=True, text=True,
                             cwd=tmp_path, env=env)
    assert listing.returncode == 0, listing.stderr
    rows = {line.split()[0]: line.split()[1:] for line in listing.stdout.splitlines()}
    assert rows["ncu"] == ["workbench-ncu", "0.1.0", "entry", "point", "workbench_ncu"]
    assert rows["sanitizer"] == ["workbench-sanitizer", "0.1.0", "entry", "point", "workbench_sanitizer"]
    assert rows["mcp"] == ["workbench-mcp", "0.1.0", "entry", "point", "workbench_mcp"]  # the SDK: when it serves
    # loaded without importing ray: only --cluster needs it
    assert rows["ray"] == ["workbench-ray", "0.1.0", "entry", "point", "workbench_ray"]
    commands = subprocess.run([sys.executable, "-m", "workbench.cli", "profile", "--list"], capture_output=True,
                              text=True, cwd=tmp_path, env=env)
    assert commands.returncode == 0 and commands.stdout.startswith("ncu ")
