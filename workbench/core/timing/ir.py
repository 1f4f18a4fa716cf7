"""A compiled kernel's IR as the user reads it: each stage's text, the kernel.py line of each IR line,
and the difference from the previous save with the location noise taken out.

Parent side: reads the files the worker named (events.KernelFacts.files, in the project's Triton
cache) and never imports torch or triton. Where each stage keeps its source locations:

- TTIR, TTGIR (MLIR): `loc(#loc12)` at the end of an operation, `#loc12 = loc("kernel.py":48:16)` and
  aliases (`loc("x"(#loc3))`, `loc(callsite(#loc4 at #loc9))`) defined in the file;
- LLVM IR: `!dbg !57` at the end of an instruction, `!57 = !DILocation(line: 48, column: 16, scope: !9)`;
- PTX: `.file 1 "kernel.py"` then `.loc 1 48 16` before the instructions it covers;
- SASS (nvdisasm -g): `//## File "kernel.py", line 48` before the instructions it covers.
"""

from __future__ import annotations

import difflib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

TEXT_STAGES = ("ttir", "ttgir", "llir", "ptx", "amdgcn")
STAGES = TEXT_STAGES + ("sass",)  # what a user can ask for; sass is disassembled from the cubin
STAGE_TITLES = {"ttir": "Triton IR", "ttgir": "Triton GPU IR", "llir": "LLVM IR", "ptx": "PTX", "sass": "SASS",
                "amdgcn": "AMDGCN"}


class IRUnavailable(Exception):
    """A stage that cannot be shown: its file is gone (a newer save cleared the cache), or no tool for SASS."""


@dataclass(frozen=True)
class Location:
    file: str
    line: int

    def short(self, kernel_file: str = "") -> str:
        if kernel_file and Path(self.file).name == Path(kernel_file).name:
            return str(self.line)
        return f"{Path(self.file).name}:{self.line}"


def read_stage(files: dict[str, str], stage: str, tools: dict[str, str] | None = None) -> str:
    """The text of one stage of a compiled kernel; SASS by disassembling its cubin with nvdisasm."""
    if stage == "sass":
        return disassemble(files, tools or {})
    path = files.get(stage)
    if not path:
        raise IRUnavailable(f"this kernel has no {stage} (stages here: {', '.join(files) or 'none'})")
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        raise IRUnavailable(f"{Path(path).name} is gone: a later run cleared the project's Triton cache; "
                            "save or run again to see it") from None


def ptx_of(files: dict[str, str]) -> str:
    """The kernel's PTX, for placing its SASS (line_locations); "" where there is none to read."""
    try:
        return read_stage(files, "ptx") if files.get("ptx") else ""
    except IRUnavailable:
        return ""


def disassemble(files: dict[str, str], tools: dict[str, str]) -> str:
    cubin = files.get("cubin")
    if not cubin:
        raise IRUnavailable("no cubin to disassemble (SASS exists for NVIDIA targets only)")
    if not Path(cubin).exists():
        raise IRUnavailable(f"{Path(cubin).name} is gone: a later run cleared the project's Triton cache")
    nvdisasm = tools.get("nvdisasm")
    if nvdisasm:
        out = subprocess.run([nvdisasm, "-c", "-gi", cubin], capture_output=True, text=True, timeout=120)
        if out.returncode == 0:
            return out.stdout
    cuobjdump = tools.get("cuobjdump")
    if cuobjdump:  # no line info this way
        out = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True, timeout=120)
        if out.returncode == 0:
            return out.stdout
    raise IRUnavailable("no nvdisasm or cuobjdump to disassemble with (Triton ships both with its NVIDIA backend; "
                        "TRITON_NVDISASM_PATH names another)")


def parse_target(text: str) -> tuple[str, int, int]:
    """"sm_90", "sm90", "90", "cuda:90" -> ("cuda", 90, 32); raises ValueError for anything else."""
    match = re.fullmatch(r"(?:cuda:|sm_?)?(\d{2,3})a?", text.strip().lower())
    if not match:
        raise ValueError(f"unknown target {text!r}: name an NVIDIA compute capability, e.g. sm_90, sm_80, sm_100")
    return ("cuda", int(match.group(1)), 32)



