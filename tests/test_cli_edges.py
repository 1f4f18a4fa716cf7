"""Bad input at the edges of the CLI: each is one line and a distinct exit code, never a traceback, and
nothing of the user's is written or lost. Configuration values, --timeout, `workbench new`'s names and
folders, a closed stdout, history/diff inside a project, `make demo`."""

import os
import pty
import shutil
import subprocess
import sys
import time
from pathlib import Path

import kernels
import pytest

from workbench.core.project.config import ConfigError, ProjectConfig

ROOT = Path(__file__).resolve().parents[1]
LONG = "a" * 300  # over the 255 bytes a file name may have


def _no_traceback(*texts):
    return all("Traceback" not in t for t in texts)


def _argument_error(capsys, *args):
    """`workbench ARGS` refused by argument parsing (argparse exits): (exit code, stderr)."""
    from workbench.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main([str(a) for a in args])
    return exited.value.code, capsys.readouterr().err


# -- 1. configuration values ---------------------------------------------------------------

@pytest.mark.parametrize("data, key", [
    ({"tolerance": {"float32": {"rtol": float("nan")}}}, "tolerance.float32.rtol"),
    ({"tolerance": {"bfloat16": {"atol": float("inf")}}}, "tolerance.bfloat16.atol"),
    ({"tolerance": {"float16": {"rel_norm": float("-inf")}}}, "tolerance.float16.rel_norm"),
    ({"tolerance": {"tf32": {"rtol": -1e-3}}}, "tolerance.tf32.rtol"),
    ({"verify": {"interpret_timeout_s": float("nan")}}, "verify.interpret_timeout_s"),
    ({"verify": {"timeout_s": float("inf")}}, "verify.timeout_s"),
    ({"verify": {"timeout_s": -5}}, "verify.timeout_s"),
    ({"verify": {"timeout_s": 1e12}}, "verify.timeout_s"),  # would overflow the threading module's wait
    ({"bench": {"timeout_s": float("nan")}}, "bench.timeout_s"),
    ({"bench": {"rep_ms": float("inf")}}, "bench.rep_ms"),
    ({"verify": {"max_generated_cases": True}}, "verify.max_generated_cases"),  # a bool is not a number
])
def test_config_refuses_non_finite_negative_and_non_numbers_naming_the_key(data, key):
    with pytest.raises(ConfigError) as raised:
        ProjectConfig.from_dict(data, "w.toml")
    assert f"[{key}]" in str(raised.value) and "w.toml" in str(raised.value)


def test_config_zero_timeouts_mean_no_limit_and_are_accepted():
    config = ProjectConfig.from_dict({"verify": {"timeout_s": 0, "interpret_timeout_s": 0},
                                      "bench": {"timeout_s": 0}})
    assert config.verify.timeout_s == 0 and config.verify.interpret_timeout_s == 0 and config.bench.timeout_s == 0


@pytest.mark.parametrize("toml, key", [
    ("[tolerance.float32]\nrtol = nan\n", "tolerance.float32.rtol"),
    ("[tolerance.float32]\natol = inf\n", "tolerance.float32.atol"),
    ("[verify]\ninterpret_timeout_s = nan\n", "verify.interpret_timeout_s"),
    ("[verify]\ntimeout_s = -inf\n", "verify.timeout_s"),
])
def test_verify_with_a_bad_number_in_workbench_toml_exits_2_naming_the_key(cli, make_project, toml, key):
    code, out, err = cli("verify", make_project(kernels.GOOD, toml=toml))
    assert code == 2, out + err
    assert f"[{key}]" in out and "NOT USABLE" in out
    assert _no_traceback(out, err)


@pytest.mark.parametrize("toml, says", [
    ("[tolerances.float32]\nrtol = 0.1\n", "unknown table [tolerances] (known: [verify], [tolerance], [bench], [history]); "
                                           "did you mean [tolerance]?"),
    ("[verfiy]\ntimeout_s = 5\n", "did you mean [verify]?"),
    ("timeout_s = 5\n", "a key outside any table (tables: [verify], [tolerance], [bench], [history]); did you mean [verify] "
                        "timeout_s?"),
    ("[verify]\ntimout_s = 5\n", "unknown key (did you mean timeout_s?)"),
])
def test_a_typo_in_workbench_toml_is_never_ignored_and_names_the_closest_known(cli, make_project, toml, says):
    """Issue 44: a typo'd table or a top-level key verified green with the defaults in force."""
    code, out, err = cli("verify", make_project(kernels.GOOD, toml=toml))
    assert code == 2 and says in out and "NOT USABLE" in out, out + err
    assert _no_traceback(out, err)


