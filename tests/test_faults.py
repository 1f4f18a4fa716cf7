"""Fault injection (issue 25): the faults a day of real use finds, each done the way CI or a user would do it.

A hang killed by the CI job's time-out (SIGTERM) or by kill -9; os._exit in kernel.py at import and in a
call; the project folder removed and restored under the watcher; a corrupt history record; a kernel that
floods its output.
"""

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import kernels
import pytest
from run_helpers import ONLY_CASES, failing, verify_json

from workbench.core.live.watch import FilesMissing, ProjectWatcher, Save
from workbench.core.project.folder import Project
from workbench.core.project.history import append_record, history_dir, read_records

BIN = Path(sys.executable).parent

HANGS_IN_LAUNCHER = kernels.GOOD.replace("def scale(x):\n", '''def scale(x):
    with open(os.environ["FAULT_PID_FILE"], "a") as f:
        f.write(f"{os.getpid()}\\n")
    while True:  # a hang in the launcher: Python spinning at 100% CPU
        pass
''', 1)


def alive(pid: int) -> bool:
    """Running (a zombie, waiting for a parent that is gone to reap it, is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def tagged(tag: str) -> list[int]:
    """The live processes whose environment carries this test's tag: the workbench and everything it started."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if f"FAULT_TAG={tag}".encode() in (proc / "environ").read_bytes() and alive(int(proc.name)):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def start_hung_verify(make_project, tmp_path):
    """`workbench verify` on a kernel whose launcher hangs, once its worker is in the hang."""
    project = make_project(HANGS_IN_LAUNCHER, toml=ONLY_CASES)
    pid_file = tmp_path / "worker.pid"
    tag = uuid.uuid4().hex
    env = {**os.environ, "FAULT_PID_FILE": str(pid_file), "FAULT_TAG": tag, "WORKBENCH_WORKERS": "1"}
    proc = subprocess.Popen([str(BIN / "workbench"), "--no-plugins", "verify", str(project)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the worker never reached the hang"
        time.sleep(0.1)
    worker = int(pid_file.read_text().split()[0])
    assert alive(worker)
    return proc, worker, tag


@pytest.mark.slow
def test_a_ci_timeout_stops_the_workbench_and_its_hung_worker(make_project, tmp_path):
    """`timeout 90 workbench verify` sends SIGTERM: handled as Ctrl-C, with its message, and the worker
    spinning in kernel.py is killed with the workbench (it lived on at 100% CPU, re-parented to init)."""
    proc, worker, tag = start_hung_verify(make_project, tmp_path)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "interrupted (SIGTERM)" in err
    assert gone_within([worker], 15) == []
    assert gone_within(tagged(tag), 15) == []


@pytest.mark.slow
def test_kill_9_of_the_workbench_takes_every_process_it_started_with_it(make_project, tmp_path):
    """SIGKILL runs no handler: every child watches a pipe only the workbench holds open, and ends its
    process group when the pipe ends (the worker, its judge, the warm template)."""
    proc, worker, tag = start_hung_verify(make_project, tmp_path)
    started = [p for p in tagged(tag) if p != proc.pid]
    assert worker in started and len(started) >= 2  # the worker, its judge, the template it was forked from
    proc.kill()
    proc.communicate(timeout=30)
    assert gone_within(started, 15) == []


@pytest.mark.parametrize("where", ["import", "call"])
def test_os_exit_0_in_kernel_py_is_a_crash_said_as_such(cli, make_project, where):
    if where == "import":
        source = "import os\nos._exit(0)\n" + kernels.GOOD
    else:
        source = kernels.GOOD.replace("def scale(x):\n", "def scale(x):\n    os._exit(0)\n", 1)
    code, rec = verify_json(cli, make_project(source, name=where, toml=ONLY_CASES), "--case", "0")
    assert code == 1 and rec["verdict"] == "failed"
    said = [p["message"] for p in rec["problems"]] + [m for c in failing(rec) for m in c["messages"]]
    assert any("exited with status 0 before its job was done" in m for m in said), said
    assert any(("while importing kernel.py" if where == "import" else "in case 0") in m for m in said), said


# -- the watcher: the folder removed and restored --------------------------------------------------------------


def test_the_watcher_follows_a_project_folder_removed_and_restored(tmp_path):
    """rm -rf the folder and cp -r it back, then break the kernel: the watcher says the kernel is gone, that
    it is back, and sees the save after (it stopped for good: a stale green verdict on a broken kernel)."""
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "kernel.py").write_text("X = 1\n")
    backup = tmp_path / "backup"
    shutil.copytree(folder, backup)
    project = Project.open(folder)
    notices: queue.Queue = queue.Queue()
    stop = threading.Event()
    watcher = ProjectWatcher(project, missing_grace_s=0.2)
    thread = threading.Thread(target=lambda: [notices.put(n) for n in watcher.watch(stop)], daemon=True)
    thread.start()
    time.sleep(0.4)
    try:
        shutil.rmtree(folder)
        assert notices.get(timeout=10) == FilesMissing(("kernel.py",))
        time.sleep(0.5)
        shutil.copytree(backup, folder)  # the same content: back, no save
        assert notices.get(timeout=10) == FilesMissing(())
        time.sleep(0.5)
        (folder / "kernel.py").write_text("X = 2  # broken\n")  # truncate, then write: a read between sees ""
        save = notices.get(timeout=10)  # never the empty file between the truncation and the write
        assert isinstance(save, Save) and "broken" in save.source
    finally:
        stop.set()
        thread.join(10)


# -- the history: a corrupt record -----------------------------------------------------------------------------


def test_a_corrupt_history_record_is_said_and_the_rest_kept(tmp_path, cli):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "kernel.py").write_text("x = 1\n")
    project = Project.open(folder)
    for n in range(3):
        append_record(project, {"source_hash": f"h{n}", "verdict": "passed", "stages": ["verify"],
                                "counts": {"passed": 2, "failed": 0, "errors": 0, "skipped": 0}}, f"x = {n}\n")
    paths = sorted(history_dir(project).glob("*.json"))
    paths[1].write_text(paths[1].read_text()[:40])  # a write cut short (a full disk, a crash of another tool)
    unreadable: list[str] = []
    records = read_records(project, unreadable)
    assert [r.source_hash for r in records] == ["h0", "h2"]
    assert unreadable == [f"{paths[1]}: unreadable run record (truncated or not JSON), skipped; the other "
                          "records are kept"]
    code, out, err = cli("history", folder)
    assert code == 0 and str(paths[1]) in err and "unreadable run record" in err, (out, err)
    assert len(out.strip().splitlines()) == 3  # the two records that could be read, then what the history holds
    paths[2].write_text("{")  # the newest, the one `list` reads
    code, out, err = cli("list", "--dir", tmp_path)
    assert code == 0 and str(paths[2]) in err and "unreadable run record" in err, (out, err)
    assert "proj" in out and "passed" in out  # the newest readable record instead


