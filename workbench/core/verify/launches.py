"""Count the Triton kernels kernel_fn launches: a kernel_fn that launches none is no Triton kernel.

Every launch of a @triton.jit function goes through ``JITFunction.run`` (or, under the interpreter,
``InterpretedFunction.run``), whether called as ``kernel[grid](...)`` or by an autotuner or
heuristics wrapper; both are wrapped once per process at the class, so kernels defined in kernel.py
or in a library it imports all count. ``run(self, *args, grid, warmup, **kwargs)`` is the launch
path of Triton 3.x (checked on 3.9 here; 3.6 has the same), and works the same under the
interpreter, which the ``triton.knobs.runtime.launch_enter_hook`` of 3.4+ does not see. A
``warmup=True`` call compiles without launching and does not count.
"""

from __future__ import annotations

from typing import Any


class LaunchCounter:
    count = 0
    _installed = False

    @classmethod
    def install(cls) -> type["LaunchCounter"]:
        if cls._installed:
            return cls
        cls._installed = True
        targets = []
        try:
            from triton.runtime.jit import JITFunction

            targets.append(JITFunction)
        except ImportError:  # pragma: no cover
            pass
        try:
            from triton.runtime.interpreter import InterpretedFunction

            targets.append(InterpretedFunction)
        except ImportError:  # pragma: no cover
            pass
        for target in targets:
            cls._wrap(target)
        return cls

    @classmethod
    def _wrap(cls, target: type) -> None:
        original = target.run
        if getattr(original, "_workbench_counted", False):
            return

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("warmup", False):
                cls.count += 1
            return original(self, *args, **kwargs)

        run._workbench_counted = True  # type: ignore[attr-defined]
        target.run = run

    @classmethod
    def reset(cls) -> None:
        cls.count = 0
