"""The watcher (debounce, content-hash dedupe, vanishing files) and the live loop's restart policy."""

import ast
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from workbench.core.events import RunFinished, RunStarted, WorkerReady
from workbench.core.live.loop import LiveLoop, RunRequest
from workbench.core.live.watch import (
    FilesMissing,
    ProjectWatcher,
    Save,
    SaveGate,
    imported_top_names,
    local_modules,
    take_snapshot,
)
from workbench.core.project.folder import Project

ROOT = Path(__file__).resolve().parents[1]


def editor_save(path: Path, text: str) -> None:
    """Save the way most editors do: write a temp file beside it, then rename it over the original."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(text)
    os.replace(tmp, path)


@pytest.fixture
def project(tmp_path) -> Project:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "kernel.py").write_text("import torch\nimport helpers\nfrom tiles import layout\nX = 1\n")
    (folder / "helpers.py").write_text("import math\nimport consts\n")
    (folder / "consts.py").write_text("C = 1\n")
    (folder / "tiles").mkdir()
    (folder / "tiles" / "__init__.py").write_text("")
    (folder / "tiles" / "layout.py").write_text("L = 1\n")
    (folder / "unrelated.py").write_text("U = 1\n")
    return Project.open(folder)


class Watching:
    """A ProjectWatcher on a thread, its notices in a queue."""

    def __init__(self, project: Project):
        self.notices: queue.Queue = queue.Queue()
        self.stop = threading.Event()
        self.watcher = ProjectWatcher(project, missing_grace_s=0.2)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        time.sleep(0.3)  # let inotify set up its watches

    def _run(self) -> None:
        for notice in self.watcher.watch(self.stop):
            self.notices.put(notice)

    def next(self, timeout: float = 5.0):
        return self.notices.get(timeout=timeout)

    def none_within(self, seconds: float) -> bool:
        try:
            notice = self.notices.get(timeout=seconds)
        except queue.Empty:
            return True
        pytest.fail(f"unexpected notice {notice}")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


@pytest.fixture
def watching(project):
    w = Watching(project)
    yield w
    w.close()


def test_imports_are_found_with_ast():
    source = "import a.b\nfrom c.d import e\nfrom . import f, g\nfrom .h import i\nx = 'import nope'\n"
    assert imported_top_names(source) == {"a", "c", "f", "g", "h"}
    assert imported_top_names("def broken(:\n") == set()


def test_local_modules_are_followed_transitively(project):
    files, packages = local_modules(project)
    assert [p.name for p in files] == ["helpers.py", "consts.py"]
    assert [p.name for p in packages] == ["tiles"]
    watched = set(take_snapshot(project).hashes)
    assert watched == {"kernel.py", "workbench.toml", "helpers.py", "consts.py", "tiles/__init__.py",
                       "tiles/layout.py"}


def test_gate_dedupes_by_content_and_reports_what_changed(project):
    gate = SaveGate(take_snapshot(project))
    assert gate.consider(take_snapshot(project)) == []  # touched, not changed
    (project.root / "consts.py").write_text("C = 2\n")
    [save] = gate.consider(take_snapshot(project))
    assert isinstance(save, Save) and save.changed == ("consts.py",)
    assert gate.consider(take_snapshot(project)) == []


def test_gate_reports_a_vanished_kernel_and_its_return(project):
    gate = SaveGate(take_snapshot(project))
    original = project.kernel_path.read_text()
    project.kernel_path.unlink()
    assert gate.consider(take_snapshot(project)) == [FilesMissing(("kernel.py",))]
    project.kernel_path.write_text(original)
    assert gate.consider(take_snapshot(project)) == [FilesMissing(())]  # back, unchanged: nothing to run
    project.kernel_path.unlink()
    gate.consider(take_snapshot(project))
    project.kernel_path.write_text(original + "Y = 2\n")
    back, save = gate.consider(take_snapshot(project))
    assert back == FilesMissing(()) and isinstance(save, Save) and save.changed == ("kernel.py",)


def test_an_editor_save_is_one_accepted_save(project, watching):
    editor_save(project.kernel_path, project.kernel_path.read_text() + "Y = 2\n")
    save = watching.next()
    assert isinstance(save, Save) and save.changed == ("kernel.py",) and "Y = 2" in save.source
    assert save.kernel_hash == project.source_hash()
    watching.none_within(0.4)


def test_a_burst_of_writes_is_debounced_into_one_save(project, watching):
    text = project.kernel_path.read_text()
    for n in range(6):  # an editor's burst of truncate-and-write saves (well inside one 20 ms step)
        project.kernel_path.write_text(text + f"Y = {n}\n")
    save = watching.next()
    assert "Y = 5" in save.source
    watching.none_within(0.4)


def test_same_content_and_unwatched_files_are_ignored(project, watching):
    project.kernel_path.write_text(project.kernel_path.read_text())  # saved without a change
    (project.root / "unrelated.py").write_text("U = 2\n")
    (project.root / "notes.txt").write_text("hello\n")
    watching.none_within(0.6)


def test_local_module_and_config_saves_are_seen(project, watching):
    editor_save(project.root / "tiles" / "layout.py", "L = 2\n")
    assert watching.next().changed == ("tiles/layout.py",)
    editor_save(project.config_path, "[verify]\ntimeout_s = 5\n")
    assert watching.next().changed == ("workbench.toml",)


def test_a_kernel_that_disappears_and_comes_back(project, watching):
    text = project.kernel_path.read_text()
    project.kernel_path.unlink()
    assert watching.next() == FilesMissing(("kernel.py",))
    project.kernel_path.write_text(text + "Y = 3\n")
    assert watching.next() == FilesMissing(())
    assert "Y = 3" in watching.next().source


def test_nothing_under_core_imports_textual():
    """rule: the core is UI-free (docs/ARCHITECTURE.md)."""
    for path in sorted((ROOT / "workbench" / "core").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n == "textual" or n.startswith("textual.") for n in names), f"{path} imports {names}"
    modules = [f"workbench.core.{p.stem}" for p in (ROOT / "workbench" / "core").glob("*.py")
               if p.stem not in ("__init__", "worker")]
    code = "import sys\n" + "".join(f"import {m}\n" for m in modules) + \
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


# -- the live loop's restart policy, against a runner that runs until it is cancelled ---------------


class HangingRunner:
    """Stands in for Runner: each run reports, then blocks until cancel() (kill-then-restart)."""

    def __init__(self):
        self.cancelled = threading.Event()
        self.started: list[str] = []
        self.lock = threading.Lock()

    def prewarm(self):
        pass

    def run(self, job, on_event, timeout_s=None, interpret_timeout_s=None):
        self.cancelled.clear()
        source_hash = Project.open(job.kernel_path).source_hash()
        with self.lock:
            self.started.append(source_hash)
        on_event(WorkerReady(pid=1, mode="interpreter", device_name="cpu", torch_version="t",
                             triton_version="t", python_version="p", warmup_s=0.0))
        on_event(RunStarted(kernel_path=job.kernel_path, source_hash=source_hash, mode="interpreter",
                            device_name="cpu", n_cases=0))
        self.cancelled.wait(timeout=10)
        finished = RunFinished(verdict="cancelled")
        on_event(finished)
        return finished

    def cancel(self):
        self.cancelled.set()

    def close(self):
        self.cancel()


def test_each_request_kills_the_run_in_progress_and_only_the_newest_reports(project):
    runner = HangingRunner()
    seen: list[tuple[int, object]] = []
    done: list[int] = []
    loop = LiveLoop(project, runner, on_event=lambda rid, e: seen.append((rid, e)),
                    on_done=lambda rid, req, outcome: done.append(rid))
    loop.start()
    try:
        first = loop.submit(RunRequest())
        deadline = time.monotonic() + 5
        while not runner.started and time.monotonic() < deadline:
            time.sleep(0.01)
        for n in range(5):  # rapid saves
            project.kernel_path.write_text(project.kernel_path.read_text() + f"Z = {n}\n")
            last = loop.submit(RunRequest(reason="save"))
        after_last = len(seen)
        deadline = time.monotonic() + 5
        while not any(rid == last and isinstance(e, RunStarted) for rid, e in seen) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert any(rid == last and isinstance(e, RunStarted) for rid, e in seen)
        assert first in done  # the first run was killed, not left running
        assert {rid for rid, _ in seen[after_last:]} == {last}  # overtaken runs never report again
        assert runner.started[-1] == project.source_hash()
    finally:
        loop.close()


def test_live_loop_runs_benchmarks_on_the_live_budget(project):
    jobs = []

    class RecordingRunner(HangingRunner):
        def run(self, job, on_event, timeout_s=None, interpret_timeout_s=None):
            jobs.append(job)
            self.cancelled.set()
            return super().run(job, on_event, timeout_s, interpret_timeout_s)

    loop = LiveLoop(project, RecordingRunner(), on_event=lambda rid, e: None)
    loop.start()
    try:
        loop.submit(RunRequest(stages=("verify", "bench")))
        deadline = time.monotonic() + 5
        while not jobs and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        loop.close()
    job = jobs[0]
    assert job.live is True
    assert job.config["bench"]["rep_ms"] == 100 and job.config["bench"]["compare_torch_compile"] is False


def test_live_loop_hands_the_reference_times_it_saw_to_the_next_run(project):
    """A save changes the kernel, not the reference: the next benchmark reuses its time (same key)."""
    from workbench.core.events import BenchResult, Timing

    jobs = []
    timing = Timing(median_ms=1.5, q25_ms=1.4, q75_ms=1.6, min_ms=1.3, samples=40, method="cuda events")

    class OneRunRunner(HangingRunner):
        def run(self, job, on_event, timeout_s=None, interpret_timeout_s=None):
            jobs.append(job)
            on_event(BenchResult(case_index=3, label="n=1048576", reference=timing, reference_key="k1"))
            finished = RunFinished(verdict="passed")
            on_event(finished)
            return finished

    done = threading.Semaphore(0)
    loop = LiveLoop(project, OneRunRunner(), on_event=lambda rid, e: None, on_done=lambda *args: done.release())
    loop.start()
    try:
        for _ in range(2):
            loop.submit(RunRequest(stages=("verify", "bench")))
            assert done.acquire(timeout=5)
    finally:
        loop.close()
    assert jobs[0].reference_timings == {}
    assert jobs[1].reference_timings == {"k1": vars(timing)}


def test_a_save_caught_between_truncation_and_write_is_read_once_written(tmp_path):
    """Editors (and cp) truncate kernel.py, then write it: a look in between sees an empty file, which is not the
    save. A kernel.py emptied on purpose still is one, after the grace."""
    from workbench.core.live.watch import ProjectWatcher, Save
    from workbench.core.project.folder import Project

    folder = tmp_path / "proj"
    folder.mkdir()
    kernel = folder / "kernel.py"
    kernel.write_text("X = 1\n")
    watcher = ProjectWatcher(Project.open(folder), missing_grace_s=0.5)
    kernel.write_text("")
    threading.Timer(0.1, lambda: kernel.write_text("X = 2\n")).start()
    notices = watcher.check()
    assert [n.source for n in notices if isinstance(n, Save)] == ["X = 2\n"]
    kernel.write_text("")
    started = time.monotonic()
    notices = watcher.check()
    assert [n.source for n in notices if isinstance(n, Save)] == [""] and time.monotonic() - started >= 0.45


def test_a_kernel_py_replaced_by_a_fifo_or_a_device_is_missing_never_read(tmp_path):
    """Issue 44, item 9: a FIFO froze the app (the read blocks); a link to /dev/urandom read until memory ran out.
    Neither is read: the snapshot says the kernel is missing, at once."""
    import os

    from workbench.core.live.watch import take_snapshot
    from workbench.core.project.folder import Project, read_source_bytes

    folder = tmp_path / "p"
    folder.mkdir()
    kernel = folder / "kernel.py"
    kernel.write_text("import helper\n")
    (folder / "helper.py").write_text("x = 1\n")
    project = Project.open(folder)
    assert not take_snapshot(project).kernel_missing
    kernel.unlink()
    os.mkfifo(kernel)
    started = time.monotonic()
    assert take_snapshot(project).kernel_missing
    kernel.unlink()
    kernel.symlink_to("/dev/urandom")
    assert take_snapshot(project).kernel_missing
    assert time.monotonic() - started < 5
    with pytest.raises(OSError, match="not a regular file"):
        read_source_bytes(kernel)
