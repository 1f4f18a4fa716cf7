"""What moving the verdict out of the kernel's process costs per case.

For a float32 case of n elements, the tensors one case hands over (the outputs of both runs, the
float64 reference, the inputs before and after, two repeat calls with their reference) are judged
twice: in this process (what the battery did before), and through the judge (packed, sent over a
pipe to a forked judge, unpacked, judged, the verdict read back). The difference is the overhead.

    python benchmarks/judge_overhead.py [n ...]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from workbench.core.events import WorkerReady  # noqa: E402
from workbench.core.project.config import VerifyConfig  # noqa: E402
from workbench.core.verify.handoff import CaseData, ExtraRun  # noqa: E402
from workbench.core.verify.judge import Judge  # noqa: E402


def case_data(n: int) -> CaseData:
    x = torch.randn(n)
    out = x * 2
    ref = (x.double() * 2)
    runs = [ExtraRun(name, outputs=[out.clone()], names=[""], reference=[ref]) for name in ("a", "b")]
    return CaseData(case_index=0, label=f"n={n}", first=[out], second=[out.clone()], names=[""], reference=[ref],
                    expected_dtypes=["float32"], before=[x], after=[x.clone()], launches=1, extra_runs=runs)


def main(sizes: list[int]) -> None:
    from workbench.core.run.child.judge_process import fork_judge, judge_threads

    events_r, events_w = os.pipe()
    stdin_r, stdin_w = os.pipe()
    saved_stdin = os.dup(0)
    os.dup2(stdin_r, 0)
    link = fork_judge(events_w)
    os.dup2(saved_stdin, 0)
    link.emit(WorkerReady(pid=0, mode="interpreter", device_name="cpu", torch_version="", triton_version="",
                          python_version="", warmup_s=0))
    os.write(stdin_w, b'{"kernel_path": "x"}\n')
    link.read_job()
    drain = os.fdopen(events_r, "rb")
    import threading

    threading.Thread(target=lambda: [None for _ in drain], daemon=True).start()
    torch.set_num_threads(judge_threads())  # the in-process comparison gets the judge's threads
    local = Judge(VerifyConfig())
    print(f"{'elements':>10}  {'in process':>11}  {'via judge':>10}  {'overhead':>9}")
    for n in sizes:
        data = case_data(n)
        here, there = [], []
        for _ in range(7):
            t = time.perf_counter()
            local.judge(data)
            here.append(time.perf_counter() - t)
            t = time.perf_counter()
            link.judge(data)
            there.append(time.perf_counter() - t)
        a, b = statistics.median(here) * 1e3, statistics.median(there) * 1e3
        print(f"{n:>10}  {a:>9.2f}ms  {b:>8.2f}ms  {b - a:>7.2f}ms")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1000, 4097, 65536, 1 << 20])