# -- a kernel that floods its output ----------------------------------------------------------------------------

FLOODS = kernels.GOOD.replace("def scale(x):\n", '''def scale(x):
    for n in range(10_000):
        print(f"{n:06d} " + "x" * 1000)  # 10 MB a call
''', 1)


@pytest.mark.slow
def test_a_kernel_that_prints_megabytes_a_call_is_bounded_on_its_way(cli, make_project):
    """10 MB a call froze the app for ~40 s (headless: 3.6 s) and `-v` printed 125 MB: what reaches the
    app and the reports is the head and the tail of it, with what was dropped said between."""
    from workbench.core.events import LogLine
    from workbench.core.run import RunSpec, make_runner, run_project

    project = Project.open(make_project(FLOODS, toml=ONLY_CASES))
    events = []
    runner = make_runner(interpret=True, parallel=1)
    try:
        outcome = run_project(project, runner, RunSpec(("verify",), case_indices=[0]), events.append)
    finally:
        runner.close()
    assert outcome.exit_code == 0
    logs = [e.text for e in events if isinstance(e, LogLine)]
    assert len(logs) <= 600 and sum(map(len, logs)) < 700_000  # 300 + 200 lines of 1 KB, and the note
    assert any("of the worker's output dropped here" in text for text in logs)
    code, out, err = cli("verify", project.root, "--case", "0", "-v")
    assert code == 0 and len(out) + len(err) < 100_000


