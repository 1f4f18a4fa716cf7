"""benchmarks/RESULTS.md is written section by section by the benchmark scripts: each replaces its own section
and no other (training.py's section once replaced scaffolds.py's, the H100 and H200 tables lost with it)."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def scaffolds_script():
    """benchmarks/scaffolds.py as a module, imported as the script runs: beside its sibling modules (child_env)."""
    spec = importlib.util.spec_from_file_location("bench_scaffolds", ROOT / "benchmarks" / "scaffolds.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


RESULTS = """# Benchmark results

## 7. The scaffolds on their hard shapes (`scaffolds.py`)

the H100 table

### 7b. The same table on an H200

the H200 table

## 10. The training scaffolds: forward, backward and both (`training.py`)

old training figures

## 11. Something else

kept as it was
"""


def test_a_section_replaces_only_its_own_title(tmp_path):
    put_section = scaffolds_script().put_section
    results = tmp_path / "RESULTS.md"
    results.write_text(RESULTS)
    put_section(results, "## 10. The training scaffolds: forward, backward and both (`training.py`)\n\nnew training "
                         "figures\n")
    text = results.read_text()
    assert "the H100 table" in text and "the H200 table" in text  # section 7 and its 7b are untouched
    assert "old training figures" not in text and "new training figures" in text
    assert text.index("new training figures") < text.index("## 11. Something else") and "kept as it was" in text

    put_section(results, scaffolds_script().SECTION_TITLE + "\n\nthe new table\n")
    text = results.read_text()
    assert "the H100 table" not in text and "the H200 table" not in text and "the new table" in text
    assert text.count("## 7.") == 1 and "new training figures" in text and "kept as it was" in text


def test_a_new_section_is_added_at_the_end_and_a_section_needs_a_title(tmp_path):
    put_section = scaffolds_script().put_section
    results = tmp_path / "RESULTS.md"
    results.write_text(RESULTS)
    put_section(results, "## 16. A new study\n\nits figures\n")
    text = results.read_text()
    assert text.startswith(RESULTS.rstrip("\n")) and text.endswith("## 16. A new study\n\nits figures\n")
    with pytest.raises(ValueError):
        put_section(results, "figures without a title\n")
    assert results.read_text() == text
