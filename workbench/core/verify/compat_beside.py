"""The torch.compile check in a process of its own, started with the run (RESULTS.md 3o).

On a fresh machine the torch.compile check costs a `workbench verify` 8-10 s (Dynamo and Inductor imported, then
Inductor's compile of kernel_fn), all of it inside the first case. So where the run is a verification on a GPU
(unless WORKBENCH_COMPILE_CHECK_PROCESS=0; on a fresh H200 it brings the softmax scaffold's verify from 22.9 s to
17.5 s, 3p), the runner starts a process for the check at the run's start, beside the template the workers come
from (run/child/torch_compile_process.py). It imports torch, Dynamo and kernel.py, and for each case the check runs
on (compat.compat_runs' rules: the first verification case of each dtype, its pass not kept) it builds the case's
fresh inputs as the worker does (the same seed), calls kernel_fn under torch.compile and writes what came out to
the run's folder:

    plan.json        the cases it will check, written before the first
    case-<i>.pt      one per case: the outputs (on the CPU) and their names, or the error; the digest of the
                     inputs it built; the Triton cache entries the compile added (compiled_context's notes)
    failed.txt       why it stopped (every case without a file is then the worker's own to check)

The worker (`CheckBeside`) does not wait for a result at the case: that case is handed to the judge later, once
the result is there, and the other cases go on meanwhile. Where the process has no result for a case (it failed,
ended, does not plan that case, or built other inputs than the worker did: a get_inputs that is not
deterministic) the worker runs the check itself, as it does with no process beside it. Either way the judge sees
the same ExtraRun.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from ..fsutil import atomic_write_bytes, atomic_write_text, process_stat
from ..project.contract import Case, KernelModule
from . import compiled_context
from .tensors import Outputs

PLAN, FAILED = "plan.json", "failed.txt"
FRESH_SEED = 0x5EED  # a case's fresh inputs (the repeat call's, checks/extra_calls.py): this seed + the case's index
WAIT_S = 240.0  # the longest the worker waits for one case's result (the checking stage's time-out is 300 s)
POLL_S = 0.02


def case_file(folder: Path, index: int) -> Path:
    return folder / f"case-{index}.pt"


def fresh_inputs(km: KernelModule, case: Case) -> list[Any]:
    """The inputs the repeat call and the compatibility checks run on: get_inputs again, seeded by the case."""
    torch.manual_seed(FRESH_SEED + case.index)
    return list(km.get_inputs(**case.params))


def inputs_digest(inputs: Any) -> str:
    """A hash of the inputs' values, shapes, strides and dtypes: the worker's and the process's inputs must be the
    same for the process's outputs to be judged against the worker's reference. "" where a value cannot be hashed
    (never equal to another digest: the worker then checks the case itself)."""
    digest = hashlib.blake2b(digest_size=16)

    def add(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            value = value.detach()
            digest.update(f"T{tuple(value.shape)}{value.stride()}{value.dtype}".encode())
            flat = value.contiguous().reshape(-1).cpu()
            digest.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
        elif isinstance(value, (list, tuple)):
            digest.update(f"L{len(value)}".encode())
            for item in value:
                add(item)
        elif isinstance(value, dict):
            digest.update(f"D{len(value)}".encode())
            for key, item in value.items():
                digest.update(repr(key).encode())
                add(item)
        else:
            digest.update(repr(value).encode())

    try:
        add(inputs)
    except Exception:  # noqa: BLE001 - a tensor subclass, a dtype numpy has no view of: no digest
        return ""
    return digest.hexdigest()


def check_cases(km: KernelModule, cases: list[Case], folder: Path,
                call: Callable[[KernelModule, list[Any]], tuple[Outputs | None, str, str]]) -> None:
    """The process's work: for each case (compat.torch_compile_cases), its fresh inputs, `call` (compat.compiled_call:
    kernel_fn under torch.compile) and its result written to `folder` (case_file), each file whole or not at all."""
    atomic_write_text(folder / PLAN, json.dumps([c.index for c in cases]))
    cache = compiled_context.cache_dir()
    for case in cases:
        inputs = fresh_inputs(km, case)
        digest = inputs_digest(inputs)
        before = compiled_context.kernels_in(cache)
        outputs, error, detail = call(km, inputs)
        added = sorted(set(compiled_context.kernels_in(cache)) - set(before))
        result = {"digest": digest, "error": error, "detail": detail, "new_entries": added,
                  "names": list(outputs.names) if outputs else [],
                  "outputs": [t.detach().cpu() for t in outputs.tensors] if outputs else []}
        packed = io.BytesIO()
        torch.save(result, packed)
        atomic_write_bytes(case_file(folder, case.index), packed.getvalue())


@dataclass
class Pending:
    """A torch.compile check whose run waits for the process's result (or is the worker's to run after all):
    what the worker would have run it on."""

    case_index: int
    digest: str
    inputs: list[Any]
    reference: list[Any]
    native: list[Any] = field(default_factory=list)
    rounded: list[Any] = field(default_factory=list)


@dataclass
class Result:
    """The process's result for a case, or why there is none (`why`: the worker checks the case itself)."""

    data: dict[str, Any] | None = None
    why: str = ""


