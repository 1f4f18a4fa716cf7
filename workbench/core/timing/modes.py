"""What one timed call of a training kernel is: its forward, its backward, or both (`workbench bench --mode`).

A training kernel (verify/gradients.py: inputs with requires_grad, or `[verify] backward = true`) is timed
in one of three modes; kernel_fn, reference_fn and torch.compile(reference_fn) are timed the same way:

- "fwd": the training forward, autograd recording (what a training step runs: the saved tensors are
  written, the graph is built and, with the outputs, dropped). Outputs: the forward's.
- "bwd": the backward alone. Each input set's forward runs once, untimed and with its Triton launches
  uncounted (LaunchCounter.paused); every timed call is `torch.autograd.grad(outputs, inputs, upstream,
  retain_graph=True)` on that graph. Outputs: each input's gradient ("grad <name>").
- "full": forward and backward in one call, as verification calls them. Outputs: both.

The upstream gradients are those verification uses (gradients.upstream_like), made once per output
shape: the timed calls allocate and copy nothing the kernel would not. A kernel that is not a training
kernel has the forward only: "fwd", timed as before (no mode is named in its results).
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from dataclasses import replace
from typing import Any, Callable

import torch

from ..project.config import BENCH_MODES
from ..project.contract import KernelModule
from ..verify.gradients import (
    as_leaves,
    detached,
    differentiable_outputs,
    gradient_inputs,
    input_names,
    upstream_like,
    with_gradients,
)
from ..verify.launches import LaunchCounter
from .plausible import ROTATION_MOST

DEFAULT_TRAINING_MODE = "full"
# bwd keeps each input set's forward (its graph and saved tensors) while the set is timed: the kernel's
# timed calls go through at most plausible.ROTATION_MOST sets, the baselines' through one.
KERNEL_PREPARED_SETS = ROTATION_MOST + 1
REFERENCE_PREPARED_SETS = 2


class ModeError(ValueError):
    """A mode this kernel cannot be timed in (a backward asked of a forward-only kernel)."""


def chosen_mode(asked: str, training: bool) -> str:
    """The mode a benchmark runs: the one asked for ("" = the default: full for a training kernel, else fwd)."""
    if not asked:
        return DEFAULT_TRAINING_MODE if training else "fwd"
    if asked not in BENCH_MODES:
        raise ModeError(f"unknown benchmark mode {asked!r}: one of {', '.join(BENCH_MODES)}")
    if asked != "fwd" and not training:
        raise ModeError(f"--mode {asked}: this kernel has no backward to time (no input of get_inputs requires "
                        "grad, and workbench.toml does not say [verify] backward = true)")
    return asked


class CachedUpstream:
    """upstream_like, made once per (output index, shape, dtype, device) and reused."""

    def __init__(self) -> None:
        self._made: dict[tuple, torch.Tensor] = {}

    def __call__(self, output: torch.Tensor, index: int) -> torch.Tensor:
        key = (index, tuple(output.shape), output.dtype, str(output.device))
        if key not in self._made:
            self._made[key] = upstream_like(output, index)
        return self._made[key]


def forward_only(fn: Callable[..., Any], indices: list[int]) -> Callable[..., Any]:
    """fn's training forward: the inputs at `indices` as leaves that require grad, the outputs detached."""

    def call(*inputs: Any) -> Any:
        with torch.enable_grad():
            return detached(fn(*as_leaves(inputs, indices)))

    return call


class BackwardOnly:
    """fn's backward alone: each input set's forward once (untimed, uncounted), then torch.autograd.grad on its
    graph (retained) at every call. Returns {"grad <name>": gradient} for the inputs at `indices`."""

    def __init__(self, fn: Callable[..., Any], indices: list[int], names: list[str], upstream: CachedUpstream,
                 is_kernel: bool):
        self.fn, self.indices, self.names, self.upstream, self.is_kernel = fn, indices, names, upstream, is_kernel
        self.most = KERNEL_PREPARED_SETS if is_kernel else REFERENCE_PREPARED_SETS
        self._prepared: OrderedDict[tuple[int, ...], tuple] = OrderedDict()

    def _forward(self, inputs: tuple) -> tuple:
        key = tuple(id(x) for x in inputs)
        state = self._prepared.get(key)
        if state is not None:
            self._prepared.move_to_end(key)
            return state
        with torch.enable_grad(), LaunchCounter.paused():
            leaves = as_leaves(inputs, self.indices)
            out = self.fn(*leaves)
            outputs = differentiable_outputs(out, self.is_kernel)
        # The inputs are kept with their graph, so no other object takes their ids while it is cached.
        state = (inputs, [leaves[i] for i in self.indices], [t for _, t in outputs],
                 [self.upstream(t, n) for n, t in outputs])
        self._prepared[key] = state
        while len(self._prepared) > self.most:
            self._prepared.popitem(last=False)
        return state

    def __call__(self, *inputs: Any) -> dict[str, Any]:
        _, targets, outputs, upstream = self._forward(inputs)
        with torch.enable_grad():
            grads = torch.autograd.grad(outputs, targets, upstream, retain_graph=True, allow_unused=True)
        return {f"grad {self.names[i]}": (g if g is not None else torch.zeros_like(t))
                for i, t, g in zip(self.indices, targets, grads)}

    def clear(self) -> None:
        self._prepared.clear()


class TimedMode:
    """One mode of one case: how kernel_fn, reference_fn and a compiled reference_fn are called."""

    def __init__(self, mode: str, indices: list[int], names: list[str]):
        self.mode, self.indices, self.names = mode, indices, names
        self.upstream = CachedUpstream()
        self._backward: list[BackwardOnly] = []

    def wrap(self, fn: Callable[..., Any], is_kernel: bool) -> Callable[..., Any]:
        if not self.indices:
            return fn
        if self.mode == "fwd":
            return forward_only(fn, self.indices)
        if self.mode == "bwd":
            backward = BackwardOnly(fn, self.indices, self.names, self.upstream, is_kernel)
            self._backward.append(backward)
            return backward
        return with_gradients(fn, self.indices, self.names, is_kernel=is_kernel, require_triton=False,
                              upstream=self.upstream)

    def module(self, km: KernelModule) -> KernelModule:
        """km, its kernel_fn and reference_fn called in this mode."""
        if not self.indices:
            return km
        return replace(km, kernel_fn=self.wrap(km.kernel_fn, True), reference_fn=self.wrap(km.reference_fn, False),
                       gradients=[self.names[i] for i in self.indices])

    def clear(self) -> None:
        """Drop the forwards the backward-only calls keep."""
        for backward in self._backward:
            backward.clear()

    @property
    def memory_factor(self) -> int:
        """How many times its inputs' size an input set takes while timed: the inputs, and in bwd the saved
        tensors and gradients (an estimate, for how many copies fit)."""
        return 1 if self.mode == "fwd" or not self.indices else 3


def timed_mode(km: KernelModule, inputs: list[Any], asked: str, backward: bool) -> TimedMode:
    """The mode this case is timed in (ModeError when it cannot be)."""
    indices = gradient_inputs(inputs, backward)
    mode = chosen_mode(asked, bool(indices))
    return TimedMode(mode, indices, input_names(km.reference_fn, len(inputs)))


def takes_mode(fn: Callable[..., Any] | None) -> bool:
    """Whether bytes_moved / flops takes a `mode` keyword (or **kwargs)."""
    if fn is None:
        return False
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "mode" or p.kind is p.VAR_KEYWORD for p in params)