# -- the source line of each IR line ---------------------------------------------------------------------

_MLIR_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$")
_MLIR_FILELOC = re.compile(r'^"([^"]+)":(\d+):(\d+)')
_MLIR_USE = re.compile(r"loc\((#loc\d*|\"[^\"]+\":\d+:\d+)\)\s*$")
_LLVM_USE = re.compile(r"!dbg (![0-9]+)")
_LLVM_LOC = re.compile(r"^(![0-9]+) = (?:distinct )?!DILocation\(line: (\d+).*?scope: (![0-9]+)(?:, inlinedAt: (![0-9]+))?")
_LLVM_SCOPE_FILE = re.compile(r"^(![0-9]+) = (?:distinct )?!DI\w+\(.*?file: (![0-9]+)")
_LLVM_FILE = re.compile(r'^(![0-9]+) = !DIFile\(filename: "([^"]+)"')
_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"')
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)(?:.*?inlined_at\s+(\d+)\s+(\d+)\s+(\d+))?")
_SASS_LOC = re.compile(r'//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?')

Chain = list  # of Location, innermost (the inlined library code) first, the kernel's own line last


def line_locations(stage: str, text: str, kernel_file: str = "", ptx: str = "") -> list[Location | None]:
    """For each line of `text`, the source location it comes from (None where the stage does not say). Code
    inlined from elsewhere (tl.sum's body in triton/language/standard.py) is given the line of kernel.py
    that it was inlined into: the innermost location in `kernel_file` wins, else the innermost of all.

    Triton writes cache-hinted loads and stores as inline asm, and the PTX gives each line of an asm block a
    `.loc` of its own, counting on from the block's (a 4-line block at line 34 says 34, 35, 36, 37): the
    load is put on a line three lines down. Inside a block the `.loc`s are passed over (the block's line
    holds); ptxas builds the cubin's line table from them, so SASS lines that only a block's `.loc`s name
    are given the block's line (`ptx`: the same kernel's PTX, where the blocks can be read). A line real code
    names too (the store's, three lines below a load) cannot be told apart in SASS, whose line table has no
    columns: it stays as the table says."""
    lines = text.splitlines()
    if stage in ("ttir", "ttgir"):
        chains = _mlir_chains(lines)
    elif stage == "llir":
        chains = _llvm_chains(lines)
    elif stage == "ptx":
        chains = _marker_chains(lines, _ptx_marker(lines), inline_asm=True)
    elif stage == "sass":
        phantoms = asm_phantom_lines(ptx) if ptx else {}
        chains = [[Location(loc.file, phantoms.get((Path(loc.file).name, loc.line), loc.line)) for loc in chain]
                  for chain in _marker_chains(lines, _sass_marker)]
    else:
        chains = [[] for _ in lines]
    return [_pick(chain, kernel_file) for chain in chains]


def _pick(chain: Chain, kernel_file: str) -> Location | None:
    if not chain:
        return None
    if kernel_file:
        name = Path(kernel_file).name
        for loc in chain:
            if Path(loc.file).name == name:
                return loc
    return chain[0]


