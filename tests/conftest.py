import os
import re
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Runs shard verification over at most two workers here: enough to exercise sharding, and a
# 16-core GPU machine does not start eight CUDA workers for every small test project.
if "WORKBENCH_WORKERS" not in os.environ:
    from workbench.core.run.runner import default_parallel

    os.environ["WORKBENCH_WORKERS"] = str(min(2, default_parallel()))
# No heartbeat lines on a captured stderr unless a test asks for them (commands.Heartbeat): a slow machine would
# otherwise add them to what tests read.
os.environ.setdefault("WORKBENCH_HEARTBEAT_S", "0")


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    gpu = [item for item in items if "gpu" in item.keywords]
    if _has_cuda():
        for item in gpu:  # under pytest-xdist (--dist loadgroup): one process runs them all, one at a time
            item.add_marker(pytest.mark.xdist_group("gpu"))
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in gpu:
        item.add_marker(skip)


LARGE_INDEX_RUNS = torch.cuda.is_available()  # the cases past 2^31 elements run only there (make_project)


def without_large_index(toml: str | None) -> str:
    """The workbench.toml with `large_index = false` in its [verify] table (one appended where it has none: the
    lines as written keep their numbers and tables)."""
    text = toml or ""
    if "large_index" in text:
        return text
    lines = text.splitlines()
    header = re.compile(r"^\s*\[verify\]\s*(#.*)?$")
    at = next((i for i, line in enumerate(lines) if header.match(line)), None)
    if at is None:
        return text + ("\n" if text and not text.endswith("\n") else "") + "\n[verify]\nlarge_index = false\n"
    lines.insert(at + 1, "large_index = false")
    return "\n".join(lines) + "\n"


@pytest.fixture
def make_project(tmp_path):
    """Write a project folder holding kernel.py (and workbench.toml) and return its path."""

    def make(source: str, name: str = "proj", toml: str | None = None, large_index: bool = False) -> Path:
        """`large_index`: keep the large-index cases past 2^31 elements (verify/large_index.py, GPU only). Off
        unless asked: the fixture kernels are written for the checks their tests are about, most with 32-bit
        offsets, and tests/test_large_index_gpu.py is where those cases are tested. Where they never run (no
        GPU) the project is written as given."""
        folder = tmp_path / name
        folder.mkdir(parents=True)
        (folder / "kernel.py").write_text(source)
        if not large_index and LARGE_INDEX_RUNS:
            toml = without_large_index(toml)
        if toml is not None:
            (folder / "workbench.toml").write_text(toml)
        return folder

    return make


@pytest.fixture
def cli(monkeypatch, capsys):
    """Run `workbench ...` in this process; returns (exit code, stdout, stderr)."""
    from workbench.cli import main

    monkeypatch.setenv("WORKBENCH_DISABLE_PLUGIN_AUTOLOAD", "1")

    def run(*args):
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def plugin_cli(capsys):
    """plugin_cli(module, name, command) -> run(*args): `workbench command ...` with only that plugin."""
    from workbench.cli import main
    from workbench.plugins import make_plugin_manager

    def bind(module, name: str, command: str):
        pm = make_plugin_manager(autoload=False)
        pm.register(module, name=name)

        def run(*args):
            capsys.readouterr()
            code = main([command, *map(str, args)], pm=pm)
            out, err = capsys.readouterr()
            return code, out, err

        return run

    return bind


@pytest.fixture
def placeholder_project(tmp_path):
    """A project whose kernel.py is a placeholder: for tests of records, history and reports, which run nothing."""
    from workbench.core.project.folder import Project

    folder = tmp_path / "rmsnorm"
    folder.mkdir()
    (folder / "kernel.py").write_text("# kernel\n")
    return Project.open(folder)
