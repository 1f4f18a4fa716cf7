"""What a run compared and by how much, said one way for the text report, the app and the MCP result: from the
CaseResult.compared entries the judge writes (verify/error_model.py says what the numbers mean). Plain data
only, no torch: the UI process reads it."""

from __future__ import annotations

from typing import Any


def describe_compared(entries: list[dict[str, Any]]) -> str:
    """The outputs compared and by how much, one line ("y 1.2x, grad x 1.0x torch's own bfloat16 error;
    budget 2x, never below the dtype's floor"), from CaseResult.compared entries of one or many cases: each
    output's worst. The text report, the app and the JSON's readers all say it this way."""
    worst: dict[str, dict[str, Any]] = {}
    for entry in entries:
        seen = worst.get(entry["output"])
        if seen is None or (entry["multiple"] or 0) > (seen["multiple"] or 0):
            worst[entry["output"]] = entry
    if not worst:
        return ""
    parts = [f"{name} {compared_words(entry)}" for name, entry in worst.items()]
    factor = next(iter(worst.values()))["factor"]
    return (f"compared: {', '.join(parts)} (at worst; budget: {factor:g}x the inputs' dtype's own error, torch's "
            f"or one more rounding of the inputs' and intermediates', never below the dtype's floor)")


def compared_words(entry: dict[str, Any]) -> str:
    """One output's error against its budget: "1.3x torch's own bfloat16 error", "0.8x a float16 rounding of the
    inputs and intermediates", "within the float32 floor"."""
    if entry["multiple"] is not None:
        if entry.get("source") == "inputs":
            return f"{entry['multiple']:.2g}x a {entry['torch_dtype']} rounding of the inputs and intermediates"
        return f"{entry['multiple']:.2g}x torch's own {entry['torch_dtype']} error"
    if not entry["passed"]:  # NaN where the reference has numbers, elements never written: said in its messages
        return "failed (see above)"
    if entry["rtol"] == 0 and entry["atol"] == 0:
        return f"exact ({entry['dtype']})"
    return f"within the {entry['dtype']} floor"
