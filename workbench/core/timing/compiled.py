"""What the compiler made of a kernel: every config's compiled specialisation, its IR files and its facts.

Worker side. Nothing here launches a kernel: `compile_only()` turns each `kernel[grid](...)` into
Triton's own warm-up call (compile, or find in the cache, and return the compiled kernel) and makes
an autotuner compile each config it would time. Calling kernel_fn once that way hands over, for one
case, every compiled kernel it launches, with the config it was compiled for:

- on a GPU, after the benchmark has compiled and tuned a case (bench.py), to report registers, spills,
  shared memory and occupancy beside each config's time; the CUDA driver's figures for the loaded
  kernel (cuFuncGetAttribute, what Triton's n_regs/n_spills come from);
- for a named target on any machine (`workbench ir --target sm_90`: the "ir" stage below), through a
  driver that only answers what the compiler asks (`CompileOnlyDriver`); the registers and spills
  then come from the resource report ptxas writes into the cubin (read with cuobjdump, which Triton
  ships beside ptxas).

The IR itself stays in the project's Triton cache (each stage's file named in `KernelFacts.files`);
the parent reads what it shows (timing/ir.py).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ..events import CompiledKernels, KernelFacts, Problem, StageChanged
from ..project.contract import describe_config, first_line, problem_from_exception, select_cases
from ..stage import COMPILE_TARGET_ENV, JobContext
from .compiler_facts import limits_for, occupancy
from .ir import parse_target

IR_STAGES = ("ttir", "ttgir", "llir", "ptx", "cubin", "amdgcn", "hsaco")  # the files Triton keeps, in order
Compiled = Callable[[Any, Any, Any, "BaseException | None"], None]  # (launched object, config, kernel, error)


@contextlib.contextmanager
def compile_only(on_compiled: Compiled | None = None, first_config_only: bool = False) -> Iterator[None]:
    """Within: launching a Triton kernel compiles it (every autotune config its pruning keeps; `first_config_only`:
    the first of them, the one an untimed pick takes: verify/quick_tuning.py) and runs nothing.

    `on_compiled(launched, config, kernel, error)` hears each compile: the object launched (a JIT function,
    heuristics or the autotuner), the autotune config (None for a plain launch), the compiled kernel, or
    the exception a config's compile raised (a failing config is skipped: the benchmark reports it)."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import KernelInterface

    def getitem(self: Any, grid: Any) -> Any:
        def launch(*args: Any, **kwargs: Any) -> Any:
            kernel = self.run(*args, grid=grid, warmup=True, **kwargs)
            if on_compiled is not None and kernel is not None and not isinstance(self, Autotuner):
                on_compiled(self, None, kernel, None)
            return kernel
        return launch

    def compile_configs(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["warmup"] = True
        self.nargs = dict(zip(self.arg_names, args))
        try:
            configs = self.prune_configs(kwargs)
            for config in configs[:1] if first_config_only else configs:
                try:
                    kernel = self.fn.run(*args, **{**kwargs, **config.all_kwargs()})
                except Exception as exc:  # noqa: BLE001 - a config that cannot compile: reported, not raised
                    if on_compiled is not None:
                        on_compiled(self, config, None, exc)
                    continue
                if on_compiled is not None and kernel is not None:
                    on_compiled(self, config, kernel, None)
        finally:
            self.nargs = None

    saved = KernelInterface.__getitem__, Autotuner.run
    KernelInterface.__getitem__, Autotuner.run = getitem, compile_configs
    try:
        yield
    finally:
        KernelInterface.__getitem__, Autotuner.run = saved


class CompileOnlyDriver:
    """What Triton's JIT asks of the active driver while it compiles, answered without CUDA: the target is
    given (a GPU worker's, or one a user names). Launching anything with it fails, as it must."""

    def __init__(self, target: Any):
        self._target = target

    def get_current_target(self) -> Any:
        return self._target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cuda", 0)

    def get_device_interface(self) -> Any:
        import torch

        return torch.cuda

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"compiling for a target without its GPU (Triton asked its driver for {name!r})")


@contextlib.contextmanager
def compiling_for(target: Any) -> Iterator[None]:
    """Within: Triton compiles for `target` (a GPUTarget) whatever GPU this machine has, or none."""
    from triton.runtime.driver import driver

    saved = getattr(driver, "_active", None)
    driver.set_active(CompileOnlyDriver(target))
    try:
        yield
    finally:
        driver._active = saved  # never driver.reset_active(): that would ask CUDA, which may not be here


