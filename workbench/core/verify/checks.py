"""Every check of the battery, by the key it has in a case's JSON `checks` (and in JUnit): what failing it
means, where its evidence is gathered (in the kernel's process) and where the judge decides it. One place
to find a check; the README's tables list exactly these keys (tests/test_check_registry.py).

A compatibility finding (`finding`) is reported beside the verdict and fails it only where the project
requires it ([verify] <key> = "require"); every other check fails the case.
"""

from __future__ import annotations

from dataclasses import dataclass


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
