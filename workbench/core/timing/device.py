"""GPU facts and measured ceilings (copy GB/s, bf16 matmul TFLOP/s), cached per GPU.

A fraction of the roofline is only honest against what this GPU does, not its
datasheet: the ceilings are measured once (the best of several streaming copies of a
buffer far past the L2, a large bf16 matrix product on random data), cached as JSON per
GPU name with the date, the versions and the copy that won, and re-measured on request
(`workbench doctor --measure`). A kernel reported above the copy ceiling beyond noise means
the bytes counted, the ceiling or the timing is wrong, not that the kernel is fast: the ceiling
is the best of several copies, timed as kernels of its size are, and kernels moving only a few
L2s of data are timed with the write-back they leave in L2 (timers.py). Such a kernel's time is
not posted (plausible.py, past PLAUSIBLE_MARGIN).

    $WORKBENCH_CACHE_DIR/ceilings/<gpu-name-slug>.json   (default ~/.cache/kernel-workbench)

The cache half of this module is pure Python (the parent reads it for `doctor`);
`gather_facts` and `measure_ceilings` import torch and run in the worker only.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..events import DeviceFacts
from ..fsutil import CACHE_ENV, atomic_write_text, cache_root  # noqa: F401 - CACHE_ENV: its variable, for tests
from ..stage import JobContext

CEILINGS_VERSION = 2  # 2: the copy ceiling is the best of several copies (1: torch's copy alone)
COPY_BYTES = 1 << 30  # 1 GiB each way: far past any L2, so the copy runs at DRAM speed
COPY_REP_MS = 300.0  # GPU time per copy method: several methods share the measuring budget
MATMUL_SIZE = 8192  # 8192³ bf16: about 1.1 TFLOP, long enough to reach the tensor cores' steady rate


@dataclass(frozen=True)
class Ceilings:
    gpu: str
    copy_gbps: float
    matmul_tflops: float
    measured_at: str  # ISO 8601, UTC
    torch_version: str = ""
    triton_version: str = ""
    driver: str = ""
    method: str = ""
    copy_method: str = ""  # the copy that set copy_gbps, e.g. "triton copy BLOCK=8192 num_warps=8"
    version: int = CEILINGS_VERSION


# -- the cache (pure) ---------------------------------------------------------------------

def gpu_slug(name: str) -> str:
    """A file name for a GPU: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug or "unknown-gpu"


def ceilings_path(gpu_name: str) -> Path:
    return cache_root() / "ceilings" / f"{gpu_slug(gpu_name)}.json"


class CeilingsCacheError(Exception):
    """The cache file exists but cannot be used (unreadable, not JSON, wrong fields)."""


def read_ceilings(gpu_name: str) -> Ceilings | None:
    """The cached ceilings of this GPU; None when never measured. Raises CeilingsCacheError for a bad file."""
    path = ceilings_path(gpu_name)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CeilingsCacheError(f"{path}: cannot be read: {exc}") from None
    try:
        data = json.loads(text)
        ceilings = Ceilings(**data)
    except (ValueError, TypeError) as exc:
        raise CeilingsCacheError(f"{path}: not a ceilings record ({type(exc).__name__}: {exc})") from None
    if ceilings.version != CEILINGS_VERSION:
        raise CeilingsCacheError(f"{path}: written by another version of the workbench ({ceilings.version})")
    if ceilings.gpu != gpu_name:
        raise CeilingsCacheError(f"{path}: holds the ceilings of {ceilings.gpu!r}, not {gpu_name!r}")
    for name in ("copy_gbps", "matmul_tflops"):
        value = getattr(ceilings, name)
        if not isinstance(value, (int, float)) or not value > 0:
            raise CeilingsCacheError(f"{path}: {name} is {value!r}, not a positive number")
    return ceilings


def write_ceilings(ceilings: Ceilings) -> Path:
    path = ceilings_path(ceilings.gpu)
    atomic_write_text(path, json.dumps(asdict(ceilings), indent=1) + "\n")
    return path


def describe_ceilings(ceilings: Ceilings) -> str:
    by = f" by {ceilings.copy_method}" if ceilings.copy_method else ""
    return (f"copy {ceilings.copy_gbps:.0f} GB/s{by}, bf16 matmul {ceilings.matmul_tflops:.0f} TFLOP/s "
            f"(measured {ceilings.measured_at[:10]}, torch {ceilings.torch_version}, driver {ceilings.driver or '?'})")


# -- GPU state (worker) -------------------------------------------------------------------

