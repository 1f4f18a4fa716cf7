"""Does kernel_fn survive how serving stacks call kernels? (the SGLang kernel guide's checklist)

- torch_compile: ``torch.compile(kernel_fn, fullgraph=True)`` traces without a graph break (a
  launcher that calls ``.item()``, ``.tolist()`` or a Python-side cache breaks the graph; wrap the
  launch in ``torch.library.wrap_triton`` for Dynamo to see through it) and gives the same result.
- cuda_graph: kernel_fn captured into a CUDA graph, the inputs refilled with other values, the
  graph replayed: the output must be the reference's on the new values (a launcher that syncs,
  allocates on the host or reads a tensor's value at capture time fails here).

They say whether a correct kernel can be used the way serving stacks use kernels, not whether it is
correct: each is a finding of its own, reported beside the verdict with its whole error, and fails
the verdict only where the project asks (``[verify] torch_compile = "require"``, ``cuda_graph =
"require"``; "off" or false: not run). Both run on a GPU once per project, on the first case of
each dtype (edge_cases.first_case_per_dtype: the same case whatever the sharding), not in the live
loop (a cold torch.compile costs seconds per save; `workbench verify` runs them); under the Triton
interpreter they are skipped, and the record says why. A pass is kept (project/kept.py) by finding_key and
not run again while the key is the same; a failure runs every time. Their outputs go to the judge with the rest
of the case (see verify/judge.py). In a verification alone on a GPU, a process started with the run may run the
torch.compile check beside the worker (verify/compat_beside.py): the case goes to the judge once its result is in.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from ..project.config import VerifyConfig
from ..project.kept import kept_since
from ..project.contract import Case, KernelModule, exception_chain, first_line, select_cases
from ..stage import ContextPoisoned
from . import compiled_context
from .compat_beside import CheckBeside, Pending, inputs_digest
from .edge_cases import first_case_per_dtype, once_per_dtype
from .handoff import ExtraRun
from .tensors import Outputs, clone_inputs, flatten_outputs


class GraphCaptureBroke(RuntimeError):
    """A failed capture left this process's CUDA state unusable: the worker must be replaced."""


def host_sync(fn: Callable[[], Any]) -> str:
    """Why `fn` cannot go into a CUDA graph ("" when it can): a host synchronization, found by a call
    under torch's sync debug mode rather than by a failed capture, which is costly to recover from."""
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings():  # torch warns on every switch that the mode is a prototype: not the user's news
        warnings.filterwarnings("ignore", message="Synchronization debug mode is a prototype", category=UserWarning)
        torch.cuda.set_sync_debug_mode("error")
    try:
        fn()
    except RuntimeError as exc:
        return first_line(exc)
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    torch.cuda.synchronize()
    return ""


def recover_from_failed_capture() -> None:
    """Undo what an aborted capture leaves behind.

    torch.cuda.graph's exit raises before the CUDA generator leaves capture mode, and
    every random op after that fails ("Offset increment outside graph capture"). A
    capture that completes takes the generator through capture and back out again.
    """
    try:
        torch.cuda.synchronize()
        probe = torch.zeros(1, device="cuda")
        reset = torch.cuda.CUDAGraph()
        with torch.cuda.graph(reset):
            probe.add_(1)
        del reset
        torch.randn(1, device="cuda")
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        raise GraphCaptureBroke(f"a failed CUDA-graph capture left torch's CUDA state unusable: "
                                f"{type(exc).__name__}: {first_line(exc)}") from exc


INTERPRETER_SKIP = "the Triton interpreter compiles nothing and has no CUDA graphs: checked on a GPU only"


