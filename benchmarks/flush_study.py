"""Which L2 flush makes a cold-cache time? The study behind `timers.L2Flusher`'s default.

    python benchmarks/flush_study.py [--project projects/rmsnorm]

Times each benchmark case's kernel_fn with CUDA events per call after three flushes of 2 × L2:
a write (memset, as triton.testing.do_bench flushes), a read (a reduction over the buffer), and
a write then a read; and with triton.testing.do_bench itself. Compare with Nsight Compute's
gpu__time_duration (benchmarks/bench_agreement.py), which starts each kernel from a flushed,
clean L2. A write leaves the L2 full of the flush's dirty lines, which the timed kernel must
write back; a read leaves clean lines.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path)
    args = parser.parse_args()
    import torch

    from workbench.core.project.config import BenchConfig
    from workbench.core.project.contract import load_kernel
    from workbench.core.timing.timers import L2Flusher

    if not torch.cuda.is_available():
        print("no CUDA GPU")
        return 3
    project = args.project
    if project is None:
        scratch = Path(tempfile.mkdtemp())
        subprocess.run([sys.executable, "-m", "workbench.cli", "new", "rmsnorm", "--dir", str(scratch)], check=True,
                       cwd=ROOT, capture_output=True)
        project = scratch / "rmsnorm"
    km = load_kernel(project / "kernel.py")
    config = BenchConfig()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    read, write = L2Flusher(l2, "read"), L2Flusher(l2, "write")

    def write_then_read() -> None:
        write()
        read()

    flushes = {"write": write, "read": read, "write+read": write_then_read}
    print(f"{torch.cuda.get_device_name()}, L2 {l2 >> 20} MiB, flush buffers {read.nbytes >> 20} MiB")
    print(f"{'case':<5} {'inputs':<38} " + " ".join(f"{name:>11}" for name in [*flushes, "do_bench"]) + "   (µs)")
    for case in (c for c in km.cases if c.purpose == "bench"):
        times = time_case(km, case, config, flushes)
        print(f"{case.index:<5} {case.label:<38} " + " ".join(f"{t * 1e3:>11.1f}" for t in times))
        torch.cuda.empty_cache()
    return 0


def time_case(km, case, config, flushes) -> list[float]:
    """Median ms of kernel_fn on one case after each flush, then by triton.testing.do_bench."""
    import torch
    import triton.testing

    from workbench.core.timing.timers import time_with_events

    inputs = km.get_inputs(**case.params)
    km.kernel_fn(*inputs)
    torch.cuda.synchronize()
    times = [statistics.median(time_with_events(lambda: km.kernel_fn(*inputs), config, flush))
             for flush in flushes.values()]
    times.append(triton.testing.do_bench(lambda: km.kernel_fn(*inputs), warmup=config.warmup_ms,
                                         rep=config.rep_ms, return_mode="median"))
    return times


if __name__ == "__main__":
    sys.exit(main())