@dataclass
class GpuState:
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    temperature_c: int | None = None
    driver: str = ""


def gpu_state(uuid: str = "") -> GpuState:
    """Clocks, temperature and driver now, through NVML, else nvidia-smi; fields it cannot read are None."""
    state = _nvml_state(uuid)
    return state if state is not None else _nvidia_smi_state(uuid)


@functools.cache
def _nvml_module() -> Any:
    """pynvml, initialised once per process (each benchmark case reads the clocks), or None."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - not installed, NVML missing or refused: nvidia-smi is tried instead
        return None


def _nvml_state(uuid: str) -> GpuState | None:
    pynvml = _nvml_module()
    if pynvml is None:
        return None
    try:
        handle, driver = _nvml_handle(uuid)
        state = GpuState(driver=driver)
        for attr, read in (("sm_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
                           ("mem_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)),
                           ("temperature_c", lambda: pynvml.nvmlDeviceGetTemperature(
                               handle, pynvml.NVML_TEMPERATURE_GPU))):
            try:
                setattr(state, attr, int(read()))
            except Exception:  # noqa: BLE001 - a counter this GPU does not expose stays None
                pass
        return state
    except Exception:  # noqa: BLE001
        return None


@functools.cache
def _nvml_handle(uuid: str) -> tuple[Any, str]:
    """The device's NVML handle and the driver version, looked up once per process: each benchmark case reads
    the clocks, and the lookup by UUID walks every device."""
    pynvml = _nvml_module()
    handle = pynvml.nvmlDeviceGetHandleByUUID(uuid) if uuid else pynvml.nvmlDeviceGetHandleByIndex(0)
    return handle, _text(pynvml.nvmlSystemGetDriverVersion())


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvidia_smi_state(uuid: str) -> GpuState:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return GpuState()
    command = [exe, "--query-gpu=clocks.sm,clocks.mem,temperature.gpu,driver_version", "--format=csv,noheader,nounits"]
    if uuid:
        command.insert(1, f"--id={uuid}")
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return GpuState()
    return parse_nvidia_smi(out)


def parse_nvidia_smi(output: str) -> GpuState:
    """The first line of `nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,driver_version`."""
    lines = [ln for ln in output.splitlines() if ln.strip()]
    if not lines:
        return GpuState()
    fields = [f.strip() for f in lines[0].split(",")]
    if len(fields) < 4:
        return GpuState()

    def number(text: str) -> int | None:
        try:
            return int(float(text))
        except ValueError:  # "[N/A]", "[Not Supported]"
            return None

    return GpuState(sm_clock_mhz=number(fields[0]), mem_clock_mhz=number(fields[1]),
                    temperature_c=number(fields[2]), driver=fields[3] if not fields[3].startswith("[") else "")


def device_uuid() -> str:
    """The current CUDA device's UUID as NVML spells it ("GPU-…"), or "" (so NVML falls back to index 0)."""
    import torch

    uuid = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", None)
    if not uuid:
        return ""
    text = str(uuid)
    return text if text.startswith("GPU-") else f"GPU-{text}"


def l2_cache_bytes() -> int | None:
    """The current CUDA device's L2 size in bytes (None where torch does not say)."""
    import torch

    return int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0)) or None


def gather_facts(ceilings: Ceilings | None) -> DeviceFacts:
    import torch
    import triton

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    state = gpu_state(device_uuid())
    return DeviceFacts(name=props.name, sm_clock_mhz=state.sm_clock_mhz, mem_clock_mhz=state.mem_clock_mhz,
                       temperature_c=state.temperature_c, driver=state.driver, torch_version=torch.__version__,
                       triton_version=triton.__version__,
                       copy_gbps=ceilings.copy_gbps if ceilings else None,
                       matmul_tflops=ceilings.matmul_tflops if ceilings else None,
                       ceilings_measured_at=ceilings.measured_at if ceilings else "",
                       l2_bytes=l2_cache_bytes())


# -- measuring the ceilings (worker) -----------------------------------------------------

