"""`workbench new`: templates, known names, name validation, never overwriting."""

import json

import pytest

from workbench.core.project.scaffold import (
    FAMILIES,
    Catalog,
    ScaffoldError,
    builtin_scaffolds,
    create_project,
    validate_name,
)

KNOWN = ["rmsnorm", "layernorm", "softmax", "gelu", "silu_mul", "swiglu", "add", "matmul", "gemm", "attention"]


@pytest.fixture(scope="module")
def catalog():
    return Catalog(builtin_scaffolds())


@pytest.mark.parametrize("name,family", [("rmsnorm", "row"), ("layernorm", "row"), ("softmax", "row"),
                                         ("gelu", "elementwise"), ("silu_mul", "elementwise"),
                                         ("swiglu", "elementwise"), ("add", "elementwise"),
                                         ("matmul", "gemm"), ("gemm", "gemm"), ("attention", "attention")])
def test_known_names_pick_their_family(catalog, name, family):
    assert catalog.choose(name, None).family == family


def test_every_family_has_a_template(catalog):
    for family in FAMILIES:
        assert catalog.template(family).family == family


def test_unknown_name_without_template_is_refused_with_the_lists(catalog):
    with pytest.raises(ScaffoldError) as err:
        catalog.choose("frobnicate", None)
    text = str(err.value)
    assert "--template" in text and "elementwise" in text and "rmsnorm" in text


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "a\\b", "../x", "1abc", "with space", "class", "x" * 65,
                                 "naïve"])
def test_bad_names_are_refused(bad):
    with pytest.raises(ScaffoldError):
        validate_name(bad)


def test_template_render_renames_identifiers(catalog, tmp_path):
    target = create_project("fused_thing", tmp_path, catalog.choose("fused_thing", "row"))
    # a known op's name with --template is the template asked for (it was the op's scaffold, silently)
    assert catalog.choose("rmsnorm", "row") == catalog.template("row") != catalog.choose("rmsnorm", None)
    text = (target / "kernel.py").read_text()
    template = catalog.template("row")
    assert template.rename not in text.replace("fused_thing", "")  # no identifier left with the old name
    assert "fused_thing" in text
    compile(text, "kernel.py", "exec")


def test_existing_project_is_never_overwritten(cli, tmp_path):
    code, out, err = cli("new", "rmsnorm", "--dir", tmp_path)
    assert code == 0
    kernel = tmp_path / "rmsnorm" / "kernel.py"
    kernel.write_text("# my edits\n")
    code, out, err = cli("new", "rmsnorm", "--dir", tmp_path)
    assert code == 2 and "already exists" in err
    assert kernel.read_text() == "# my edits\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rmsnorm"]  # no staging folder left behind


def test_new_writes_kernel_and_settings(cli, tmp_path):
    code, out, err = cli("new", "matmul", "--dir", tmp_path)
    assert code == 0, err
    names = sorted(p.name for p in (tmp_path / "matmul").iterdir())
    assert names == [".gitignore", "AGENTS.md", "kernel.py", "workbench.toml"]
    guide = (tmp_path / "matmul" / "AGENTS.md").read_text()
    assert guide.startswith("# matmul: notes for coding agents") and "{project}" not in guide
    assert "workbench verify matmul --json" in guide and "workbench bench matmul --json" in guide


def test_new_refuses_bad_name_and_unknown_template_with_exit_2(cli, tmp_path):
    assert cli("new", "../evil", "--dir", tmp_path)[0] == 2
    assert cli("new", "thing", "--template", "nope", "--dir", tmp_path)[0] == 2
    assert cli("new", "frobnicate", "--dir", tmp_path)[0] == 2
    assert list(tmp_path.iterdir()) == []


def _verify_project(cli, path):
    code, out, err = cli("verify", path, "--json")
    record = json.loads(out)["projects"][0]
    return code, record


# rmsnorm (the demo's op) stays in the fast lane; the other ops repeat the same end-to-end check. The GEMM and
# attention scaffolds are templates too: test_each_template_renamed_verifies_green verifies them, renamed.
@pytest.mark.parametrize("name", ["rmsnorm", *(pytest.param(name, marks=pytest.mark.slow) for name in
                                              ["layernorm", "softmax", "gelu", "silu_mul", "add",
                                               "layernorm_train", "softmax_train", "silu_mul_train",
                                               "cross_entropy_train", "attention_train"])])
def test_known_op_scaffolds_verify_green(cli, tmp_path, name):
    cli("new", name, "--dir", tmp_path)
    code, record = _verify_project(cli, tmp_path / name)
    bad = [c for c in record["cases"] if c["status"] != "passed"]
    assert code == 0, (bad, record["problems"])
    assert record["counts"]["passed"] >= 4


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.slow
def test_each_template_renamed_verifies_green(cli, tmp_path, family):
    cli("new", f"my_{family}", "--template", family, "--dir", tmp_path)
    code, record = _verify_project(cli, tmp_path / f"my_{family}")
    assert code == 0, ([c for c in record["cases"] if c["status"] != "passed"], record["problems"])


