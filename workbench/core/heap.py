"""The C heap of a process that stays up all day (the app's live loop, the MCP server).

Each run relays a worker's events through threads of its own, and glibc's malloc gives each thread that allocates
at once an arena of its own (up to eight per core) and keeps what is freed there for later: the Python objects of
a run are all freed at its end, yet the process's resident memory kept rising with the runs (about 20 kB a save on
the CPU and 80 kB on a GPU over hundreds of saves, with tracemalloc's count of live Python memory flat). A
long-lived session therefore caps the arenas and hands back what each run freed (`malloc_trim`). Elsewhere (not
glibc: macOS, musl) both are no-ops.
"""

from __future__ import annotations

import ctypes
import sys
from functools import lru_cache
from typing import Any

M_ARENA_MAX = -8  # mallopt's parameter (malloc.h)
ARENAS = 2  # the main arena and one for every other thread: runs are one at a time


@lru_cache(maxsize=1)
def _glibc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt.argtypes, libc.malloc_trim.argtypes = [ctypes.c_int, ctypes.c_int], [ctypes.c_size_t]
    except (OSError, AttributeError):  # no glibc (musl has no malloc_trim)
        return None
    return libc


def limit_arenas(count: int = ARENAS) -> bool:
    """Cap the arenas glibc's malloc creates from now on (as MALLOC_ARENA_MAX would at start-up); True if it did."""
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(M_ARENA_MAX, count) == 1)


def give_back_freed() -> bool:
    """Return the heap's free pages to the system; True if any were."""
    libc = _glibc()
    return bool(libc is not None and libc.malloc_trim(0) == 1)
