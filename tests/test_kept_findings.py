"""A compatibility check that passed is kept by everything its finding depends on (verify/compat.finding_key,
project/kept.py): not run again while that is the same, said so with when it passed, and run again when a
project file, the case or the [verify] settings change, or with --fresh-checks. A failure is never kept.
(The checks themselves run on a GPU: test_verify_gpu.)"""

from types import SimpleNamespace

import torch

from workbench.core.project import kept as store
from workbench.core.project.config import VerifyConfig
from workbench.core.project.contract import Case
from workbench.core.project.folder import Project
from workbench.core.verify import compat
from workbench.core.verify.handoff import CaseData
from workbench.core.verify.judge import Judge


def kernel_at(folder):
    (folder / "kernel.py").write_text("x = 1\n")
    (folder / "helpers.py").write_text("y = 2\n")
    return SimpleNamespace(path=folder / "kernel.py", gradients=[],
                           kernel_fn=lambda *a: (_ for _ in ()).throw(AssertionError("a kept check ran")))


def test_a_kept_pass_is_not_run_again_and_its_key_follows_what_it_depends_on(tmp_path):
    km, case, config = kernel_at(tmp_path), Case(index=0, params={"n": 8}), VerifyConfig()
    keys = {name: compat.finding_key(km, case, config, name) for name in ("torch_compile", "cuda_graph")}
    kept = {key: {"check": name, "at": 0.0} for name, key in keys.items()}
    runs = compat.compat_runs(km, case, [torch.ones(8)], [torch.ones(8)], [], [], config, interpret=False,
                              anchors={0}, kept=compat.KeptFindings(km, config, kept))  # kernel_fn raises if called
    assert [r.kept.startswith("passed in a run at ") for r in runs] == [True, True]
    assert [r.key for r in runs] == [keys["torch_compile"], keys["cuda_graph"]]
    before = keys["torch_compile"]
    assert compat.finding_key(km, Case(index=0, params={"n": 9}), config, "torch_compile") != before
    assert compat.finding_key(km, case, VerifyConfig(fp32_precision="tf32"), "torch_compile") != before
    (tmp_path / "helpers.py").write_text("y = 3\n")  # a module kernel.py may import
    assert compat.finding_key(km, case, config, "torch_compile") != before
    (tmp_path / ".workbench").mkdir()
    (tmp_path / ".workbench" / "scratch.py").write_text("z = 1\n")  # the project's own state: not its sources
    changed = compat.finding_key(km, case, config, "torch_compile")
    (tmp_path / ".workbench" / "scratch.py").write_text("z = 2\n")
    assert compat.finding_key(km, case, config, "torch_compile") == changed


def test_a_kept_pass_is_judged_passed_and_says_so():
    run = compat.ExtraRun("torch_compile", compat=True, key="k1", kept="passed in a run at 2026-11-26 02:00 ...")
    result = Judge(VerifyConfig()).judge(
        CaseData(case_index=0, label="n=8", first=[torch.ones(4)], names=["output"], reference=[torch.ones(4)],
                 extra_runs=[run]))
    assert result.status == "passed" and result.checks["torch_compile"] == "passed"
    assert result.compat["torch_compile"]["kept"].startswith("passed in a run at")


def test_only_passes_run_in_this_run_are_kept(tmp_path):
    (tmp_path / "kernel.py").write_text("x = 1\n")
    project = Project.open(tmp_path)
    project.ensure_state_dir()
    found = {"torch_compile": {"cases": [{"status": "passed", "key": "a", "kept": ""},
                                         {"status": "failed", "key": "b", "kept": ""}]},
             "cuda_graph": {"cases": [{"status": "passed", "key": "c", "kept": "passed in a run at ..."},
                                      {"status": "passed", "key": "", "kept": ""}]}}
    store.remember_findings(project, found)
    kept = store.load_findings(project)
    assert set(kept) == {"a"} and kept["a"]["check"] == "torch_compile"
    (project.state_dir / store.FINDINGS_FILE).write_text("{not json")
    assert store.load_findings(project) == {}  # a damaged file is a miss


def test_a_kernel_in_a_large_tree_keeps_nothing_and_a_virtual_environment_is_not_hashed(tmp_path, monkeypatch):
    km, case, config = kernel_at(tmp_path), Case(index=0, params={"n": 8}), VerifyConfig()
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "env" / "lib.py").write_text("a = 1\n")
    before = compat.finding_key(km, case, config, "torch_compile")
    (tmp_path / "env" / "lib.py").write_text("a = 2\n")  # inside a virtual environment: not the project's
    assert compat.finding_key(km, case, config, "torch_compile") == before
    monkeypatch.setattr(compat, "DIGEST_MOST_FILES", 1)  # kernel.py and helpers.py: past the limit
    assert compat.finding_key(km, case, config, "torch_compile") != compat.finding_key(km, case, config,
                                                                                     "torch_compile")


def test_what_a_kept_pass_noted_is_kept_with_it_and_said_again(tmp_path):
    """A torch.compile pass that noted a scalar reaching the kernel as fp64 (verify/compiled_context.py) keeps the
    note: the run that skips the check says it again, on the case and in the record."""
    (tmp_path / "kernel.py").write_text("x = 1\n")
    project = Project.open(tmp_path)
    project.ensure_state_dir()
    note = "under torch.compile `k` receives `eps` as f64 (eagerly f32)"
    store.remember_findings(project, {"torch_compile": {"cases": [{"status": "passed", "key": "a", "kept": "",
                                                                   "notes": [note]}]}})
    assert store.load_findings(project)["a"]["notes"] == [note]
    km, case, config = kernel_at(tmp_path), Case(index=0, params={"n": 8}), VerifyConfig()
    key = compat.finding_key(km, case, config, "torch_compile")
    graph_key = compat.finding_key(km, case, config, "cuda_graph")  # kept too: neither check runs here
    kept = compat.KeptFindings(km, config, {key: store.load_findings(project)["a"],
                                            graph_key: {"check": "cuda_graph", "at": 0.0}})
    compiled = compat.compat_runs(km, case, [torch.ones(8)], [torch.ones(8)], [], [], config, interpret=False,
                                  anchors={0}, kept=kept)[0]
    assert compiled.kept and compiled.notes == [note]
    result = Judge(VerifyConfig()).judge(
        CaseData(case_index=0, label="n=8", first=[torch.ones(4)], names=["output"], reference=[torch.ones(4)],
                 extra_runs=[compiled]))
    assert result.compat["torch_compile"]["notes"] == [note] and f"torch_compile: {note}" in result.notes
