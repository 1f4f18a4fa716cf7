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