def _mlir_chains(lines: list[str]) -> list[Chain]:
    defs = {}
    for line in lines:
        match = _MLIR_DEF.match(line)
        if match:
            defs[match.group(1)] = match.group(2)
    resolved: dict[str, Chain] = {}

    def resolve(body: str, depth: int = 0) -> Chain:
        if depth > 32:
            return []
        body = body.strip()
        match = _MLIR_FILELOC.match(body)
        if match:
            return [Location(match.group(1), int(match.group(2)))]
        if body.startswith("#loc"):
            if body not in resolved:
                resolved[body] = []  # cycles end here
                resolved[body] = resolve(defs.get(body, ""), depth + 1)
            return resolved[body]
        if body.startswith("callsite("):  # callsite(callee at caller)
            callee, _, caller = body[len("callsite("):-1].partition(" at ")
            return resolve(callee, depth + 1) + resolve(caller, depth + 1)
        named = re.match(r'^"[^"]*"\((.*)\)$', body)  # loc("name"(#loc3))
        if named:
            return resolve(named.group(1), depth + 1)
        if body.startswith("fused["):
            for part in body[len("fused["):].rstrip("]").split(","):
                found = resolve(part, depth + 1)
                if found:
                    return found
        return []

    out: list[Chain] = []
    for line in lines:
        use = _MLIR_USE.search(line) if not line.startswith("#loc") else None
        out.append(resolve(use.group(1)) if use else [])
    return out


def _llvm_chains(lines: list[str]) -> list[Chain]:
    files, scope_file, locs = {}, {}, {}
    for line in lines:
        if (m := _LLVM_FILE.match(line)):
            files[m.group(1)] = m.group(2)
        elif (m := _LLVM_LOC.match(line)):
            locs[m.group(1)] = (int(m.group(2)), m.group(3), m.group(4))
        elif (m := _LLVM_SCOPE_FILE.match(line)):
            scope_file[m.group(1)] = m.group(2)

    def chain(ref: str | None, depth: int = 0) -> Chain:
        if ref is None or ref not in locs or depth > 32:
            return []
        number, scope, inlined_at = locs[ref]
        return [Location(files.get(scope_file.get(scope, ""), ""), number)] + chain(inlined_at, depth + 1)

    out: list[Chain] = []
    for line in lines:
        use = _LLVM_USE.search(line) if not line.startswith("!") else None
        out.append(chain(use.group(1)) if use else [])
    return out


def _ptx_marker(lines: list[str]):
    files = _ptx_files(lines)
    outer: dict[tuple[str, int, int], tuple[str, int, int]] = {}  # a .loc -> where it was inlined

    def marker(line: str) -> Chain | None:
        match = _PTX_LOC.match(line)
        if not match:
            return None
        here = (match.group(1), int(match.group(2)), int(match.group(3)))
        if match.group(4):
            outer[here] = (match.group(4), int(match.group(5)), int(match.group(6)))
        chain, seen = [], set()
        while here is not None and here not in seen:
            seen.add(here)
            chain.append(Location(files.get(here[0], ""), here[1]))
            here = outer.get(here)
        return chain
    return marker


def _sass_marker(line: str) -> Chain | None:
    match = _SASS_LOC.search(line)
    if not match:
        return None
    chain = [Location(match.group(1), int(match.group(2)))]
    if match.group(3):
        chain.append(Location(match.group(3), int(match.group(4))))
    return chain


ASM_BEGIN, ASM_END = "// begin inline asm", "// end inline asm"


def _ptx_files(lines: list[str]) -> dict[str, str]:
    """The PTX's `.file` table: file number -> path."""
    return {m.group(1): m.group(2) for line in lines if (m := _PTX_FILE.match(line))}


def asm_phantom_lines(ptx: str) -> dict[tuple[str, int], int]:
    """(file name, line) that only `.loc`s inside inline asm blocks name -> the line of the block they are in."""
    files = {number: Path(path).name for number, path in _ptx_files(ptx.splitlines()).items()}
    inside: dict[tuple[str, int], int] = {}
    outside: set[tuple[str, int]] = set()
    block_line: tuple[str, int] | None = None
    current: tuple[str, int] | None = None
    for line in ptx.splitlines():
        stripped = line.strip()
        if stripped == ASM_BEGIN:
            block_line = current
            continue
        if stripped == ASM_END:
            block_line = None
            continue
        match = _PTX_LOC.match(line)
        if not match:
            continue
        here = (files.get(match.group(1), ""), int(match.group(2)))
        if block_line is None:
            outside.add(here)
            current = here
        elif here != block_line and here[0] == block_line[0]:
            inside.setdefault(here, block_line[1])
    return {loc: line for loc, line in inside.items() if loc not in outside}


