"""Proof that nothing compiled inside a timed region.

A compile (or a load from Triton's disk cache) inside a timed series would be timed
as if it were the kernel. Two witnesses: Triton's compilation listener
(`triton.knobs.compilation.listener`), which sees every compile in the process,
torch.compile's kernels included, where the installed Triton has one; and the
number of compiled variants in the in-memory caches of the kernel module's JIT
functions, which every Triton has. Runs in the worker.
"""

from __future__ import annotations

from typing import Any


class CompileWatch:
    """Counts Triton compilations while active (re-entrant: each entry counts from zero)."""

    def __init__(self, jit_functions: list[Any] | None = None):
        self.jit_functions = list(jit_functions or [])
        self.compiled = 0
        self._heard = 0
        self._before = 0
        self._previous: Any = None
        self._knobs: Any = None

    def __enter__(self) -> "CompileWatch":
        self.compiled = self._heard = 0
        self._before = self._cached_variants()
        self._knobs = _compilation_knobs()
        if self._knobs is not None:
            self._previous = self._knobs.listener
            previous = self._previous

            def listener(**kwargs: Any) -> None:
                self._heard += 1
                if previous is not None:
                    previous(**kwargs)

            self._knobs.listener = listener
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._knobs is not None:
            self._knobs.listener = self._previous
        self.compiled = max(self._heard, self._cached_variants() - self._before)

    @property
    def witness(self) -> str:
        """What saw the timed region: "" when nothing could (no listener, no JIT functions to count)."""
        seen_by = (["Triton's compilation listener"] if _compilation_knobs() is not None else []) + \
            (["the kernel's JIT caches"] if self.jit_functions else [])
        return " and ".join(seen_by)

    @property
    def proof(self) -> str:
        if not self.witness:
            return "compilation inside not checked (this Triton has no compilation listener)"
        return f"no compilation inside (witness: {self.witness})"

    def _cached_variants(self) -> int:
        return sum(cached_variants(fn) for fn in self.jit_functions)


def _compilation_knobs() -> Any:
    try:
        from triton import knobs
    except ImportError:  # Triton before knobs.py (3.3 and older)
        return None
    compilation = getattr(knobs, "compilation", None)
    return compilation if compilation is not None and hasattr(compilation, "listener") else None


def cached_variants(jit_function: Any) -> int:
    """How many compiled variants a JITFunction holds (across Triton versions)."""
    caches = getattr(jit_function, "device_caches", None)
    if isinstance(caches, dict):
        return sum(len(entry[0]) for entry in caches.values() if entry and isinstance(entry[0], dict))
    cache = getattr(jit_function, "cache", None)
    if isinstance(cache, dict):
        return sum(len(v) for v in cache.values() if isinstance(v, dict))
    return 0


def jit_functions(module: Any) -> list[Any]:
    """The JITFunctions defined in a module, unwrapped from autotuners and heuristics."""
    from triton.runtime.jit import JITFunction

    found = []
    for value in vars(module).values():
        fn = value
        for _ in range(4):
            if isinstance(fn, JITFunction):
                break
            fn = getattr(fn, "fn", None)
        if isinstance(fn, JITFunction) and all(fn is not f for f in found):
            found.append(fn)
    return found