def target_name(target: Any) -> str:
    arch = getattr(target, "arch", target)
    return f"sm_{arch}" if isinstance(arch, int) else str(arch)


# -- one case's compiled kernels ----------------------------------------------------------------------


@dataclass
class Captured:
    name: str  # what it is launched by (the module's name for an autotuner, else the function's)
    config: str
    kernel: Any  # Triton's CompiledKernel


def capture(call: Callable[[], Any], module: Any) -> tuple[list[Captured], list[str]]:
    """The compiled kernels one `call()` launches, each config of an autotuner's, and the configs that did not
    compile ("<kernel> (<config>): <error>"). Raises what `call` raises."""
    names = {id(value): name for name, value in vars(module).items()}
    found: dict[tuple[str, str, str], Captured] = {}
    failed: list[str] = []

    def heard(launched: Any, config: Any, kernel: Any, error: BaseException | None) -> None:
        jit = _jit_of(launched)
        # an autotuner by the name the module binds it to (AutotuneReport.kernel's), a plain launch by its function's
        name = (config is not None and names.get(id(launched))) or getattr(jit, "__name__", "kernel")
        label = describe_config(config) if config is not None else _plain_config(jit, kernel)
        if error is not None:
            failed.append(f"{name} ({label}): {type(error).__name__}: {first_line(error)}")
            return
        found.setdefault((name, label, getattr(kernel, "hash", "")), Captured(name=name, config=label, kernel=kernel))

    with compile_only(heard):
        call()
    return list(found.values()), failed


def _jit_of(obj: Any) -> Any:
    from triton.runtime.jit import JITFunction

    for _ in range(5):
        if isinstance(obj, JITFunction):
            return obj
        obj = getattr(obj, "fn", None)
    return obj


def _plain_config(jit: Any, kernel: Any) -> str:
    """A launch without an autotuner as a config: its constexpr arguments, then the compile options."""
    parts = [f"{name}={getattr(value, 'value', value)}" for name, value in _constexprs(jit, kernel).items()]
    meta = kernel.metadata
    parts += [f"num_warps={meta.num_warps}", f"num_stages={meta.num_stages}"]
    if getattr(meta, "num_ctas", 1) not in (None, 1):
        parts.append(f"num_ctas={meta.num_ctas}")
    return ", ".join(parts)


def _constexprs(jit: Any, kernel: Any) -> dict[str, Any]:
    src = getattr(kernel, "src", None)
    constants = getattr(src, "constants", None) or {}
    declared = {p.num: p.name for p in getattr(jit, "params", []) if getattr(p, "is_constexpr", False)}
    values = {}
    for key, value in constants.items():
        index = key[0] if isinstance(key, tuple) and key else key
        if isinstance(index, int) and index in declared:
            values[declared[index]] = value
    return dict(sorted(values.items(), key=lambda item: list(declared.values()).index(item[0])))


def signature_of(kernel: Any) -> str:
    """Triton's specialisation of a compiled kernel's arguments: "*fp32:16, *fp32:16, i32, fp32" (":16":
    divisible by 16, as Triton assumed it). Constexpr arguments are in the config, not here."""
    src = getattr(kernel, "src", None)
    signature = getattr(src, "signature", None)
    if not isinstance(signature, dict):
        return ""
    aligned = set()
    for key, values in (getattr(src, "attrs", None) or {}).items():
        if any("divisibility" in str(v) for v in values):
            aligned.add(key[0] if isinstance(key, tuple) and key else key)
    parts = []
    for index, kind in enumerate(signature.values()):
        if kind == "constexpr":
            continue
        parts.append(f"{kind}:16" if index in aligned else str(kind))
    return ", ".join(parts)


def ir_files(kernel: Any) -> dict[str, str]:
    """Each IR stage's file in the Triton cache (ttir, ttgir, llir, ptx, cubin; amdgcn, hsaco on AMD)."""
    group = getattr(kernel, "metadata_group", None) or {}
    files = {}
    for filename, path in group.items():
        stage = Path(filename).suffix.lstrip(".")
        if stage in IR_STAGES:
            files[stage] = str(path)
    return {stage: files[stage] for stage in IR_STAGES if stage in files}


