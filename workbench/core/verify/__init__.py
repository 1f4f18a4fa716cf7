"""The verification battery, run inside a worker: every check of "what verified means" (battery),
the comparison of outputs with the reference (compare), the torch modes that poison allocations and
move "cuda" to the CPU (torchmodes), and the fixes that make the Triton interpreter behave as a GPU
(interpreter_fixes). May import the base layer and project/; never run/, timing/ or live/.

The stage-ending exceptions plugins raise are re-exported here from ``workbench.core.stage``.
"""

from ..stage import ContextPoisoned, RunAborted, is_cuda_fatal

__all__ = ["ContextPoisoned", "RunAborted", "is_cuda_fatal"]
