"""Reading compute-sanitizer's output. Pure Python, no GPU.

Every line the tool prints starts with "=========". A report is a headline followed by indented
detail lines and ends at a blank one:

    ========= Invalid __global__ read of size 4 bytes
    =========     at add_kernel+0xb0 in kernel.py:9
    =========     by thread (107,0,0) in block (7,0,0)
    =========     Access to 0x7f70be803fac is out of bounds
    =========     and is 13 bytes after the nearest allocation at 0x7f70be803000 of size 4,000 bytes
    =========
    ...
    ========= ERROR SUMMARY: 24 errors

initcheck says "Uninitialized __global__ memory read of size 4 bytes", racecheck
"Error: Race reported between Write access at ... and Read access at ...", and a CUDA call
that failed "Program hit cudaErrorLaunchFailure (error 719) due to ... on CUDA API call to ...".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

PREFIX = "========="
_AT = re.compile(r"^at (?P<kernel>[^\s+]+)(?:\+0x[0-9a-f]+)? in (?P<location>.+)$")
_THREAD = re.compile(r"^by thread (?P<thread>\(\d+,\d+,\d+\)) in block (?P<block>\(\d+,\d+,\d+\))")
_ERRORS = re.compile(r"^ERROR SUMMARY: (?P<n>[\d,]+) errors?(?P<unprinted> were not printed)?")
_HAZARDS = re.compile(r"^RACECHECK SUMMARY: (?P<n>[\d,]+) hazards? displayed \((?P<errors>[\d,]+) errors?, "
                      r"(?P<warnings>[\d,]+) warnings?\)")
_RACE = re.compile(r"access at (?P<kernel>.+?)\+0x[0-9a-f]+ in (?P<location>\S+)")
_TOOL_MESSAGE = re.compile(r"^(Error|Warning|Internal Sanitizer Error): (?!Race reported)")


@dataclass
class SanitizerReport:
    """One error (or hazard) the tool reported: its headline and what it said about it."""

    headline: str
    details: list[str] = field(default_factory=list)

    def _detail(self, pattern: re.Pattern[str], group: str) -> str:
        for line in self.details:
            match = pattern.match(line)
            if match:
                return match.group(group)
        return ""

    @property
    def kernel(self) -> str:
        race = _RACE.search(self.headline)
        return race.group("kernel") if race else self._detail(_AT, "kernel")

    @property
    def location(self) -> str:
        """"kernel.py:40": where in the source the faulting access is (Triton keeps line info)."""
        race = _RACE.search(self.headline)
        return race.group("location") if race else self._detail(_AT, "location")

    @property
    def thread(self) -> str:
        return self._detail(_THREAD, "thread")

    @property
    def block(self) -> str:
        return self._detail(_THREAD, "block")

    @property
    def out_of_bounds_detail(self) -> str:
        """"13 bytes after the nearest allocation ... of size 4,000 bytes", for out-of-bounds accesses."""
        for line in self.details:
            if line.startswith("and is ") and "allocation" in line:
                return re.sub(r" at 0x[0-9a-f]+", "", line[len("and is "):])
        return ""

    @property
    def is_api_error(self) -> bool:
        return self.headline.startswith("Program hit ")

    def hint(self) -> str:
        if self.out_of_bounds_detail or "out of bounds" in " ".join(self.details):
            return "a missing or wrong mask?"
        if self.headline.startswith("Uninitialized"):
            return "a read of memory nothing wrote: an unwritten output read back, or other= missing on a load?"
        if "Race reported" in self.headline:
            return "a missing tl.debug_barrier() between shared-memory writes and reads?"
        return ""


@dataclass
class SanitizerOutput:
    reports: list[SanitizerReport] = field(default_factory=list)
    errors: int | None = None  # the tool's ERROR SUMMARY count (printed or not)
    unprinted: int = 0  # reports over --print-limit: counted, not shown
    hazards: int | None = None  # racecheck's RACECHECK SUMMARY count
    tool_messages: list[str] = field(default_factory=list)  # "Error: Target application terminated ..."


def sanitizer_lines(text_or_lines: str | Iterable[str]) -> list[str]:
    lines = text_or_lines.splitlines() if isinstance(text_or_lines, str) else list(text_or_lines)
    return [line.rstrip("\n") for line in lines if line.startswith(PREFIX)]


def parse_output(text_or_lines: str | Iterable[str]) -> SanitizerOutput:
    """The reports and summary in compute-sanitizer output (other lines are ignored)."""
    out = SanitizerOutput()
    current: SanitizerReport | None = None
    for raw in sanitizer_lines(text_or_lines):
        body = raw[len(PREFIX):]
        if not body.strip():
            current = None
            continue
        if body.startswith("  ") and current is not None:
            current.details.append(body.strip())
            continue
        current = None
        text = body.strip()
        errors, hazards = _ERRORS.match(text), _HAZARDS.match(text)
        if text == "COMPUTE-SANITIZER":
            continue
        if errors:
            n = int(errors.group("n").replace(",", ""))
            if errors.group("unprinted"):
                out.unprinted = n
            else:
                out.errors = n
        elif hazards:
            out.hazards = int(hazards.group("n").replace(",", ""))
        elif text.startswith(("LEAK SUMMARY", "RACECHECK SUMMARY")):
            continue
        elif _TOOL_MESSAGE.match(text):
            out.tool_messages.append(text)
        else:
            current = SanitizerReport(headline=text)
            out.reports.append(current)
    return out


@dataclass
class ReportGroup:
    """Reports alike but for the thread: one line of the summary."""

    headline: str
    kernel: str
    location: str
    count: int
    example: SanitizerReport

    def describe(self) -> str:
        where = f" in {self.kernel}" if self.kernel else ""
        where += f" at {self.location}" if self.location else ""
        first = self.example
        parts = []
        if first.thread:
            parts.append(f"first: thread {first.thread} block {first.block}")
        if first.out_of_bounds_detail:
            parts.append(first.out_of_bounds_detail)
        detail = f" ({'; '.join(parts)})" if parts else ""
        hint = first.hint()
        return f"{self.count}x {self.headline}{where}{detail}" + (f" -- {hint}" if hint else "")


def group_reports(reports: list[SanitizerReport]) -> list[ReportGroup]:
    groups: dict[tuple[str, str, str], ReportGroup] = {}
    for report in reports:
        key = (report.headline, report.kernel, report.location)
        if key in groups:
            groups[key].count += 1
        else:
            groups[key] = ReportGroup(report.headline, report.kernel, report.location, 1, report)
    return list(groups.values())
