"""One run of one project, from the parent's side: config, cache, job, events, outcome.

Every front end of verify and bench (the CLI, the app's live loop, pytest --workbench, the MCP server) starts
its runs through `run_project` with a `RunSpec`, which fires the plugins' notification hooks (`PluginHooks`);
it never imports the kernel (the Runner's worker does). The profilers still build their own Job.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

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
from ..project.kept import load_baselines, load_findings, remember_baselines, remember_findings
from ..project.config import ConfigError
from ..project.folder import Project, read_source_bytes, source_hash, watched_files
from ..project.history import RunRecord, append_record
from ..stage import COMPILE_TARGET_ENV, Job
from ..timing.stats import bench_rows, bench_summary
from ..verdict import ENVIRONMENT_KINDS, Tally, Verdict
from .contracts import OnEvent, RunnerLike

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
                                       "key": finding.get("key", ""), "kept": finding.get("kept", "")})
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
    run the torch.compile and CUDA-graph checks again rather than keep an earlier run's pass (project/kept.py)."""

    stages: tuple[str, ...]
    case_indices: list[int] | None = None
    pins: dict[str, int] = field(default_factory=dict)
    live: bool = False
    timeout_s: float | None = None
    reference_timings: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    record: bool = True
    fresh_baselines: bool = False
    bench_mode: str = ""
    fresh_checks: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", tuple(self.stages))


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
        from ..verify.checks import CHECKS

        found: dict[str, Any] = {}

        def register(check: Any) -> None:
            if check.key in CHECKS or check.key in found:
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
                hooks: PluginHooks | None = None) -> RunOutcome:
    """Clear the project's Triton cache, run `spec`'s stages in a worker, collect the events, record the run.
    `on_event` sees each event as it arrives; `hooks`, the plugins' notification hooks, are fired for each
    event and once the run is over (before the caller reports it)."""
    outcome = _run_project(project, runner, spec, on_event, hooks)
    if hooks is not None:
        hooks.finish(outcome)
    return outcome


def _run_project(project: Project, runner: RunnerLike, spec: RunSpec, on_event: OnEvent | None,
                 hooks: PluginHooks | None) -> RunOutcome:
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
    project.clear_triton_cache()
    if spec.live:
        config = replace(config, bench=config.bench.for_live_loop())
    if spec.bench_mode:  # the command line's --mode wins over workbench.toml
        config = replace(config, bench=replace(config.bench, mode=spec.bench_mode))
    if spec.timeout_s:  # the command line's --timeout wins over workbench.toml
        config = replace(config, verify=replace(config.verify, timeout_s=spec.timeout_s,
                                                 interpret_timeout_s=spec.timeout_s))
    # The baselines' kept times (the live loop keeps its own reference times, and times no torch.compile)
    keeps_baselines = "bench" in stages and not spec.live and not spec.fresh_baselines
    job = Job(kernel_path=str(project.kernel_path), stages=stages, config=config.to_dict(),
              case_indices=spec.case_indices, cache_dir=str(project.triton_cache_dir), pins=dict(spec.pins),
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
    from .factory import make_runner

    runner = make_runner(env={COMPILE_TARGET_ENV: target}, parallel=1)
    try:
        return run_project(project, runner, RunSpec(("ir",), case_indices=case_indices, record=False))
    finally:
        runner.close()
