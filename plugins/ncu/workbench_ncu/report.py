"""Reading what Nsight Compute wrote: its CSV exports and its log. Pure Python, no GPU.

    ncu --import R.ncu-rep --csv --page raw --print-units base      one row per profiled kernel,
                                                                    one column per metric, a units row
    ncu --import R.ncu-rep --csv --page details --print-units base  one row per metric or rule result;
                                                                    the rules say what limits the kernel

A report taken with ``--nvtx`` has a column holding the NVTX push/pop ranges open at each launch
("thread Domain:Push/Pop_Range:..."): the profile stage opens one naming the case, which is how a
profiled kernel is tied to the case that launched it.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from typing import Any

from workbench.commands import EXIT_ENVIRONMENT

from .events import NVTX_PREFIX
from .hotlines import describe_hot_lines

# Raw metric names (ncu 2023.1 and later) behind each figure of the summary.
DURATION = "gpu__time_duration.sum"
DRAM_PCT = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_PCT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
ACHIEVED_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"
REGISTERS = "launch__registers_per_thread"
SHARED_STATIC = "launch__shared_mem_per_block_static"
SHARED_DYNAMIC = "launch__shared_mem_per_block_dynamic"
LOCAL_LOADS = "sm__sass_inst_executed_op_local_ld.sum"
LOCAL_STORES = "sm__sass_inst_executed_op_local_st.sum"
OCCUPANCY_LIMITS = {  # blocks per SM that each resource allows; the smallest limits occupancy
    "launch__occupancy_limit_registers": "registers",
    "launch__occupancy_limit_shared_mem": "shared memory",
    "launch__occupancy_limit_warps": "warps per SM",
    "launch__occupancy_limit_blocks": "blocks per SM",
    "launch__occupancy_limit_barriers": "barriers",
}
# Asked for besides the sections: local-memory traffic is what register spills cost at run time.
EXTRA_METRICS = (LOCAL_LOADS, LOCAL_STORES)
BOTTLENECK_RULE = "SOLBottleneck"

_TIME_TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
               "second": 1e6, "s": 1e6}
_IDENTITY_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
                     "Block Size", "Grid Size", "Device", "CC")
_CASE_RANGE = re.compile(re.escape(NVTX_PREFIX) + r"(\d+|default)")


class NcuReportError(Exception):
    """An export could not be read as ncu CSV."""


@dataclass
class KernelRow:
    """One profiled kernel launch from the raw page: identity columns, then metrics in base units."""

    id: int
    name: str
    grid: str
    block: str
    device: str
    nvtx: str = ""  # the NVTX ranges open at launch, as ncu printed them
    metrics: dict[str, Any] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)

    @property
    def case_range(self) -> str | None:
        """The profile stage's NVTX range ("workbench case 12") this launch ran in, if any."""
        match = _CASE_RANGE.search(self.nvtx)
        return NVTX_PREFIX + match.group(1) if match else None

    def number(self, metric: str) -> float | None:
        value = self.metrics.get(metric)
        return value if isinstance(value, float) else None

    @property
    def duration_us(self) -> float | None:
        value = self.number(DURATION)
        if value is None:
            return None
        return value * _TIME_TO_US.get(self.units.get(DURATION, "nsecond"), 1e-3)


@dataclass
class RuleResult:
    kernel_id: int
    section: str
    rule: str
    kind: str  # "OPT", "INF", "WRN", ...
    text: str


def parse_number(text: str) -> float | str:
    """"1,234.5" -> 1234.5; text that is no number stays text."""
    cleaned = text.strip().replace(",", "")
    try:
        return float(cleaned)
    except ValueError:
        return text.strip()


