"""A kernel's hottest source lines: ncu's warp-state samples per kernel.py line. Pure Python, no GPU.

    ncu --import R.ncu-rep --csv --print-units base --page source --print-source cuda,sass

prints, for each profiled launch in launch order and for each source file its code came from, a
block: a ``"File Path"`` row, a ``"Function Name"`` row (the kernel), a header row, then one row
per source line that has code (``Line No`` set; its metrics summed over its instructions) followed
by that line's SASS instructions (``Line No`` empty). Triton keeps each instruction's line
(``.loc`` in the PTX) unless TRITON_DISABLE_LINE_INFO=1, so the lines are kernel.py's, and those
of Triton's own library code inlined into the kernel (``tl.sum`` is triton/language/standard.py).

The rows name no launch: blocks are tied to the raw page's launches in order, and each launch's
sample total (``smsp__pcsamp_sample_count``) must equal its blocks' sum of "Warp Stall Sampling
(All Samples)", else nothing is tied (a line's share would be another launch's). The columns differ
from kernel to kernel (each block has its own header), and ncu does not escape quotes inside the
Source column, so a row is read by its header from both ends: the line number first, the metrics
from the right.

A warp-state sample is one warp's state at one moment: "All Samples" counts every sampled warp,
"Not-issued" those that were stalled rather than issuing; the ``stall_*`` columns split a line's
samples by reason. A line's share is its samples over the launch's.
"""

from __future__ import annotations

import ast
import csv
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ALL_SAMPLES = "Warp Stall Sampling (All Samples)"
NOT_ISSUED_SAMPLES = "Warp Stall Sampling (Not-issued Samples)"
SAMPLE_COUNT = "smsp__pcsamp_sample_count"  # raw page: one launch's samples
RAW_STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"  # raw page: one launch's samples of one reason
TOP_LINES = 5
TOP_LINE_REASONS = 3
TOP_KERNEL_REASONS = 4
FEW_SAMPLES = 100  # under this many, a share moves by whole percents from one profile to the next
TEXT_WIDTH = 100

# Both spellings of each reason (the source page's column, the raw page's metric), in ncu's words.
STALL_NAMES = {
    "long_sb": "long scoreboard", "long_scoreboard": "long scoreboard",
    "short_sb": "short scoreboard", "short_scoreboard": "short scoreboard",
    "lg": "LG throttle", "lg_throttle": "LG throttle",
    "math": "math pipe throttle", "math_pipe_throttle": "math pipe throttle",
    "mio": "MIO throttle", "mio_throttle": "MIO throttle",
    "tex": "TEX throttle", "tex_throttle": "TEX throttle",
    "dispatch": "dispatch stall", "dispatch_stall": "dispatch stall",
    "imc": "IMC miss", "imc_miss": "IMC miss",
    "no_inst": "no instruction", "no_instructions": "no instruction",
    "sleep": "sleeping", "sleeping": "sleeping",
    "branch_resolving": "branch resolving",
    "not_selected": "not selected",
    "selected": "selected (issuing)",
    "gmma": "GMMA", "warpgroup_arrive": "warpgroup arrive",
}


class SourcePageError(Exception):
    """The source page could not be read, or not tied to the profiled launches."""


def stall_name(key: str) -> str:
    return STALL_NAMES.get(key, key.replace("_", " "))


def _number(text: str) -> float:
    cleaned = text.strip().replace(",", "")
    if cleaned in ("", "-"):
        return 0.0
    try:
        return float(cleaned)
    except ValueError:
        return 0.0


@dataclass
class SourceLine:
    """One source line's counters in one launch."""

    line: int
    samples: float  # warp-state samples of its instructions (All Samples)
    not_issued: float
    stalls: dict[str, float]  # reason ("long_sb" ...) -> samples
    ncu_text: str  # the line as ncu printed it (quotes inside may be mangled)


@dataclass
class SourceBlock:
    """One file's lines in one launch's code."""

    file: str
    function: str
    lines: list[SourceLine] = field(default_factory=list)
    has_samples: bool = True  # the header had the sampling column (SourceCounters was collected)

    @property
    def samples(self) -> float:
        return sum(line.samples for line in self.lines)


def parse_source_page(text: str) -> list[SourceBlock]:
    """The blocks of `ncu --import R --csv --page source --print-source cuda,sass`, in order."""
    blocks: list[SourceBlock] = []
    header: list[str] = []
    current: SourceBlock | None = None
    pending_file = None
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        head = row[0]
        if head == "File Path":
            pending_file = row[1] if len(row) > 1 else ""
            current, header = None, []
            continue
        if head == "Function Name":
            if pending_file is None:
                raise SourcePageError("ncu's source page has a \"Function Name\" row before any \"File Path\" row")
            current = SourceBlock(file=pending_file, function=row[1] if len(row) > 1 else "")
            blocks.append(current)
            continue
        if head == "Line No":
            header = row
            if current is not None:
                current.has_samples = ALL_SAMPLES in header
            continue
        if current is None or not header or not head.strip().isdigit():
            continue  # an instruction (no line number), or "..." between instruction runs
        current.lines.append(_line_of(row, header))
    if not blocks and text.strip():
        first = text.strip().splitlines()[0][:120]
        raise SourcePageError(f"ncu's source page has no \"File Path\" blocks (it begins: {first})")
    return blocks


