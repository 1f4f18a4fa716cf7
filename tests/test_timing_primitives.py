"""The benchmark's CUDA calls are bound before kernel.py is imported (core/timing/primitives.py): a kernel.py
that rebinds them reports nothing it likes. (The timing itself, with such a kernel.py: test_bench_gpu.)"""

import ast
import subprocess
import sys
from pathlib import Path

import kernels
import pytest

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
from workbench.core.timing import primitives           # what the worker imports before kernel.py
bound = (primitives.elapsed_time, primitives.synchronize, primitives.replay, primitives.Event, primitives._record_on)
exec({REBINDS_TIMING!r})                                 # kernel.py's import
torch.cuda.Event = type("Fake", (), {{}})
assert torch.cuda.synchronize is not bound[1]            # the patch took
after = (primitives.elapsed_time, primitives.synchronize, primitives.replay, primitives.Event, primitives._record_on)
assert after == bound and primitives.Event is not torch.cuda.Event, after
print("bound")
''')
    done = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0 and "bound" in done.stdout, done.stderr


def test_the_methods_are_bound_at_the_c_extension_where_torch_has_it():
    """A fake written into the extension type's method table (forbiddenfruit's way) reaches torch.cuda.Event's own
    methods, which look it up through super() on every call; the bound ones are the extension's functions."""
    import torch

    from workbench.core.timing import primitives

    base = getattr(torch._C, "_CudaEventBase", None)
    if base is None or getattr(base, "elapsed_time", None) is None:
        pytest.skip("this torch has no CUDA event type")
    assert primitives.elapsed_time is base.elapsed_time and primitives._record_on is base.record
    assert primitives.replay is torch._C._CUDAGraph.replay and primitives.synchronize is torch._C._cuda_synchronize


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
