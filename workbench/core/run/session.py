"""One run of one project, from the parent's side: config, cache, job, events, outcome; and `Session`, the one owner
of a front end's runs.

Every front end (the CLI's verify, bench and ir, the app's live loop, pytest --workbench, the MCP server, the
profiler and sanitizer plugins, `doctor --measure`) opens a `Session`, describes each run with a `RunSpec` and runs
it through the session, then renders the outcome. The session chooses the runner (a plugin's, else lanes over the
GPUs; a tool's launcher gets one of its own), `run_project` builds the Job (the only place one is built) and fires
the plugins' notification hooks (`PluginHooks`). Nothing here imports the kernel (the Runner's worker does).
"""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from ..events import (
    AutotuneReport,
    BenchResult,
    CaseResult,
    CompiledKernels,
    DeviceFacts,
    Event,
    LogLine,
    Problem,
    Requeued,
    RunFinished,
    RunStarted,
    WorkerReady,
)
from .. import heap
from ..project.kept import load_baselines, load_findings, remember_baselines, remember_findings
from ..project.config import ConfigError, draw_seed
from ..project.folder import Project, read_source_bytes, source_hash, watched_files
from ..project.history import RunRecord, append_record
from ..stage import BENCH_STAGES, COMPILE_TARGET_ENV, Job
from ..timing.stats import bench_rows, bench_summary
from ..verdict import ENVIRONMENT_KINDS, Tally, Verdict
from .contracts import OnEvent, RunnerLike
from .factory import choose_runners, make_runner
from .project_lanes import ProjectLanes

FINDING_RANK = {"passed": 0, "refused": 1, "failed": 2}  # a compatibility finding's worst case wins


@dataclass
class RunOutcome:
    project: Project
    source_hash: str
    stages: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    finished: RunFinished | None = None
    record: RunRecord | None = None

    @property
    def verdict(self) -> Verdict:
        return self.tally.verdict()

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    @property
    def ready(self) -> WorkerReady | None:
        return next((e for e in self.events if isinstance(e, WorkerReady)), None)

    @property
    def started(self) -> RunStarted | None:
        return next((e for e in self.events if isinstance(e, RunStarted)), None)

    @property
    def seed(self) -> int | None:
        """The seed the run's inputs were drawn from (config.inputs_seed), as its worker said; None: not started."""
        started = self.started
        return started.seed if started is not None else None

    def of_type(self, cls: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, cls)]

    def case_results(self) -> list[CaseResult]:
        """Every CaseResult in case order (verification shards finish in any order); stable within a case."""
        return sorted(self.of_type(CaseResult), key=lambda r: r.case_index)

    def compatibility(self) -> dict[str, dict[str, Any]]:
        """The compatibility findings (CaseResult.compat) by check: status (the worst of its cases': failed, then
        refused, kernel_fn saying no before launching, then passed), whether the project requires it, and each
        case it ran on with its status and whole error."""
        found: dict[str, dict[str, Any]] = {}
        for r in self.case_results():
            if r.config or r.phase:
                continue
            for name, finding in r.compat.items():
                entry = found.setdefault(name, {"status": "passed", "required": finding["required"], "cases": []})
                entry["cases"].append({"case_index": r.case_index, "label": r.label, "dtype": r.dtype,
                                       "status": finding["status"], "error": finding["error"],
                                       "key": finding.get("key", ""), "kept": finding.get("kept", ""),
                                       **({"notes": finding["notes"]} if finding.get("notes") else {})})
                if FINDING_RANK[finding["status"]] > FINDING_RANK[entry["status"]]:
                    entry["status"] = finding["status"]
        return found

    def to_record(self) -> dict[str, Any]:
        """The run as a JSON-ready dict: the history record and `--json` output."""
        ready = self.ready
        return {
            "project": self.project.name,
            "kernel": str(self.project.kernel_path),
            "stages": self.stages,
            "source_hash": self.source_hash,
            "mode": ready.mode if ready else None,
            "device": ready.device_name if ready else None,
            "torch": ready.torch_version if ready else None,
            "triton": ready.triton_version if ready else None,
            "verdict": self.verdict.status,
            "verdict_label": self.verdict.label,  # the word every report says: VERIFIED, FAILED, NOT USABLE ...
            "exit_code": self.verdict.exit_code,
            "counts": self.verdict.counts,
            "cases": [_plain(r) for r in self.case_results()],
            "problems": [_plain(p) for p in self.of_type(Problem)],
            "after_verification": [_plain(p) for p in self.tally.later_problems],  # Verdict.of_record
            "compatibility": self.compatibility(),
            "requeued": [_plain(r) for r in self.of_type(Requeued)],
            "duration_s": self.finished.duration_s if self.finished else None,
            "seed": self.seed,
            **self._bench_fields(),
        }

    def _bench_fields(self) -> dict[str, Any]:
        """The benchmark part of the record: GPU facts, timings (record["bench"], read by `workbench diff`),
        autotuning, and the one-line summary `workbench history` prints."""
        facts = self.of_type(DeviceFacts)
        results = self.of_type(BenchResult)
        if not facts and not results:
            return {}
        return {
            "device_facts": _plain(facts[0]) if facts else None,
            "devices": [_plain(f) for f in facts],  # several when one run spanned GPU kinds (--per-gpu-kind)
            "bench": bench_rows(results),
            "autotune": [_plain(a) for a in self.of_type(AutotuneReport)],
            "compiled": [_plain(c) for c in self.of_type(CompiledKernels)],  # each config's registers, occupancy
            "bench_summary": bench_summary(results),
        }