def _line_of(row: list[str], header: list[str]) -> SourceLine:
    # The line number is the first cell, the metrics the last len(header) - 2: a Source cell whose quotes
    # ncu left unescaped may have been read as more than one cell.
    n = len(header) - 2
    if len(row) >= len(header):
        cells, text = row[len(row) - n:], ",".join(row[1:len(row) - n])
    else:
        cells, text = row[2:], row[1] if len(row) > 1 else ""
    metrics = dict(zip(header[2:], cells))
    stalls = {name[len("stall_"):]: _number(value) for name, value in metrics.items()
              if name.startswith("stall_") and not name.endswith("(Not Issued)")}
    return SourceLine(line=int(row[0]), samples=_number(metrics.get(ALL_SAMPLES, "")),
                      not_issued=_number(metrics.get(NOT_ISSUED_SAMPLES, "")),
                      stalls={k: v for k, v in stalls.items() if v}, ncu_text=text.strip())


@dataclass
class Launch:
    """What the raw page says of one profiled launch: its id, kernel name and sample total."""

    id: int
    name: str
    samples: float | None


def tie_to_launches(blocks: list[SourceBlock], launches: list[Launch]) -> dict[int, list[SourceBlock]]:
    """Each launch's blocks, by launch id. The page lists launches in the raw page's order, each one's
    files in turn; a launch takes blocks of its kernel until their samples reach its total (then any
    further sample-less files of its own), or, without a total, until a file comes round again."""
    tied: dict[int, list[SourceBlock]] = {}
    i = 0
    for launch in launches:
        mine: list[SourceBlock] = []
        while i < len(blocks):
            block = blocks[i]
            if block.function != launch.name or any(b.file == block.file for b in mine):
                break
            reached = launch.samples is not None and sum(b.samples for b in mine) >= launch.samples
            if reached and block.samples:
                break
            mine.append(block)
            i += 1
        got = sum(b.samples for b in mine)
        if not mine:
            raise SourcePageError(f"the source page has no lines for launch {launch.id} ({launch.name})")
        if launch.samples is not None and abs(got - launch.samples) > 0.5:
            raise SourcePageError(f"the source page's lines for launch {launch.id} ({launch.name}) hold {got:.0f} "
                                  f"warp samples, the launch {launch.samples:.0f}: they cannot be told apart")
        tied[launch.id] = mine
    if i < len(blocks):
        extra = blocks[i]
        raise SourcePageError(f"the source page has more blocks than the report has launches ({extra.function} "
                              f"in {extra.file})")
    return tied


# -- kernel.py's own words ---------------------------------------------------------------

class SourceFiles:
    """The text of the files ncu names, read once each; a line inside a statement that spans several
    lines reads as the whole statement (ncu gives a call's samples to its last line, say)."""

    def __init__(self) -> None:
        self._lines: dict[str, list[str] | None] = {}
        self._spans: dict[str, dict[int, tuple[int, int]]] = {}

    def _load(self, path: str) -> list[str] | None:
        if path not in self._lines:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError, ValueError):
                self._lines[path] = None
                return None
            self._lines[path] = text.splitlines()
            self._spans[path] = _statement_spans(text) if path.endswith(".py") else {}
        return self._lines[path]

    def text(self, path: str, line: int) -> str | None:
        """The statement at `line` of `path`, on one line; None when the file cannot be read there."""
        lines = self._load(path)
        if lines is None or not 1 <= line <= len(lines):
            return None
        first, last = self._spans[path].get(line, (line, line))
        return " ".join(" ".join(lines[n - 1].split()) for n in range(first, last + 1)).strip()


def _statement_spans(text: str) -> dict[int, tuple[int, int]]:
    """Line -> (first, last) line of the simple statement that spans it, for statements over several lines."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    spans: dict[int, tuple[int, int]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or hasattr(node, "body"):
            continue  # compound statements (def, for, if ...) read as their own line
        end = getattr(node, "end_lineno", None) or node.lineno
        if end > node.lineno:
            for n in range(node.lineno, end + 1):
                spans.setdefault(n, (node.lineno, end))
    return spans


def display_path(path: str, project_root: Path | None) -> tuple[str, bool]:
    """How a file reads in the report, and whether it is the project's own: kernel.py relative to the
    project; Triton's library from its package ("triton/language/standard.py"); else the name."""
    if project_root is not None:
        try:
            resolved, root = Path(path).resolve(), project_root.resolve()
        except (OSError, RuntimeError, ValueError):
            return _foreign(path), False
        if resolved.is_relative_to(root):
            return resolved.relative_to(root).as_posix(), True
    return _foreign(path), False