class CheckBeside:
    """The worker's end: the run's folder (Job.compile_check's "folder") and the process's pid."""

    def __init__(self, folder: str | Path, pid: int = 0, wait_s: float = WAIT_S):
        self.folder, self.pid, self.wait_s = Path(folder), pid, wait_s
        self._plan: list[int] | None = None  # plan.json, once read

    @classmethod
    def of_job(cls, compile_check: dict[str, Any] | None) -> CheckBeside | None:
        if not compile_check or not compile_check.get("folder"):
            return None
        return cls(compile_check["folder"], int(compile_check.get("pid") or 0))

    def alive(self) -> bool:
        """Whether the process still runs (an ended one not yet reaped is a zombie, "Z", in /proc; where /proc does
        not have it, or there is no /proc, it is taken for gone: the worker then checks the case itself)."""
        if not self.pid:
            return True  # no pid given: its files alone say when it is done (tests)
        try:
            return process_stat(self.pid)[0] != "Z"
        except (OSError, IndexError):
            return False

    def _planned(self) -> list[int] | None:
        if self._plan is None:
            try:
                self._plan = json.loads((self.folder / PLAN).read_text())
            except (OSError, ValueError):
                return None  # not written yet
        return self._plan

    def _none_coming(self, index: int) -> str:
        """Why no result for case `index` will come ("" while one may): the process stopped, never planned the
        case, or ended. Its file is looked for after the process is found ended: it may have written it last."""
        if (self.folder / FAILED).exists():
            return "its process stopped: " + (self.folder / FAILED).read_text(errors="replace")[:300]
        planned = self._planned()
        if planned is not None and index not in planned:
            return "its process did not plan this case"
        if not self.alive() and not case_file(self.folder, index).exists():
            return "its process ended without a result for this case"
        return ""

    def ready(self, index: int) -> bool:
        """Whether waiting for case `index` would return at once."""
        return case_file(self.folder, index).exists() or bool(self._none_coming(index))

    def result(self, index: int, digest: str, device: Any = None) -> Result:
        """Case `index`'s result, waited for (at most wait_s), its outputs on `device`; or why there is none."""
        path = case_file(self.folder, index)
        deadline = time.monotonic() + self.wait_s
        while not path.exists():
            why = self._none_coming(index)
            if why:
                return Result(why=why)
            if time.monotonic() > deadline:
                return Result(why=f"its process gave no result within {self.wait_s:.0f} s")
            time.sleep(POLL_S)
        try:
            data = torch.load(path, map_location=device, weights_only=True)
        except Exception as exc:  # noqa: BLE001 - a file it could not write whole: checked here instead
            return Result(why=f"its result could not be read ({type(exc).__name__})")
        if not digest or data.get("digest") != digest:
            return Result(why="its process built other inputs than this worker (get_inputs is not deterministic?)")
        return Result(data=data)
