"""The CUDA primitives the timing calls, bound before kernel.py is imported.

The worker imports this module before it imports kernel.py (run/child/worker.py), and `timers` calls only
what is bound here: a kernel.py that rebinds `torch.cuda.Event.elapsed_time`, `torch.cuda.synchronize`,
`torch.cuda.CUDAGraph.replay` or `torch.cuda.Event` itself, at import or in a call, changes none of the
benchmark's figures. Where torch has them, the methods are bound at the C extension's own types
(`torch._C._CudaEventBase.elapsed_time`, not the Python subclass's method that looks it up through `super()`
on every call): a kernel.py that writes a fake into the extension type's method table (through
`gc.get_referents(type.__dict__)`, as forbiddenfruit does) changes what torch's own classes call, not these.
What this does not cover (docs/TIMING.md, "What the timing trusts"): ctypes writes into the extension's or the CUDA
driver's code or memory, or the GPU's clocks.
"""

from __future__ import annotations

from typing import Any

import torch

_EventBase = getattr(torch._C, "_CudaEventBase", None)
_GraphBase = getattr(torch._C, "_CUDAGraph", None)


def _c_method(base: Any, name: str, fallback: Any) -> Any:
    """`base.name` as the C extension defines it; `fallback` where this torch has none (a CPU build)."""
    found = getattr(base, name, None) if base is not None else None
    return found if found is not None else fallback


Event = torch.cuda.Event
_record_on = _c_method(_EventBase, "record", torch.cuda.Event.record)
elapsed_time = _c_method(_EventBase, "elapsed_time", torch.cuda.Event.elapsed_time)  # elapsed_time(start, end)
wait_for = _c_method(_EventBase, "synchronize", torch.cuda.Event.synchronize)  # wait_for(event): the host waits
synchronize = getattr(torch._C, "_cuda_synchronize", None) or torch.cuda.synchronize  # the current device
current_stream = torch.cuda.current_stream
CUDAGraph = torch.cuda.CUDAGraph
replay = _c_method(_GraphBase, "replay", torch.cuda.CUDAGraph.replay)  # replay(graph)
graph = torch.cuda.graph
sleep = torch.cuda._sleep
capturing = torch.cuda.is_current_stream_capturing


def record(event: Any, stream: Any = None) -> None:
    """`event` recorded on `stream` (the current stream when None)."""
    _record_on(event, stream if stream is not None else current_stream())


# For escapes.py: the stream a launch goes to, as a raw handle, and another stream's work delayed from a hook.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
current_device = torch.cuda.current_device
ExternalStream = torch.cuda.ExternalStream
use_stream = torch.cuda.stream


def raw_current_stream() -> int:
    """The current stream's handle on the current device (what Triton launches on)."""
    if _raw_stream is not None:
        return int(_raw_stream(current_device()))
    return int(current_stream().cuda_stream)