def test_scaffold_cases_cover_dtypes_and_odd_shapes(catalog):
    import ast

    for scaffold in catalog.scaffolds:
        text = (scaffold.directory / "kernel.py").read_text()
        tree = ast.parse(text)
        names = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
                 if isinstance(t, ast.Name)} | {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        for required in ("kernel_fn", "reference_fn", "get_inputs", "CASES", "flops", "bytes_moved"):
            assert required in names, (scaffold.name, required)
        assert '"purpose": "bench"' in text or "purpose=\"bench\"" in text, scaffold.name
        for dtype in ("float16", "bfloat16"):
            assert dtype in text, (scaffold.name, dtype)
        assert ast.get_docstring(tree), f"{scaffold.name}: kernel.py needs a header docstring"


def test_shipped_example_projects_are_the_verified_scaffolds():
    """projects/ holds `workbench new` output of scaffolds this suite verifies green (rmsnorm and softmax as known
    ops, matmul as the gemm template renamed), and test_shipped_example_projects_are_what_workbench_new_makes holds
    them equal: verifying the copies again would repeat those runs."""
    from pathlib import Path

    projects = Path(__file__).resolve().parents[1] / "projects"
    shipped = sorted(p for p in projects.iterdir() if (p / "kernel.py").is_file())
    assert [p.name for p in shipped] == ["matmul", "rmsnorm", "softmax"]


def test_shipped_example_projects_are_what_workbench_new_makes(catalog):
    """projects/ holds `workbench new <name>` output: a scaffold's change must reach its shipped copy too."""
    from pathlib import Path

    from workbench.core.project.scaffold import render

    projects = Path(__file__).resolve().parents[1] / "projects"
    for folder in sorted(p for p in projects.iterdir() if (p / "kernel.py").is_file()):
        made = render(catalog.choose(folder.name, None), folder.name)
        shipped = {name: (folder / name).read_text(encoding="utf-8") for name in made}
        assert shipped == made, f"projects/{folder.name} differs from `workbench new {folder.name}`"


def test_backward_picks_the_ops_training_scaffold_which_verifies_with_its_gradients(cli, catalog, tmp_path):
    assert catalog.choose("rmsnorm", None, backward=True).name == "rmsnorm_train"
    assert catalog.choose("my_norm", "layernorm", backward=True).name == "layernorm_train"
    assert catalog.choose("swiglu", None, backward=True).name == "silu_mul_train"
    assert catalog.choose("cross_entropy", None, backward=True).name == "cross_entropy_train"
    assert catalog.choose("sdpa", None, backward=True).name == "attention_train"
    assert catalog.choose("rmsnorm_train", None, backward=True).name == "rmsnorm_train"
    code, out, err = cli("new", "rmsnorm", "--backward", "--dir", tmp_path)
    assert code == 0 and "rmsnorm_train scaffold" in out
    source = (tmp_path / "rmsnorm" / "kernel.py").read_text()
    assert "def rmsnorm_bwd_kernel" in source and "rmsnorm_train" not in source
    code, record = _verify_project(cli, tmp_path / "rmsnorm")
    assert code == 0, ([c for c in record["cases"] if c["status"] != "passed"], record["problems"])
    assert record["counts"]["passed"] >= 4
    # each case's call ran the forward's kernel and the backward's (rows, then dw's partial sums)
    assert all(c["launches"] >= 2 for c in record["cases"] if not c["config"] and c["status"] == "passed")


def test_backward_without_a_training_scaffold_is_refused_with_the_list(cli, tmp_path):
    code, out, err = cli("new", "gelu", "--backward", "--dir", tmp_path)
    assert code == 2 and not (tmp_path / "gelu").exists()
    text = out + err
    assert "no training scaffold for 'gelu'" in text and "rmsnorm" in text and "cross_entropy" in text


def test_a_new_project_and_its_files_are_readable_by_a_teammate(tmp_path):
    """Issue 44: the project folder came out 0700 (mkdtemp's), files written atomically 0600 (mkstemp's)."""
    import os
    import stat

    from workbench.core.fsutil import atomic_write_text, current_umask

    old = os.umask(0o022)
    try:
        assert current_umask() == 0o022
        target = create_project("rmsnorm", tmp_path, Catalog.installed().choose("rmsnorm", None))
        assert stat.S_IMODE(target.stat().st_mode) == 0o755
        assert stat.S_IMODE((target / "kernel.py").stat().st_mode) == 0o644
        report = tmp_path / "report.xml"
        atomic_write_text(report, "x")
        assert stat.S_IMODE(report.stat().st_mode) == 0o644
        report.chmod(0o600)  # a mode the user chose is kept
        atomic_write_text(report, "y")
        assert stat.S_IMODE(report.stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_a_project_is_found_by_name_where_agents_md_readers_are(tmp_path, monkeypatch):
    """Issue 44, item 7: AGENTS.md says `workbench verify swish --json`; that failed anywhere but in projects/."""
    from workbench.core.project.folder import Project, ProjectError

    create_project("swish", tmp_path / "projects", Catalog.installed().choose("swish", "elementwise"))
    create_project("other", tmp_path / "projects", Catalog.installed().choose("other", "row"))
    expected = (tmp_path / "projects" / "swish").resolve()
    for where in (tmp_path, tmp_path / "projects", tmp_path / "projects" / "swish", tmp_path / "projects" / "other"):
        monkeypatch.chdir(where)
        assert Project.open("swish").root == expected, where
    monkeypatch.chdir(tmp_path / "projects" / "swish")
    with pytest.raises(ProjectError, match="nowhere: no such file or folder"):
        Project.open("nowhere")