def test_the_bounded_log_keeps_the_head_and_the_tail_and_says_what_it_dropped():
    from workbench.core.run.workers import BoundedLog

    log = BoundedLog()
    passed = [text for n in range(10_000) if (text := log.admit(f"line {n}")) is not None]
    held = log.flush()
    assert passed == [f"line {n}" for n in range(BoundedLog.HEAD_LINES)]
    assert held[0].startswith(f"... {10_000 - BoundedLog.HEAD_LINES - BoundedLog.TAIL_LINES:,} lines")
    assert held[1:] == [f"line {n}" for n in range(10_000 - BoundedLog.TAIL_LINES, 10_000)]
    assert BoundedLog().admit("y" * 5000).endswith("(3,000 more characters)")
    assert json.dumps(held)  # plain text


# -- two live loops on one project ----------------------------------------------------------------------------


def test_a_second_live_loop_on_a_project_does_not_record_and_knows_who_does(tmp_path):
    """Two `workbench watch` on one project recorded every run twice: the first holds the recorder lock, the
    second runs without recording and can say which process records; the lock goes with its holder."""
    from workbench.core.project.history import RecorderLock

    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "kernel.py").write_text("x = 1\n")
    project = Project.open(folder)
    first, second = RecorderLock(project), RecorderLock(project)
    assert first.acquire() is True
    assert second.acquire() is False and second.holder == str(os.getpid())
    first.release()
    assert second.acquire() is True
    second.release()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path\n"
                               "from workbench.core.project.folder import Project\n"
                               "from workbench.core.project.history import RecorderLock\n"
                               f"lock = RecorderLock(Project.open({str(folder)!r}))\nassert lock.acquire()\n"
                               "print('held', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        third = RecorderLock(project)
        assert third.acquire() is False and third.holder == str(holder.pid)
    finally:
        holder.kill()
        holder.wait()
    assert RecorderLock(project).acquire() is True  # killed: the lock went with it


@pytest.mark.slow
def test_a_change_to_a_module_kernel_py_imports_is_recorded_and_diffed(cli, make_project):
    """Editing a local module kernel.py imports changed the verdict but not the recorded source hash, so
    `workbench diff` said "(same kernel source)": every watched file is recorded and diffed."""
    source = kernels.GOOD.replace("import torch\n", "import torch\nfrom scaling import FACTOR\n", 1).replace(
        "y = x * 2.0", "y = x * FACTOR")
    project = make_project(source, toml=ONLY_CASES)
    (project / "scaling.py").write_text("FACTOR = 2.0\n")
    assert cli("verify", project, "--case", "0")[0] == 0
    (project / "scaling.py").write_text("FACTOR = 3.0  # wrong\n")
    assert cli("verify", project, "--case", "0")[0] == 1
    records = read_records(Project.open(project))
    assert [sorted(r.data["files"]) for r in records] == [["kernel.py", "scaling.py", "workbench.toml"]] * 2
    code, out, err = cli("diff", project, "-2", "-1")
    assert code == 0 and "scaling.py@" in out and "+FACTOR = 3.0  # wrong" in out, out
    (project / "scaling.py").write_text("FACTOR = 2.0\n")
    code, out, err = cli("list", "--dir", project.parent)
    assert "(scaling.py changed since)" in out, out


def test_a_worker_that_stalls_in_its_start_up_is_given_up_with_what_its_threads_were_doing():
    """The worker registers its stacks on SIGUSR1 (child/worker.py): one silent past its time is asked for them
    before it is killed, and the failure carries them; a run then takes another worker (strategies.once)."""
    from workbench.core.events import LogLine
    from workbench.core.run.workers import WorkerStartError, wait_for_ready

    script = ("import faulthandler, signal, sys, time\n"
              "faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
              "print('warming up', file=sys.stderr, flush=True)\n"
              "def stuck_in_start_up():\n"
              "    time.sleep(60)\n"
              "stuck_in_start_up()\n")

    class Stalled:
        ready = None

        def __init__(self):
            self.proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
            self.queue = queue.Queue()
            threading.Thread(target=self._read, daemon=True).start()

        def _read(self):
            for line in self.proc.stderr:
                self.queue.put(("event", LogLine(text=line.rstrip("\n"))))

        def kill(self):
            self.proc.kill()
            self.proc.wait()

    worker = Stalled()
    with pytest.raises(WorkerStartError) as caught:
        wait_for_ready(worker, timeout=2.0)
    assert caught.value.stalled and "did not start within 2 s" in caught.value.problem.message
    said = caught.value.problem.traceback
    assert "warming up" in said and "its threads when it was given up:" in said and "stuck_in_start_up" in said
    assert worker.proc.poll() is not None  # killed