# -- registers, spills, shared memory ---------------------------------------------------------------------


def driver_resources(kernel: Any) -> tuple[int | None, int | None, int | None]:
    """(registers per thread, local bytes per thread, static shared bytes) of a kernel loaded on this GPU,
    from the CUDA driver (cuFuncGetAttribute); Triton's own n_regs / n_spills when the driver cannot be asked."""
    kernel._init_handles()
    function = getattr(kernel, "function", None)
    values = _cu_func_attributes(function, (4, 3, 1)) if function else None  # NUM_REGS, LOCAL_SIZE, SHARED_SIZE
    if values is not None:
        return values[0], values[1], values[2]
    spills = getattr(kernel, "n_spills", None)
    return getattr(kernel, "n_regs", None), spills * 4 if spills is not None else None, None


_LIBCUDA: Any = None


def _cu_func_attributes(function: int, attributes: tuple[int, ...]) -> list[int] | None:
    import ctypes

    global _LIBCUDA
    try:
        if _LIBCUDA is None:
            _LIBCUDA = ctypes.CDLL("libcuda.so.1")
        values = []
        for attribute in attributes:
            value = ctypes.c_int(0)
            if _LIBCUDA.cuFuncGetAttribute(ctypes.byref(value), ctypes.c_int(attribute), ctypes.c_void_p(function)):
                return None
            values.append(value.value)
        return values
    except (OSError, AttributeError):
        return None


_RESOURCE_LINE = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


def parse_resource_usage(text: str, function: str) -> tuple[int, int, int] | None:
    """(registers, local bytes, static shared bytes) of `function` from `cuobjdump -res-usage`'s report
    (ptxas's figures, kept in the cubin): "Function f:\\n  REG:40 STACK:0 SHARED:0 LOCAL:0 ..."."""
    current = None
    for line in text.splitlines():
        header = re.match(r"\s*Function (.+):\s*$", line)
        if header:
            current = header.group(1).strip()
            continue
        found = _RESOURCE_LINE.search(line)
        if found and current == function:
            registers, _stack, shared, local = (int(g) for g in found.groups())
            return registers, local, shared
    return None


def cubin_resources(cuobjdump: str, cubins: list[tuple[str, str]]) -> dict[str, tuple[int, int, int] | None]:
    """cubin path -> (registers, local bytes, static shared bytes), one cuobjdump per cubin, in parallel."""

    def one(item: tuple[str, str]) -> tuple[str, tuple[int, int, int] | None]:
        path, function = item
        try:
            out = subprocess.run([cuobjdump, "-res-usage", path], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return path, None
        return path, parse_resource_usage(out.stdout, function)

    if not cubins:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, len(cubins))) as pool:
        return dict(pool.map(one, cubins))


def nvidia_tools() -> dict[str, str]:
    """The paths of the CUDA tools Triton uses (its own copies unless TRITON_*_PATH names others).

    Read from the knob's own description (its environment variable and its default path): asking the knob for
    its value runs the tool with --version, a process per tool in every benchmark worker, for a path the
    parent may never use (SASS is disassembled on demand)."""
    tools = {}
    try:
        from triton import knobs

        for name in ("cuobjdump", "nvdisasm"):
            knob = vars(type(knobs.nvidia)).get(name)
            candidates = [os.environ.get(knob.key), knob.default_path] if hasattr(knob, "default_path") else \
                [getattr(getattr(knobs.nvidia, name), "path", None)]
            path = next((p for p in candidates if p and os.path.exists(p)), None)
            if path:
                tools[name] = path
    except Exception:  # noqa: BLE001 - a Triton without the knobs, or without the NVIDIA backend
        pass
    return tools


