"""What torch.compile changes in the kernel's launches: a scalar that reaches the kernel as another type.

Called eagerly, a Python float argument reaches a Triton kernel as fp32; under torch.compile, Inductor launches
the user's kernel itself and may pass the same float as fp64. The kernel's arithmetic on it is then fp64 (slower
on every GPU, far slower where fp64 runs at a fraction of fp32's rate) and gives other numbers. Both launches
compile into the project's Triton cache, each entry with its IR: the function's signature in the .ttir names
every argument with its type, and the .ptx holds the instructions. So the check lists the cache before
torch.compile runs kernel_fn, and compares each kernel compiled under it with the same kernel compiled eagerly:
an argument whose type changed, where the compiled kernel also runs more fp64 instructions, is a note.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

_FUNC = re.compile(r"tt\.func\s+(?:public\s+)?@([\w$.]+)\((.*?)\)\s*(?:attributes|\{)", re.S)
_ARG = re.compile(r"%([\w$.]+)\s*:\s*([^\s,]+(?:<[^>]*>)?)")
# fp64 arithmetic in PTX: an instruction of these whose type is .f64 (a conversion, a load or a move of an fp64
# argument is no fp64 work: a kernel that converts the scalar once where it first uses it runs none)
_FP64_WORK = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:add|sub|mul|mad|fma|div|rcp|sqrt|rsqrt|min|max|neg|abs|setp|ex2|lg2|"
                        r"sin|cos|copysign)\.[\w.]*f64\b")


@dataclass
class Compiled:
    """One kernel in the Triton cache: its name, each argument's type (by name, in order) and its count of fp64
    arithmetic instructions (None without a .ptx: another backend)."""

    name: str
    args: dict[str, str] = field(default_factory=dict)
    fp64_lines: int | None = None


def cache_dir() -> Path | None:
    folder = os.environ.get("TRITON_CACHE_DIR")
    return Path(folder) if folder else None


def kernels_in(folder: Path | None) -> dict[str, Path]:
    """Every compiled kernel in the cache `folder`: its entry (the hash folder's name) -> its .ttir, named after the
    kernel. A listing only: the IR is read for the kernels a comparison needs (changed_scalars)."""
    if folder is None or not folder.is_dir():
        return {}
    return {ttir.parent.name: ttir for ttir in folder.glob("*/*.ttir")}


def read_entry(ttir: Path) -> Compiled | None:
    try:
        text = ttir.read_text(errors="replace")
    except OSError:
        return None
    match = _FUNC.search(text)
    if match is None:
        return None
    # a location suffix, `loc("x_ptr"(#loc))`, follows each argument: drop it before reading name: type pairs
    signature = re.sub(r"loc\([^()]*(?:\([^()]*\))?[^()]*\)", "", match.group(2))
    args = {name: kind for name, kind in _ARG.findall(signature)}
    fp64 = None
    ptx = ttir.with_suffix(".ptx")
    if ptx.is_file():
        try:
            fp64 = sum(1 for line in ptx.read_text(errors="replace").splitlines() if _FP64_WORK.match(line))
        except OSError:
            fp64 = None
    return Compiled(match.group(1), args, fp64)


def changed_scalars(before: dict[str, Path], after: dict[str, Path]) -> list[str]:
    """A note per kernel compiled under torch.compile (the entries of `after`, kernels_in's listing, not in
    `before`) whose arguments changed type against the same kernel compiled eagerly (an entry of `before` of the
    same name), where its fp64 instruction count grew too (or no .ptx says). The same kernel compiled eagerly for
    several specialisations: the one with the most arguments of the same types is its pair."""
    compiled = [entry for key, path in after.items() if key not in before and (entry := read_entry(path))]
    names = {entry.name for entry in compiled}
    eager = [entry for path in before.values() if path.stem in names and (entry := read_entry(path))]
    notes: list[str] = []
    for entry in compiled:
        pairs = [e for e in eager if e.name == entry.name and e.args.keys() == entry.args.keys()]
        if not pairs:
            continue
        pair = max(pairs, key=lambda e: sum(e.args[a] == entry.args[a] for a in entry.args))
        changed = [(a, pair.args[a], entry.args[a]) for a in entry.args if pair.args[a] != entry.args[a]]
        if not changed:
            continue
        grew = entry.fp64_lines is None or pair.fp64_lines is None or entry.fp64_lines > pair.fp64_lines
        if not grew:
            continue
        said = ", ".join(f"`{a}` as {new} (eagerly {old})" for a, old, new in changed)
        count = (f": {entry.fp64_lines} fp64 arithmetic instructions in its PTX, {pair.fp64_lines} eagerly"
                 if entry.fp64_lines is not None and pair.fp64_lines is not None else "")
        fp64 = [a for a, _, new in changed if new == "f64"]
        advice = (f"; a Python float passed to a Triton kernel reaches it as fp64 under torch.compile: convert "
                  f"{', '.join(f'`{a}`' for a in fp64)} to fp32 where the kernel first uses it "
                  f"(`{fp64[0]} = {fp64[0]}.to(tl.float32)`)" if fp64 else "")
        note = f"under torch.compile `{entry.name}` receives {said}{count}{advice}"
        if note not in notes:
            notes.append(note)
    return notes


def scalars_as_fp64(cache: dict[str, Path]) -> list[str]:
    """changed_scalars' notes from a cache listing alone, where the compiles under torch.compile are not new (an
    earlier compile of the same call in this run or a kept cache holds them): a called-eagerly launch never passes
    a Python float as fp64, so the entries with an f64 scalar argument are taken for torch.compile's and the others
    for the eager ones."""
    eager = {}
    for key, path in cache.items():
        entry = read_entry(path)
        if entry is not None and "f64" not in entry.args.values():
            eager[key] = path
    return changed_scalars(eager, cache)
