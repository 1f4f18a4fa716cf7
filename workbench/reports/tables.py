"""Small pieces both reports use: the GPUs results came from, and a plain-text table."""

from __future__ import annotations

from typing import Any


def gpus_used(results: list[Any]) -> list[str]:
    """The GPUs (GpuSlot ids) that produced these results, in order."""
    return sorted({r.gpu for r in results if r.gpu})


def text_table(rows: list[tuple[str, ...]], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