def compat_runs(km: KernelModule, case: Case, inputs: list[Any], reference: list[Any], native: list[Any],
                rounded: list[Any], config: VerifyConfig, interpret: bool, anchors: set[int], live: bool = False,
                kept: KeptFindings | None = None, announce: Callable[[str], None] = lambda check: None,
                beside: CheckBeside | None = None) -> list[ExtraRun]:
    """The torch.compile and CUDA-graph runs of one case (`inputs` are left as they were). `anchors`: the
    cases they run on (the first of each dtype); `native`: reference_fn on the inputs' own dtype (`rounded`: in
    float64 on them rounded once more); `kept`: the findings that passed in earlier runs: one passed with the
    same key is not run again, and the record says when it passed. `announce(check)` before the torch.compile
    check runs (stage.CHECKING: its own time-out). `beside`: a process runs the torch.compile check beside the
    worker (verify/compat_beside.py): the run is left pending (ExtraRun.pending), for finish_beside."""
    compiled = ExtraRun("torch_compile", hint="kernel_fn under torch.compile(fullgraph=True)",
                        compat=True, required=config.torch_compile == "require")
    graphed = ExtraRun("cuda_graph", hint="kernel_fn replayed from a CUDA graph",
                       compat=True, required=config.cuda_graph == "require")
    for run, mode, key in ((compiled, config.torch_compile, "torch_compile"),
                           (graphed, config.cuda_graph, "cuda_graph")):
        if mode == "off":
            run.skipped = f"turned off ([verify] {key})"
        elif interpret:
            run.skipped = INTERPRETER_SKIP
        elif km.gradients:
            run.skipped = ("not run on a training kernel yet: here kernel_fn is verified with its backward "
                           "(torch.autograd.grad), which this check does not trace")
        elif live:
            run.skipped = "not in the live loop (seconds per save): `workbench verify` runs it"
        elif case.index not in anchors:
            run.skipped = once_per_dtype(case, anchors)
    kept = kept or KeptFindings(km, config, {})
    for run in (compiled, graphed):
        if not run.skipped:
            run.key = kept.key(case, run.name)
            run.kept = kept.passed_before(run.key)
            if run.kept:
                run.notes = kept.notes(run.key)
    if not compiled.skipped and not compiled.kept and beside is not None:
        compiled.pending = Pending(case.index, inputs_digest(inputs), clone_inputs(inputs), list(reference),
                                   list(native), list(rounded))
    elif not compiled.skipped and not compiled.kept:
        announce("the torch.compile check")
        _torch_compile(km, inputs, reference, compiled)
    if not graphed.skipped and not graphed.kept:
        _cuda_graph(km, inputs, reference, graphed)
    for run in (compiled, graphed):
        if run.outputs:
            run.native, run.rounded = list(native), list(rounded)
    return [compiled, graphed]


def import_torch_compile_in_background() -> threading.Thread:
    """Dynamo and Inductor imported on a thread while the kernels compile and the first cases run, so the
    torch.compile check finds them loaded: their import is 4-6 s of a headless run on an H100 host (RESULTS.md
    3i). Only when the check will run (torch_compile_to_run): with its passes kept the thread only slowed the
    cases (3j). Inductor compiles in this process (compile_threads 1, unless the environment says): its pool of
    compile processes takes longer to start than the check's one small graph takes to compile."""
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

    def load() -> None:
        try:
            import torch._dynamo  # noqa: F401
            import torch._inductor.compile_fx  # noqa: F401
        except Exception:  # noqa: BLE001 - the check imports them itself and reports what fails
            pass

    thread = threading.Thread(target=load, name="import-torch-compile", daemon=True)
    thread.start()
    return thread


def torch_compile_to_run(km: KernelModule, cases: list[Case], config: VerifyConfig, interpret: bool,
                         anchors: set[int], live: bool, kept: KeptFindings) -> bool:
    """Whether the torch.compile check will run on any of `cases` (compat_runs' rules: on, on a GPU, not a training
    kernel, not live, an anchor, its pass not kept)."""
    if config.torch_compile == "off" or interpret or km.gradients or live:
        return False
    return any(kept.to_run(case, "torch_compile") for case in cases if case.index in anchors)


def torch_compile_cases(km: KernelModule, config: VerifyConfig, indices: list[int] | None,
                        kept_findings: Mapping[str, dict] | None) -> list[Case]:
    """The cases the torch.compile check runs on in a run, found without the worker (the process beside it:
    verify/compat_beside.py): the first verification case of each dtype among those asked for (`indices`), whose
    pass is not kept. The worker finds the same (verify/battery.run_verification, compat_runs)."""
    selected = select_cases(km.cases, indices, "verify")
    anchors = first_case_per_dtype(selected)
    kept = KeptFindings(km, config, kept_findings)
    return [c for c in selected if c.index in anchors and kept.to_run(c, "torch_compile")]


