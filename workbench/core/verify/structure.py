"""Outputs matched by name: a kernel's result against reference_fn's, through the names flatten_outputs gives
(a plain tensor "", a tuple's entry "[0]", a dict's "['y']"). A dict built in another key order is the same
result; a missing or extra key, or another container, is a structure failure naming both."""

from __future__ import annotations


def paired_by_name(names: list[str], reference_names: list[str], count: int, reference_count: int
                   ) -> tuple[list[int | None], list[str]]:
    """For each reference output, the index of the kernel's output of the same name (a dict's key, a tuple's
    position: tensors.flatten_outputs), None where it has none; and what differs in the structure. Without the
    reference's names (a caller that has none), outputs pair by position."""
    if not reference_names or len(reference_names) != reference_count or len(names) != count:
        problems = [] if count == reference_count else [f"kernel_fn returned {count} tensors, reference_fn "
                                                        f"{reference_count}"]
        return [j if j < count else None for j in range(reference_count)], problems
    where = {name: i for i, name in enumerate(names)}
    order = [where.get(name) for name in reference_names]
    missing = [name for name, i in zip(reference_names, order) if i is None]
    known = set(reference_names)
    extra = [name for name in names if name not in known]
    if not missing and not extra:
        return order, []
    return order, [f"the output structure differs from reference_fn's: kernel_fn returned "
                   f"{describe_structure(names)}, reference_fn {describe_structure(reference_names)}"
                   + (f"; missing {', '.join(shown(n) for n in missing)}" if missing else "")
                   + (f"; not in the reference: {', '.join(shown(n) for n in extra)}" if extra else "")]


def describe_structure(names: list[str]) -> str:
    """What flatten_outputs' names say about a result: a tensor (""), a sequence ("[0]"), a dict ("['y']")."""
    if names == [""]:
        return "a plain tensor"
    if not names:
        return "no tensor"
    if all(n.startswith("['") or n.startswith('["') for n in names):
        return f"a dict of {len(names)} ({', '.join(shown(n) for n in names)})"
    return f"{len(names)} tensors ({', '.join(shown(n) for n in names)})"


def shown(name: str) -> str:
    """An output's name as a reader writes it: output['y'] -> 'y', output[0] -> [0], a plain tensor -> output."""
    if not name:
        return "output"
    return name[1:-1] if name.startswith("[") and name.endswith("]") and name[1:2] in "'\"" else name


def output_label(name: str) -> str:
    """An output's name in a report: output, y (a dict's key), output[1] (a tuple's), grad x (a gradient)."""
    if name.startswith("['out']"):  # a training kernel's forward result (gradients.with_gradients)
        name = name[len("['out']"):]
    if name.startswith("['") and name.endswith("']") and name.count("['") == 1:
        return name[2:-2]
    return "output" + name