def test_a_plugin_claims_its_own_workbench_toml_table(make_project):
    import workbench
    from workbench.core.project.config import load_config
    from workbench.plugins import make_plugin_manager

    folder = make_project(kernels.GOOD, toml="[verify]\ntimeout_s = 5\n[mytool_claimed]\nlevel = 3\n")
    with pytest.raises(ConfigError, match=r"unknown table \[mytool_claimed\]"):
        load_config(folder / "workbench.toml")

    class Claims:
        @workbench.hookimpl
        def workbench_register_config_tables(self, register):
            register("mytool_claimed")

    make_plugin_manager(autoload=False).register(Claims(), name="claims")
    assert load_config(folder / "workbench.toml").extra == {"mytool_claimed": {"level": 3}}


@pytest.mark.parametrize("command", ["verify", "bench"])
@pytest.mark.parametrize("value, says", [
    ("-5", "above 0"), ("0", "above 0"), ("nan", "finite"), ("inf", "finite"), ("-inf", "finite"),
    ("1e12", "at most"), ("soon", "a number of seconds"),
])
def test_timeout_option_refuses_what_is_not_a_positive_finite_number(capsys, make_project, monkeypatch, command,
                                                                    value, says):
    monkeypatch.setenv("WORKBENCH_DISABLE_PLUGIN_AUTOLOAD", "1")
    code, err = _argument_error(capsys, command, f"--timeout={value}", make_project(kernels.GOOD))
    assert code == 2
    assert f"workbench {command}: error: argument --timeout: " in err and says in err and repr(value) in err
    assert _no_traceback(err)


# -- 3. workbench new ------------------------------------------------------------------------