class KeptFindings:
    """The compatibility checks that passed in earlier runs (project/kept.py: finding_key -> {"check", "at"}), and
    this run's keys: the project's files are hashed once per run, not once per case and check."""

    def __init__(self, km: KernelModule, config: VerifyConfig, passed: Mapping[str, dict] | None):
        self.km, self.config, self.passed = km, config, dict(passed or {})
        self._sources: str | None = None

    def key(self, case: Case, check: str) -> str:
        if self._sources is None:
            self._sources = project_digest(str(self.km.path.parent))
        return finding_key(self.km, case, self.config, check, self._sources)

    def notes(self, key: str) -> list[str]:
        """What the pass kept under `key` noted beside its outcome (compiled_context.py): said again when kept."""
        notes = (self.passed.get(key) or {}).get("notes")
        return [str(note) for note in notes] if isinstance(notes, list) else []

    def to_run(self, case: Case, check: str) -> bool:
        """Whether `check` runs on `case` in this run: no pass of it is kept."""
        return not self.passed_before(self.key(case, check))

    def passed_before(self, key: str) -> str:
        """What the record says of a pass kept under `key` ("" when there is none)."""
        earlier = self.passed.get(key)
        if not earlier:
            return ""
        return (f"passed in a run at {kept_since(earlier.get('at', 0))} on the same project files, case, GPU, torch, "
                "Triton and [verify] settings; not run again (--fresh-checks runs it)")


def finding_key(km: KernelModule, case: Case, config: VerifyConfig, check: str, sources: str | None = None) -> str:
    """What a compatibility check's finding depends on: every Python file of the project (kernel.py and what it
    imports from its folder: `sources`, project_digest's, when the caller has it), the case, the GPU, torch, Triton,
    the checks' own code (this module, the judge and verify/checks/) and the [verify] settings but the seed (the
    checks run on fresh inputs of their own: compat_beside.fresh_inputs)."""
    import triton

    parts = [check, sources if sources is not None else project_digest(str(km.path.parent)),
             repr(sorted(case.params.items())), torch.cuda.get_device_name() if torch.cuda.is_available() else "",
             torch.__version__, triton.__version__, checks_digest(),
             repr({k: v for k, v in dataclasses.asdict(config).items() if k != "seed"})]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


@functools.cache
def checks_digest() -> str:
    """A hash of the code that runs and judges the checks: a workbench that checks differently keeps nothing."""
    here = Path(__file__).parent
    code = [here / "compat.py", here / "judge.py", *sorted((here / "checks").glob("*.py"))]
    return hashlib.sha256(b"".join(path.read_bytes() for path in code)).hexdigest()


DIGEST_MOST_FILES = 500  # a kernel file verified inside a large tree: past this, nothing is kept for it


def project_digest(folder: str) -> str:
    """A hash of every Python file under the project folder, names and bytes: hidden folders (its state),
    caches and virtual environments left out. Past DIGEST_MOST_FILES files (a kernel.py verified at the top
    of a large tree) a key that no later run matches: nothing is kept, rather than a hash that misses a file."""
    digest = hashlib.sha256()
    root = Path(folder)
    found: list[Path] = []
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__"
                         and not (Path(here) / d / "pyvenv.cfg").exists())
        found += [Path(here) / f for f in files if f.endswith(".py")]
        if len(found) > DIGEST_MOST_FILES:
            return f"uncounted:{os.urandom(8).hex()}"
    for path in sorted(found):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()


def compiled_call(km: KernelModule, inputs: list[Any]) -> tuple[Outputs | None, str, str]:
    """kernel_fn under torch.compile(fullgraph=True) on a copy of `inputs`: its flattened outputs, or None with the
    error's line and its whole text (a graph break or a compile error is the finding)."""
    try:
        import torch._dynamo

        torch._dynamo.reset()
        compiled = torch.compile(km.kernel_fn, fullgraph=True, dynamic=False)
        out = compiled(*clone_inputs(inputs))
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        return None, describe_compile_failure(exc), whole_error(exc)
    finally:
        try:
            torch._dynamo.reset()
        except Exception:  # noqa: BLE001
            pass
    return flatten_outputs(out), "", ""


def _torch_compile(km: KernelModule, inputs: list[Any], reference: list[Any], run: ExtraRun) -> None:
    cache = compiled_context.cache_dir()
    eager = compiled_context.kernels_in(cache)  # the kernels the case's calls compiled, called as they are
    flat, run.error, run.detail = compiled_call(km, inputs)
    if flat is None:
        return
    run.outputs, run.names, run.reference = [t.detach() for t in flat.tensors], flat.names, list(reference)
    run.notes = scalar_notes(eager, compiled_context.kernels_in(cache))