def _csv_rows(text: str) -> list[list[str]]:
    """The CSV part of an export: from the header row (it starts with "ID") on."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith('"ID"'):
            return list(csv.reader(io.StringIO("\n".join(lines[i:]))))
    raise NcuReportError("no CSV header (a row starting with \"ID\") in the ncu export")


def parse_raw_page(text: str) -> list[KernelRow]:
    """Rows of `ncu --import R --csv --page raw --print-units base`, in launch order."""
    rows = _csv_rows(text)
    header, body = rows[0], rows[1:]
    units: dict[str, str] = {}
    if body and body[0] and body[0][0] == "":  # the units row
        units = {name: unit for name, unit in zip(header, body[0]) if unit}
        body = body[1:]
    kernels = []
    for row in body:
        if not row or not row[0].strip().isdigit():
            continue
        cells = dict(zip(header, row))
        nvtx = " ".join(v for k, v in cells.items() if "Range" in k and v)
        metrics = {k: parse_number(v) for k, v in cells.items()
                   if k not in _IDENTITY_COLUMNS and "Range" not in k and v != ""}
        kernels.append(KernelRow(id=int(cells["ID"]), name=cells.get("Kernel Name", ""),
                                 grid=cells.get("Grid Size", ""), block=cells.get("Block Size", ""),
                                 device=cells.get("Device", ""), nvtx=nvtx, metrics=metrics, units=units))
    return kernels


def parse_rules(text: str) -> list[RuleResult]:
    """The rule results of `ncu --import R --csv --page details` (rows whose "Rule Name" is set)."""
    rows = _csv_rows(text)
    header = rows[0]
    if "Rule Name" not in header:
        return []
    results = []
    for row in rows[1:]:
        cells = dict(zip(header, row))
        if not cells.get("Rule Name") or not cells.get("ID", "").strip().isdigit():
            continue
        results.append(RuleResult(kernel_id=int(cells["ID"]), section=cells.get("Section Name", ""),
                                  rule=cells["Rule Name"], kind=cells.get("Rule Type", ""),
                                  text=" ".join(cells.get("Rule Description", "").split())))
    return results


def first_sentence(text: str) -> str:
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    return match.group(1) if match else text


def occupancy_limiter(row: KernelRow) -> str:
    """The resource that allows the fewest blocks per SM (ncu's "Block Limit ..." rows), when occupancy
    is limited at all (theoretical occupancy under 100%)."""
    theoretical = row.number(THEORETICAL_OCCUPANCY)
    if theoretical is not None and theoretical >= 100.0:
        return ""
    limits = [(row.number(metric), what) for metric, what in OCCUPANCY_LIMITS.items()]
    known = [(value, what) for value, what in limits if value is not None]
    if not known:
        return ""
    least = min(value for value, _ in known)
    return ", ".join(what for value, what in known if value == least)


# -- the log ----------------------------------------------------------------------------

def diagnose_log(text: str, kernel_filter: str) -> tuple[int, str] | None:
    """An environment failure ncu reported in its log, as (exit code, one line), or None."""
    if "ERR_NVGPUCTRPERM" in text:
        return EXIT_ENVIRONMENT, ("ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): run as "
                                  "root, or let users profile (see https://developer.nvidia.com/ERR_NVGPUCTRPERM)")
    for line in text.splitlines():
        if line.startswith("==ERROR==") and "returned an error code" not in line:
            return EXIT_ENVIRONMENT, f"ncu failed: {line[len('==ERROR=='):].strip()}"
    if "No kernels were profiled" in text:
        seen = re.findall(r"^\s*\d+\. (\S.*)$", text.split("Available Kernels:", 1)[-1], re.MULTILINE) \
            if "Available Kernels:" in text else []
        return EXIT_ENVIRONMENT, (f"ncu profiled no kernel: none launched in the profiled call matched "
                                  f"{kernel_filter}" + (f" (it launched: {', '.join(seen)})" if seen else ""))
    return None


# -- the summary ------------------------------------------------------------------------

def _threads(block: str) -> int | None:
    numbers = [int(n) for n in re.findall(r"\d+", block)]
    if not numbers:
        return None
    total = 1
    for n in numbers:
        total *= n
    return total


def compile_facts_for(row: KernelRow, facts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The compiled variant (from the worker) this launch ran: same name, registers and warps."""
    same_name = [f for f in facts if f.get("name") == row.name]
    registers, threads = row.number(REGISTERS), _threads(row.block)
    exact = [f for f in same_name if f.get("registers") == registers and
             (threads is None or (f.get("num_warps") or 0) * 32 == threads)]
    candidates = exact or same_name
    if not candidates:
        return None
    return max(candidates, key=lambda f: f.get("spilled") or 0)


def kernel_record(row: KernelRow, case_index: int | None, case_label: str, facts: list[dict[str, Any]],
                  rules: list[RuleResult]) -> dict[str, Any]:
    """One profiled launch as the JSON-ready dict that `metrics["kernels"]` holds."""
    compiled = compile_facts_for(row, facts) or {}
    bottleneck = next((r.text for r in rules if r.kernel_id == row.id and r.rule == BOTTLENECK_RULE), "")
    local = [row.number(m) for m in EXTRA_METRICS]
    return {
        "id": row.id, "case_index": case_index, "case": case_label, "kernel": row.name,
        "grid": row.grid, "block": row.block,
        "duration_us": row.duration_us,
        "dram_pct": row.number(DRAM_PCT), "memory_pct": row.number(MEMORY_PCT), "sm_pct": row.number(SM_PCT),
        "achieved_occupancy_pct": row.number(ACHIEVED_OCCUPANCY),
        "theoretical_occupancy_pct": row.number(THEORETICAL_OCCUPANCY),
        "registers_per_thread": row.number(REGISTERS),
        "spilled_registers": compiled.get("spilled"),
        "local_memory_instructions": sum(v for v in local if v is not None) if any(v is not None for v in local)
        else None,
        "shared_static_bytes": row.number(SHARED_STATIC), "shared_dynamic_bytes": row.number(SHARED_DYNAMIC),
        "occupancy_limited_by": occupancy_limiter(row),
        "limiter": bottleneck,
        "autotune_pick": compiled.get("autotune_pick", ""),
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _bytes(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1024:.1f} KiB" if value >= 1024 else f"{value:.0f} B"


def _us(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.3f} ms" if value >= 1000 else f"{value:.2f} µs"


def describe_kernel(record: dict[str, Any]) -> list[str]:
    """The lines one profiled launch gets in the summary."""
    regs = record["registers_per_thread"]
    spilled = record["spilled_registers"]
    lines = [
        f"  {record['kernel']}  grid {record['grid']}  block {record['block']}"
        + (f"  [{record['autotune_pick']}]" if record["autotune_pick"] else ""),
        f"    time {_us(record['duration_us'])}   DRAM {_pct(record['dram_pct'])}   "
        f"SM {_pct(record['sm_pct'])} of peak   occupancy {_pct(record['achieved_occupancy_pct'])} achieved"
        f" of {_pct(record['theoretical_occupancy_pct'])} theoretical",
        f"    {'-' if regs is None else f'{regs:.0f}'} registers/thread, "
        f"{'?' if spilled is None else spilled} spilled, "
        f"shared memory {_bytes(record['shared_static_bytes'])} static + "
        f"{_bytes(record['shared_dynamic_bytes'])} dynamic per block"
        + (f"; occupancy limited by {record['occupancy_limited_by']}" if record["occupancy_limited_by"] else ""),
    ]
    if record["limiter"]:
        lines.append(f"    limiter (ncu): {first_sentence(record['limiter'])}")
    return lines + describe_hot_lines(record)
