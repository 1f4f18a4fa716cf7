"""The baselines a kernel's time is compared with: reference_fn and torch.compile(reference_fn), timed on the
same inputs by the same timer (docs/TIMING.md).

A baseline's time depends on the reference, the inputs, the GPU, torch and the timing method, never on the
kernel (`reference_key`, `compiled_key`): the live loop reuses the reference's time of its earlier runs, and a
headless run one kept by an earlier run (project/kept.py); either says so in the result's notes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
from typing import Any, Callable

import torch

from ..events import BenchResult, StageChanged, Timing
from ..project.contract import Case, KernelModule, first_line
from ..project.kept import kept_since
from ..stage import Phases, is_cuda_fatal
from ..verify import compiled_context
from ..verify.tensors import restore_inputs, synchronize
from .compilewatch import CompileWatch
from .memory import peak_memory
from .modes import TimedMode
from .stats import without_samples
from .timers import L2Flusher, measure

REUSED_REFERENCE_NOTE = ("reference time from an earlier run of the live loop (reference_fn, get_inputs, case and "
                         "GPU unchanged); `workbench bench` times it afresh")
COMPILE_WARMUP_CALLS = 3


class Baselines:
    """Times (or reuses the times of) the reference and torch.compile(reference_fn), one case after another."""

    def __init__(self, context: Any, device_name: str, flusher: L2Flusher, watch: CompileWatch):
        self.project_km: KernelModule = context.km
        self.config = context.config.bench
        self.device_name = device_name
        self.flusher, self.watch = flusher, watch  # the kernel's own
        self.emit: Callable[[Any], None] = context.emit
        self.live = context.job.live
        # The live loop passes the reference times of its earlier runs: a save changes the kernel, not them.
        self.known_references: dict[str, dict] = context.job.reference_timings
        self.kept_baselines: dict[str, dict] = context.job.kept_baselines

    def time(self, result: BenchResult, case: Case, inputs: list[Any], originals: list[Any] | None,
             phases: Phases, km: KernelModule, mode: TimedMode | None) -> None:
        """The baselines of `case` into `result`; `km`, `mode`: the case's (modes.py: a training kernel's
        reference_fn called in its benchmark mode)."""
        if originals is not None:
            restore_inputs(inputs, originals)
        result.reference_key = reference_key(self.project_km, case, self.config, self.device_name, result.mode)
        known = self.known_references.get(result.reference_key) if self.live else None
        if known:
            result.reference, result.reference_reused = Timing(**known), True
            result.notes.append(REUSED_REFERENCE_NOTE)
        else:
            result.reference = self._kept(result, result.reference_key, "reference_fn", "timing method")
            result.reference_reused = result.reference is not None
            if result.reference is None:
                self._time_reference(result, inputs, km)
        phases.done("baselines: reference_fn timed")
        if not self.config.compare_torch_compile:
            result.compiled_note = ("not measured in the live loop ([bench] live_compare_torch_compile; "
                                    "`workbench bench` measures it)" if self.live else
                                    "not measured ([bench] compare_torch_compile = false)")
            return
        result.compiled_key = compiled_key(result.reference_key)
        result.compiled = self._kept(result, result.compiled_key, "torch.compile", "Triton")
        if result.compiled is not None:
            result.compiled_reused = True
            return
        self.emit(StageChanged(stage="benchmarking", detail=f"{case.label}: torch.compile(reference_fn)",
                               case_index=case.index))
        training = mode is not None and mode.indices
        result.compiled, result.compiled_note = self._time_compiled(
            self.project_km.reference_fn, "torch.compile(reference_fn)", "torch.compile", inputs, result, phases,
            (lambda fn: mode.wrap(fn, False)) if training else None)

    def time_kernel_compiled(self, result: BenchResult, case: Case, inputs: list[Any], originals: list[Any] | None,
                             phases: Phases, mode: TimedMode | None) -> None:
        """kernel_fn under torch.compile, timed as the kernel is (`workbench bench`, where torch.compile(reference_fn)
        is timed too): the kernel in the launches Inductor makes of it, beside its eager time."""
        if self.live or not self.config.compare_torch_compile:
            return
        if mode is not None and mode.indices:
            result.kernel_compiled_note = "not timed for a training kernel's modes (the forward-only kernels are)"
            return
        if result.kernel is None:
            return  # no eager time to set it beside (a wrong or withheld kernel's time is never posted)
        result.kernel_compiled_key = kernel_compiled_key(result.reference_key, self.project_km)
        result.kernel_compiled = self._kept(result, result.kernel_compiled_key, "kernel_fn under torch.compile",
                                            "timing method, Triton and project files")
        if result.kernel_compiled is not None:
            result.kernel_compiled_reused = True  # its compile imports Dynamo and Inductor: seconds, every run
            result.kernel_compiled_scalars = list(self.kept_baselines[result.kernel_compiled_key].get("scalars", []))
            return
        if originals is not None:
            restore_inputs(inputs, originals)
        self.emit(StageChanged(stage="benchmarking", detail=f"{case.label}: torch.compile(kernel_fn)",
                               case_index=case.index))
        # The kernels Inductor compiles for it, against their eager compiles in the same cache: a scalar that
        # reaches the kernel as another type (verify/compiled_context.py) says why the two times differ. Where an
        # earlier compile of it is in the cache (the torch.compile check's, in this worker), nothing is new: the
        # cache's entries with an fp64 scalar are then taken for torch.compile's.
        eager = compiled_context.kernels_in(compiled_context.cache_dir())
        try:
            result.kernel_compiled, result.kernel_compiled_note = self._time_compiled(
                self.project_km.kernel_fn, "torch.compile(kernel_fn)", "torch.compile(kernel_fn)", inputs, result,
                phases)
            after = compiled_context.kernels_in(compiled_context.cache_dir())
            new = after.keys() - eager.keys()
            result.kernel_compiled_scalars = (compiled_context.changed_scalars(eager, after) if new
                                              else compiled_context.scalars_as_fp64(after))
        finally:
            if originals is not None:
                restore_inputs(inputs, originals)

    def _time_compiled(self, fn: Callable[..., Any], what: str, label: str, inputs: list[Any], result: BenchResult,
                       phases: Phases, wrap: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
                       ) -> tuple[Timing | None, str]:
        """torch.compile(fn) (`what`) compiled, warmed up and timed by the kernel's timer (its notes under `label`):
        (the time, "") or (None, why not). Only the kernel's samples are compared between runs: none kept here."""
        compiled, note = compile_reference(fn, inputs, wrap, what)
        phases.done(f"baselines: {what} compiled")
        if compiled is None:
            return None, note
        try:
            timed = measure(lambda: compiled(*inputs), self.config, self.flusher, self.watch, label,
                            result.bytes_moved)
        except Exception as exc:  # noqa: BLE001 - a comparison, never a reason to fail
            if is_cuda_fatal(exc):
                raise
            return None, f"timing {what} failed: {type(exc).__name__}: {first_line(exc)}"
        timing = without_samples(timed.timing)
        if timing is not None:
            timing.peak_memory_bytes = peak_memory(lambda: compiled(*inputs))
        result.notes += timed.notes
        phases.done(f"baselines: {what} timed")
        return timing, ""

    def _kept(self, result: BenchResult, key: str, what: str, also: str) -> Timing | None:
        """A baseline's time kept from an earlier run (project/kept.py), noted as such; None when there is none."""
        entry = self.kept_baselines.get(key)
        if not entry:
            return None
        result.notes.append(f"{what}: its time from a run at {kept_since(entry.get('measured_at', 0))} (the same "
                            f"reference_fn, get_inputs, case, GPU, torch and {also}); `workbench bench "
                            "--fresh-baselines` measures it again")
        return Timing(**entry["timing"])

    def _time_reference(self, result: BenchResult, inputs: list[Any], km: KernelModule) -> None:
        try:
            km.reference_fn(*inputs)  # its first call in the inputs' own dtype: warm it outside the timing
            reference = measure(lambda: km.reference_fn(*inputs), self.config, self.flusher, self.watch,
                                "reference", result.bytes_moved)
            result.reference = without_samples(reference.timing)
            if result.reference is not None:
                result.reference.peak_memory_bytes = peak_memory(lambda: km.reference_fn(*inputs))
            result.notes += reference.notes
        except Exception as exc:  # noqa: BLE001 - a baseline that cannot be timed is a note, not a failure
            if is_cuda_fatal(exc):
                raise
            result.notes.append(f"reference_fn could not be timed: {type(exc).__name__}: {first_line(exc)}")


