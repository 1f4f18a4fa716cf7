"""The process that runs a run's torch.compile check beside its workers (verify/compat_beside.py says why and
what it writes). Started by the runner at the run's start:

    python -m workbench.core.run.child.torch_compile_process JOB_FILE FOLDER

JOB_FILE holds the run's Job (stage.Job, as JSON); FOLDER is where the results go. It ends with the process that
started it (run/protocol.die_with_parent), and writes FOLDER/failed.txt where it stops early.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

from ..protocol import die_with_parent


def main(argv: list[str]) -> int:
    die_with_parent()
    job_file, folder = Path(argv[0]), Path(argv[1])
    from ...fsutil import atomic_write_text
    from ...verify.compat_beside import FAILED

    try:
        return run(job_file, folder)
    except BaseException as exc:  # noqa: BLE001 - said in failed.txt: the worker checks every case itself
        atomic_write_text(folder / FAILED, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        return 1


def run(job_file: Path, folder: Path) -> int:
    from ...stage import Job

    job = Job.from_json(job_file.read_text())
    if job.cache_dir:
        os.environ["TRITON_CACHE_DIR"] = job.cache_dir  # the project's: its kernels shared with the workers
    # Inductor compiles in this process: its pool of compile processes starts more slowly than one small graph
    # compiles (as in the worker: compat.import_torch_compile_in_background)
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    import torch

    from ...project.config import ProjectConfig
    from ...project.contract import ContractError, find_autotuners, load_kernel
    from ...verify.battery import apply_pins
    from ...verify.compat import compiled_call, torch_compile_cases
    from ...fsutil import atomic_write_text
    from ...verify.compat_beside import FAILED, check_cases
    from ...verify.gradients import for_training

    if not torch.cuda.is_available():
        atomic_write_text(folder / FAILED, "no CUDA GPU visible to torch")
        return 0
    config = ProjectConfig.from_dict(job.config).verify
    try:
        km = for_training(load_kernel(Path(job.kernel_path)), config.backward, config.require_triton)
    except ContractError as exc:
        atomic_write_text(folder / FAILED, f"kernel.py could not be used: {exc.problem.message}")
        return 0
    if km.gradients:
        atomic_write_text(folder / FAILED, "a training kernel: the check is not run on it")
        return 0
    cases = torch_compile_cases(km, config, job.case_indices, job.kept_findings)
    if cases:  # none where every case's pass is kept: Dynamo and Inductor are not even imported
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401
    apply_pins(find_autotuners(km.module), job.pins)
    check_cases(km, cases, folder, compiled_call)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