def measure_ceilings(config: Any) -> Ceilings:
    """The best of several 1 GiB streaming copies and an 8192³ bf16 matmul on random data; medians of many runs."""
    import torch
    import triton

    copy = _time_copies(config)
    matmul = _time_matmul(config)
    torch.cuda.empty_cache()
    state = gpu_state(device_uuid())
    n = MATMUL_SIZE
    return Ceilings(
        gpu=torch.cuda.get_device_name(),
        copy_gbps=round(copy.best_gbps, 1),
        matmul_tflops=round(2 * n ** 3 / (matmul.median_ms * 1e-3) / 1e12, 1),
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        torch_version=torch.__version__, triton_version=triton.__version__, driver=state.driver,
        method=(f"copy: the best of {len(copy.gbps)} copies of {copy.nbytes >> 20} MiB (bytes read + written), "
                f"each the median of its series, CUDA events, {copy.flush_label}: "
                + ", ".join(f"{label} {gbps:.0f} GB/s" for label, gbps in copy.gbps.items())
                + f"; matmul: median of {matmul.samples} bf16 torch.mm of {n}x{n}x{n} on random data, CUDA events"),
        copy_method=copy.best)


@dataclass
class CopyMeasurement:
    nbytes: int  # each way
    gbps: dict[str, float]  # method -> bytes read + written per second at its median, in GB/s
    flush_label: str

    @property
    def best(self) -> str:
        return max(self.gbps, key=self.gbps.__getitem__)

    @property
    def best_gbps(self) -> float:
        return self.gbps[self.best]


def _time_copies(config: Any) -> CopyMeasurement:
    """Every copy method of copy_kernels, timed as kernels of this size are (per-call events, L2 flushed
    before each: 2 GiB moved is past timers.WRITEBACK_L2S L2s, where the write-back left in L2 is noise)."""
    import dataclasses

    import torch

    from . import (
        primitives as cuda,  # here, in the worker: the parent side never imports torch
    )
    from .copy_kernels import copy_methods
    from .stats import summarize
    from .timers import L2Flusher, time_with_events

    free, _ = torch.cuda.mem_get_info()
    copy_bytes = min(COPY_BYTES, free // 4) // 16 * 16
    src = torch.randint(-2 ** 31, 2 ** 31 - 1, (copy_bytes // 4,), dtype=torch.int32, device="cuda")
    dst = torch.empty_like(src)
    flusher = L2Flusher(l2_cache_bytes())
    series = dataclasses.replace(config, rep_ms=min(config.rep_ms, COPY_REP_MS))
    gbps = {}
    for label, call in copy_methods(src, dst):
        call()  # compiles outside the timing
        cuda.synchronize()
        timing = summarize(time_with_events(call, series, flusher), "cuda events")
        gbps[label] = 2 * copy_bytes / (timing.median_ms * 1e-3) / 1e9
    del src, dst, flusher
    return CopyMeasurement(nbytes=copy_bytes, gbps=gbps, flush_label="L2 flushed (read) before each copy")


def _time_matmul(config: Any) -> Any:
    import torch

    from .stats import summarize
    from .timers import time_with_events

    a = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device="cuda", dtype=torch.bfloat16)  # never zeros: they run fast
    b = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device="cuda", dtype=torch.bfloat16)
    return summarize(time_with_events(lambda: torch.mm(a, b), config), "cuda events")


def load_or_measure(config: Any, force: bool = False, on_measure: Any = None) -> tuple[Ceilings | None, list[str]]:
    """This GPU's ceilings from the cache, else measured now and cached. Returns (ceilings, notes)."""
    import torch

    name = torch.cuda.get_device_name()
    notes: list[str] = []
    if not force:
        try:
            cached = read_ceilings(name)
        except CeilingsCacheError as exc:
            notes.append(f"ceilings cache ignored and re-measured: {exc}")
            cached = None
        if cached is not None:
            return cached, notes
    if on_measure is not None:
        on_measure()
    ceilings = measure_ceilings(config)
    try:
        path = write_ceilings(ceilings)
        notes.append(f"ceilings measured and cached in {path}; copy ceiling set by {ceilings.copy_method}")
    except OSError as exc:
        notes.append(f"ceilings measured but not cached ({exc}); set {CACHE_ENV} to a writable folder")
    return ceilings, notes


def measure_ceilings_stage(context: JobContext) -> None:
    """Worker stage "measure_ceilings" (`workbench doctor --measure`): re-measure, cache, report."""
    from ..events import LogLine, Problem, StageChanged

    if context.interpret:
        context.emit(Problem(kind="environment", message="measuring ceilings needs a CUDA GPU; this worker runs "
                                                         "the Triton interpreter on the CPU"))
        return
    context.emit(StageChanged(stage="measuring", detail="copy bandwidth and bf16 matmul rate"))
    ceilings, notes = load_or_measure(context.config.bench, force=True)
    for note in notes:
        context.emit(LogLine(text=note, stream="stdout"))
    context.emit(gather_facts(ceilings))