def gather(captured: list[Captured], case_index: int | None, compiled_here: bool, props: Any = None) -> CompiledKernels:
    """The facts of each captured kernel, as one event. `compiled_here`: loaded on this machine's GPU (the
    driver's figures), else compiled for a target only (ptxas's report, through cuobjdump)."""
    started = time.perf_counter()
    tools = nvidia_tools()
    notes: list[str] = []
    resources: dict[str, tuple[int | None, int | None, int | None] | None] = {}
    files = {item.kernel.hash: ir_files(item.kernel) for item in captured}
    if compiled_here:
        source = "the CUDA driver (the loaded kernel's attributes)"
        for item in captured:
            try:
                resources[item.kernel.hash] = driver_resources(item.kernel)
            except Exception as exc:  # noqa: BLE001 - out of resources on load: the facts say what is known
                resources[item.kernel.hash] = None
                notes.append(f"{item.name} ({item.config}) does not load on this GPU: {exc}")
    else:
        source = "ptxas's resource report in the cubin (cuobjdump -res-usage)"
        cubins = {files[c.kernel.hash].get("cubin"): c.kernel.name for c in captured}
        cubins.pop(None, None)
        if cubins and "cuobjdump" not in tools:
            notes.append("no cuobjdump found: registers and spills unknown (set TRITON_CUOBJDUMP_PATH)")
        by_path = cubin_resources(tools["cuobjdump"], list(cubins.items())) if "cuobjdump" in tools else {}
        for item in captured:
            resources[item.kernel.hash] = by_path.get(files[item.kernel.hash].get("cubin", ""))
    kernels, target = [], ""
    for item in captured:
        meta = item.kernel.metadata
        target = target_name(meta.target)
        registers, local, static = resources.get(item.kernel.hash) or (None, None, None)
        facts = KernelFacts(kernel=item.name, config=item.config, signature=signature_of(item.kernel), target=target,
                            num_warps=meta.num_warps, num_stages=meta.num_stages,
                            num_ctas=getattr(meta, "num_ctas", 1) or 1, registers=registers, spill_bytes=local,
                            static_shared=static, dynamic_shared=int(getattr(meta, "shared", 0) or 0),
                            files=files[item.kernel.hash], hash=item.kernel.hash,
                            case_indices=[case_index] if case_index is not None else [])
        limits = limits_for(meta.target.arch, props) if isinstance(meta.target.arch, int) else None
        if limits is not None:
            occ = occupancy(limits, meta.num_warps, registers, (static or 0) + facts.dynamic_shared)
            facts.occupancy, facts.blocks_per_sm, facts.limiter = round(occ.fraction, 4), occ.blocks_per_sm, occ.limiter
        kernels.append(facts)
    return CompiledKernels(kernels=kernels, target=target, compiled_here=compiled_here, facts_source=source,
                           case_index=case_index, seconds=round(time.perf_counter() - started, 4), tools=tools,
                           notes=notes)


# -- the "ir" stage: `workbench ir` ----------------------------------------------------------------------


def ir_stage(context: JobContext) -> None:
    """Worker stage "ir": compile the chosen cases' kernels (every config) without running them, and report
    each compiled kernel's facts and IR files: for this GPU, or for the target the worker was started for
    (COMPILE_TARGET_ENV), on any machine."""
    from triton.backends.compiler import GPUTarget

    named = os.environ.get(COMPILE_TARGET_ENV)
    km = context.km
    if named is None and context.interpret:
        context.emit(Problem(kind="environment", message="no GPU here to compile for: name a target, e.g. "
                                                         "`workbench ir --target sm_90`"))
        return
    cases = select_cases(km.cases, context.job.case_indices, "bench") or km.cases[:1]
    if context.job.case_indices is None:
        cases = cases[:1]  # the first benchmark case unless others are asked for
    import torch

    from ..verify.gradients import for_training
    from ..verify.torchmodes import CudaToCpu

    on_gpu = named is None
    props = torch.cuda.get_device_properties(torch.cuda.current_device()) if on_gpu else None
    target = GPUTarget(*parse_target(named)) if named is not None else None
    with compiling_for(target) if target is not None else contextlib.nullcontext(), \
            contextlib.nullcontext() if torch.cuda.is_available() else CudaToCpu():
        # A training kernel's call runs its backward too (verify/gradients.py), so that its kernels compile as well.
        km = for_training(km, context.config.verify.backward, require_triton=False)
        for case in cases:
            context.emit(StageChanged(stage="compiling", detail=case.label, case_index=case.index))
            try:
                inputs = km.get_inputs(**case.params)
                captured, failed = capture(lambda: km.kernel_fn(*inputs), km.module)
            except Exception as exc:  # noqa: BLE001 - the kernel's own error, pointing into kernel.py
                context.emit(problem_from_exception("compile", exc, km.path, f"compiling {case.label} failed",
                                                    case.index))
                continue
            event = gather(captured, case.index, compiled_here=on_gpu, props=props)
            event.notes += [f"did not compile: {f}" for f in failed]
            context.emit(event)