def scalar_notes(eager: dict[str, Any], after: dict[str, Any]) -> list[str]:
    try:
        return compiled_context.changed_scalars(eager, after)
    except Exception:  # noqa: BLE001 - a note, never a reason the check fails
        return []


def finish_beside(km: KernelModule, run: ExtraRun, beside: CheckBeside,
                  announce: Callable[[str], None] = lambda check: None, log: Callable[[str], None] = lambda t: None,
                  ) -> None:
    """The torch.compile check of a case that `compat_runs` left to the process beside the worker
    (verify/compat_beside.py): its result taken into `run`, or, where it has none, the check run here."""
    pending: Pending = run.pending
    run.pending = None
    announce("the torch.compile check, in its own process")
    device = next((t.device for t in pending.reference if isinstance(t, torch.Tensor)), None)
    got = beside.result(pending.case_index, pending.digest, device)
    if got.data is None:
        log(f"case {pending.case_index}: the torch.compile check runs in the worker: {got.why}")
        announce("the torch.compile check")
        _torch_compile(km, pending.inputs, pending.reference, run)
    else:
        data = got.data
        run.error, run.detail = data["error"], data["detail"]
        if not run.error:
            run.outputs, run.names, run.reference = list(data["outputs"]), list(data["names"]), list(pending.reference)
            cache = compiled_context.kernels_in(compiled_context.cache_dir())
            added = set(data["new_entries"])
            run.notes = scalar_notes({k: v for k, v in cache.items() if k not in added}, cache)
    if run.outputs:
        run.native, run.rounded = list(pending.native), list(pending.rounded)


WHOLE_ERROR_LIMIT = 20_000  # characters of an error kept for the record (Inductor's can hold generated code)


def whole_error(exc: BaseException) -> str:
    """The exception's whole text, every line, and that of each exception it was raised from (Inductor's
    "CompilationError: at 50:28" names the call; the reason is in the error it wraps), bounded."""
    parts: list[str] = []
    for link in exception_chain(exc):
        text = str(link).strip()
        if text and any(text in part for part in parts):
            continue
        parts.append(f"{type(link).__name__}: {text}" if not parts else f"raised from {type(link).__name__}: {text}")
    text = "\n".join(parts)
    if len(text) > WHOLE_ERROR_LIMIT:
        text = text[:WHOLE_ERROR_LIMIT] + f"\n... ({len(text) - WHOLE_ERROR_LIMIT} more characters)"
    return text


def describe_compile_failure(exc: BaseException) -> str:
    name = type(exc).__name__
    text = first_line(exc)
    if name in ("Unsupported", "UserError") or "graph break" in str(exc).lower():
        return f"torch.compile(fullgraph=True) hit a graph break: {text}"
    return f"torch.compile(fullgraph=True) failed: {name}: {text}"


def _cuda_graph(km: KernelModule, inputs: list[Any], reference: list[Any], run: ExtraRun) -> None:
    static = clone_inputs(inputs)
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            km.kernel_fn(*clone_inputs(inputs))  # compile and autotune outside the capture
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        # A launcher that syncs with the host would abort the capture, and an aborted capture can leave
        # torch unusable for the cases after it: ask torch's sync debug mode first.
        why = host_sync(lambda: km.kernel_fn(*clone_inputs(inputs)))
        if why:
            run.error = (f"CUDA graph capture or replay failed: kernel_fn synchronizes with the host, which a "
                         f"graph cannot hold ({why})")
            run.detail = why
            return
        graph = torch.cuda.CUDAGraph()
        # Capture on other values than those replayed: a value read at capture time shows up.
        with torch.no_grad():
            for t in static:
                if isinstance(t, torch.Tensor) and t.is_floating_point():
                    t.mul_(0.5).add_(0.25)
        with torch.cuda.graph(graph):
            out = km.kernel_fn(*static)
        with torch.no_grad():
            for now, value in zip(static, inputs):
                if isinstance(now, torch.Tensor):
                    now.copy_(value)
        graph.replay()
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the capture error is the finding
        run.error = f"CUDA graph capture or replay failed: {type(exc).__name__}: {first_line(exc)}"
        run.detail = whole_error(exc)
        try:
            recover_from_failed_capture()
        except GraphCaptureBroke as broke:
            raise ContextPoisoned(str(broke)) from broke
        return
    flat = flatten_outputs(out)
    run.outputs, run.names, run.reference = [t.detach().clone() for t in flat.tensors], flat.names, list(reference)