def test_two_threads_waiting_for_one_worker_both_see_it_ready():
    """A run takes a spare while its GPU-free thread waits for the spares to warm: both wait for one worker's
    WorkerReady. The one that does not take it off the queue sees it at once, not at its time-out (the cause of
    "the worker did not start within 180 s" under load)."""
    from workbench.core.events import WorkerReady
    from workbench.core.run.workers import wait_for_ready

    class Warming:
        ready = None

        def __init__(self):
            self.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
            self.queue = queue.Queue()
            self.started_up = threading.Event()

        def kill(self):
            self.proc.kill()
            self.proc.wait()

    worker = Warming()
    said = WorkerReady(pid=1, mode="gpu", device_name="GPU", torch_version="t", triton_version="t",
                       python_version="p", warmup_s=1.0)
    got: list = []
    try:
        waiters = [threading.Thread(target=lambda: got.append(wait_for_ready(worker, timeout=20))) for _ in range(2)]
        for waiter in waiters:
            waiter.start()
        time.sleep(0.3)
        started = time.monotonic()
        worker.queue.put(("event", said))
        worker.started_up.set()
        for waiter in waiters:
            waiter.join(timeout=10)
        assert got == [said, said] and time.monotonic() - started < 2.0
    finally:
        worker.kill()


def test_a_run_replaces_a_worker_stalled_in_its_start_up_once(monkeypatch):
    """WorkerJobs.once: a worker alive but silent past FIRST_START_TIMEOUT_S is released, its stacks go to the
    log, and another takes its place; a second stall is the run's problem, naming both."""
    from workbench.core.events import LogLine, Problem, WorkerReady
    from workbench.core.run import strategies
    from workbench.core.run.workers import WorkerStartError
    from workbench.core.stage import Job

    ready = WorkerReady(pid=1, mode="gpu", device_name="GPU", torch_version="t", triton_version="t",
                        python_version="p", warmup_s=1.0)

    class Worker:
        gpu_id = ""

        def __init__(self, stalls):
            self.stalls, self.timeouts, self.sent = stalls, [], []

        def wait_ready(self, timeout=180.0):
            self.timeouts.append(timeout)
            if self.stalls:
                raise WorkerStartError(Problem(kind="environment", message=f"the worker did not start within "
                                                                           f"{timeout:.0f} s",
                                               traceback="its threads when it was given up:\n  File x"), stalled=True)
            return ready

        def send(self, job):
            self.sent.append(job)

    def runner_of(workers):
        released = []
        runner = SimpleNamespace(cancelled=False, launcher=[], cancel_event=threading.Event(),
                                 take_worker=lambda gpu, timed=False: workers.pop(0),
                                 supply=SimpleNamespace(release=released.append))
        return runner, released

    monkeypatch.setattr(strategies, "pump", lambda *args, **kwargs: None)
    run = SimpleNamespace(limits=(60.0, 300.0), gpu_free=threading.Event())
    job = Job(kernel_path="kernel.py", stages=["verify"])
    stalled, fine = Worker(stalls=True), Worker(stalls=False)
    runner, released = runner_of([stalled, fine])
    events = []
    assert strategies.WorkerJobs(runner).once(run, job, events.append, None) is None
    assert stalled.timeouts == [strategies.FIRST_START_TIMEOUT_S] and released == [stalled, fine]
    assert fine.sent == [job] and events[-1] is ready
    assert any(isinstance(e, LogLine) and "another worker takes its place" in e.text and "File x" in e.text
               for e in events)
    runner, released = runner_of([Worker(stalls=True), Worker(stalls=True)])
    events = []
    strategies.WorkerJobs(runner).once(run, job, events.append, None)
    problems = [e for e in events if isinstance(e, Problem)]
    assert len(problems) == 1 and "(the second worker; the first did not start within 90 s)" in problems[0].message
