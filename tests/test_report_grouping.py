"""Failures said once for all that fail alike (reports/grouping.py): a one-constant bug fits in a screen
without -v, and -v keeps every result."""

import kernels

from workbench.core.events import CaseResult
from workbench.core.project.folder import Project
from workbench.core.run.session import RunOutcome
from workbench.reports import format_outcome
from workbench.reports.grouping import spans

CONFIGS = [f"scale_kernel: BLOCK={b}, num_warps=4, num_stages=3" for b in (64, 128, 256, 512, 1024)]


def off_by_one_percent(case, config="", rel=0.0101):
    return CaseResult(case_index=case, label=f"n={1000 + case}", status="failed", config=config, dtype="float32",
                      max_abs_err=0.09, max_rel_err=rel, rel_norm_err=0.0101, numel=1000, bad_count=880,
                      rtol=1e-5, atol=1e-5, pattern="everywhere (880 of 1000): the computation itself, not a boundary",
                      checks={"values": "failed"},
                      messages=["880 of 1000 elements outside rtol=1e-05 atol=1e-05 (the float32 floor) and past 2x "
                                "torch's own float32 error"])


def outcome_of(tmp_path, results):
    (tmp_path / "kernel.py").write_text(kernels.GOOD)
    outcome = RunOutcome(project=Project.open(tmp_path), source_hash="x", stages=["verify"])
    outcome.events += results
    return outcome


def test_a_one_constant_bug_fits_in_a_screen_and_v_keeps_every_result(tmp_path):
    results = []
    for case in range(30):
        results.append(off_by_one_percent(case, rel=0.0101 + case * 1e-4))
        results += [off_by_one_percent(case, config) for config in CONFIGS]
    results.append(CaseResult(case_index=30, label="n=1", status="passed", dtype="float32"))
    outcome = outcome_of(tmp_path, results)
    text = format_outcome(outcome)
    lines = text.splitlines()
    assert len(lines) <= 40, text
    assert sum(line.lstrip().startswith("FAIL case") for line in lines) == 2  # the worst two, in full
    assert "FAIL case 29 (n=1029); its 5 forced configs the same way" in text  # the worst: max rel 1.3e-02
    assert ("FAIL the same way (values; max rel 1.0e-02 to 1.3e-02): 28 more cases 0-27, and their 140 forced "
            "configs the same way (-v shows each)") in text
    assert "... 23 more rows (22 failing, 1 passing or skipped): -v lists every case and config" in text
    verbose = format_outcome(outcome, verbose=True)
    assert sum(line.lstrip().startswith("FAIL case") for line in verbose.splitlines()) == 180
    assert "the same way" not in verbose


def test_failures_of_another_kind_or_in_one_config_are_said_on_their_own(tmp_path):
    results = [off_by_one_percent(0), off_by_one_percent(0, CONFIGS[0])]
    results += [CaseResult(case_index=1, label="n=1001", status="passed", dtype="float32"),
                CaseResult(case_index=1, label="n=1001", status="error", config=CONFIGS[1],
                           messages=["OutOfResources: out of resource: shared memory"])]
    text = format_outcome(outcome_of(tmp_path, results))
    assert "FAIL case 0 (n=1000); its 1 forced config the same way" in text
    assert f"ERROR case 1 (n=1001) with {CONFIGS[1]}" in text and "the same way (" not in text


def test_spans_name_runs_of_cases():
    assert spans([0, 2, 3, 4, 7]) == "0, 2-4, 7" and spans([5]) == "5" and spans([]) == ""


def test_an_error_size_beside_nan_says_it_is_over_the_finite_elements_alone(tmp_path):
    """A kernel that writes NaN where the reference has numbers has no finite error there: the max printed beside
    the NaN count is the finite elements' alone, and the report and the app say so (a bare "max abs 5.8e-232"
    read as "nearly right")."""
    from rich.console import Console

    from workbench.tui.widgets.cases import result_detail

    nan = CaseResult(case_index=0, label="n=1000", status="failed", dtype="float32", max_abs_err=5.8e-232,
                     max_rel_err=1e-230, numel=1000, bad_count=141, rtol=1e-5, atol=1e-5,
                     checks={"nan": "failed"}, messages=["141 elements are NaN/Inf where the reference is not"])
    text = format_outcome(outcome_of(tmp_path, [nan]), verbose=True)
    assert "max abs over the finite elements 5.8e-232" in text, text
    (row,) = [line for line in text.splitlines() if line.lstrip().startswith("0 ")]
    assert "NaN/Inf" in row and "5.8e-232" not in row, text  # the table's cells: no size for an error without one
    console = Console(width=120, record=True)
    for part in result_detail(nan):
        console.print(part)
    assert "max abs · rel (finite)" in console.export_text()
    from workbench.tui.widgets.cases import compared_text, error_cell

    assert str(error_cell(nan, "max_abs_err")) == "NaN/Inf" and error_cell(nan, "max_rel_err").style == "red1"
    entry = {"output": "output", "dtype": "float32", "passed": False, "max_abs_err": 5.8e-232, "torch_error": None,
             "torch_dtype": None, "source": None, "multiple": None, "factor": 2.0, "rtol": 1e-5, "atol": 1e-5}
    assert compared_text({**entry, "non_finite": True}).endswith("max abs NaN/Inf")
    assert compared_text(entry).endswith("max abs 5.8e-232")  # a record from before the field: its number

    plain = off_by_one_percent(0)
    assert "over the finite" not in format_outcome(outcome_of(tmp_path, [plain]), verbose=True)
    assert error_cell(plain, "max_abs_err") == "9.0e-02"
    console = Console(width=120, record=True)
    for part in result_detail(plain):
        console.print(part)
    assert "max abs · rel " in console.export_text() and "(finite)" not in console.export_text()


def test_a_group_of_cases_that_wrote_nan_says_nan_not_a_tiny_number(tmp_path):
    """Cases that wrote NaN and fail alike are one group; its span of max rel says NaN/Inf: their finite elements'
    max (1e-228 for an exp that overflowed) said nothing."""
    def nan_case(index, rel):
        return CaseResult(case_index=index, label=f"n={index}", status="failed", dtype="float32", max_abs_err=rel,
                          max_rel_err=rel, numel=381, bad_count=150, rtol=1e-5, atol=1e-5, checks={"nan": "failed"},
                          messages=["150 elements are NaN/Inf where the reference is not (or the reverse)"])

    results = [nan_case(i, 10.0 ** (-230 + i)) for i in range(5)]
    text = format_outcome(outcome_of(tmp_path, results))
    assert "the same way (nan; max rel NaN/Inf)" in text, text
    assert "e-2" not in text.split("the same way")[1].splitlines()[0], text
