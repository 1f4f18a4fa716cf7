"""Count the Triton kernels kernel_fn launches: a kernel_fn that launches none is no Triton kernel.

On a GPU the count comes from Triton itself: its runtime calls ``triton.knobs.runtime.launch_enter_hook``
(a chain of hooks, Triton 3.4 and later) from the launcher of every compiled kernel, whatever path led
there: ``kernel[grid](...)``, an autotuner or heuristics wrapper, or a ``CompiledKernel`` that
kernel.py compiled with ``warmup`` and launches itself (the fused-softmax tutorial does). A Triton
without that chain falls back to wrapping ``JITFunction.run`` (which misses direct ``CompiledKernel``
launches). Under the interpreter nothing is compiled and no hook is called: every launch goes through
``InterpretedFunction.run``, wrapped once per process at the class (a ``warmup=True`` call compiles
nothing and does not count; workbench's interpreter stand-in for a warmed-up kernel launches through it).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator


class LaunchCounter:
    count = 0
    _installed = False
    _paused = 0  # inside `paused()`: launches are not counted

    @classmethod
    @contextmanager
    def paused(cls) -> Iterator[None]:
        """Launches made inside are not counted (a benchmark's untimed set-up: the forward a backward needs)."""
        cls._paused += 1
        try:
            yield
        finally:
            cls._paused -= 1

    @classmethod
    def install(cls) -> type[LaunchCounter]:
        if cls._installed:
            return cls
        cls._installed = True
        try:
            from triton.runtime.interpreter import InterpretedFunction

            cls._wrap(InterpretedFunction)
        except ImportError:  # pragma: no cover
            pass
        if not cls._hook_launches():
            try:
                from triton.runtime.jit import JITFunction

                cls._wrap(JITFunction)
            except ImportError:  # pragma: no cover
                pass
        return cls

    @classmethod
    def _hook_launches(cls) -> bool:
        """Count in Triton's own launch hook chain; False where this Triton has none."""
        try:
            from triton import knobs
        except ImportError:
            return False
        chain = getattr(getattr(knobs, "runtime", None), "launch_enter_hook", None)
        if not callable(getattr(chain, "add", None)):
            return False

        def counted(metadata: Any = None) -> None:
            if not cls._paused:
                cls.count += 1

        chain.add(counted)
        return True

    @classmethod
    def _wrap(cls, target: type) -> None:
        original = target.run
        if getattr(original, "_workbench_counted", False):
            return

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("warmup", False) and not cls._paused:
                cls.count += 1
            return original(self, *args, **kwargs)

        run._workbench_counted = True  # type: ignore[attr-defined]
        target.run = run

    @classmethod
    def reset(cls) -> None:
        cls.count = 0