def reference_key(km: KernelModule, case: Case, config: Any, device_name: str, mode: str = "") -> str:
    """What the reference's time depends on: reference_fn's and get_inputs' source, the case, the GPU,
    torch, the timing method and a training kernel's mode. Not the kernel: a save that changes only the kernel
    keeps the key."""
    parts = [function_source(km.reference_fn), function_source(km.get_inputs), repr(sorted(case.params.items())),
             device_name, torch.__version__,
             repr([getattr(config, f.name) for f in dataclasses.fields(config) if f.name != "mode"])]
    if mode:
        parts.append(mode)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def compiled_key(reference: str) -> str:
    """What torch.compile(reference_fn)'s time depends on: the reference's key (reference_key) and Triton."""
    import triton

    return hashlib.sha256(f"{reference}\0{triton.__version__}".encode()).hexdigest()[:16]


def kernel_compiled_key(reference: str, km: KernelModule) -> str:
    """What kernel_fn's time under torch.compile depends on: the reference's key (the inputs, the case, the GPU,
    torch, the timing method), Triton, and every Python file of the project (verify/compat.project_digest): a save
    that changes the kernel measures it again."""
    from ..verify.compat import project_digest

    parts = [compiled_key(reference), project_digest(str(km.path.parent)), "kernel_fn"]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def function_source(fn: Any) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return repr(fn)


def compile_reference(reference_fn: Callable[..., Any], inputs: list[Any],
                      wrap: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
                      what: str = "torch.compile(reference_fn)") -> tuple[Callable[..., Any] | None, str]:
    """torch.compile(reference_fn), specialised to this case's shapes and warmed up; or (None, why not).
    `wrap`: how a training kernel's mode calls it (modes.TimedMode.wrap: its backward compiled by AOTAutograd);
    `what`: what is compiled, as a failure says (kernel_fn is compiled the same way)."""
    try:
        import torch._dynamo

        torch._dynamo.reset()  # each case compiles afresh: no recompile limit, no shape-generic fallback
        if wrap is not None:
            # The backward alone is timed by calling it again on one graph (retain_graph=True), which AOTAutograd's
            # donated buffers (the backward reusing its saved tensors' memory) refuse.
            import torch._functorch.config

            torch._functorch.config.donated_buffer = False
        compiled = torch.compile(reference_fn, dynamic=False)
        if wrap is not None:
            compiled = wrap(compiled)
        for _ in range(COMPILE_WARMUP_CALLS):
            compiled(*inputs)
        synchronize()
        return compiled, ""
    except Exception as exc:  # noqa: BLE001 - torch.compile is a comparison, never a reason to fail
        if is_cuda_fatal(exc):
            raise
        return None, f"{what} failed: {type(exc).__name__}: {first_line(exc)[:200]}"
