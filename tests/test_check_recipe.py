"""docs/ARCHITECTURE.md's "How to add a check", followed once with a check of the tests' own
(tests/check_unit_example.py: every output kernel_fn returns is contiguous, which only the kernel's process can see):
one unit, registered by key, gathered in the worker and decided in the judge, its key in the case's JSON `checks`."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

import check_unit_example
import kernels
import test_check_registry
from check_unit_example import KEY

# The output is every other element of a buffer twice its length: the right values, strided.
STRIDED = kernels.kernel_source(
    kernel=kernels.KERNEL.replace("def scale_kernel(x_ptr, out_ptr, n, BLOCK",
                                  "def scale_kernel(x_ptr, out_ptr, n, stride, BLOCK")
    .replace("tl.store(out_ptr + offs,", "tl.store(out_ptr + offs * stride,"),
    launcher=kernels.LAUNCHER.replace("out = torch.empty_like(x)",
                                      "out = torch.empty(2 * x.numel(), dtype=x.dtype, device=x.device)[::2]")
    .replace("](x, out, n)", "](x, out, n, out.stride(0))"),
    contract=kernels.CONTRACT.replace("CASES = [dict(n=1), ", "CASES = ["))
FAST = "[verify]\ngenerated_cases = false\nrepeat_calls = false\n"


def verify(project, capsys):
    """`workbench verify --interpret --json` with the example's check registered (its Plugin): worker processes
    and their judges, which import the check by name."""
    from workbench.cli import main
    from workbench.plugins import make_plugin_manager

    pm = make_plugin_manager(autoload=False)
    pm.register(check_unit_example.Plugin(), name="contiguous")
    capsys.readouterr()
    code = main(["verify", str(project), "--interpret", "--json"], pm=pm)
    record = json.loads(capsys.readouterr().out)["projects"][0]
    return code, [c for c in record["cases"] if not c["config"]]  # a forced config's call is not gathered


def test_the_recipes_check_is_gathered_in_the_worker_and_decided_in_the_judge(make_project, monkeypatch, capsys):
    tests = str(Path(__file__).resolve().parent)  # the kernel's process and the judge import the check by name
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))

    code, cases = verify(make_project(kernels.GOOD, name="contiguous", toml=FAST), capsys)
    assert code == 0 and cases and all(c["checks"][KEY] == "passed" for c in cases)

    code, cases = verify(make_project(STRIDED, name="strided", toml=FAST), capsys)
    by_label = {c["label"]: c for c in cases}
    assert code == 1 and set(by_label) == {"n=1000 dtype=float16", "n=4097"}
    for case in by_label.values():
        assert case["status"] == "failed" and case["checks"][KEY] == "failed" and case["checks"]["values"] == "passed"
        assert f"{KEY}: output has strides (2,): return a contiguous tensor" in case["messages"]


@pytest.fixture
def registered():
    """The example registered as a built-in unit is (checks/__init__.py's `register`), for one test."""
    from workbench.core.verify import checks

    saved = list(checks.UNITS), dict(checks.CHECKS), dict(checks.OWNERS)
    checks.register(check_unit_example.UNIT)
    yield checks
    checks.UNITS[:] = saved[0]
    for now, before in ((checks.CHECKS, saved[1]), (checks.OWNERS, saved[2])):
        now.clear()
        now.update(before)


TORCH_STRIDED = '''
import torch


def kernel_fn(x):
    out = torch.empty(2 * x.numel(), dtype=x.dtype)[::2]
    return torch.mul(x, 2, out=out)


def reference_fn(x):
    return x * 2


def get_inputs(n=64):
    return [torch.randn(n)]


CASES = [{"n": 64}]
'''


def test_a_unit_registered_as_built_in_runs_in_the_battery_and_the_judge_and_wants_its_row(registered, tmp_path):
    """Registered the way checks/__init__.py registers the built-in units: the registry holds its key, the battery
    calls its hooks, the judge decides it from what crossed the wire, and docs/VERIFIED.md must list it."""
    from workbench.core.project.config import VerifyConfig
    from workbench.core.project.contract import load_kernel
    from workbench.core.verify.battery import Verifier
    from workbench.core.verify.handoff import CaseData
    from workbench.core.verify.judge import Judge

    assert registered.CHECKS[KEY] is check_unit_example.UNIT.checks[0]
    assert registered.OWNERS[KEY] is check_unit_example.UNIT
    assert KEY not in test_check_registry.keys_the_readme_lists()  # the recipe's last step: its row is due
    with pytest.raises(ValueError, match="registered twice"):
        registered.register(check_unit_example.UNIT)

    (tmp_path / "kernel.py").write_text(textwrap.dedent(TORCH_STRIDED))
    km = load_kernel(tmp_path / "kernel.py")
    config = VerifyConfig(require_triton=False, repeat_calls=False, torch_compile="off", cuda_graph="off",
                          noncontiguous="off", storage_offset="off")
    judge = Judge(config)
    results = []
    verifier = Verifier(km, config, results.append, interpret=False,
                        judge=lambda data: judge.judge(CaseData.unpack(data.pack())))  # the pipe's bytes
    [result] = verifier.verify_case(km.cases[0])
    checks = json.loads(result.to_json())["checks"]
    assert result.status == "failed" and checks[KEY] == "failed" and checks["values"] == "passed"
    assert f"{KEY}: output has strides (2,): return a contiguous tensor" in result.messages