def _plain(event: Event) -> dict[str, Any]:
    data = event.to_dict()
    data.pop("type", None)
    return data


def worth_recording(outcome: RunOutcome) -> bool:
    """A finished run of this very source that tried the kernel.

    Not recorded: a cancelled run, one whose worker read a newer save, and one the
    machine refused before any case ran (bench on the CPU, no torch): nothing was learnt
    about the kernel, and it must not hide the last real verdict.
    """
    if outcome.finished is None or outcome.finished.verdict == "cancelled":
        return False
    started = outcome.started
    if started is not None and started.source_hash != outcome.source_hash:
        return False
    problems = outcome.tally.all_problems
    refused = problems and all(p.kind in ENVIRONMENT_KINDS for p in problems)
    return not (refused and not outcome.of_type(CaseResult))


def read_watched_files(project: Project) -> dict[str, str]:
    """The text of every file a run depends on (folder.watched_files), by its path in the project."""
    files = {}
    for path in watched_files(project):
        try:
            files[str(path.relative_to(project.root))] = read_source_bytes(path).decode("utf-8", errors="replace")
        except (OSError, ValueError):
            continue
    return files


@dataclass(frozen=True)
class RunSpec:
    """What one run of a project does, for every front end (the CLI, the app's live loop, pytest --workbench,
    the MCP server).

    `stages`: the worker's stages ("verify", "bench", "ir", ...); `case_indices`: the cases to run (None: all);
    `pins`: autotune configs pinned by kernel name; `live`: the live loop's run (its shorter timing series;
    `reference_timings` of earlier runs reused); `timeout_s`: the command line's --timeout, over workbench.toml's;
    `options`: a plugin's own switches for its stages (Job.options); `record`: write the run to the history (a
    live loop that is not the project's recorder does not: history.RecorderLock); `fresh_baselines`: time
    torch.compile(reference_fn) again rather than reuse an earlier run's time (project/kept.py); `bench_mode`: a
    training kernel's benchmark mode ("fwd", "bwd", "full"), over workbench.toml's [bench] mode; `fresh_checks`:
    run the torch.compile and CUDA-graph checks again rather than keep an earlier run's pass (project/kept.py).

    Where the worker runs: `launcher`, the command it is started under (a profiler's: ncu, compute-sanitizer), and
    `env`, variables its environment gets (a tool's PYTHONPATH, a compile target: stage.COMPILE_TARGET_ENV); a spec
    with either gets a runner of its own, one worker, closed when the run is over (`Session.run`). `cache_dir`: a
    Triton cache of the run's own, left as it is (a tool's run keeps apart from the project's cache, which every
    other run clears first). `seed`: the seed of the inputs (the command line's --seed), over workbench.toml's
    [verify] seed, over the session's draw (`Session.seed`)."""

    stages: tuple[str, ...]
    case_indices: list[int] | None = None
    pins: dict[str, int | str] = field(default_factory=dict)
    live: bool = False
    timeout_s: float | None = None
    reference_timings: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    record: bool = True
    fresh_baselines: bool = False
    bench_mode: str = ""
    fresh_checks: bool = False
    launcher: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cache_dir: str = ""
    seed: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", tuple(self.stages))
        object.__setattr__(self, "launcher", tuple(self.launcher))

    @property
    def own_runner(self) -> bool:
        """Whether the run's worker is started its own way (a launcher, an environment): a runner made for it alone."""
        return bool(self.launcher or self.env)


