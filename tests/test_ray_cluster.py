"""workbench-ray: the worker protocol as Ray actors of one GPU each, on a local cluster this module starts
(two GPUs faked as Ray resources; the workers run the Triton interpreter, as everywhere on the CPU)."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import kernels
import pytest

ray = pytest.importorskip("ray")
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """ray://127.0.0.1:PORT of a head node with 2 fake GPUs; stopped by its own process id, not `ray stop`."""
    client_port = free_port()
    temp = Path(f"/tmp/wbray-{os.getpid()}")  # short: Ray's socket paths have a length limit
    head = subprocess.Popen(
        [str(BIN / "ray"), "start", "--head", "--block", "--num-cpus", "4", "--num-gpus", "2",
         "--port", str(free_port()), "--ray-client-server-port", str(client_port), "--include-dashboard", "false",
         "--disable-usage-stats", "--object-store-memory", str(80 * 1024 * 1024), "--temp-dir", str(temp)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 90
    while True:
        try:
            socket.create_connection(("127.0.0.1", client_port), timeout=1).close()
            break
        except OSError:
            if head.poll() is not None or time.monotonic() > deadline:
                head.kill()
                pytest.fail("the Ray head did not start: " + head.stderr.read().decode()[-2000:])
            time.sleep(0.3)
    yield f"ray://127.0.0.1:{client_port}"
    os.killpg(head.pid, signal.SIGKILL)  # its group: the head's processes; its workers exit with the raylet
    head.wait()
    shutil.rmtree(temp, ignore_errors=True)


def workbench(*args, timeout=240):
    env = {**os.environ, "WORKBENCH_WORKERS": "2"}
    return subprocess.run([str(BIN / "workbench"), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_an_unreachable_cluster_exits_3_within_seconds_naming_it(make_project):
    address = f"ray://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    done = workbench("verify", make_project(kernels.GOOD), "--cluster", address, timeout=30)
    assert done.returncode == 3, done.stdout + done.stderr
    assert time.monotonic() - started < 10
    assert f"cannot reach the Ray cluster at {address}" in done.stderr


def test_verify_runs_on_the_cluster_one_gpu_per_worker(cluster, make_project):
    project = make_project(kernels.GRID_SHORT)
    done = workbench("verify", project, "--cluster", cluster, "--json")
    assert done.returncode == 1, done.stderr[-3000:]  # GRID_SHORT fails, as it does on this machine
    (record,) = json.loads(done.stdout)["projects"]
    assert record["verdict"] == "failed" and record["kernel"] == str(project / "kernel.py")
    tuned = [c for c in record["cases"] if not c["config"]]
    assert [c["case_index"] for c in tuned] == [0, 1, 2]
    assert any(c["status"] == "failed" and c["pattern"] for c in tuned)  # the error map came back whole
    # Shards over both GPUs of the cluster, each result naming "node/gpu".
    assert {c["gpu"].rsplit("/", 1)[1] for c in tuned} == {"0", "1"}


def test_a_lost_gpu_s_cases_run_again_elsewhere_and_are_recorded_once(cluster, make_project):
    from workbench.core.events import CaseResult, Requeued, StageChanged
    from workbench.core.project.folder import Project
    from workbench.core.run.session import run_project
    from workbench_ray.runner import connect, RayRunner

    assert connect(cluster)
    runner = RayRunner(cluster, parallel=1, connected_here=True)
    killed = []

    def on_event(event):  # the actor running case 1 dies, as with its node
        if isinstance(event, StageChanged) and event.stage == "verifying" and event.case_index == 1 and not killed:
            (worker,) = runner._active
            killed.append(worker.gpu_id)
            ray.kill(worker.actor, no_restart=True)

    try:
        outcome = run_project(Project.open(make_project(kernels.GOOD)), runner, ["verify"], on_event)
    finally:
        runner.close()
    (requeued,) = outcome.of_type(Requeued)
    assert requeued.cases == [1, 2] and requeued.gpu == killed[0] and "was lost" in requeued.reason
    tuned = sorted((r.case_index, r.status) for r in outcome.of_type(CaseResult) if not r.config)
    assert tuned == [(0, "passed"), (1, "passed"), (2, "passed")]
    keys = [(r.case_index, r.config) for r in outcome.of_type(CaseResult)]
    assert len(keys) == len(set(keys)) and outcome.exit_code == 0
