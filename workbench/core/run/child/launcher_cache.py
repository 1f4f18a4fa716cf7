"""Keep Triton's launcher modules across saves, while the kernels' cache is cleared on every save.

For each kernel signature Triton 3.x builds a small C extension that launches the kernel
(`__triton_launcher`, and `cuda_utils` once per process), compiling it with the system's C
compiler: a quarter of a second each on a 16-core H100 machine (benchmarks/compile_breakdown.py),
paid again on every save because it lives in the project's Triton cache, which a save clears.
These modules depend only on the argument types of the launch, never on the kernel's code, and
Triton names each by the hash of its C source: keeping them in the workbench's own cache loses
nothing of "every save compiles the kernel afresh". Every other file (IR, PTX, cubin, metadata)
still goes to TRITON_CACHE_DIR.

Used by GPU workers: TRITON_CACHE_MANAGER=workbench.core.run.launcher_cache:LauncherKeepingCache.
"""

from __future__ import annotations

import os
import sysconfig

from triton.runtime.cache import FileCacheManager

from ...timing.device import cache_root

MANAGER = f"{__name__}:LauncherKeepingCache"
EXTENSION_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def launcher_dir() -> str:
    return str(cache_root() / "triton-launchers")


class LauncherKeepingCache(FileCacheManager):
    """Triton's file cache, with Python extension modules (the launchers) kept in the workbench's cache."""

    def __init__(self, key: str, override: bool = False, dump: bool = False):
        super().__init__(key, override=override, dump=dump)
        self._kept: FileCacheManager | None = None
        if not override and not dump:
            kept = FileCacheManager.__new__(FileCacheManager)
            kept.key = key
            kept.cache_dir = os.path.join(launcher_dir(), key)
            kept.lock_path = os.path.join(kept.cache_dir, "lock")
            self._kept = kept

    def _keeps(self, filename: str) -> bool:
        if self._kept is None or not filename.endswith(EXTENSION_SUFFIX):
            return False
        os.makedirs(self._kept.cache_dir, exist_ok=True)
        return True

    def get_file(self, filename: str):  # type: ignore[override]
        return self._kept.get_file(filename) if self._keeps(filename) else super().get_file(filename)

    def put(self, data, filename: str, binary: bool = True) -> str:  # type: ignore[override]
        return self._kept.put(data, filename, binary) if self._keeps(filename) else super().put(data, filename, binary)
