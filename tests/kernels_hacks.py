"""kernel.py sources written to fake a benchmark time, one for each family of hack, and kernels that do
the same things honestly (tests/test_timing_hacks_gpu.py runs them; docs/TIMING.md tabulates
how each is caught). All are the scale kernel of tests/kernels.py (out = 2x), correct on every call
verification makes, with a benchmark case of 64 MiB in and out (tens of µs on an H100: far from launch
overhead, so an honest time and a faked one are far apart)."""

import kernels

BIG = kernels.CONTRACT.replace('dict(n=1 << 20, purpose="bench")', 'dict(n=1 << 24, purpose="bench")')


def source(launcher: str = kernels.LAUNCHER, extra: str = "", contract: str = BIG) -> str:
    return kernels.kernel_source(launcher=launcher, contract=contract) + extra


HONEST = source()

# -- the timer patched ---------------------------------------------------------------------------------

# Python level: torch's own classes rebound at import.
TIMER_PATCHED_PYTHON = source(extra='''
torch.cuda.Event.elapsed_time = lambda self, end: 1e-6
torch.cuda.CUDAGraph.replay = lambda self: None
''')

# C level: a fake written into the extension types' method tables (forbiddenfruit's way), which torch.cuda.Event's
# own methods reach through super() on every call.
TIMER_PATCHED_C = source(extra='''
import ctypes
import gc


def _write_into(cls, name, fake):
    gc.get_referents(cls.__dict__)[0][name] = fake
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))


_write_into(torch._C._CudaEventBase, "elapsed_time", lambda self, end: 1e-6)
_write_into(torch._C._CUDAGraph, "replay", lambda self: None)
''')

# -- results kept from an earlier call -------------------------------------------------------------------

KEEPS_BY_POINTER = source(launcher=kernels.KEEPS_BY_POINTER_LAUNCHER)

# Wrong when called again within a millisecond of its last call (as a kernel sharing a workspace between calls
# without waiting for the last one might be), right when called on its own: right on the call checked before
# timing and on the recheck after it, wrong on timed calls made back to back (the next element's value).
RIGHT_ONLY_WHEN_NOT_HURRIED = source(launcher='''
import time

_last_call = [0.0]


def scale(x):
    out = torch.empty_like(x)
    n = x.numel()
    now = time.perf_counter()
    hurried = n >= (1 << 24) and now - _last_call[0] < 1e-3
    _last_call[0] = now
    if hurried:
        x, n = x[1:], n - 1
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    return out
''')

# -- another stream --------------------------------------------------------------------------------------

SIDE = '''
_side = []


def scale(x):
    if not _side:
        _side.append(torch.cuda.Stream())
    side, caller = _side[0], torch.cuda.current_stream()
    {fork}
    with torch.cuda.stream(side):
        out = torch.empty_like(x)
        n = x.numel()
        scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    {join}
    return out
'''
FORK = "side.wait_stream(caller)"
JOIN = "caller.wait_stream(side); out.record_stream(caller)"

SIDE_STREAM_UNJOINED = source(launcher=SIDE.format(fork=FORK, join="pass"))
SIDE_STREAM_UNFORKED = source(launcher=SIDE.format(fork="pass", join=JOIN))
SIDE_STREAM_JOINED = source(launcher=SIDE.format(fork=FORK, join=JOIN))  # honest: timed as the device sees it

# -- other threads, work deferred -------------------------------------------------------------------------

# Each call hands its launch to a worker thread and returns once the worker has taken it: the launch lands
# after the call returned, outside the timer's events.
DEFERRED_TO_A_THREAD = source(launcher='''
import queue
import threading

_jobs, _taken = queue.Queue(), threading.Semaphore(0)


def _worker():
    while True:
        x, out = _jobs.get()
        _taken.release()
        n = x.numel()
        scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)


threading.Thread(target=_worker, daemon=True).start()


def scale(x):
    out = torch.empty_like(x)
    _jobs.put((x, out))
    _taken.acquire()
    return out
''')

# Each call starts a thread that launches, and waits for the launch but not for the thread.
STARTS_THREADS = source(launcher='''
import threading


def scale(x):
    out = torch.empty_like(x)
    launched = threading.Event()

    def launch():
        n = x.numel()
        scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
        launched.set()
        time.sleep(5)

    threading.Thread(target=launch, daemon=True).start()
    launched.wait()
    return out
''')

# -- the L2 kept across the flush --------------------------------------------------------------------------

PERSISTING_L2 = source(launcher='''
import ctypes

_rt = []


class _Window(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int), ("pad", ctypes.c_char * 64)]


def _persist(x):
    if not _rt:
        path = next(line.split()[-1] for line in open("/proc/self/maps") if "libcudart.so" in line)
        _rt.append(ctypes.CDLL(path))
    rt = _rt[0]
    most = ctypes.c_int(0)
    rt.cudaDeviceGetAttribute(ctypes.byref(most), 108, torch.cuda.current_device())  # MaxPersistingL2CacheSize
    size = min(x.numel() * x.element_size(), most.value)
    assert rt.cudaDeviceSetLimit(0x06, ctypes.c_size_t(size)) == 0  # cudaLimitPersistingL2CacheSize
    window = _Window(x.data_ptr(), size, 1.0, 2, 1)  # persisting on a hit, streaming on a miss
    rt.cudaStreamSetAttribute(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), 1, ctypes.byref(window))
    rt.cudaGetLastError()  # the legacy default stream may refuse a window: no error left for torch to find


def scale(x):
    _persist(x)
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    return out
''')

# -- wrong answers that look right ---------------------------------------------------------------------------

NAN_OUTPUTS = kernels.kernel_source(
    kernel=kernels.KERNEL.replace("y = x * 2.0", "y = tl.where(offs == 0, float('nan'), x * 2.0)"), contract=BIG)

LAZY_SUBCLASS = source(launcher='''
class _Lazy(torch.Tensor):
    """Computes nothing until looked at."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        args = [a.as_subclass(torch.Tensor) * 2 if isinstance(a, _Lazy) else a for a in args]
        return func(*args, **(kwargs or {}))


def scale(x):
    return x.as_subclass(_Lazy)
''')

# torch in place of a Triton kernel (a library call), with a token launch for the launch count.
LIBRARY_CALL = source(launcher='''
def scale(x):
    token = torch.empty(1, device=x.device)
    scale_kernel[lambda meta: (1,)](token, token, 1)
    return torch.mul(x, 2)
''')
LIBRARY_CALL_ONLY = source(launcher='''
def scale(x):
    return torch.mul(x, 2)
''')

# A copy in place of a clamp: right on N(0, 1) inputs, where clamp(-4, 4) changes almost nothing. Caught by the
# value-stress cases (inputs x64, outliers) and by the 16M-element benchmark case's values past 4.
IDENTITY_ON_NORMAL = source(contract=BIG.replace("return x * 2", "return x.clamp(-4.0, 4.0)"),
                            launcher=kernels.LAUNCHER).replace("y = x * 2.0", "y = x")
