"""The keys of the built-in checks, named without importing them (checks/ imports torch): what the parent process
needs to refuse a plugin's check whose key is taken before any worker starts, while the app and the MCP server never
load torch. tests/test_check_registry.py holds this set to the registry (checks.CHECKS)."""

BUILTIN_KEYS = frozenset({
    "structure", "dtype", "shape", "tolerance", "values", "unwritten", "nan", "deterministic",  # checks/outputs.py
    "mutated_input", "aliasing",  # checks/input_changes.py
    "triton_launched", "out_of_bounds", "torch_ops",
    "repeat_fresh_inputs", "repeat_recycled_addresses",  # checks/extra_calls.py, with the compatibility findings:
    "torch_compile", "cuda_graph", "noncontiguous", "storage_offset",
    "inputs",  # checks/weak_inputs.py (a warning)
})
