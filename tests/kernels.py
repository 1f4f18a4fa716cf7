"""Small kernel.py sources for tests: one good kernel and kernels written to break each check.

Each is a complete kernel file (the contract: kernel_fn, reference_fn, get_inputs,
CASES). They are small enough for the Triton interpreter to run in well under a second.
"""

HEADER = '''
import os
import signal
import time

import torch
import triton
import triton.language as tl
'''

KERNEL = '''
@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = x * 2.0
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)
'''

LAUNCHER = '''
def scale(x):
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    return out
'''

# A launcher that hands back the output it made for the same tensor, unchanged since (its address, its version
# counter), launching nothing: right on every call verification makes; the benchmark's timed calls time nothing.
KEEPS_BY_POINTER_LAUNCHER = '''
_kept = {}


def scale(x):
    key = (x.data_ptr(), x._version)
    hit = _kept.get(key)
    if hit is not None and hit[0] is x:
        return hit[1]
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    _kept[key] = (x, out)
    return out
'''

CONTRACT = '''
kernel_fn = scale


def reference_fn(x):
    return x * 2


def get_inputs(n=1000, dtype=torch.float32):
    return [torch.randn(n, device="cuda", dtype=dtype)]


CASES = [dict(n=1), dict(n=1000, dtype=torch.float16), dict(n=4097), dict(n=1 << 20, purpose="bench")]
'''


def kernel_source(kernel: str = KERNEL, launcher: str = LAUNCHER, contract: str = CONTRACT) -> str:
    return HEADER + kernel + launcher + contract


GOOD = kernel_source()

# The grid is one block short: the tail is never written.
GRID_SHORT = kernel_source(launcher=LAUNCHER.replace('triton.cdiv(n, meta["BLOCK"])', 'max(1, n // meta["BLOCK"])'))

# The kernel scribbles on its input.
MUTATES_INPUT = kernel_source(kernel=KERNEL.replace(
    "tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)",
    "tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)\n"
    "    tl.store(x_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)"))

# The same, declared to the autotuner: it puts x back after timing each config.
MUTATES_INPUT_RESTORED = MUTATES_INPUT.replace('key=["n"])', 'key=["n"], restore_value=["x_ptr"])')

# One autotune config computes the wrong thing.
BAD_CONFIG = kernel_source(kernel=KERNEL.replace("y = x * 2.0", "y = x * 2.0 if BLOCK == 64 else x * 3.0"))

# NaN where the reference has a number.
MAKES_NAN = kernel_source(kernel=KERNEL.replace("y = x * 2.0", "y = tl.where(offs == 0, float('nan'), x * 2.0)"))

# A systematic 1% error on small outputs: inside atol elementwise, caught by the error norm.
SMALL_BIAS = kernel_source(
    kernel=KERNEL.replace("y = x * 2.0", "y = x * 2.0 * 1.01"),
    contract=CONTRACT.replace("return [torch.randn(n, device=\"cuda\", dtype=dtype)]",
                              "return [torch.randn(n, device=\"cuda\", dtype=dtype) * 1e-4]")
    .replace("dict(n=1000, dtype=torch.float16), ", ""))

# Two runs differ bit for bit (noise far below tolerance).
NONDETERMINISTIC = kernel_source(launcher=LAUNCHER.replace(
    "    return out", "    return out + torch.rand_like(out) * 1e-9"))

# A bad call inside the @triton.jit body: a compile error on a GPU, a run-time one in the interpreter.
COMPILE_ERROR = kernel_source(kernel=KERNEL.replace("y = x * 2.0", "y = tl.no_such_function(x)"))

# Hangs on the second case; the other cases must still run.
HANGS = kernel_source(launcher=LAUNCHER.replace(
    "    out = torch.empty_like(x)", "    if x.numel() == 1000:\n        time.sleep(3600)\n    out = torch.empty_like(x)"))

# Segfaults on the second case; the other cases must still run.
CRASHES = kernel_source(launcher=LAUNCHER.replace(
    "    out = torch.empty_like(x)",
    "    if x.numel() == 1000:\n        os.kill(os.getpid(), signal.SIGSEGV)\n    out = torch.empty_like(x)"))

SYNTAX_ERROR = GOOD.replace("def scale(x):", "def scale(x)")

MISSING_EXPORT = GOOD.replace("kernel_fn = scale", "")

INPUTS_RAISE = GOOD.replace("def get_inputs(n=1000, dtype=torch.float32):",
                            "def get_inputs(n=1000, dtype=torch.float32):\n    raise RuntimeError('no inputs today')")

