"""Training kernels: the backward verified with the forward.

A project is a training kernel when get_inputs() returns tensors with `requires_grad=True`, or when
workbench.toml says `[verify] backward = true` (then every floating-point tensor input is
differentiated). kernel_fn is then typically `SomeFunction.apply`, a torch.autograd.Function whose
forward and backward launch Triton kernels.

Verification calls kernel_fn and reference_fn through `with_gradients`: the inputs that require grad
become fresh leaves, the call runs, and one upstream gradient per differentiable output (the same
values for kernel and reference: multiples of 1/8 in [-2, 2] without zero, exact in every float dtype,
drawn from a generator seeded by the output's index and shape) is pulled back through
`torch.autograd.grad`. The call's result is the forward's outputs followed by each input's gradient,
named "grad <input>": every check of the battery (poisoned allocations, which now include the gradient
buffers the backward allocates, NaN positions, tolerances per dtype against the float64 reference's
autograd, repeat calls, every autotune config, generated edge shapes, launch counts) applies to the
gradients as to outputs, and a failure names the input whose gradient is wrong and where.

Refused outright, with a message: a call in which neither the forward nor the backward launched a Triton
kernel (torch computed everything) when `require_triton` holds, and a missing gradient (None) for an input
that requires grad.

Where the gradients come from. A backward need not launch a kernel of its own: a fused loss's forward kernel
often writes the gradient too, saved for a backward that only scales it in torch (Liger's and Unsloth's
cross-entropy). What must not pass is a gradient torch computed from the inputs alone (a backward recomputed
in torch, or the outputs' values from Triton with torch autograd's gradient behind them). The backward runs
inside the autograd engine, where no torch function mode sees it (the engine's call is dispatched with the mode
taken off, and on a GPU it runs on the engine's own thread), so its ops cannot be followed; what it reads can:
the saved tensors it unpacks (saved-tensor hooks, called on whichever thread unpacks) and the tensors a
torch.autograd.Function keeps on its ctx. When the backward launched no Triton kernel and none of what it read
holds data a Triton kernel wrote in the forward, its gradients are torch autograd's: the torch-ops check
(verify/torchops.py, in the case's second call, which follows every storage) fails them, saying so. A backward
that reads such data and ignores it (recomputing everything from the inputs beside it) is not told apart.
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import replace
from typing import Any, Callable, Iterator

import torch
from torch.utils._pytree import tree_flatten

from ..project.contract import KernelModule
from .launches import LaunchCounter
from .tensors import flatten_outputs, seeded_generator
from .torchops import TorchOpRecorder


class GradientError(Exception):
    """The backward did not do what a training kernel's must (no Triton launch, a missing gradient)."""


def gradient_inputs(inputs: list[Any], backward: bool) -> list[int]:
    """The indices of the inputs whose gradients are verified: those get_inputs marks requires_grad, or with
    `backward` (workbench.toml) every floating-point tensor input."""
    marked = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.requires_grad]
    if marked or not backward:
        return marked
    return [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.is_floating_point()]


