"""Edge shapes derived from a project's CASES: the sizes a kernel written for its own CASES gets wrong.

For one verification case of each dtype (each combination of the non-integer parameters),
every positive integer parameter (a size: n, M, N, K, head_dim ...) is set together to n+1, n+2, 1, a
prime above n+1 and n-1 (in that order of preference), from the case whose sizes, each capped at SMALL_BASE, are largest (so the cases stay cheap
in the interpreter). An odd size
or a prime is a multiple of no power-of-two BLOCK (nor of 16), so a kernel without a mask, or with a
grid rounded down, meets a partial block. The cases run with the rest, marked generated; a shape
that get_inputs, reference_fn or kernel_fn's launcher refuses is dropped with a note (only a wrong
result or an out-of-bounds access fails). At most `[verify] max_generated_cases` of them;
`[verify] generated_cases = false` turns them off.
"""

from __future__ import annotations

from math import prod
from typing import Any

from ..project.config import VerifyConfig
from ..project.contract import Case

SMALL_BASE = 64
NOT_SIZES = ("dim", "axis", "groups", "k", "topk", "top_k")  # integer parameters that are no size ("n", "head_dim" are)


def is_size(name: str, value: Any) -> bool:
    return type(value) is int and value > 0 and name.lower() not in NOT_SIZES and "seed" not in name.lower()


def next_prime(n: int) -> int:
    n = max(n, 3)
    while any(n % d == 0 for d in range(2, int(n ** 0.5) + 1)):
        n += 1
    return n


def _frozen(params: dict[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


def generate_cases(cases: list[Case], config: VerifyConfig) -> list[Case]:
    """The generated cases, indexed after the project's own."""
    if not config.generated_cases or config.max_generated_cases <= 0:
        return []
    groups: dict[tuple, list[Case]] = {}
    for case in cases:
        if case.purpose != "verify" or not any(is_size(k, v) for k, v in case.params.items()):
            continue
        key = _frozen({k: v for k, v in case.params.items() if not is_size(k, v)})
        groups.setdefault(key, []).append(case)
    per_group = []
    for members in groups.values():
        # The case whose sizes, capped at SMALL_BASE, are largest: n+1, n-1 and a prime stay partial blocks.
        base = max(members, key=lambda c: prod(_capped(c).values()))
        sizes = _capped(base)
        variants = []
        # n+2 keeps the parity of n: a kernel that needs even sizes (RoPE's halves) still meets a
        # partial block; the others are odd, a multiple of no power of two.
        for change in (lambda n: n + 1, lambda n: n + 2, lambda n: 1, lambda n: next_prime(n + 2),
                       lambda n: max(1, n - 1)):
            variants.append({**base.params, **{k: change(v) for k, v in sizes.items()}})
        per_group.append(variants)
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


def _capped(case: Case) -> dict[str, int]:
    """The case's size parameters, each capped at SMALL_BASE."""
    return {k: min(v, SMALL_BASE) for k, v in case.params.items() if is_size(k, v)}