class PluginHooks:
    """The notification hooks (hookspecs.workbench_observe_event, workbench_finish_run), fired by `run_project`
    for every run whatever front end started it, one call at a time (runs on several lanes share one
    PluginHooks; a plugin need not be thread-safe). A plugin that raises does not stop the run: an observer's
    failure becomes a LogLine of the run, a finish hook's is handed to `warn` (stderr by default)."""

    def __init__(self, pm: Any, warn: Callable[[str], None] | None = None):
        self.pm, self.warn = pm, warn or (lambda text: print(text, file=sys.stderr))
        self._one_at_a_time = threading.RLock()

    def observe(self, event: Event, project: Project) -> LogLine | None:
        try:
            with self._one_at_a_time:
                self.pm.hook.workbench_observe_event(event=event, project=project)
        except Exception as exc:  # noqa: BLE001 - a plugin must not stop the run
            return LogLine(text=f"plugin observer failed: {type(exc).__name__}: {exc}")
        return None

    def checks(self) -> list[dict[str, str]]:
        """The checks the plugins add (hookspecs.workbench_register_checks), as a Job carries them. Raises
        ValueError for a key registered twice or already a built-in check's."""
        from ..verify.check_keys import BUILTIN_KEYS  # not verify.checks: the parent never imports torch

        found: dict[str, Any] = {}

        def register(check: Any) -> None:
            if check.key in BUILTIN_KEYS or check.key in found:
                raise ValueError(f"check {check.key!r} is registered twice")
            found[check.key] = check

        self.pm.hook.workbench_register_checks(register=register)
        return [{"key": c.key, "target": c.target} for c in found.values()]

    def finish(self, outcome: "RunOutcome") -> None:
        try:
            with self._one_at_a_time:
                self.pm.hook.workbench_finish_run(project=outcome.project, finished=outcome.finished,
                                                  events=outcome.events)
        except Exception as exc:  # noqa: BLE001
            self.warn(f"a plugin's finish_run failed: {type(exc).__name__}: {exc}")


def run_project(project: Project, runner: RunnerLike, spec: RunSpec, on_event: OnEvent | None = None,
                hooks: PluginHooks | None = None, seed: int | None = None) -> RunOutcome:
    """Clear the project's Triton cache, run `spec`'s stages in a worker, collect the events, record the run.
    `on_event` sees each event as it arrives; `hooks`, the plugins' notification hooks, are fired for each
    event and once the run is over (before the caller reports it). `seed`: the inputs' seed where neither the spec
    nor workbench.toml names one (the session's; else one drawn for this run)."""
    outcome = _run_project(project, runner, spec, on_event, hooks, seed)
    if hooks is not None:
        hooks.finish(outcome)
    return outcome


