"""The verification battery, run inside a worker: every check of "what verified means" (battery, calling
kernel.py's functions through calls; each check one unit of checks/, gathered there and decided by the judge),
the verdict given in the judge process that never imports kernel.py (judge, its threat model; the
tensors reach it through handoff), the comparison of outputs with the reference (compare), edge
shapes derived from CASES (edge_cases) and value-stress cases (value_stress), how far an output may be from
the float64 truth (error_model; `compared.describe_compared` says it for a record's cases), the Triton launch count (launches), torch.compile and
CUDA-graph runs (compat), the torch modes that poison allocations and move "cuda" to the CPU
(torchmodes), and the fixes that make the Triton interpreter behave as a GPU (interpreter/).
May import the base layer and project/; never run/, timing/ or live/.

The stage-ending exceptions plugins raise are re-exported here from ``workbench.core.stage``.
"""

from ..stage import ContextPoisoned, RunAborted, is_cuda_fatal
from .compared import describe_compared

__all__ = ["ContextPoisoned", "RunAborted", "describe_compared", "is_cuda_fatal"]
