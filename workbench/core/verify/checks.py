"""Every check of the battery, by the key it has in a case's JSON `checks` (and in JUnit): what failing it
means, where its evidence is gathered (in the kernel's process) and where the judge decides it. One place
to find a check; docs/VERIFIED.md's tables list exactly these keys (tests/test_check_registry.py).

A compatibility finding (`finding`) is reported beside the verdict and fails it only where the project
requires it ([verify] <key> = "require"); every other check fails the case.

A plugin adds a check with the `workbench_register_checks` hook: a `PluginCheck` naming (by "module:attribute")
an object with two methods, one per process, so that no verdict is ever given in the kernel's:

    gather(inputs, outputs, reference) -> evidence   in the kernel's process, after each case's first call: the
                                                     inputs as they were, the outputs and the float64
                                                     reference's by name ({"output": tensor, ...}); plain data
                                                     back (what json.dumps takes)
    decide(evidence) -> str | None                   in the judge: the failure's message, or None (passed)
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Check:
    key: str
    fails_when: str
    gathered: str  # module (function) that collects its evidence in the kernel's process
    decided: str  # module (function) where the judge decides it
    finding: bool = False


BUILTIN_CHECKS = (
    Check("structure", "the outputs' structure differs from reference_fn's (a missing or extra dict key, a tuple "
          "for a tensor, a tensor subclass)", "battery.Verifier._verify_case", "judge.Judge._outputs"),
    Check("dtype", "an output's dtype differs from reference_fn's on the same inputs",
          "references.native_reference", "judge.Judge._outputs"),
    Check("shape", "an output's shape differs from the reference's", "battery.Verifier._verify_case",
          "judge.Judge._outputs"),
    Check("tolerance", "an output's dtype has no tolerance ([tolerance.<dtype>] in workbench.toml)",
          "project.config.VerifyConfig.tolerance_for", "judge.Judge._outputs"),
    Check("values", "an output is further from the float64 reference than the error model allows",
          "references.upcast_reference", "judge.Judge._outputs (compare.compare, error_model)"),
    Check("unwritten", "an element kernel_fn never wrote (NaN on the first call, a sentinel on the second)",
          "torchmodes.PrefillEmpty", "judge.Judge._outputs"),
    Check("nan", "NaN or Inf where the reference has a number (or the reverse)", "battery.Verifier._call_kernel",
          "judge.Judge._outputs"),
    Check("deterministic", "two calls on the same inputs differ (only with [verify] deterministic = true)",
          "battery.Verifier._verify_case", "judge.Judge._outputs"),
    Check("mutated_input", "an input changed", "battery.Verifier._verify_case", "judge.Judge._inputs"),
    Check("aliasing", "an output shares an input's memory", "tensors.shared_memory", "judge.Judge._inputs"),
    Check("triton_launched", "kernel_fn launched no Triton kernel", "launches.LaunchCounter",
          "judge.Judge._launches"),
    Check("out_of_bounds", "a store landed in a guard margin around an input or an allocation",
          "guards.Guards", "judge.Judge._out_of_bounds"),
    Check("torch_ops", "an output holds no data a Triton kernel wrote and torch functions computed it",
          "torchops.TorchOpRecorder", "judge.Judge._torch_ops"),
    Check("repeat_fresh_inputs", "a second call on fresh inputs is wrong (a result kept from an earlier call)",
          "battery.Verifier._repeat_calls", "judge.Judge._extra_runs"),
    Check("repeat_recycled_addresses", "a call on the first call's tensors refilled with new values is wrong",
          "battery.Verifier._repeat_calls", "judge.Judge._extra_runs"),
    Check("inputs", "a warning: every input is constant, the reference is all zeros, or it equals another case's",
          "battery.Verifier._verify_case", "judge.Judge._weak_inputs"),
    Check("torch_compile", "torch.compile(kernel_fn, fullgraph=True) breaks the graph, fails or differs",
          "compat.compat_runs", "judge.Judge._extra_runs", finding=True),
    Check("cuda_graph", "kernel_fn captured into a CUDA graph and replayed is wrong, or the capture fails",
          "compat.compat_runs", "judge.Judge._extra_runs", finding=True),
    Check("noncontiguous", "kernel_fn on the same values non-contiguous is wrong", "layouts.layout_runs",
          "judge.Judge._extra_runs", finding=True),
    Check("storage_offset", "kernel_fn on inputs 16 bytes into their storage is wrong", "layouts.layout_runs",
          "judge.Judge._extra_runs", finding=True),
)
CHECKS = {check.key: check for check in BUILTIN_CHECKS}


@dataclass(frozen=True)
class PluginCheck:
    """A check a plugin adds (see the module docstring): its JSON key, what failing it means, and "module:attr"
    of its gather/decide object, importable in the worker and in the judge."""

    key: str
    fails_when: str
    target: str


def load_check(target: str) -> Any:
    """The gather/decide object a PluginCheck names ("module:attribute")."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def gather_evidence(checks: list[dict[str, str]], inputs: list[Any], outputs: dict[str, Any],
                    reference: dict[str, Any]) -> dict[str, list[Any]]:
    """In the kernel's process: each plugin check's evidence, {key: [target, "ok", evidence]}, or
    [target, "error", why] when gather raised or gave what is not plain data."""
    found: dict[str, list[Any]] = {}
    for spec in checks:
        try:
            evidence = load_check(spec["target"]).gather(inputs, outputs, reference)
            json.dumps(evidence)
            found[spec["key"]] = [spec["target"], "ok", evidence]
        except Exception as exc:  # noqa: BLE001 - the check fails, saying why; the case goes on
            found[spec["key"]] = [spec["target"], "error", f"{type(exc).__name__}: {exc}"]
    return found


def decide(target: str, status: str, evidence: Any) -> str | None:
    """In the judge: a plugin check's failure message, or None when it passed."""
    if status == "error":
        return f"the check could not gather its evidence: {evidence}"
    try:
        return load_check(target).decide(evidence)
    except Exception as exc:  # noqa: BLE001
        return f"the check's decide raised {type(exc).__name__}: {exc}"
