"""The state of one run as the screen shows it, folded from its events. No Textual here.

`RunState.apply(event)` takes every event of one run, in order, and returns the
names of the panels whose content changed; the widgets render from the state.
The verdict is core/verdict.py's, from a Tally of the run's events, as the CLI and the history have
it: the verification's own; a benchmark that was refused (no GPU) or that failed is the benchmark
panel's business, never the kernel's verdict.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from ..core.events import (
    AutotuneReport,
    BenchResult,
    CaseResult,
    CompiledKernels,
    DeviceFacts,
    Event,
    LogLine,
    Problem,
    RunFinished,
    RunStarted,
    StageChanged,
    WorkerReady,
)
from ..core.live.changes import CaseKey, CaseTiming, timings_of
from ..core.live.loop import RunRequest
from ..core.live.watch import Save
from ..core.stage import RECORDING
from ..core.verdict import (
    ENVIRONMENT_KINDS,
    GPU_ONLY_KIND,
    LABELS,
    Tally,
    worst_problem,
)

# The pipeline a run goes through, as the status line draws it.
PHASES = ("cache", "compile", "verify", "bench", "done")
PHASE_LABELS = {"cache": "cache cleared", "compile": "compile", "verify": "verify", "bench": "bench", "done": "done"}
LOCATION_IN_MESSAGE = re.compile(r"\[(?P<file>[^\[\]]+?):(?P<line>\d+)\]\s*$")
DTYPE_IN_LABEL = re.compile(r"(?:^|\s)dtype=(?P<dtype>[\w.]+)")
GENERATED_SUFFIX = " (generated)"
STRESS_IN_LABEL = re.compile(r" \[(?P<stress>[^\]]+)\]$")  # "rows=8 cols=300 [values x64]": a value-stress case
# What stopped a run, by the problem's kind, as the stage bar says it ("✘ import: syntax error").
STOPPED_BY = {"config": "bad workbench.toml", "syntax": "syntax error", "import": "import failed",
              "contract": "kernel.py contract", "inputs": "get_inputs failed", "reference": "reference_fn failed",
              "compile": "does not compile", GPU_ONLY_KIND: "GPU only", "environment": "cannot run here",
              "internal": "internal error", "crash": "worker crashed", "timeout": "timed out"}
FORWARD_OK = "forward ok"  # a case's status while only its forward has passed (CaseRow.forward)
# Problems of these kinds come from running the cases: at the earliest, the stage bar's verify stage.
CASE_STAGE_KINDS = frozenset({"inputs", "reference", GPU_ONLY_KIND})


@dataclass
class CaseRow:
    index: int
    label: str
    result: CaseResult | None = None  # the autotuner's own pick (or the only config)
    configs: list[CaseResult] = field(default_factory=list)  # each autotune config forced in turn
    forward: CaseResult | None = None  # a training kernel's forward alone, judged before its gradients (live loop)
    problems: list[Problem] = field(default_factory=list)
    tallied: str | None = None  # the case's verdict in the run's Tally (core/verdict.py), once it has a result

    run_over: bool = False  # the run ended: a case with no result was never reached

    @property
    def status(self) -> str:
        """passed | failed | error | skipped (the Tally's), else gpu only | error | not run | pending; "forward ok"
        while a training kernel's forward passed and its gradients have no verdict yet."""
        if self.tallied is not None:
            if self.result is None and self.forward is not None and self.tallied == "passed":
                return FORWARD_OK
            return self.tallied
        if any(p.kind == GPU_ONLY_KIND for p in self.problems):
            return "gpu only"  # the interpreter cannot run what the kernel uses: no verdict, not an error
        return "error" if self.problems else "not run" if self.run_over else "pending"

    @property
    def dtype(self) -> str:
        """The case's dtype: its result's, else the one its label names (a case that raised has no result dtype)."""
        if self.result is not None and self.result.dtype:
            return self.result.dtype
        match = DTYPE_IN_LABEL.search(self.label)
        return match["dtype"] if match else ""

    @property
    def generated(self) -> bool:
        return bool(self.result is not None and self.result.generated) or self.label.endswith(GENERATED_SUFFIX)

    @property
    def stress(self) -> str:
        """The value stress of a value-stress case ("values x64"), "" for any other."""
        match = STRESS_IN_LABEL.search(self.label.removesuffix(GENERATED_SUFFIX))
        return match["stress"] if match else ""

    @property
    def params(self) -> str:
        """The label without its dtype (a column of its own), its value stress and " (generated)" (said apart)."""
        label = STRESS_IN_LABEL.sub("", self.label.removesuffix(GENERATED_SUFFIX))
        dtype = self.dtype
        if dtype:
            label = label.replace(f" dtype={dtype}", "").replace(f"dtype={dtype}", "").strip()
        return label or self.label

    @property
    def configs_passed(self) -> tuple[int, int]:
        # a config this GPU cannot launch (skipped, as the autotuner skips it) is neither
        return sum(c.status == "passed" for c in self.configs), sum(c.status != "skipped" for c in self.configs)

    def location(self) -> tuple[str, int] | None:
        """Where in the source this case went wrong, when an error says so."""
        for problem in self.problems:
            if problem.file and problem.line:
                return problem.file, problem.line
        for result in [self.result, *self.configs]:
            for message in (result.messages if result else []):
                match = LOCATION_IN_MESSAGE.search(message)
                if match:
                    return match["file"], int(match["line"])
        return None


@dataclass
class RunState:
    run_id: int
    request: RunRequest
    created_at: float = field(default_factory=time.time)
    ready: WorkerReady | None = None
    started: RunStarted | None = None
    stage: StageChanged | None = None
    rows: dict[int, CaseRow] = field(default_factory=dict)
    tally: Tally = field(default_factory=Tally)  # every event: the verdict, and which problems are whose
    bench: list[BenchResult] = field(default_factory=list)
    device: DeviceFacts | None = None
    autotune: list[AutotuneReport] = field(default_factory=list)
    compiled: list[CompiledKernels] = field(default_factory=list)  # per benchmark case: each config's facts
    logs: list[LogLine] = field(default_factory=list)
    finished: RunFinished | None = None
    planned: list[int] = field(default_factory=list)  # verification's cases, in order
    benchmarking: bool = False
    verified: bool = False  # every verification case has its verdict (a sharded run says so)
    verdict_at: float | None = None  # wall clock when the verdict became known
    forward_at: float | None = None  # ... a training kernel's forward verdict (every case's forward judged)
    bench_at: float | None = None  # ... and the first benchmark result
    failure_shown: bool = False  # the first failing case has been put on screen
    problem_phases: dict[int, str] = field(default_factory=dict)  # id(problem) -> the phase it came in
    importing_problems: set[int] = field(default_factory=set)  # id(problem) of those that came while importing

    def apply(self, event: Event) -> set[str]:
        """Fold one event in; returns the panels to redraw (status, cases, bench, autotune, log)."""
        changed = {"status"}
        if isinstance(event, Problem) and not self.tally.past_verification:
            self.problem_phases[id(event)] = self.phase
            if self.stage is not None and self.stage.stage == "importing":
                self.importing_problems.add(id(event))
        self.tally.add(event)
        if isinstance(event, WorkerReady):
            self.ready = event
        elif isinstance(event, RunStarted):
            # A worker that replaced a crashed one starts again with the cases left: keep the first.
            self.started = self.started or event
            self.planned += [i for i in event.planned if i not in self.planned]
            for index in event.planned:
                self.rows.setdefault(index, CaseRow(index=index, label=f"case {index}"))
            changed.add("cases")
        elif isinstance(event, StageChanged):
            self.stage = event
            if event.stage == "benchmarking":
                self.benchmarking = True
            elif event.stage == "verified":
                self.verified = True
            if event.case_index is not None and event.stage == "verifying":
                row = self.rows.setdefault(event.case_index, CaseRow(index=event.case_index, label=event.detail))
                row.label = event.detail or row.label
                changed.add("cases")
        elif isinstance(event, CaseResult):
            row = self.rows.setdefault(event.case_index, CaseRow(index=event.case_index, label=event.label))
            row.label = event.label
            if event.config:
                row.configs.append(event)
            elif event.phase == "forward":
                row.forward = event
            else:
                row.result = event
            row.tallied = self.tally.case_status(event.case_index)
            if self.forward_at is None and self.forward_verdict() is not None:
                self.forward_at = time.time()
            changed.add("cases")
        elif isinstance(event, Problem):
            if self.tally.past_verification:  # after the verdict: the benchmark's business
                self.benchmarking = True
                changed.add("bench")
            else:
                if event.case_index is not None:
                    row = self.rows.setdefault(event.case_index, CaseRow(index=event.case_index,
                                                                         label=f"case {event.case_index}"))
                    row.problems.append(event)
                    changed.add("cases")
            changed.add("log")
        elif isinstance(event, DeviceFacts):
            self.device, self.benchmarking = event, True
            changed.add("bench")
        elif isinstance(event, BenchResult):  # a case timed again replaces its earlier row
            self.bench = [b for b in self.bench if b.case_index != event.case_index] + [event]
            self.benchmarking = True
            changed.add("bench")
        elif isinstance(event, AutotuneReport):
            self.autotune.append(event)
            changed.add("autotune")
        elif isinstance(event, CompiledKernels):
            self.compiled.append(event)
            changed.add("autotune")
        elif isinstance(event, LogLine):
            self.logs.append(event)
            changed.add("log")
        elif isinstance(event, RunFinished):
            self.finished = event
            for row in self.rows.values():
                row.run_over = True
            changed |= {"cases", "bench", "autotune"}
        if self.verdict_at is None and self.verdict_known:
            self.verdict_at = time.time()
        if self.bench_at is None and self.bench and self.verdict == "passed":
            self.bench_at = time.time()
        return changed

    # -- what the run says ---------------------------------------------------------------

    @property
    def source_hash(self) -> str:
        if self.started is not None:
            return self.started.source_hash
        return self.request.save.kernel_hash if self.request.save else ""

    @property
    def bench_refused(self) -> bool:
        """The bench stage said it cannot time here (no GPU)."""
        return any(p.kind in ENVIRONMENT_KINDS for p in self.bench_problems)

    @property
    def verdict_known(self) -> bool:
        return self.finished is not None or self.benchmarking or self.verified

    def so_far(self) -> tuple[int, int, int]:
        """While verification runs: (cases with a verdict, cases planned, failing among them)."""
        judged = [r for r in self.rows.values() if r.result is not None and r.status != "skipped"]
        failing = sum(r.status in ("failed", "error") for r in judged)
        return len(judged), len([r for r in self.rows.values() if r.status != "skipped"]), failing

    def forward_verdict(self) -> tuple[int, int] | None:
        """A training kernel's forward verdict in the live loop, once every case's forward is judged: (cases whose
        forward passed, cases whose forward failed). None before, and for a forward-only kernel."""
        rows = [r for r in self.rows.values() if r.status != "skipped"]
        if not any(r.forward is not None for r in rows) or any(r.forward is None and r.result is None for r in rows):
            return None
        judged = [r.forward for r in rows if r.forward is not None]
        failed = sum(f.status in ("failed", "error") for f in judged)
        return len(judged) - failed, failed

    @property
    def problems(self) -> list[Problem]:
        """Of the project and its verification."""
        return self.tally.problems

    @property
    def bench_problems(self) -> list[Problem]:
        """Of the stages after verification (a refused or failed benchmark)."""
        return self.tally.later_problems

    @property
    def verdict(self) -> str:
        """running | passed | failed | gpu_only | error | cancelled (core/verdict.py's Verdict.status)."""
        if self.finished is not None and self.finished.verdict == "cancelled":
            return "cancelled"
        if not self.verdict_known:
            return "running"
        return self.tally.verdict().status

    @property
    def stopped(self) -> tuple[str, str, Problem] | None:
        """A run that stopped before its cases could give a verdict (a syntax error, a bad workbench.toml, a
        kernel the interpreter cannot run): (the phase where it stopped, the word for it, what stopped it)."""
        if self.finished is None or self.verdict not in ("error", "gpu_only"):
            return None
        _, problem = worst_problem(self.problems)
        if problem is None:
            return None
        phase = self.problem_phases.get(id(problem), "cache")
        if problem.kind in CASE_STAGE_KINDS and PHASES.index(phase) < PHASES.index("verify"):
            phase = "verify"
        if phase in ("bench", "done"):
            phase = "verify"
        where = {"cache": "start", "compile": "import" if id(problem) in self.importing_problems else "compile",
                 "verify": "verify"}[phase]
        return phase, where, problem

    @property
    def verdict_label(self) -> str:
        """What the status badge says: core/verdict.py's label ("VERIFIED", "GPU ONLY", "CANNOT RUN HERE" ...)."""
        verdict = self.verdict
        return self.tally.verdict().label if verdict not in ("running", "cancelled") else LABELS[verdict]

    @property
    def phase(self) -> str:
        """Where in PHASES the run is now (the current phase is the one not yet done)."""
        if self.finished is not None:
            return "done"
        if self.benchmarking or (self.verified and "bench" in self.request.stages):
            return "bench"
        if self.ready is None:
            return "cache"
        if self.stage is None or self.stage.stage in ("importing", RECORDING):
            return "compile"  # kernel.py imported, then each case's launcher run to see what it compiles
        if self.stage.stage == "verifying" and self.stage.current <= 1 and not self._any_result():
            return "compile"  # the first case's first call compiles the kernel
        return "verify"

    def _any_result(self) -> bool:
        return any(row.result is not None for row in self.rows.values())

    def ordered_rows(self) -> list[CaseRow]:
        ranked = {index: n for n, index in enumerate(self.planned)}
        return sorted(self.rows.values(), key=lambda r: (ranked.get(r.index, len(ranked)), r.index))

    def first_location(self) -> tuple[str, int] | None:
        for problem in self.problems:
            if problem.file and problem.line:
                return problem.file, problem.line
        for row in self.ordered_rows():
            location = row.location()
            if location:
                return location
        return None

    @property
    def bench_shown(self) -> bool:
        """Benchmark results belong on screen only for a kernel that verified."""
        return self.verdict == "passed" and bool(self.bench)

    def case_timings(self) -> dict[CaseKey, CaseTiming]:
        """The kernel's timed cases with their kept samples: what the Changes tab compares with earlier runs."""
        return timings_of(self.bench, [self.device] if self.device is not None else [])

    def configs_of(self, kernel: str) -> list[str]:
        """The configs verification forced for one autotuned kernel, in the tuner's order (pin indices)."""
        seen: list[str] = []
        prefix = f"{kernel}: "
        for row in self.ordered_rows():
            for result in row.configs:
                if result.config.startswith(prefix) and result.config not in seen:
                    seen.append(result.config)
        return seen


@dataclass
class LiveSession:
    """Everything the screen shows besides one run: what is on disk, what is pending, the switches."""

    project_name: str
    kernel_name: str
    latest: RunState | None = None  # the newest run asked for: the status line follows its progress
    current: RunState | None = None  # the run whose results are on screen (the latest, once it reports)
    benched: RunState | None = None  # the newest run whose benchmark is on screen
    last_save: Save | None = None
    missing: tuple[str, ...] = ()
    bench_on: bool = True
    pins: dict[str, int] = field(default_factory=dict)  # autotuned kernel -> forced config index
    pin_labels: dict[str, str] = field(default_factory=dict)  # ... and that config, described
    ready: WorkerReady | None = None  # the last worker that reported in
    kernel_times: list[float] = field(default_factory=list)  # kernel time (ms) per timed run, oldest first
    compiled_run: RunState | None = None  # the newest run that reported its compiled kernels
    compiled_before: list[CompiledKernels] = field(default_factory=list)  # ... and the one before it, its kernels

    def note_compiled(self, run: RunState) -> None:
        """`run` reported compiled kernels: the run before it becomes what their facts are compared with."""
        if self.compiled_run is not run:
            if self.compiled_run is not None:
                self.compiled_before = list(self.compiled_run.compiled)
            self.compiled_run = run

    @property
    def disk_hash(self) -> str:
        return self.last_save.kernel_hash if self.last_save else ""

    @property
    def stale(self) -> bool:
        """What is on screen is not the verdict of the source on disk."""
        if self.missing:
            return True
        run = self.current
        if run is None:
            return False  # nothing has run yet: nothing on screen to be stale
        if self.latest is not run:
            return True  # a newer save (or rerun) is pending
        return bool(run and self.disk_hash and run.source_hash and run.source_hash != self.disk_hash)

    @property
    def bench_stale(self) -> bool:
        return self.benched is not None and (self.stale or self.benched is not self.current)

    @property
    def bench_unavailable(self) -> str:
        """Why benchmarking cannot run here ("" when it can): the workers run the interpreter."""
        if self.ready is not None and self.ready.mode == "interpreter":
            return f"the workers run the Triton interpreter ({self.ready.reason or 'no GPU'}); nothing is timed"
        return ""

    @property
    def stages(self) -> tuple[str, ...]:
        return ("verify", "bench") if self.bench_on and not self.bench_unavailable else ("verify",)