def _run_project(project: Project, runner: RunnerLike, spec: RunSpec, on_event: OnEvent | None,
                 hooks: PluginHooks | None, seed: int | None) -> RunOutcome:
    stages = list(spec.stages)
    started = time.monotonic()
    try:
        raw = read_source_bytes(project.kernel_path)
    except OSError as exc:
        raw = b""
        problem: Problem | None = Problem(kind="import", message=f"cannot read {project.kernel_path}: {exc}",
                                          file=str(project.kernel_path))
    else:
        problem = None
    source = raw.decode("utf-8", errors="replace")
    files = read_watched_files(project)  # recorded beside the verdict: a change to any of them is a change
    outcome = RunOutcome(project=project, source_hash=source_hash(raw), stages=list(stages))

    def collect(event: Event) -> None:
        outcome.events.append(event)
        outcome.tally.add(event)
        if isinstance(event, RunFinished):
            outcome.finished = event
        failed = hooks.observe(event, project) if hooks is not None else None
        if on_event is not None:
            if failed is not None:
                on_event(failed)
            on_event(event)

    checks: list[dict[str, str]] = []
    try:
        config = project.load_config()
        checks = hooks.checks() if hooks is not None else []
    except ConfigError as exc:
        problem = Problem(kind="config", message=str(exc), file=exc.path)
    except ValueError as exc:  # a plugin's check whose key is taken
        problem = Problem(kind="config", message=f"a plugin's check: {exc}")
    if problem is not None:
        collect(problem)
        collect(outcome.tally.finished(time.monotonic() - started))
        return outcome
    project.ensure_state_dir()
    if not spec.cache_dir:
        project.clear_triton_cache()
    if spec.live:
        config = replace(config, bench=config.bench.for_live_loop())
    if spec.bench_mode:  # the command line's --mode wins over workbench.toml
        config = replace(config, bench=replace(config.bench, mode=spec.bench_mode))
    # the inputs' seed: the command line's, else workbench.toml's, else the session's draw (said in the report)
    chosen = next((v for v in (spec.seed, config.verify.seed, seed) if v is not None), None)
    config = replace(config, verify=replace(config.verify, seed=draw_seed() if chosen is None else chosen))
    if spec.timeout_s:  # the command line's --timeout wins over workbench.toml
        config = replace(config, verify=replace(config.verify, timeout_s=spec.timeout_s,
                                                 interpret_timeout_s=spec.timeout_s))
    # The baselines' kept times (the live loop keeps its own reference times, and times no torch.compile)
    keeps_baselines = "bench" in stages and not spec.live and not spec.fresh_baselines
    job = Job(kernel_path=str(project.kernel_path), stages=stages, config=config.to_dict(),
              case_indices=spec.case_indices, cache_dir=spec.cache_dir or str(project.triton_cache_dir), pins=dict(spec.pins),
              live=spec.live, reference_timings=dict(spec.reference_timings), options=dict(spec.options),
              kept_baselines=load_baselines(project) if keeps_baselines else {},
              kept_findings=load_findings(project) if not spec.live and not spec.fresh_checks else {},
              checks=checks)
    verify = config.verify
    # Benchmarking has long quiet spells (a cold torch.compile); verification's time-out would kill it.
    limit = max(verify.timeout_s, config.bench.timeout_s) if "bench" in stages else verify.timeout_s
    runner.run(job, collect, timeout_s=limit, interpret_timeout_s=verify.interpret_timeout_s)
    remember_baselines(project, outcome.of_type(BenchResult))
    remember_findings(project, outcome.compatibility())
    if spec.record and worth_recording(outcome):
        outcome.record = append_record(project, outcome.to_record(), source, files, config.history)
    return outcome


def compile_for_target(project: Project, target: str, case_indices: list[int] | None = None) -> RunOutcome:
    """The project's kernels compiled for a named GPU architecture ("sm_90") and nothing run (`workbench ir
    --target`, the app's IR tab without a GPU): a worker of its own kind, which neither interprets nor touches
    CUDA (stage.COMPILE_TARGET_ENV), its stage "ir". Not recorded in the history."""
    with Session() as session:
        return session.run(project, RunSpec(("ir",), case_indices=case_indices, record=False,
                                            env={COMPILE_TARGET_ENV: target}))