def input_names(fn: Callable[..., Any], count: int) -> list[str]:
    """The inputs' names, from reference_fn's signature (kernel_fn is often Function.apply, which has none)."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"input #{i}" for i in range(count)]


# Upstream gradients of more elements are drawn on the output's GPU (other draws than the host's, the same on
# every run): a benchmark's or a large-index case's billions of elements drawn on the host take minutes.
DRAWN_ON_DEVICE_ABOVE = 1 << 24


def upstream_like(output: torch.Tensor, index: int) -> torch.Tensor:
    """The upstream gradient for output `index`: the same values for kernel and reference."""
    on_device = output.numel() > DRAWN_ON_DEVICE_ABOVE and output.device.type == "cuda"
    device, small = (output.device, torch.int8) if on_device else ("cpu", torch.int64)
    generator = seeded_generator(index, output.shape, device)
    magnitude = torch.randint(1, 16, tuple(output.shape), generator=generator, device=device, dtype=small)
    magnitude += (magnitude >= 8).to(magnitude.dtype)  # never exactly 1: a loss's backward may skip its kernel for 1.0
    sign = torch.randint(0, 2, tuple(output.shape), generator=generator, device=device, dtype=small) * 2 - 1
    magnitude *= sign
    del sign
    if on_device:  # multiples of 1/8 in [-2, 2]: exact in every float dtype
        return magnitude.to(output.dtype).div_(8.0)
    return (magnitude / 8.0).to(device=output.device, dtype=output.dtype)


def as_leaves(inputs: Any, indices: list[int]) -> list[Any]:
    """The inputs, those at `indices` as fresh leaves that require grad (the caller's tensors untouched)."""
    leaves = list(inputs)
    for i in indices:
        if isinstance(leaves[i], torch.Tensor):
            leaves[i] = leaves[i].detach().requires_grad_(True)
    return leaves


def differentiable_outputs(out: Any, is_kernel: bool) -> list[tuple[int, torch.Tensor]]:
    """(index among the flattened outputs, tensor) of each output a gradient flows back from."""
    flat = flatten_outputs(out).tensors
    found = [(n, t) for n, t in enumerate(flat) if t.is_floating_point() and t.requires_grad]
    if not found:
        raise GradientError(f"{'kernel_fn' if is_kernel else 'reference_fn'} returned no output that requires "
                            "grad: nothing to differentiate (is the autograd.Function's output detached?)")
    return found


def with_gradients(fn: Callable[..., Any], indices: list[int], names: list[str], *, is_kernel: bool,
                   require_triton: bool,
                   upstream: Callable[[torch.Tensor, int], torch.Tensor] = upstream_like) -> Callable[..., Any]:
    """fn, returning {"out": its outputs, "grad <name>": each input's gradient, ...}. `upstream(output, index)`:
    the gradient pulled back from each output (a benchmark passes one that makes each only once)."""

    @torch.enable_grad()  # a benchmark times its calls under torch.no_grad
    def call(*inputs: Any) -> dict[str, Any]:
        leaves = as_leaves(inputs, indices)
        # Where the gradients come from is followed in the call the torch-ops check records (the case's second)
        recorder = TorchOpRecorder.active if is_kernel and require_triton else None
        reads = BackwardReads() if recorder is not None else None
        started = LaunchCounter.count
        with reads.saved() if reads is not None else contextlib.nullcontext():
            out = fn(*leaves)
        differentiable = differentiable_outputs(out, is_kernel)
        if reads is not None:
            reads.kept_on_ctx([t for _, t in differentiable])
        targets = [leaves[i] for i in indices]
        before = LaunchCounter.count
        grads = torch.autograd.grad([t for _, t in differentiable], targets,
                                    [upstream(t, n) for n, t in differentiable], allow_unused=True)
        if is_kernel and require_triton and LaunchCounter.count == started:
            raise GradientError("neither the forward nor the backward launched a Triton kernel: torch computed the "
                                "outputs and torch autograd the gradients (give the torch.autograd.Function Triton "
                                "kernels; [verify] require_triton = false allows it)")
        if reads is not None and LaunchCounter.count == before and not recorder.holds_triton_data(reads.tensors):
            recorder.computed_by_autograd([g for g in grads if g is not None])
        result: dict[str, Any] = {"out": detached(out)}
        for i, grad in zip(indices, grads):
            if grad is None:
                if is_kernel:
                    raise GradientError(f"the backward gave no gradient for {names[i]} (input #{i}), which "
                                        "requires grad (a None where the gradient should be)")
                grad = torch.zeros_like(leaves[i])  # the reference does not use it: its gradient is zero
            result[f"grad {names[i]}"] = grad
        return result

    return call


class BackwardReads:
    """What a backward reads besides the upstream gradients (see the module's docstring)."""

    def __init__(self) -> None:
        self.tensors: list[torch.Tensor] = []
        self.every_saved = False  # saved-tensor hooks could not be set: every saved tensor counts as read

    @contextlib.contextmanager
    def saved(self) -> Iterator[None]:
        """Around the forward: each tensor it saves for the backward joins `tensors` when the backward unpacks it
        (not where saved-tensor hooks are disabled, by a library's own checkpointing: then every saved tensor)."""
        hooks = torch.autograd.graph.saved_tensors_hooks(_detached_tensor, self._unpacked)
        try:
            hooks.__enter__()
        except RuntimeError:
            self.every_saved = True
            yield
            return
        try:
            yield
        finally:
            hooks.__exit__(None, None, None)

    def _unpacked(self, t: torch.Tensor) -> torch.Tensor:
        self.tensors.append(t)
        return t

    def kept_on_ctx(self, outputs: list[torch.Tensor]) -> None:
        """The tensors each torch.autograd.Function behind `outputs` keeps on its ctx (`ctx.grad = ...`, outside
        save_for_backward), and every node's saved tensors where the hooks could not follow them."""
        seen, nodes = set(), [t.grad_fn for t in outputs]
        while nodes:
            node = nodes.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            nodes += [child for child, _ in getattr(node, "next_functions", ())]
            values = list(getattr(node, "__dict__", {}).values())
            if self.every_saved:
                for name in ["saved_tensors"] + [n for n in dir(node) if n.startswith("_saved_")]:
                    with contextlib.suppress(RuntimeError, AttributeError):
                        values.append(getattr(node, name))
            leaves, _ = tree_flatten(values)
            self.tensors += [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def _detached_tensor(t: torch.Tensor) -> torch.Tensor:
    return t.detach()  # the saved tensor itself would hold its own graph in a cycle until the garbage collector


def detached(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, list):
        return [detached(v) for v in value]
    if isinstance(value, tuple):
        return tuple(detached(v) for v in value)
    if isinstance(value, dict):
        return {k: detached(v) for k, v in value.items()}
    return value


def for_training(km: KernelModule, backward: bool, require_triton: bool) -> KernelModule:
    """km with kernel_fn and reference_fn verified with their gradients, when it is a training kernel (the first
    case's inputs say so, or `backward`); km itself otherwise, or when get_inputs fails (the battery reports it)."""
    try:
        inputs = km.get_inputs(**(km.cases[0].params if km.cases else {}))
    except Exception:  # noqa: BLE001 - the battery calls it again and reports what it raises
        return km
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else []
    indices = gradient_inputs(inputs, backward)
    if not indices:
        return km
    names = input_names(km.reference_fn, len(inputs))
    return replace(km, kernel_fn=with_gradients(km.kernel_fn, indices, names, is_kernel=True,
                                                require_triton=require_triton),
                   reference_fn=with_gradients(km.reference_fn, indices, names, is_kernel=False,
                                               require_triton=False),
                   gradients=[names[i] for i in indices])
