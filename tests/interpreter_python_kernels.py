"""Kernels that run on a GPU and, since interpreter/python_syntax.py, under the interpreter too (tests/test_interpreter_python.py),
each with a broken twin that must still fail there. Written for this project."""

AND_MASK = '''import torch
import triton
import triton.language as tl


@triton.jit
def _clip_copy(x_ptr, y_ptr, n, lo, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs < n) and (offs >= lo)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, x * 2, mask=offs < n)


def clip_copy(x):
    y = torch.empty_like(x)
    _clip_copy[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), 0, BLOCK=128)
    return y


kernel_fn = clip_copy


def reference_fn(x):
    return x * 2


def get_inputs(n=1000):
    return [torch.randn(n, device="cuda")]
'''

# the same construct, the mask wrong: lanes from 1 on only, so element 0 is never loaded
AND_MASK_WRONG = AND_MASK.replace("(offs >= lo)", "(offs > lo)")

OR_MASK = AND_MASK.replace("mask = (offs < n) and (offs >= lo)", "mask = (offs < n) and ((offs >= lo) or (offs < 0))")

BUILTIN_ALIAS = '''import torch
import triton
import triton.language as tl

triton_cast = tl.cast


@triton.jit
def _to_half(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, triton_cast(x, tl.float16), mask=mask)


def to_half(x):
    y = torch.empty(x.shape, dtype=torch.float16, device=x.device)
    _to_half[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
    return y


kernel_fn = to_half


def reference_fn(x):
    return x.to(torch.float16)


def get_inputs(n=1000):
    return [torch.randn(n, device="cuda")]
'''

BUILTIN_ALIAS_WRONG = BUILTIN_ALIAS.replace("triton_cast(x, tl.float16)", "triton_cast(x * 1.01, tl.float16)")

DEVICE_CONTEXT = '''import torch
import triton
import triton.language as tl


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def double(x):
    y = torch.empty_like(x)
    with torch.get_device_module().device(x.device):
        _double[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
    with torch.cuda.device(x.device):
        pass
    return y


kernel_fn = double


def reference_fn(x):
    return x * 2


def get_inputs(n=1000):
    return [torch.randn(n, device="cuda")]
'''

DEVICE_CONTEXT_WRONG = DEVICE_CONTEXT.replace("tl.load(x_ptr + offs, mask=mask) * 2", "tl.load(x_ptr + offs, mask=mask) * 3")

# an int launch argument used as a tensor (`stride.to(tl.int64)`): runs on Triton 3.6's and 3.9's interpreters
INT_ARGUMENT_AS_TENSOR = '''import torch
import triton
import triton.language as tl


@triton.jit
def _rows(x_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = row.to(tl.int64) * stride.to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    tl.store(y_ptr + base + cols, tl.load(x_ptr + base + cols, mask=mask) + 1, mask=mask)


def rows(x):
    y = torch.empty_like(x)
    _rows[(x.shape[0],)](x, y, x.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


kernel_fn = rows


def reference_fn(x):
    return x + 1


def get_inputs(r=7, c=100):
    return [torch.randn(r, c, device="cuda")]
'''
