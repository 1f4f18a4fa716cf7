"""The CUDA primitives the timing calls, bound before kernel.py is imported.

The worker imports this module before it imports kernel.py (run/child/worker.py), and `timers` calls only
what is bound here: a kernel.py that rebinds `torch.cuda.Event.elapsed_time`, `torch.cuda.synchronize`,
`torch.cuda.CUDAGraph.replay` or `torch.cuda.Event` itself, at import or in a call, changes none of the
benchmark's figures. What this does not cover (README, "What the timing trusts"): a kernel.py that patches
torch's C extension, the CUDA driver or the GPU's clocks.
"""

from __future__ import annotations

import torch

Event = torch.cuda.Event
record = torch.cuda.Event.record  # record(event, stream)
elapsed_time = torch.cuda.Event.elapsed_time  # elapsed_time(start, end)
synchronize = torch.cuda.synchronize
current_stream = torch.cuda.current_stream
CUDAGraph = torch.cuda.CUDAGraph
replay = torch.cuda.CUDAGraph.replay  # replay(graph)
graph = torch.cuda.graph
sleep = torch.cuda._sleep
