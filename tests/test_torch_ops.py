"""Which outputs torch computed (workbench/core/verify/torchops.py), launcher by launcher, under the
Triton interpreter in a child process (the interpreter is chosen when triton is imported)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r'''
import json
import logging

import torch
import triton
import triton.language as tl

from workbench.core.verify.launches import LaunchCounter
from workbench.core.verify.torchmodes import PrefillEmpty
from workbench.core.verify.torchops import TorchOpRecorder

LaunchCounter.install()
logger = logging.getLogger("launchers")
SCALE = 2.0  # a module-level constant, as libraries keep them


@triton.jit
def noop(x_ptr):
    pass


@triton.jit
def add_kernel(x, y, o, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(o + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)


@triton.jit
def zero_where_negative(x, o, n, BLOCK: tl.constexpr):  # stores 0 where the buffer already holds 0
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    v = tl.load(x + i, mask=m)
    tl.store(o + i, tl.where(v > 0, v, 0.0), mask=m)


def add(x, y):
    o = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 64),)](x, y, o, x.numel(), BLOCK=64)
    return o


LAUNCHERS = {
    # torch does the work
    "noop_then_torch": lambda x, y: (noop[(1,)](x), x * 2 + y)[1],
    "computed_then_noop": lambda x, y: (lambda t: (noop[(1,)](t), t)[1])(x * 2 + y),
    "empty_overwritten_after_noop": lambda x, y: (lambda o: (noop[(1,)](o), o.copy_(x * SCALE + y))[1])(
        torch.empty_like(x)),
    "stats_from_inputs": lambda x, y: (add(x, y), x.mean()),
    # a Triton kernel's data in every output
    "kernel": add,
    "kernel_then_bias": lambda x, y: add(x, y) + y,
    "kernel_then_sum": lambda x, y: torch.sum(add(x, y)) / (y != 0).sum(),
    "kernel_in_place_on_a_torch_result": lambda x, y: (lambda o: (add_kernel[(1,)](o, y, o, o.numel(), BLOCK=64),
                                                                  o)[1])(x * 2),
    "zeros_written_with_zeros": lambda x, y: (lambda o: (zero_where_negative[(1,)](-x.abs(), o, o.numel(), BLOCK=64),
                                                         logger.debug("rows %d", o.numel()), o.sum())[2])(
        torch.zeros_like(x)),
    "item_and_float_scalar": lambda x, y: add(x, y) * (y.abs().max().item() * 0 + 1.0) * torch.tensor(1.0),
    "returns_an_input_untouched": lambda x, y: (noop[(1,)](x), y)[1],
}

found = {}
for name, launcher in LAUNCHERS.items():
    x, y = torch.randn(50), torch.randn(50)
    with PrefillEmpty("sentinel"), TorchOpRecorder() as recorder:
        out = launcher(x, y)
    outs = list(out) if isinstance(out, tuple) else [out]
    found[name] = {"ops": recorder.computed_by_torch(outs, [f"[{i}]" for i in range(len(outs))]),
                   "unknown": recorder.unknown}


# A launch the wrappers do not see (a compiled kernel launched directly): the recorder stands down.
x, y = torch.randn(50), torch.randn(50)
with TorchOpRecorder() as recorder:
    LaunchCounter.count += 1
    out = x * 2 + y
found["unseen_launch"] = {"ops": recorder.computed_by_torch([out], [""]), "unknown": recorder.unknown}
print(json.dumps(found))
'''


@pytest.fixture(scope="module")
def found():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name, ops", [
    ("noop_then_torch", ["output[0]: torch.add, torch.mul"]),
    ("computed_then_noop", ["output[0]: torch.add, torch.mul"]),
    ("empty_overwritten_after_noop", ["output[0]: torch.add, torch.mul"]),
    ("stats_from_inputs", ["output[1]: torch.mean"]),
])
def test_an_output_torch_computed_is_reported_with_its_functions(found, name, ops):
    assert found[name] == {"ops": ops, "unknown": ""}


@pytest.mark.parametrize("name", ["kernel", "kernel_then_bias", "kernel_then_sum", "kernel_in_place_on_a_torch_result",
                                  "zeros_written_with_zeros", "item_and_float_scalar", "returns_an_input_untouched"])
def test_an_output_holding_a_kernels_data_is_not_reported(found, name):
    assert found[name] == {"ops": [], "unknown": ""}


def test_a_launch_not_seen_with_its_arguments_makes_the_recorder_stand_down(found):
    assert found["unseen_launch"]["ops"] == []
    assert "not seen with their arguments" in found["unseen_launch"]["unknown"]


@pytest.mark.parametrize("allowed, name, expected", [
    (True, "torch.mul", True), (False, "torch.mul", False), (["torch.mul"], "torch.mul", True),
    (["mul"], "torch.mul", True), (["aten.mul"], "torch.mul", True), (["mul_"], "torch.mul", True),
    (["torch.add"], "torch.mul", False), (["softmax"], "torch.nn.functional.softmax", True),
])
def test_allow_torch_ops_names_functions_by_their_torch_or_aten_names(allowed, name, expected):
    from workbench.core.project.config import VerifyConfig
    from workbench.core.verify.judge import allows_torch_op

    assert allows_torch_op(VerifyConfig(allow_torch_ops=allowed), name) is expected


@pytest.mark.parametrize("value", ["yes", 1, ["torch.add", 3], [""]])
def test_a_bad_allow_torch_ops_names_the_key(tmp_path, value):
    from workbench.core.project.config import ConfigError, load_config

    toml = tmp_path / "workbench.toml"
    toml.write_text(f"[verify]\nallow_torch_ops = {json.dumps(value)}\n")
    with pytest.raises(ConfigError, match="verify.allow_torch_ops"):
        load_config(toml)
