"""The kernel's timed calls: several copies of the inputs in turn, and the Triton launches they make.

- `copy_inputs`: a copy of a case's inputs that kernel_fn cannot tell from them but by address: the same
  values, sizes, strides and storage offsets (so the same alignment), and inputs that shared memory
  share it again;
- `Rotation`: kernel_fn over the input sets in turn, counting its calls. A CUDA-graph capture calls it
  several times, so the graph holds calls on each set as well;
- `probe_launches`: one counted call on each copy, before any timing: a launcher that keeps results by
  input address or identity has not seen them, so the count is what a call does (plausible.launch_refusal
  compares the timed calls with it);
- `TuningLaunches`: the launches Triton's autotuners make while timing their configs, so a first call's
  count can stand for one call when there is no copy to probe.

Counting is Triton's launch hook incrementing a Python integer (verify/launches.LaunchCounter): nothing the
GPU waits on. A graph's launches are counted when it is captured, since its replays call no Python.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from ..verify.launches import LaunchCounter


def storages_of(inputs: Sequence[Any]) -> dict[tuple[str, int], Any]:
    """The distinct storages the tensor inputs live in, by (device, address)."""
    found: dict[tuple[str, int], Any] = {}
    for x in inputs:
        if isinstance(x, torch.Tensor):
            storage = x.untyped_storage()
            found.setdefault((str(x.device), storage.data_ptr()), storage)
    return found


def input_storage_bytes(inputs: Sequence[Any]) -> int:
    """Bytes a copy of the inputs takes: each storage they live in once, whole."""
    return sum(storage.nbytes() for storage in storages_of(inputs).values())


def why_not_copied(inputs: Sequence[Any]) -> str:
    """Why copies of these inputs would not be faithful ("" when they would)."""
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            continue
        if type(x) not in (torch.Tensor, torch.nn.Parameter):
            return f"input {i} is a {type(x).__name__}, a tensor subclass"
        if x.layout != torch.strided or x.is_quantized or x.device.type == "meta":
            return f"input {i} is not a plain strided tensor"
    return ""


def copy_inputs(inputs: Sequence[Any]) -> list[Any]:
    """A copy of `inputs`: every storage copied whole, every tensor the same view of its copy (sizes, strides,
    storage offset, dtype, requires_grad); inputs sharing a storage share the copy; non-tensors as they are."""
    copies: dict[tuple[str, int], Any] = {}
    for key, storage in storages_of(inputs).items():
        fresh = torch.empty(storage.nbytes(), dtype=torch.uint8, device=key[0]).untyped_storage()
        fresh.copy_(storage)
        copies[key] = fresh
    result: list[Any] = []
    with torch.no_grad():
        for x in inputs:
            if not isinstance(x, torch.Tensor):
                result.append(x)
                continue
            storage = copies[(str(x.device), x.untyped_storage().data_ptr())]
            view = torch.empty(0, dtype=x.dtype, device=x.device).set_(storage, x.storage_offset(), x.size(),
                                                                         x.stride())
            result.append(view.requires_grad_(True) if x.requires_grad else view)
    return result


class Rotation:
    """`fn(*sets[0])`, `fn(*sets[1])`, ... in turn, counting the calls that returned (host-side: nothing the GPU
    waits on)."""

    def __init__(self, fn: Callable[..., Any], sets: Sequence[Sequence[Any]]):
        if not sets:
            raise ValueError("no input set to call with")
        self.fn, self.sets = fn, [list(s) for s in sets]
        self.calls = 0
        self._next = 0

    def __call__(self) -> Any:
        out = self.uncounted()
        self.calls += 1  # a call that raised (a CUDA-graph capture it could not join) launched nothing to count
        return out

    def uncounted(self) -> Any:
        """A call on the next set that the count leaves out (a probe before the timing): the calls after it go
        on from the set after its own, so the first timed call is never on the set the call before it had."""
        args = self.sets[self._next]
        self._next = (self._next + 1) % len(self.sets)
        return self.fn(*args)


def probe_launches(fn: Callable[..., Any], sets: Sequence[Sequence[Any]], counter: Any = LaunchCounter) -> list[int]:
    """One call of `fn` on each input set, the Triton launches of each (their outputs dropped)."""
    counts = []
    for args in sets:
        before = counter.count
        out = fn(*args)
        counts.append(counter.count - before)
        del out
    return counts


class TuningLaunches:
    """While active: the launches made inside any Triton autotuner's timing of its configs (`launches`).

    Wraps `Autotuner._bench` on the class, so every autotuner counts, kernel.py's own or one it imports;
    enter it before anything wraps `_bench` on an instance (autotune.AutotuneRecorder), so that wrap calls
    this one."""

    def __init__(self, counter: Any = LaunchCounter):
        self.counter = counter
        self.launches = 0
        self._depth = 0
        self._restore: Callable[[], None] | None = None

    def __enter__(self) -> "TuningLaunches":
        try:
            from triton.runtime.autotuner import Autotuner
        except ImportError:  # pragma: no cover - triton is a dependency
            return self
        original = Autotuner.__dict__.get("_bench")
        if original is None:
            return self
        counter, tally = self.counter, self

        def _bench(tuner: Any, *args: Any, **kwargs: Any) -> Any:
            if tally._depth:
                return original(tuner, *args, **kwargs)
            tally._depth += 1
            before = counter.count
            try:
                return original(tuner, *args, **kwargs)
            finally:
                tally._depth -= 1
                tally.launches += max(0, counter.count - before)

        Autotuner._bench = _bench

        def restore() -> None:
            Autotuner._bench = original

        self._restore = restore
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._restore is not None:
            self._restore()
            self._restore = None