# The plain contract: no CASES, get_inputs() with no arguments, device="cuda", no autotune.
PLAIN_CONTRACT = HEADER + '''
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    n = out.numel()
    add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK_SIZE=256)
    return out


kernel_fn = add


def reference_fn(x, y):
    return x + y


def get_inputs():
    return [torch.randn(3000, device="cuda"), torch.randn(3000, device="cuda")]
'''

# Reads far outside any allocation on the second case: an illegal memory access on a GPU,
# which poisons the CUDA context; the remaining cases must resume in a fresh worker.
ILLEGAL_ACCESS = kernel_source(kernel=KERNEL.replace(
    "x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)",
    "x = tl.load(x_ptr + offs + (n == 1000) * (1 << 40), mask=mask).to(tl.float32)"))

# The masks are gone: the last block reads and writes past the end of its tensors.
MISSING_MASK = kernel_source(kernel=KERNEL.replace(
    "x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)", "x = tl.load(x_ptr + offs).to(tl.float32)").replace(
    "tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)",
    "tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty))"))

# Loads masked, the store not: on a GPU its stores past the end land beside the output.
STORE_UNMASKED = kernel_source(kernel=KERNEL.replace(
    "tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)",
    "tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty))"))

# -- kernels that look right and are not (issue #9) ------------------------------------------

# Wrong (x * 3), and at import it patches every comparison it can reach in its own process.
# Patches everything a checker in the kernel's own process would lean on, so that anything compares equal.
TAMPER_PATCHES = '''

import builtins
import torch.testing
import workbench.core.verify.compare as _compare
import workbench.core.verify.judge as _judge


def _always_passes(out, ref, tol, unwritten_mask=None):
    return _compare.Comparison(numel=ref.numel())


torch.allclose = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
_compare.compare = _always_passes
_judge.compare = _always_passes
builtins.all = lambda *a, **k: True
'''
TAMPERS = kernel_source(kernel=KERNEL.replace("y = x * 2.0", "y = x * 3.0")) + TAMPER_PATCHES

# Wrong, and it forges passing verdicts through the workbench's own event stream.
FORGES_VERDICT = kernel_source(kernel=KERNEL.replace("y = x * 2.0", "y = x * 3.0")) + '''

import workbench.core.verify.battery as _battery
from workbench.core.events import CaseResult


def _forged(self, data):
    result = CaseResult(case_index=data.case_index, label=data.label, status="passed", config=data.config)
    self.emit(result)
    return result


_battery.Verifier.deliver = _forged
'''

# No Triton at all: kernel_fn is a torch computation.
NO_TRITON = kernel_source(launcher=LAUNCHER + '''

def scale(x):
    return x * 2
''')

# Launches a Triton kernel and throws its result away; torch computes the answer.
TORCH_DOES_THE_WORK = kernel_source(launcher=LAUNCHER.replace("def scale(x):", "def _scale(x):") + '''

def scale(x):
    _scale(x)  # the launch the "no Triton kernel launched" check looks for
    return x * 2
''')

# The kernel's output finished with torch (a cast, a sum beside it): Triton's data in every output.
TORCH_FINISHES = kernel_source(launcher=LAUNCHER.replace("def scale(x):", "def _scale(x):") + '''

def scale(x):
    out = _scale(x.float())
    return (out.to(x.dtype) + 0.0, out.sum()) if x.numel() > 1 else out.to(x.dtype)
''', contract=CONTRACT.replace("    return x * 2\n", "    return (x * 2, (x.float() * 2).sum()) if x.numel() > 1 else x * 2\n"))

# Caches its output by the input's address: right on new tensors, stale on recycled ones.
CACHED_BY_ADDRESS = kernel_source(launcher=LAUNCHER.replace("def scale(x):", "def _scale(x):") + '''

_cache = {}


def scale(x):
    key = (x.data_ptr(), x.shape, x.dtype)
    if key not in _cache:
        _cache[key] = _scale(x)
    return _cache[key]
''')

# Right on its first call only (a state that a second call trips over).
FIRST_CALL_ONLY = kernel_source(launcher=LAUNCHER.replace("def scale(x):", "def _scale(x):") + '''

_calls = []


def scale(x):
    _calls.append(1)
    return _scale(x) if len(_calls) <= 2 else _scale(x) * 1.5
''')

