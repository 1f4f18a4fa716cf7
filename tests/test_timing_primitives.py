"""The benchmark's CUDA calls are bound before kernel.py is imported (core/timing/primitives.py): a kernel.py
that rebinds them reports nothing it likes. (The timing itself, with such a kernel.py: test_bench_gpu.)"""

import ast
import subprocess
import sys
from pathlib import Path

import kernels

import workbench.core.timing.timers as timers

REBINDS_TIMING = '''
import torch

torch.cuda.Event.elapsed_time = lambda self, end: 1e-9   # every call "takes" a picosecond
torch.cuda.synchronize = lambda *a, **k: None
torch.cuda.CUDAGraph.replay = lambda self: None
'''


def test_what_kernel_py_rebinds_after_the_workers_imports_leaves_the_timing_alone(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(f'''
import importlib.util, sys, torch
original = (torch.cuda.Event.elapsed_time, torch.cuda.synchronize, torch.cuda.CUDAGraph.replay, torch.cuda.Event)
from workbench.core.timing import primitives           # what the worker imports before kernel.py
exec({REBINDS_TIMING!r})                                 # kernel.py's import
torch.cuda.Event = type("Fake", (), {{}})
assert torch.cuda.synchronize is not original[1]         # the patch took
bound = (primitives.elapsed_time, primitives.synchronize, primitives.replay, primitives.Event)
assert bound == original, bound
print("bound")
''')
    done = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0 and "bound" in done.stdout, done.stderr


def test_the_timers_call_cuda_only_through_the_bound_primitives():
    tree = ast.parse(Path(timers.__file__).read_text())
    direct, on_objects = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                and isinstance(node.value.value, ast.Name) and (node.value.value.id, node.value.attr) == ("torch", "cuda"):
            direct.append(f"torch.cuda.{node.attr} (line {node.lineno})")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("elapsed_time", "record", "replay", "synchronize") \
                and not (isinstance(node.func.value, ast.Name) and node.func.value.id == "cuda"):
            on_objects.append(f".{node.func.attr}() (line {node.lineno})")
    assert not direct, f"timers.py calls torch.cuda directly: {direct}"
    assert not on_objects, f"timers.py looks a timing method up on its object: {on_objects}"


def test_the_worker_binds_them_before_it_imports_kernel_py(make_project, cli, monkeypatch):
    """A fresh worker (no fork template): the primitives module is loaded when kernel.py's import runs."""
    monkeypatch.setenv("WORKBENCH_FORKSERVER", "0")
    checks_order = "import sys\nassert 'workbench.core.timing.primitives' in sys.modules, 'imported too late'\n"
    project = make_project(checks_order + kernels.GOOD)
    code, out, err = cli("verify", project, "--interpret", "--case", "0")
    assert code == 0, out + err
