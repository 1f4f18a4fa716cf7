"""workbench-ncu: Nsight Compute as a workbench profiler (`workbench profile --profiler ncu`).

Registered through the entry point ``[project.entry-points.workbench] ncu = "workbench_ncu"``.
"""

from workbench import hookimpl
from workbench.profiling import Profiler

from . import events  # noqa: F401 - registers the ProfiledCase event type with the parent's event reader
from .profiler import run_ncu

__version__ = "0.1.0"


@hookimpl
def workbench_register_profilers(register):
    register(Profiler(name="ncu", help="Nsight Compute: one warm call of each case's Triton kernels "
                                       "(time, DRAM and SM throughput, occupancy, registers, limiter, "
                                       "hottest kernel.py lines)",
                      run=run_ncu))
