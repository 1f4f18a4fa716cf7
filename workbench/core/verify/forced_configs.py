"""Which configs of each autotuned kernel verification forces on a case: the ones its autotuner would time there.

An autotuner does not run every config it declares on every launch: `prune_configs_by` (an early prune, a
performance model's top k) drops, per launch, the configs its author knows are wasted or wrong for those
arguments (a row tile narrower than the row, a tile wider than the problem). Verification forces each config by
leaving the tuner one config, and Triton then runs it unpruned, so before this a case forced configs the kernel
never runs on it: a false alarm where a dropped config cannot handle that shape, and, on a GPU, a compile of
each one in the GPU worker, one after another, since the compile processes compile what the autotuner keeps
(run/child/compile_pool.py records launches under its pruning): minutes for a few hundred configs.

So the case's repeat call notes each autotuner's launches (`autotuner_launches`), and `configs_to_force` asks
the tuner's own `prune_configs` which configs those launches keep. A config dropped for one case is still
forced on a case whose launch keeps it; one that no case keeps is never run by the autotuner on these cases
and is said so, in the note the case carries.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

Launch = tuple[Any, dict[str, Any], dict[str, Any]]  # (the autotuner, its named arguments, its keyword arguments)
NOT_FORCED = "configs not forced: "  # how a case's note on the configs its launches' pruning dropped begins


@contextlib.contextmanager
def autotuner_launches() -> Iterator[list[Launch]]:
    """Within: every launch through an autotuner (a module's, or one a heuristics wraps) is noted, then run."""
    from triton.runtime.autotuner import Autotuner

    seen: list[Launch] = []
    signatures: set[tuple] = set()
    launched = Autotuner.run

    def noting(self: Any, *args: Any, **kwargs: Any) -> Any:
        named = dict(zip(self.arg_names, args))
        signature = (id(self), _signature(named), _signature(kwargs))
        if signature not in signatures:  # a kernel launched in a loop is asked about once per distinct launch
            signatures.add(signature)
            seen.append((self, named, dict(kwargs)))
        return launched(self, *args, **kwargs)

    Autotuner.run = noting
    try:
        yield seen
    finally:
        Autotuner.run = launched


def _signature(arguments: dict[str, Any]) -> tuple:
    """What a pruning can read of the arguments: a tensor's shape, strides and dtype, another value itself (a
    callable, such as the grid, by its type only)."""
    parts = []
    for name, value in arguments.items():
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            stride = value.stride() if callable(getattr(value, "stride", None)) else None
            parts.append((name, tuple(value.shape), stride, str(value.dtype)))
        elif callable(value):
            parts.append((name, type(value).__name__))
        else:
            try:
                hash(value)
                parts.append((name, value))
            except TypeError:
                parts.append((name, repr(value)))
    return tuple(parts)


def _contains(configs: list[Any], config: Any) -> bool:
    return any(config is c for c in configs)


def configs_to_force(tuner: Any, launches: list[Launch]) -> list[Any] | None:
    """The configs `tuner` keeps, after its pruning, for the launches noted, in its declared order (a config
    the pruning made anew after them); [] when the case did not launch it; None when the pruning could not be
    asked again (it raised): then every config is forced, as the tuner declares them."""
    declared = list(tuner.configs)
    kept: list[Any] = []
    for launched_by, named, keywords in launches:
        if launched_by is not tuner:
            continue
        saved = tuner.nargs
        tuner.nargs = named
        try:
            pruned = list(tuner.prune_configs(dict(keywords)))
        except Exception:  # noqa: BLE001 - user code (an early prune, a perf model) on arguments seen once already
            return None
        finally:
            tuner.nargs = saved
        kept += [config for config in pruned if not _contains(kept, config)]
    return [c for c in declared if _contains(kept, c)] + [c for c in kept if not _contains(declared, c)]


def not_forced_note(name: str, declared: int, forced: int) -> str:
    """What a case says of the configs its launches' pruning dropped."""
    if forced == 0:
        return f"{NOT_FORCED}this case does not launch {name}: none of its {declared} configs forced on it"
    return (f"{NOT_FORCED}{declared - forced} of {name}'s {declared}: its prune_configs_by drops them for this "
            f"case's launch (the autotuner never runs them on it); the other {forced} forced")
