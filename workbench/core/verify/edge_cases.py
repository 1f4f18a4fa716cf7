"""Edge shapes derived from a project's CASES: the sizes a kernel written for its own CASES gets wrong.

For one verification case of each dtype (each combination of the parameters that are no size),
every size is set together to n+1, n+2, 1, a prime above n+1 and n-1 (in that order of
preference), from the case whose sizes, each capped at SMALL_BASE, are largest (so the cases stay
cheap in the interpreter). A size is any positive integer parameter (n, M, N, K, dim, groups,
head_dim ...) and every entry of a tuple or list of positive integers (`shape=(3, 100, 7)`), unless
the project holds it: `[verify] fixed_params = ["k"]` names parameters that must keep their values
(a top-k's k, an axis). Only parameters named "seed" are never varied. An odd size or a prime is a
multiple of no power-of-two BLOCK (nor of 16), so a kernel without a mask, or with a grid rounded
down, meets a partial block. The cases run with the rest, marked generated; a shape that
get_inputs or reference_fn refuses, or that the launcher refuses explicitly before launching
anything, is dropped with a note (see battery.is_refusal). At most `[verify] max_generated_cases`
of them; `[verify] generated_cases = false` turns them off.
"""

from __future__ import annotations

from math import prod
from typing import Any, Callable

from ..project.config import VerifyConfig
from ..project.contract import Case

SMALL_BASE = 64
DTYPE_NAMES = frozenset({"float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8",
                         "int16", "int32", "int64", "uint8", "bool", "fp32", "fp16", "bf16", "f32", "f16", "tf32"})


def is_size(name: str, value: Any, fixed: frozenset[str] = frozenset()) -> bool:
    """A parameter the generator varies: a positive int, or a non-empty tuple/list of them."""
    if name in fixed or "seed" in name.lower():
        return False
    if isinstance(value, (tuple, list)):
        return bool(value) and all(type(v) is int and v > 0 for v in value)
    return type(value) is int and value > 0


def next_prime(n: int) -> int:
    n = max(n, 3)
    while any(n % d == 0 for d in range(2, int(n ** 0.5) + 1)):
        n += 1
    return n


def _frozen(params: dict[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


# n+2 keeps the parity of n: a kernel that needs even sizes (RoPE's halves) still meets a partial
# block; the others are odd, a multiple of no power of two.
CHANGES: tuple[Callable[[int], int], ...] = (lambda n: n + 1, lambda n: n + 2, lambda n: 1,
                                             lambda n: next_prime(n + 2), lambda n: max(1, n - 1))


def generate_cases(cases: list[Case], config: VerifyConfig) -> list[Case]:
    """The generated cases, indexed after the project's own."""
    if not config.generated_cases or config.max_generated_cases <= 0:
        return []
    fixed = frozenset(config.fixed_params)
    groups: dict[tuple, list[Case]] = {}
    for case in cases:
        if case.purpose != "verify" or not any(is_size(k, v, fixed) for k, v in case.params.items()):
            continue
        key = _frozen({k: v for k, v in case.params.items() if not is_size(k, v, fixed)})
        groups.setdefault(key, []).append(case)
    per_group = []
    for members in groups.values():
        # The case whose sizes, capped at SMALL_BASE, are largest: n+1, n-1 and a prime stay partial blocks.
        base = max(members, key=lambda c: _volume(_capped(c, fixed)))
        sizes = _capped(base, fixed)
        per_group.append([{**base.params, **{k: _changed(v, change) for k, v in sizes.items()}} for change in CHANGES])
    seen = {_frozen(c.params) for c in cases}
    out: list[Case] = []
    for round_ in range(max((len(v) for v in per_group), default=0)):
        for variants in per_group:
            if round_ < len(variants) and len(out) < config.max_generated_cases:
                params = variants[round_]
                key = _frozen(params)
                if key not in seen:
                    seen.add(key)
                    out.append(Case(index=len(cases) + len(out), params=params, generated=True))
    return out


def _changed(value: int | tuple | list, change: Callable[[int], int]) -> Any:
    if isinstance(value, (tuple, list)):
        return type(value)(change(v) for v in value)
    return change(value)


def _volume(sizes: dict[str, Any]) -> int:
    return prod(prod(v) if isinstance(v, (tuple, list)) else v for v in sizes.values())


def _capped(case: Case, fixed: frozenset[str]) -> dict[str, Any]:
    """The case's size parameters, each size capped at SMALL_BASE."""
    return {k: _changed(v, lambda n: min(n, SMALL_BASE)) for k, v in case.params.items() if is_size(k, v, fixed)}


def names_dtype(value: Any) -> bool:
    """A parameter value that says which dtype a case runs in (torch.float16, "bf16" ...)."""
    if type(value).__name__ == "dtype" and type(value).__module__.startswith("torch"):
        return True
    return isinstance(value, str) and value.replace("torch.", "") in DTYPE_NAMES


def dtype_key(case: Case) -> tuple:
    """What a case's dtype is, as its parameters name it (the cases of one dtype share it; () names none)."""
    return tuple(sorted((k, repr(v)) for k, v in case.params.items() if names_dtype(v)))


def sizes_of(case: Case, fixed: frozenset[str] = frozenset()) -> list[int]:
    """Every size of a case, the entries of a size tuple each on its own (see is_size)."""
    return [n for k, v in case.params.items() if is_size(k, v, fixed)
            for n in (v if isinstance(v, (tuple, list)) else [v])]


def best_per_dtype(cases: list[Case], rank: Callable[[Case], Any]) -> list[Case]:
    """Of each dtype, the verification case of CASES (not a generated one) of least `rank(case)` (the first on a
    tie; a rank of None: not a candidate), in the order the dtypes first appear."""
    chosen: dict[tuple, tuple[Any, Case]] = {}
    for case in cases:
        if case.purpose != "verify" or case.generated:
            continue
        value = rank(case)
        if value is None:
            continue
        key = dtype_key(case)
        if key not in chosen or value < chosen[key][0]:
            chosen[key] = (value, case)
    return [case for _, case in chosen.values()]


def first_case_per_dtype(cases: list[Case], sized: bool = False) -> set[int]:
    """The indices of the first verification case (CASES order) of each dtype: where the checks that run once
    per dtype run (torch.compile, CUDA graphs; in the interpreter also the repeat calls). Chosen from the whole
    list, so every worker of a sharded run agrees on them and each runs exactly once. `sized`: the first of
    each dtype with a size above 1 where there is one (the layouts: an n=1 case has none to vary)."""
    chosen: dict[tuple, int] = {}
    with_size: dict[tuple, int] = {}
    for case in cases:
        if case.purpose != "verify" or case.generated:
            continue
        key = dtype_key(case)
        chosen.setdefault(key, case.index)
        if sized and any(_above_one(v) for k, v in case.params.items() if is_size(k, v)):
            with_size.setdefault(key, case.index)
    return {with_size.get(key, first) for key, first in chosen.items()}


def _above_one(value: int | tuple | list) -> bool:
    return any(v > 1 for v in value) if isinstance(value, (tuple, list)) else value > 1


def once_per_dtype(case: Case, anchors: set[int]) -> str:
    """Why a check made once per dtype skips this case ("" on a case it runs on)."""
    if case.index in anchors:
        return ""
    return f"checked once per dtype, on case{'s' if len(anchors) > 1 else ''} {', '.join(map(str, sorted(anchors)))}"