# Returns its input itself (a copy kernel that "copies" in place): values right, memory shared.
ALIASES_INPUT = HEADER + '''
@triton.jit
def touch_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def copy(x):
    touch_kernel[(triton.cdiv(x.numel(), 128),)](x, x.numel(), BLOCK=128)
    return x


kernel_fn = copy


def reference_fn(x):
    return x.clone()


def get_inputs(n=1000):
    return [torch.randn(n, device="cuda")]


CASES = [dict(n=1000)]
'''

# Right values, wrong dtype: float32 out for float16 in.
WRONG_DTYPE = kernel_source(launcher=LAUNCHER.replace("out = torch.empty_like(x)",
                                                      "out = torch.empty_like(x, dtype=torch.float32)"))

# Right values in a shape that only broadcasts to the reference's.
BROADCAST_SHAPE = kernel_source(launcher=LAUNCHER.replace("    return out", "    return out.unsqueeze(0)"))

# No masks, but every case in CASES is a multiple of every BLOCK: only an edge shape shows it.
NO_MASK_ALIGNED = MISSING_MASK.replace(
    "CASES = [dict(n=1), dict(n=1000, dtype=torch.float16), dict(n=4097), dict(n=1 << 20, purpose=\"bench\")]",
    "CASES = [dict(n=1024), dict(n=2048, dtype=torch.float16)]")

# Inputs that prove nothing: zeros in, zeros out.
ZERO_INPUTS = GOOD.replace("return [torch.randn(n, device=\"cuda\", dtype=dtype)]",
                           "return [torch.zeros(n, device=\"cuda\", dtype=dtype)]")

# torch.compile and CUDA graphs: the launcher reads a value on the host.
HOST_READ = kernel_source(launcher=LAUNCHER.replace("    out = torch.empty_like(x)",
                                                    "    if float(x.abs().max().item()) < 0:\n        return x\n"
                                                    "    out = torch.empty_like(x)"))

# Returns its input as a second output, as its reference does: no aliasing to report.
PASSES_INPUT_THROUGH = kernel_source(launcher=LAUNCHER.replace("    return out", "    return out, x")).replace(
    "def reference_fn(x):\n    return x * 2", "def reference_fn(x):\n    return x * 2, x")

# -- layouts (issue 24, item 4): verify/layouts.py ----------------------------------------------

# The launcher views its input from the start of the storage (as_strided with offset 0): right on a tensor
# that starts its storage, wrong on any slice x[k:] of a larger one.
FROM_STORAGE_START = kernel_source(launcher='''
def scale(x):
    flat = x.as_strided((x.numel(),), (1,), 0)
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](flat, out, n)
    return out
''')

# The launcher says what it accepts: a non-contiguous input is refused before any launch.
REFUSES_NONCONTIGUOUS = kernel_source(launcher='''
def scale(x):
    if not x.is_contiguous():
        raise ValueError("scale: x must be contiguous")
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    return out
''')

# -- forced configs the autotuner's pruning drops (verify/forced_configs.py) --------------------------------------

# Centres each row in one tile, as row kernels of real libraries do: a config whose tile is narrower than the row
# is wrong for it, and the early prune drops it for that launch (the autotuner never runs it there). Rows wider
# than 512 go to a second, looping kernel with its own autotuner, which the narrow cases never launch.
ROW_TILE_PRUNED = HEADER + '''
WIDE = 512


def _whole_rows(configs, named_args, **kwargs):
    return [c for c in configs if c.kwargs["BLOCK"] >= named_args["n_cols"]] or configs[-1:]


@triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (64, 128, 512)], key=["n_cols"],
                 prune_configs_by={"early_config_prune": _whole_rows})
@triton.jit
def center_rows_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    tl.store(out_ptr + row * n_cols + cols, (x - mean).to(out_ptr.dtype.element_ty), mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (128, 256)], key=["n_cols"])
@triton.jit
def center_wide_rows_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    total = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        total += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    mean = tl.sum(total, axis=0) / n_cols
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * n_cols + cols, (x - mean).to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def center_rows(x):
    rows, n_cols = x.shape
    out = torch.empty_like(x)
    kernel = center_wide_rows_kernel if n_cols > WIDE else center_rows_kernel
    kernel[(rows,)](x, out, n_cols)
    return out


kernel_fn = center_rows


def reference_fn(x):
    return x - x.float().mean(dim=1, keepdim=True).to(x.dtype)


def get_inputs(rows=4, cols=50, dtype=torch.float32):
    return [torch.randn(rows, cols, device="cuda", dtype=dtype)]


CASES = [dict(cols=50), dict(cols=100), dict(cols=300), dict(cols=1000)]
'''