def _foreign(path: str) -> str:
    parts = Path(path).parts
    if "triton" in parts:
        return "/".join(parts[len(parts) - 1 - parts[::-1].index("triton"):])
    return Path(path).name


def _share(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 1) if whole else 0.0


def hot_lines(blocks: list[SourceBlock], project_root: Path | None, files: SourceFiles,
              top: int = TOP_LINES) -> list[dict[str, Any]]:
    """One launch's `top` lines by warp-state samples, as JSON-ready dicts (see the plugin's README)."""
    total = sum(b.samples for b in blocks)
    merged: dict[tuple[str, int], dict[str, Any]] = {}
    for block in blocks:
        for line in block.lines:
            entry = merged.setdefault((block.file, line.line), {"samples": 0.0, "not_issued": 0.0, "stalls": {},
                                                                 "ncu_text": line.ncu_text})
            entry["samples"] += line.samples
            entry["not_issued"] += line.not_issued
            for reason, count in line.stalls.items():
                entry["stalls"][reason] = entry["stalls"].get(reason, 0.0) + count
    ranked = sorted(((k, v) for k, v in merged.items() if v["samples"] > 0),
                    key=lambda kv: (-kv[1]["samples"], kv[0]))[:top]
    out = []
    for (path, number), entry in ranked:
        shown, own = display_path(path, project_root)
        reasons = sorted(entry["stalls"].items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_LINE_REASONS]
        text = files.text(path, number)
        out.append({
            "file": path, "path": shown, "line": number, "in_project": own,
            "samples": int(entry["samples"]), "share_pct": _share(entry["samples"], total),
            "not_issued_samples": int(entry["not_issued"]),
            "stalls": [{"reason": stall_name(r), "samples": int(n), "share_pct": _share(n, entry["samples"])}
                       for r, n in reasons],
            "text": text if text is not None else " ".join(entry["ncu_text"].split()),
        })
    return out


def kernel_stalls(metrics: dict[str, Any], top: int = TOP_KERNEL_REASONS) -> list[dict[str, Any]]:
    """The launch's top stall reasons from the raw page's sampling metrics (the same samples as the lines')."""
    counts = {name[len(RAW_STALL_PREFIX):]: value for name, value in metrics.items()
              if name.startswith(RAW_STALL_PREFIX) and not name.endswith("_not_issued") and isinstance(value, float)}
    total = sum(counts.values())
    ranked = sorted(((r, n) for r, n in counts.items() if n > 0), key=lambda kv: (-kv[1], kv[0]))[:top]
    return [{"reason": stall_name(r), "samples": int(n), "share_pct": _share(n, total)} for r, n in ranked]


# -- the report's lines -------------------------------------------------------------------

def _pct(value: float) -> str:
    if 0 < value < 1:
        return "<1%"
    return f"{value:.0f}%"


def _clip(text: str, width: int = TEXT_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def describe_hot_lines(record: dict[str, Any]) -> list[str]:
    """The lines a launch's samples and hot lines get in the summary (nothing when lines were not asked for)."""
    out: list[str] = []
    samples = record.get("warp_samples")
    stalls = record.get("stall_reasons") or []
    if samples is not None:
        reasons = ", ".join(f"{s['reason']} {_pct(s['share_pct'])}" for s in stalls)
        out.append(f"    warp samples {samples:,}" + (f"; stalls: {reasons}" if reasons else ""))
    lines = record.get("hot_lines")
    if lines is None:
        if record.get("hot_lines_unavailable"):
            out.append(f"    hot lines: {record['hot_lines_unavailable']}")
        return out
    if not lines:
        out.append("    hot lines: no warp sample fell on a source line")
        return out
    if samples is not None and samples < FEW_SAMPLES:
        out.append(f"    hot lines (only {samples} samples: each share is rough):")
    else:
        out.append("    hot lines:")
    width = max(len(f"{h['path']}:{h['line']}") for h in lines)
    for hot in lines:
        where = f"{hot['path']}:{hot['line']}"
        stalls_text = ", ".join(f"{s['reason']} {_pct(s['share_pct'])}" for s in hot["stalls"])
        out.append(f"      {where:<{width}}  {_pct(hot['share_pct']):>4} of samples"
                   + (f"  (stall: {stalls_text})" if stalls_text else "") + f"  {_clip(hot['text'])}")
    return out