class Session:
    """The owner of a front end's runs (docs/ARCHITECTURE.md, "A run's owner"): it chooses the runners, runs one
    project at a time with a cancel (the live loop, the MCP server, the profilers) or several over lanes (the CLI's
    verify and bench, pytest --workbench), fires the plugins' notification hooks (`hooks`) for every run, and closes
    every runner it holds.

        Session.choose(3, ["verify"], gpus="all", plugin=...)  a plugin's runner, else lanes over the chosen GPUs
        Session(hooks, [runner])              the runner a front end was handed (`workbench watch`'s, a test's)
        Session(hooks, keep_warm=True)        this machine's workers, one runner per mode made on first use
                                              (`gpus="all"`: placed on the GPUs, as the MCP server's are)
        Session()                             the profilers: each spec's launcher gets a runner of its own

    `run` blocks and takes one run at a time (a second call waits); `cancel`, from any thread, stops the run in
    progress, even one whose runner has not started yet (it is stopped at its first event). `submit`/`run_many` put
    projects on the lanes: each runner runs one project at a time (project_lanes.ProjectLanes)."""

    def __init__(self, hooks: PluginHooks | None = None, runners: Sequence[RunnerLike] = (), *,
                 interpret: bool = False, keep_warm: bool = False, gpus: str | None = None,
                 make: Callable[[bool], RunnerLike] | None = None):
        self.hooks = hooks
        self.runners = list(runners)  # chosen for the session (lanes), or handed to it; else made per mode
        self.interpret, self.keep_warm, self.gpus = interpret, keep_warm, gpus
        self._make = make  # interpret -> a runner, for a mode without one (a test's stand-in)
        self._made: dict[bool, RunnerLike] = {}
        self._lanes: ProjectLanes[Any, RunOutcome] | None = None
        self._one_at_a_time = threading.Lock()
        self._state = threading.Lock()
        self._current: RunnerLike | None = None
        self._cancel_asked = False
        self._closed = False
        # The seed of every run's inputs that names none (RunSpec.seed, [verify] seed): one for the session, so
        # that a command's projects, or the live loop's saves, draw the same inputs
        self.seed = draw_seed()
        if keep_warm:  # a session kept for many runs (the live loop, the MCP server): its heap stays flat (heap.py)
            heap.limit_arenas()

    @classmethod
    def choose(cls, projects: int, stages: Sequence[str], *, hooks: PluginHooks | None = None,
               interpret: bool = False, keep_warm: bool = False, gpus: str | None = "all",
               plugin: Callable[[], Any] | None = None) -> "Session":
        """A session for `projects` projects' `stages` (the CLI's verify and bench, pytest --workbench): the runner a
        plugin gives (`plugin()`, the workbench_make_runner hook), else lanes over the GPUs `gpus` selects
        (factory.choose_runners). Raises gpus.GpuSelectionError for a `gpus` that names no GPU here."""
        runners = choose_runners(projects, stages, interpret=interpret, keep_warm=keep_warm, gpus=gpus, plugin=plugin)
        return cls(hooks, runners, interpret=interpret, keep_warm=keep_warm)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the runners ----------------------------------------------------------------------------

    def runner(self, interpret: bool | None = None) -> RunnerLike:
        """The runner of the session's runs: the first of those it was given or chose (whatever the mode: they were
        chosen for one), else the one of the mode asked (default: the session's), made on first use and kept."""
        if self.runners:
            return self.runners[0]
        mode = self.interpret if interpret is None else interpret
        with self._state:
            if mode not in self._made:
                self._made[mode] = self._new_runner(mode)
            return self._made[mode]

    def _new_runner(self, interpret: bool) -> RunnerLike:
        if self._make is not None:
            return self._make(interpret)
        if self.gpus is None:  # the environment's GPUs, no placement
            return make_runner(interpret=interpret, keep_warm=self.keep_warm)
        return choose_runners(1, BENCH_STAGES, interpret=interpret, keep_warm=self.keep_warm, gpus=self.gpus)[0]

    def _own_runner(self, spec: RunSpec, interpret: bool | None) -> RunnerLike:
        """A runner for one run whose worker starts its own way (RunSpec.launcher, .env): one worker at a time."""
        mode = self.interpret if interpret is None else interpret
        return make_runner(interpret=mode, env=dict(spec.env) or None, launcher=spec.launcher, parallel=1)

    def prewarm(self, interpret: bool | None = None) -> None:
        """Start the spares of the session's runner now, so that its first run is warm too."""
        self.runner(interpret).prewarm()

    # -- one run at a time ----------------------------------------------------------------------

    def run(self, project: Project, spec: RunSpec, on_event: OnEvent | None = None,
            interpret: bool | None = None) -> RunOutcome:
        """One run of `project` (blocking; one at a time: a second call waits for the first), on the session's
        runner of the mode `interpret` (default: the session's), or on one of its own for a spec with a launcher or
        an environment (closed when the run is over)."""
        with self._one_at_a_time:
            own = spec.own_runner
            runner = self._own_runner(spec, interpret) if own else self.runner(interpret)
            try:
                return run_project(project, runner, spec, self._watching(runner, on_event), self.hooks, self.seed)
            finally:
                with self._state:
                    self._current = None
                if own:
                    runner.close()
                if self.keep_warm:
                    heap.give_back_freed()

    def run_stage(self, stage: str, on_event: OnEvent, timeout_s: float | None = None) -> RunFinished:
        """A stage about this machine rather than a project's kernel (`doctor --measure`: "measure_ceilings"): a job
        with no kernel, in one worker of its own, in the session's mode."""
        with self._one_at_a_time:
            runner = make_runner(interpret=self.interpret, parallel=1)
            try:
                return runner.run(Job(kernel_path="", stages=[stage]), self._watching(runner, on_event),
                                  timeout_s=timeout_s)
            finally:
                with self._state:
                    self._current = None
                runner.close()

    def _watching(self, runner: RunnerLike, on_event: OnEvent | None) -> OnEvent:
        """`runner`'s run made the one in progress: the events relayed to `on_event`, and a cancel asked before the
        runner had started the run carried out at its first event."""
        with self._state:
            self._current, self._cancel_asked = runner, False

        def relay(event: Event) -> None:
            if self._cancel_asked:
                runner.cancel()
            if on_event is not None:
                on_event(event)

        return relay

    def cancel(self) -> None:
        """Stop the run in progress, if any (its workers are killed; the runner stays for the next run)."""
        with self._state:
            self._cancel_asked = True
            current = self._current
        if current is not None:
            current.cancel()

    # -- several projects over the lanes --------------------------------------------------------

    def submit(self, project: Project, spec: RunSpec, on_event: OnEvent | None = None,
               on_start: Callable[[], None] | None = None,
               on_done: Callable[[RunOutcome], None] | None = None) -> "Future[RunOutcome]":
        """`project`'s run of `spec` on the session's lanes, whose runners each run one project at a time, taking
        the next in the order submitted. On the lane: `on_start()` as the run begins, `on_done(outcome)` once it is
        over, before the future has its outcome."""
        runners = self.runners or [self.runner()]
        with self._state:
            if self._lanes is None:
                self._lanes = ProjectLanes(runners, self._run_on_lane)
            lanes = self._lanes
        return lanes.submit(_LaneRun(project, spec, on_event, on_start, on_done))

    def _run_on_lane(self, item: "_LaneRun", runner: RunnerLike) -> RunOutcome:
        if item.on_start is not None:
            item.on_start()
        outcome = run_project(item.project, runner, item.spec, item.on_event, self.hooks, self.seed)
        if item.on_done is not None:
            item.on_done(outcome)
        return outcome

    def result(self, future: "Future[RunOutcome]") -> RunOutcome:
        """A submitted run's outcome once its lane has run it; a run that raised raises here (and so does every
        project not started after it: project_lanes.ProjectLanes.result)."""
        assert self._lanes is not None, "nothing was submitted"
        return self._lanes.result(future)

    def run_many(self, projects: Sequence[Project], spec: RunSpec,
                 on_event: Callable[[Project, Event], None] | None = None,
                 on_start: Callable[[Project], None] | None = None,
                 on_done: Callable[[int, RunOutcome], None] | None = None) -> list[RunOutcome]:
        """Every project's run of `spec` over the lanes; their outcomes in the projects' order. On the lanes, as each
        run goes: `on_start(project)`, `on_event(project, event)`, then `on_done(index, outcome)`."""

        def submit(index: int, project: Project) -> "Future[RunOutcome]":
            return self.submit(project, spec,
                               (lambda event: on_event(project, event)) if on_event is not None else None,
                               (lambda: on_start(project)) if on_start is not None else None,
                               (lambda outcome: on_done(index, outcome)) if on_done is not None else None)

        futures = [submit(index, project) for index, project in enumerate(projects)]
        return [self.result(future) for future in futures]

    # -- the end --------------------------------------------------------------------------------

    def close(self, wait_s: float | None = None) -> None:
        """No more runs: the lanes end once their current project does, and every runner the session holds is
        closed (its workers killed). `wait_s`: close them in the background and wait at most that long (whatever
        is left ends with this process)."""
        with self._state:
            if self._closed:
                return
            self._closed = True
            lanes, made = self._lanes, list(self._made.values())
        runners = [*self.runners, *made]
        if lanes is not None:  # the lanes close their own runners
            lanes.close()
            runners = [r for r in runners if all(r is not laned for laned in lanes.runners)]
        if wait_s is None:
            for runner in runners:
                runner.close()
            return
        closing = [threading.Thread(target=runner.close, daemon=True) for runner in runners]
        for thread in closing:
            thread.start()
        deadline = time.monotonic() + wait_s
        for thread in closing:
            thread.join(max(0.0, deadline - time.monotonic()))


@dataclass(frozen=True)
class _LaneRun:
    """A run waiting for a lane (Session.submit)."""

    project: Project
    spec: RunSpec
    on_event: OnEvent | None
    on_start: Callable[[], None] | None
    on_done: Callable[[RunOutcome], None] | None
