"""workbench-ray: the worker protocol as Ray actors of one GPU each, on a local cluster this module starts
(two GPUs faked as Ray resources; the workers run the Triton interpreter, as everywhere on the CPU)."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kernels
import pytest
from run_helpers import ONLY_CASES

# These tests count cases per GPU and per re-queue: the project's CASES alone, no generated edge shapes.
ray = pytest.importorskip("ray")
from workbench_ray.local_node import answers, free_port  # noqa: E402 - once ray is known to be there
from workbench_ray.local_node import stop_node as stop  # noqa: E402

BIN = Path(sys.executable).parent


def start(args, ready) -> subprocess.Popen:
    """A Ray node of this machine (workbench_ray.local_node); the test fails with Ray's stderr if it does not start."""
    from workbench_ray.local_node import NodeDidNotStart, start_node

    try:
        return start_node(args, ready)
    except NodeDidNotStart as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def cluster():
    """Two nodes on this machine with fake GPUs: a head with two of kind FAKE_A, a second node with one of
    kind FAKE_B. The workers see no GPU and run the interpreter. Yields (ray://127.0.0.1:PORT, the Ray Client
    address the CLI uses; 127.0.0.1:PORT, the head's own, which this process joins as a driver)."""
    client_port, gcs_port = free_port(), free_port()
    temp = Path(f"/tmp/wbray-{os.getpid()}")  # short: Ray's socket paths have a length limit
    head = start(["--head", "--num-cpus", "4", "--num-gpus", "2", "--resources", '{"accelerator_type:FAKE_A": 2}',
                  "--port", str(gcs_port), "--ray-client-server-port", str(client_port), "--include-dashboard",
                  "false", "--object-store-memory", str(80 * 1024 * 1024), "--temp-dir", str(temp)],
                 lambda: answers(client_port))
    second = start(["--address", f"127.0.0.1:{gcs_port}", "--num-cpus", "2", "--num-gpus", "1", "--resources",
                    '{"accelerator_type:FAKE_B": 1}', "--object-store-memory", str(80 * 1024 * 1024)],
                   lambda: True)
    yield f"ray://127.0.0.1:{client_port}", f"127.0.0.1:{gcs_port}"
    stop(second)
    stop(head)  # its workers exit with the raylet
    shutil.rmtree(temp, ignore_errors=True)
    from workbench_ray.host import FOLDER_PREFIX, sweep_stale_folders

    deadline = time.monotonic() + 30  # the actors' processes end with their raylets
    while time.monotonic() < deadline and list(Path(tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}*")):
        sweep_stale_folders()
        time.sleep(0.5)


def test_a_killed_actors_folder_is_swept_by_the_next_host(tmp_path):
    """A Ray actor killed by Ray never cleans up: the next host on the node removes the folders of actors
    that are gone (kernel copies, Triton caches), and keeps those of actors still running."""
    from workbench_ray.host import FOLDER_PREFIX, sweep_stale_folders

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale, alive = tmp_path / f"{FOLDER_PREFIX}{gone.pid}-abc", tmp_path / f"{FOLDER_PREFIX}{os.getpid()}-def"
    for folder in (stale, alive):
        (folder / "triton-cache").mkdir(parents=True)
        (folder / "kernel.py").write_text("x = 1\n")
    assert sweep_stale_folders(tmp_path) == [stale]
    assert not stale.exists() and alive.exists()


def workbench(*args, timeout=240):
    env = {**os.environ, "WORKBENCH_WORKERS": "2"}
    return subprocess.run([str(BIN / "workbench"), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_an_unreachable_cluster_exits_3_within_seconds_naming_it(make_project):
    address = f"ray://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    done = workbench("verify", make_project(kernels.GOOD, toml=ONLY_CASES), "--cluster", address, timeout=30)
    assert done.returncode == 3, done.stdout + done.stderr
    assert time.monotonic() - started < 10
    assert f"cannot reach the Ray cluster at {address}" in done.stderr


@pytest.mark.slow
def test_verify_runs_on_the_cluster_one_gpu_per_worker(cluster, make_project):
    # kernel.py imports a module of its folder: the node gets that too.
    project = make_project(kernels.GRID_SHORT.replace("import torch\n", "import torch\nfrom scaling import FACTOR\n", 1)
                           .replace("return x * 2", "return x * FACTOR"), toml=ONLY_CASES)
    (project / "scaling.py").write_text("FACTOR = 2\n")
    done = workbench("verify", project, "--cluster", cluster[0], "--json")
    said = f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 1, said  # GRID_SHORT fails, as it does on this machine
    (record,) = json.loads(done.stdout)["projects"]
    assert record["verdict"] == "failed" and record["kernel"] == str(project / "kernel.py"), said
    tuned = [c for c in record["cases"] if not c["config"]]
    assert [c["case_index"] for c in tuned] == [0, 1, 2]
    assert any(c["status"] == "failed" and c["pattern"] for c in tuned), said  # the error map came back whole
    # Shards over the GPUs of the cluster, each result naming "node/gpu kind".
    assert all(re.fullmatch(r"\S+/[01] FAKE_[AB]", c["gpu"]) for c in tuned), tuned
    assert len({c["gpu"] for c in tuned}) >= 2, said


@pytest.mark.slow
def test_a_lost_gpu_s_cases_run_again_elsewhere_and_are_recorded_once(cluster, make_project):
    from workbench_ray.runner import connect, ray_runner

    from workbench.core.events import CaseResult, Requeued, StageChanged
    from workbench.core.project.folder import Project
    from workbench.core.run.session import RunSpec, run_project

    assert connect(cluster[1])
    runner = ray_runner(parallel=1, connected_here=True)
    killed = []

    def on_event(event):  # the actor running case 1 dies, as with its node
        if isinstance(event, StageChanged) and event.stage == "verifying" and event.case_index == 1 and not killed:
            (worker,) = runner.supply.active
            killed.append(worker.gpu_id)
            ray.kill(worker.actor, no_restart=True)

    try:
        outcome = run_project(Project.open(make_project(kernels.GOOD, toml=ONLY_CASES)), runner, RunSpec(("verify",)), on_event)
    finally:
        runner.close()
    (requeued,) = outcome.of_type(Requeued)
    # The actor streams its results: case 0's may still be in flight when the loss is seen (a loaded
    # machine), and case 1's may have come back in the same poll as its start. What had not come back runs again.
    assert requeued.cases in ([0, 1, 2], [1, 2], [2]) and requeued.gpu == killed[0] and "was lost" in requeued.reason
    tuned = sorted((r.case_index, r.status) for r in outcome.of_type(CaseResult) if not r.config and not r.generated)
    assert tuned == [(0, "passed"), (1, "passed"), (2, "passed")]
    keys = [(r.case_index, r.config) for r in outcome.of_type(CaseResult)]
    assert len(keys) == len(set(keys)) and outcome.exit_code == 0


@pytest.mark.slow
def test_per_gpu_kind_runs_the_job_once_on_each_kind(cluster, make_project):
    from workbench_ray.matrix import make_matrix_runner
    from workbench_ray.runner import cluster_gpus

    from workbench.core.events import CaseResult, RunFinished
    from workbench.core.project.folder import Project
    from workbench.core.run.session import RunSpec, run_project

    runner = make_matrix_runner(cluster[1])
    try:
        deadline = time.monotonic() + 60
        while cluster_gpus() != {"FAKE_A": 2, "FAKE_B": 1}:  # the second node may still be joining
            assert time.monotonic() < deadline, cluster_gpus()
            time.sleep(0.5)
        runner.close()
        runner = make_matrix_runner(cluster[1])
        assert runner.kinds == ["FAKE_A", "FAKE_B"]
        events = []
        outcome = run_project(Project.open(make_project(kernels.GOOD, toml=ONLY_CASES)), runner, RunSpec(("verify",)), events.append)
    finally:
        runner.close()
    tuned = sorted((r.case_index, r.gpu.split()[-1]) for r in outcome.of_type(CaseResult) if not r.config and not r.generated)
    assert tuned == [(i, kind) for i in range(3) for kind in ("FAKE_A", "FAKE_B")]
    # the unit is the case on a kind of GPU: 3 cases on 2 kinds (their forced configs counted beside)
    assert sum(isinstance(e, RunFinished) for e in events) == 1 and outcome.finished.passed == 6


def test_per_gpu_kind_needs_a_cluster(make_project, plugin_cli):
    import workbench_ray

    code, out, err = plugin_cli(workbench_ray, "ray", "bench")(make_project(kernels.GOOD, toml=ONLY_CASES),
                                                              "--per-gpu-kind")
    assert code == 2 and "--per-gpu-kind needs --cluster" in err


def test_a_verify_of_several_projects_gets_lanes_sharing_the_cluster_as_this_machine_does(monkeypatch):
    """A cluster verifies several projects side by side, as `--gpus` does here (RESULTS 3v: one project at a time
    over 2 H200s took 306 s where the local lanes took 57 s): lanes per GPU from the cluster's cores per GPU (or
    WORKBENCH_PROJECTS_PER_GPU), the cluster's workers (one per two cores) shared among them, each actor asking
    for its share of a GPU so that every lane's workers are placed at once."""
    from workbench_ray.runner import verify_lanes

    monkeypatch.delenv("WORKBENCH_PROJECTS_PER_GPU", raising=False)
    monkeypatch.delenv("WORKBENCH_WORKERS", raising=False)
    assert verify_lanes(16, gpus=2, cpus=32) == (8, 2, 1 / 8)  # the 2 x H200 host: the local run's 8 lanes x 2
    assert verify_lanes(1, gpus=2, cpus=32) == (1, 2, 1.0)  # one project: its cases over every GPU, whole ones
    assert verify_lanes(3, gpus=2, cpus=4) == (2, 1, 1.0)  # few cores: a lane per GPU, a GPU per worker
    assert verify_lanes(40, gpus=8, cpus=256) == (32, 4, 1 / 16)  # 4 lanes per GPU at most, 8 workers per lane cap
    monkeypatch.setenv("WORKBENCH_PROJECTS_PER_GPU", "2")
    assert verify_lanes(3, gpus=2, cpus=4) == (3, 1, 1 / 2)
    monkeypatch.setenv("WORKBENCH_WORKERS", "24")  # the workers of the whole cluster, shared among its lanes
    assert verify_lanes(16, gpus=2, cpus=32) == (4, 6, 1 / 12)


@pytest.mark.slow
def test_several_projects_verify_in_lanes_over_the_cluster_and_disconnect_once(cluster, make_project, monkeypatch,
                                                                                tmp_path):
    from workbench_ray.runner import connect_runner

    monkeypatch.setenv("WORKBENCH_PROJECTS_PER_GPU", "2")
    if ray.is_initialized():  # an earlier test's connection: this one connects itself
        ray.shutdown()
    runners = connect_runner(cluster[1], interpret=True, keep_warm=True, projects=4, stages=["verify"])
    try:
        # 3 GPUs, 6 CPUs, 2 lanes per GPU: 4 lanes of 1 worker, each actor half a GPU; one connection for all
        assert len(runners) == 4 and len({id(r.supply.source.connection) for r in runners}) == 1
        assert {r.supply.source.share for r in runners} == {0.5} and {r.parallel for r in runners} == {1}
    finally:
        for runner in runners[:-1]:
            runner.close()
            runner.supply.source.close()  # closed twice: still one lane letting go
            assert ray.is_initialized()  # the others still use it
        runners[-1].close()
    assert not ray.is_initialized()  # the last lane to close disconnected

    projects = [make_project(kernels.GOOD, toml=ONLY_CASES, name=f"p{i}") for i in range(4)]
    done = workbench("verify", *projects, "--cluster", cluster[0], "--json")
    said = f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, said
    records = json.loads(done.stdout)["projects"]
    assert [r["kernel"] for r in records] == [str(p / "kernel.py") for p in projects], said
    for record in records:
        tuned = [c for c in record["cases"] if not c["config"]]
        assert record["verdict"] == "passed" and [c["case_index"] for c in tuned] == [0, 1, 2], said
        assert all(re.fullmatch(r"\S+/[01] FAKE_[AB]", c["gpu"]) for c in tuned), tuned
