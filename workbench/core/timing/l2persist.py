"""Persisting L2: lines a kernel can keep in the L2 past the flush the timer runs before every call.

Since Ampere a program can set aside part of the L2 for "persisting" accesses (cudaDeviceSetLimit with
cudaLimitPersistingL2CacheSize) and mark an address window of a stream persisting (its access policy
window). Lines so marked survive ordinary traffic, the flush's reads among them: a kernel.py that marks its
inputs persisting reads them from the L2 on every timed call. torch has no API for any of it, so this
reaches the CUDA runtime torch itself loaded through ctypes (the same library, so the same context).

- `reset`: the set-aside to 0 and every persisting line back to normal (cudaCtxResetPersistingL2Cache),
  before a kernel is timed: what kernel.py set aside at import or in its first call is gone;
- `set_aside_bytes`: the set-aside now; a kernel that sets one again during its timed calls leaves it
  above 0 after them, and its time is not posted (escapes.TimedCalls).

Where no CUDA runtime can be found (a torch linked to it statically), both say so and do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any

LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize


@functools.lru_cache(maxsize=1)
def runtime() -> Any | None:
    """The CUDA runtime library this process loaded (libcudart), or None."""
    candidates = []
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                path = line.rsplit(" ", 1)[-1].strip()
                if "libcudart.so" in path and path not in candidates:
                    candidates.append(path)
    except OSError:
        pass
    found = ctypes.util.find_library("cudart")
    candidates += [found] if found else []
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
            lib.cudaDeviceGetLimit  # noqa: B018 - a library without it is no CUDA runtime
            return lib
        except (OSError, AttributeError):
            continue
    return None


def set_aside_bytes() -> int | None:
    """The L2 set aside for persisting accesses on the current device (None: unknown)."""
    lib = runtime()
    if lib is None:
        return None
    value = ctypes.c_size_t(0)
    if lib.cudaDeviceGetLimit(ctypes.byref(value), LIMIT_PERSISTING_L2) != 0:
        lib.cudaGetLastError()  # an unsupported limit (before Ampere) must not fail torch's next launch check
        return None
    return int(value.value)


def reset() -> str:
    """No L2 set aside and no line persisting; "" when done, else why not."""
    lib = runtime()
    if lib is None:
        return "the CUDA runtime library was not found, so persisting L2 lines were not reset"
    if lib.cudaDeviceSetLimit(LIMIT_PERSISTING_L2, ctypes.c_size_t(0)) != 0 or lib.cudaCtxResetPersistingL2Cache() != 0:
        lib.cudaGetLastError()  # not left for torch's next launch check to raise
        return "persisting L2 lines could not be reset (a GPU before Ampere has none)"
    return ""