def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("args", [
    [LONG], [LONG, "--template", "row"], ["x", "--template", LONG],
])
def test_new_refuses_a_name_or_argument_over_255_bytes(cli, tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("new", *args)
    assert code == 2 and "workbench new: " in err and len(err.strip().splitlines()) == 1
    assert "(300 characters)" in err
    assert _no_traceback(out, err) and _tree(tmp_path) == []


def test_new_refuses_a_dir_that_is_a_file(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("mine\n")
    code, out, err = cli("new", "x", "--template", "row", "--dir", "afile")
    assert code == 2 and "afile is a file, not a folder; nothing was written" in err
    assert _no_traceback(out, err)
    assert _tree(tmp_path) == ["afile"] and (tmp_path / "afile").read_text() == "mine\n"


@pytest.mark.parametrize("where", ["/proc", "/proc/no/such", "DEEP/" + LONG])
def test_new_refuses_a_dir_it_cannot_write_and_leaves_nothing(cli, tmp_path, monkeypatch, where):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("new", "x", "--template", "row", "--dir", where)
    assert code == 2 and "workbench new: cannot create " in err and "nothing was written" in err
    assert _no_traceback(out, err)
    assert _tree(tmp_path) == []  # not even DEEP/, made on the way


@pytest.mark.parametrize("name, says", [
    ("torch", "would shadow"), ("triton", "would shadow"), ("numpy", "would shadow"), ("tl", "would shadow"),
    ("json", "standard library"), ("math", "standard library"), ("os", "standard library"),
    ("max", "builtin"), ("get_inputs", "already has `get_inputs`"), ("kernel_fn", "already has `kernel_fn`"),
    ("MAX_FUSED_BYTES", "already has"), ("__name__", "Python's"),
])
def test_new_refuses_names_its_launcher_would_shadow(cli, tmp_path, monkeypatch, name, says):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("new", name, "--template", "row")
    assert code == 2 and says in err, err
    assert _no_traceback(out, err) and _tree(tmp_path) == []


def test_new_still_renames_an_ordinary_name(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("new", "mynorm", "--template", "row")
    assert code == 0, err
    assert "def mynorm(" in (tmp_path / "projects" / "mynorm" / "kernel.py").read_text()


def _closed_stdout_run(*args, cwd):
    """`workbench ARGS` with stdout a pipe whose reader has already gone (`| head -1`, deterministic)."""
    read, write = os.pipe()
    os.close(read)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKBENCH_DISABLE_PLUGIN_AUTOLOAD": "1"}
    try:
        proc = subprocess.run([sys.executable, "-m", "workbench", *args], stdout=write, stderr=subprocess.PIPE,
                              text=True, cwd=cwd, env=env, timeout=120)
    finally:
        os.close(write)
    return proc.returncode, proc.stderr


def test_a_closed_stdout_exits_141_quietly_and_keeps_what_was_done(tmp_path):
    code, err = _closed_stdout_run("new", "matmul", cwd=tmp_path)
    assert code == 141 and err == "", err
    assert sorted(p.name for p in (tmp_path / "projects" / "matmul").iterdir()) == [
        ".gitignore", "AGENTS.md", "kernel.py", "workbench.toml"]  # the project is whole


def test_a_broken_pipe_in_any_command_is_caught_in_process(monkeypatch, tmp_path):
    from workbench.cli import main

    class Gone:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setenv("WORKBENCH_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdout", Gone())
    assert main(["new", "--list"]) == 141
    assert main(["plugins"]) == 141


def test_a_long_argument_does_not_break_the_project_hint():
    from workbench.cli import _project_dir_hint

    assert _project_dir_hint(["history", LONG]) in (None, Path.cwd())


# -- 4. history and diff inside a project ----------------------------------------------------

def _two_runs(project_dir: Path) -> list[str]:
    from workbench.core.project.folder import Project, source_hash
    from workbench.core.project.history import append_record

    project = Project.open(project_dir)
    ids = []
    for n, source in enumerate((kernels.GOOD, kernels.GRID_SHORT)):
        (project_dir / "kernel.py").write_text(source)
        record = append_record(project, {"id": f"run{n}", "source_hash": source_hash(source.encode()),
                                         "stages": ["verify"], "verdict": "passed" if n == 0 else "failed",
                                         "counts": {"passed": 3 - 2 * n, "failed": n, "errors": 0, "skipped": 0},
                                         "problems": []}, source)
        ids.append(record.id)
        time.sleep(0.01)
    return ids


def test_history_and_diff_default_to_this_folders_project(cli, make_project, monkeypatch):
    project = make_project(kernels.GOOD, name="projects/hist")
    first, second = _two_runs(project)
    monkeypatch.chdir(project)
    code, out, err = cli("history")
    assert code == 0, err
    assert [line.split()[0] for line in out.strip().splitlines()] == [first, second, "hist:"]  # then its size
    code, out, err = cli("history", "-n", "1")
    assert code == 0 and out.split()[0] == second
    code, out, err = cli("diff")
    assert code == 0, err
    assert out.startswith(f"{first} (VERIFIED) -> {second} (FAILED)") and "n // meta" in out
    code, out, err = cli("diff", second, first)  # the runs, first: no project named
    assert code == 0, err
    assert out.startswith(f"{second} (FAILED) -> {first} (VERIFIED)")
    code, out, err = cli("diff", "0")  # one run: against the latest
    assert code == 0 and out.startswith(f"{first} (VERIFIED) -> {second} (FAILED)")
    code, out, err = cli("diff", ".", "-1", "-2")  # naming the project still works
    assert code == 0 and out.startswith(f"{second} (FAILED) -> {first} (VERIFIED)")
    code, out, err = cli("diff", "nope", "-1", "-2")
    assert code == 2 and "nope: not a project" in err and _no_traceback(out, err)


def test_history_and_diff_outside_a_project_say_so_with_exit_2(cli, capsys, make_project, tmp_path,
                                                                 monkeypatch):
    make_project(kernels.GOOD, name="projects/rmsnorm")
    monkeypatch.chdir(tmp_path)
    for command in ("history", "diff"):
        code, out, err = cli(command)
        assert code == 2
        assert f"no project given and this folder is not one (no kernel.py here); name it: workbench {command} " \
               "PROJECT (projects/rmsnorm)" in err
        assert _no_traceback(out, err)
    code, err = _argument_error(capsys, "history", "-n", "0", "projects/rmsnorm")
    assert code == 2 and "argument -n: expected 1 or more" in err
    code, out, err = cli("history", LONG)
    assert code == 2 and "File name too long" in err and _no_traceback(out, err)


# -- 6. make demo ------------------------------------------------------------------------------

def _make_demo(tmp_path: Path, terminal: bool) -> str:
    """`make demo` with a stand-in .venv whose workbench says how it was called; on a terminal or not."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "calls"
    script = venv / "bin" / "workbench"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n")
    script.chmod(0o755)
    os.symlink(sys.executable, venv / "bin" / "python")
    later = time.time() + 3600  # newer than the pyproject files: no set-up
    os.utime(script, (later, later))
    demo = tmp_path / "projects" / "rmsnorm"
    demo.mkdir(parents=True)
    (demo / "kernel.py").write_text(kernels.GOOD)
    command = ["make", "-s", "-C", str(ROOT), "demo", f"VENV={venv}", f"DEMO={demo}"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no GPU, as on this machine
    if terminal:
        main_fd, sub_fd = pty.openpty()
        try:
            subprocess.run(command, stdin=sub_fd, stdout=sub_fd, stderr=sub_fd, env=env, timeout=120, check=True)
        finally:
            os.close(sub_fd)
            os.close(main_fd)
    else:
        subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=120, check=True)
    return log.read_text().strip()


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_opens_the_app_on_a_terminal_even_without_a_gpu(tmp_path):
    assert _make_demo(tmp_path, terminal=True).startswith("watch ")


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_verifies_headless_without_a_terminal(tmp_path):
    assert _make_demo(tmp_path, terminal=False).startswith("verify ")


def test_list_inside_a_project_folder_names_it(tmp_path, cli, monkeypatch):
    project = tmp_path / "rms"
    project.mkdir()
    (project / "kernel.py").write_text("x = 1\n")
    monkeypatch.chdir(project)
    code, out, err = cli("list")
    assert code == 0 and "this folder is the project rms" in out and "workbench history" in out
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("list")
    assert code == 0 and "no projects under projects/" in out


# -- issue 44, item 5: the exit code printed is the exit code given --------------------------------------------

def test_a_junit_path_that_cannot_be_written_is_refused_before_anything_runs(cli, make_project, tmp_path):
    """It printed "VERIFIED ... (exit 0)" and then exited 2."""
    folder = tmp_path / "reports"
    folder.mkdir()
    code, out, err = cli("verify", make_project(kernels.GOOD), "--junit", folder)
    assert code == 2 and out == "" and f"cannot write the JUnit report {folder}: it is a folder" in err


def test_a_junit_report_is_written_whole(cli, make_project, tmp_path):
    import xml.etree.ElementTree as ET

    report = tmp_path / "deep" / "junit.xml"
    code, out, _ = cli("verify", make_project(kernels.GOOD, toml="[verify]\ngenerated_cases = false\n"),
                       "--junit", report)
    assert code == 0 and "(exit 0)" in out
    assert report.read_text().startswith("<?xml version='1.0' encoding='utf-8'?>")
    assert ET.parse(report).getroot().tag == "testsuites"
    assert [p.name for p in report.parent.iterdir()] == ["junit.xml"]  # no temporary file left beside it


def test_a_cancelled_run_says_interrupted_not_an_exit_code_it_does_not_give(make_project):
    from workbench.core.events import RunFinished
    from workbench.core.project.folder import Project
    from workbench.core.run.session import RunOutcome
    from workbench.reports import projects_summary, summary_line

    outcome = RunOutcome(project=Project.open(make_project(kernels.GOOD)), source_hash="x")
    finished = RunFinished(verdict="cancelled")
    outcome.tally.add(finished)
    outcome.finished = finished
    assert summary_line(outcome).startswith("CANCELLED") and summary_line(outcome).endswith("(interrupted)")
    assert projects_summary([outcome, outcome], 2).endswith("(interrupted)")


def test_the_help_lists_every_exit_code():
    from workbench.cli import build_parser

    epilog = build_parser({}).epilog
    for code in ("0 verified", "1 ", "2 ", "3 ", "4 slower", "130 interrupted", "143 terminated", "141 stdout"):
        assert code in epilog


def test_cases_that_are_all_for_the_benchmark_are_refused_saying_why(cli, make_project):
    """Issue 44, item 8: it was "NOT USABLE: 0 passed, 0 failed" with no reason, -v too."""
    source = kernels.GOOD + '\nCASES = [{"n": 4096, "purpose": "bench"}, {"n": 8192, "purpose": "bench"}]\n'
    code, out, err = cli("verify", make_project(source))
    assert code == 2 and "no case of CASES is for verification: all 2 have purpose \"bench\"" in out, out + err


def test_a_full_disk_is_the_machines_problem_said_in_one_line(make_project, monkeypatch, capsys):
    """Issue 44, item 8: a full disk while recording was a raw OSError traceback and exit 1 (as if the kernel
    had failed); now exit 3 and one line."""
    import errno

    import workbench.core.run.session as session
    from workbench.cli import main

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", "/x/.workbench/history/1.json")

    monkeypatch.setattr(session, "append_record", full)
    project = make_project(kernels.GOOD, toml="[verify]\ngenerated_cases = false\nrepeat_calls = false\n")
    code = main(["verify", str(project), "--interpret"])
    err = capsys.readouterr().err
    assert code == 3 and "no space left to write /x/.workbench/history/1.json (No space left on device)" in err
    assert _no_traceback(err)


def test_a_slow_import_is_not_silence_where_stderr_is_no_terminal(cli, make_project, monkeypatch):
    """Issue 44, item 8: an import that hangs was 300 s of silence in CI and for agents."""
    monkeypatch.setenv("WORKBENCH_HEARTBEAT_S", "1")
    slow = "import time\ntime.sleep(3)\n" + kernels.GOOD
    code, out, err = cli("verify", make_project(slow, toml="[verify]\ngenerated_cases = false\n"))
    assert code == 0, out + err
    assert "workbench: proj: still importing kernel.py" in err, err


def test_a_broken_roofline_count_is_said_on_the_cpu(cli, make_project):
    """Issue 44, item 8: a flops() that raises was found only in a benchmark on the GPU machine."""
    source = kernels.GOOD + "\n\ndef flops(x):\n    return x.numel() / 0\n"
    code, out, err = cli("verify", make_project(source, toml="[verify]\ngenerated_cases = false\n"))
    assert code == 0, out + err  # said, not a verdict: the kernel is right
    assert "flops() raised ZeroDivisionError: division by zero: a benchmark will have no FLOP rate" in out, out


def test_the_cases_left_to_the_benchmark_are_said_where_the_numbers_jump(cli, make_project):
    """Issue 44, item 8: the case table went 0, 1, 3 with no line saying why."""
    source = kernels.GOOD + '\nCASES = [{"n": 100}, {"n": 200}, {"n": 1 << 20, "purpose": "bench"}, {"n": 300}]\n'
    code, out, err = cli("verify", make_project(source, toml="[verify]\ngenerated_cases = false\n"))
    assert code == 0, out + err
    assert 'case 2: for the benchmark only (purpose "bench"), not verified' in out, out


def test_a_project_refused_before_running_does_not_say_its_worker_failed(cli, make_project):
    code, out, _ = cli("verify", make_project(kernels.GOOD, toml="[verfiy]\n"))
    assert code == 2 and "not run: the project could not be used (below)" in out and "worker did not start" not in out


def test_a_loose_kernel_file_writes_nothing_beside_it(cli, tmp_path, monkeypatch):
    """A .py verified on its own is in someone's folder of scripts: its history (with the local modules it
    imports) goes to the workbench's cache, and `history` on the same file finds it there."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(cache))
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "helpers.py").write_text("FACTOR = 2.0\n")
    (scripts / "scale.py").write_text(kernels.GOOD.replace("import torch\n", "import torch\nimport helpers  # noqa\n", 1))
    monkeypatch.syspath_prepend(str(scripts))
    code, out, err = cli("verify", scripts / "scale.py")
    assert code == 0, out + err
    assert sorted(p.name for p in scripts.iterdir()) == ["helpers.py", "scale.py"]
    (state,) = (cache / "loose").iterdir()
    assert state.name.startswith("scale-") and (state / "history").is_dir()
    code, out, err = cli("history", scripts / "scale.py")
    assert code == 0 and "VERIFIED" in out, out + err