def _marker_chains(lines: list[str], marker, inline_asm: bool = False) -> list[Chain]:
    """Stages where location lines cover the instructions after them, until the next ones (nvdisasm -gi writes
    one line per level of inlining, the innermost first). `inline_asm`: location lines inside an inline asm
    block are passed over (see line_locations)."""
    out: list[Chain] = []
    current: Chain = []
    fresh = False  # the last line was a location: the next location line extends the chain
    in_asm = False
    for line in lines:
        if inline_asm and line.strip() in (ASM_BEGIN, ASM_END):
            in_asm = line.strip() == ASM_BEGIN
            out.append([])
            continue
        found = marker(line)
        if found is not None and in_asm:
            out.append([])
            continue
        if found is not None:
            current = (current + [loc for loc in found if loc not in current]) if fresh else found
            fresh = True
            out.append([])
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith(("//", ".", "}", "$")) or stripped.endswith(":"):
            if stripped == "}":  # the function's end
                current = []
            out.append([])
            continue
        fresh = False
        out.append(current)
    return out


def annotated(stage: str, text: str, kernel_file: str = "", ptx: str = "") -> list[tuple[str, str]]:
    """(source line label, IR line) for each line: "48" for kernel.py's line 48, "standard.py:290" for a
    line of another file, "" where the stage gives none. `ptx`: for SASS, the kernel's PTX (line_locations)."""
    return [(loc.short(kernel_file) if loc else "", line)
            for loc, line in zip(line_locations(stage, text, kernel_file, ptx), text.splitlines())]


def hottest_lines(stage: str, text: str, kernel_file: str) -> dict[int, int]:
    """kernel.py line -> how many lines of this stage come from it (where the code of a line went)."""
    counts: dict[int, int] = {}
    for loc in line_locations(stage, text, kernel_file):
        if loc is not None and Path(loc.file).name == Path(kernel_file).name:
            counts[loc.line] = counts.get(loc.line, 0) + 1
    return counts


# -- the difference from the previous save ------------------------------------------------------------------

_NOISE = {
    "ttir": [re.compile(r"^#loc\d* = .*$"), re.compile(r"\s*loc\((?:[^()]|\([^()]*\))*\)\s*$")],
    "ttgir": [re.compile(r"^#loc\d* = .*$"), re.compile(r"\s*loc\((?:[^()]|\([^()]*\))*\)\s*$")],
    "llir": [re.compile(r", !dbg ![0-9]+"), re.compile(r"^![0-9]+ = .*$"), re.compile(r"^\s*#dbg_\w+\(.*$")],
    "ptx": [re.compile(r"^\s*\.loc\s.*$"), re.compile(r"^\s*\.file\s.*$")],
    "sass": [re.compile(r"^\s*//## File .*$")],
}


def without_locations(stage: str, text: str) -> list[str]:
    """The stage's lines with source locations removed: a save that only moves code lines must not show as
    a changed kernel. Debug sections (PTX's .section .debug_*) go too."""
    out = []
    in_debug = False
    for line in text.splitlines():
        if stage == "ptx" and line.strip().startswith(".section") and ".debug" in line:
            in_debug = True
        if in_debug:
            if line.strip() == "}":
                in_debug = False
            continue
        for pattern in _NOISE.get(stage, []):
            line = pattern.sub("", line)
        if line.strip():
            out.append(line.rstrip())
    return out


def stage_diff(stage: str, before: str, after: str, context: int = 2) -> list[str]:
    """A unified diff of two saves' texts of one stage, locations left out ([] when the code is the same)."""
    return list(difflib.unified_diff(without_locations(stage, before), without_locations(stage, after),
                                     fromfile=f"{stage} @ previous save", tofile=f"{stage} @ this save",
                                     n=context, lineterm=""))


def diff_summary(diff: Iterable[str]) -> str:
    added = removed = 0
    for line in diff:
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return f"+{added} -{removed} lines" if added or removed else "unchanged"
