"""`workbench mcp`: the workbench as a Model Context Protocol server over stdio (the official `mcp` SDK).

Tools: new, verify, bench, profile, history, diff. Each returns a compact, structured result for a model
(results.py): the verdict, failing cases with the worst element, the pattern and the kernel.py line, the
shortcuts the verdict caught named as such, speed against this GPU's ceilings and torch.compile, and what
to look at next; long lists are paged (`page`). verify and bench send progress notifications as the run's
stages and cases go by, and a cancelled call (the client's `notifications/cancelled`) stops its run's
workers. Workers are kept warm between calls (runs.py: the server's one run session). The server speaks only through the protocol: while
it serves, what anything else writes to stdout goes to stderr (the SDK's stdio transport diverts it).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from workbench.core.events import CaseResult, Event, StageChanged
from workbench.core.project import (
    Catalog,
    Project,
    ProjectError,
    ScaffoldError,
    create_project,
    find_record,
    read_records,
    record_files,
    seed_value,
    source_diff,
    validate_name,
)
from workbench.core.run import PluginHooks, RunSpec, Session
from workbench.core.stage import BENCH_STAGES
from workbench.profiling import collect_profilers
from workbench.reports import timing_change

from .results import bench_result, lines_page, verify_result
from .runs import CLOSE_WAIT_S, open_session

INSTRUCTIONS = """Kernel Workbench: write an OpenAI Triton kernel in a project's kernel.py (kernel_fn,
reference_fn, get_inputs, CASES; the project's AGENTS.md says the rules), then call verify after each edit
and bench once it is VERIFIED. A verdict other than VERIFIED is a failure, whatever the numbers: "no Triton
kernel launched", "torch computed an output", "timed calls launched nothing" are shortcuts the verdict
catches, never passes. Read `next` in each result first."""


def open_project(path: str, root: Path) -> Project:
    try:
        return Project.open(str((root / path) if not Path(path).is_absolute() else Path(path)))
    except ProjectError as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:
        raise ToolError(f"{path[:200]}: {exc.strerror or exc}") from None


def required_but_not_live(project: Project) -> list[str]:
    """The checks the project requires that a live run leaves out (an unreadable workbench.toml: none here,
    the run itself reports it)."""
    try:
        return project.load_config().verify.required_but_not_live()
    except Exception:  # noqa: BLE001 - ConfigError and the like: the run says so, with the key
        return []


class Progress:
    """The run's events as progress notifications (from the run's thread, through the event loop)."""

    def __init__(self, ctx: Context):
        self.ctx, self.step, self.results = ctx, 0, 0

    def __call__(self, event: Event) -> None:
        message = ""
        if isinstance(event, StageChanged):
            counter = f" {event.current}/{event.total}" if event.total else ""
            message = f"{event.stage}{counter} {event.detail}".strip()
        elif isinstance(event, CaseResult) and not event.config and not event.phase:
            self.results += 1
            message = f"case {event.case_index} {event.status}"
        if not message:
            return
        self.step += 1
        try:
            anyio.from_thread.run(self.ctx.report_progress, self.step, None, message)
        except Exception:  # noqa: BLE001 - the call was cancelled or the client left: the run goes on to its end
            pass


def build_server(pm: Any, root: Path, runs: Session, default_interpret: bool = False) -> MCPServer:
    server = MCPServer("kernel-workbench", instructions=INSTRUCTIONS, log_level="WARNING")

    async def run_in_thread(fn: Callable[[], Any]) -> Any:
        """`fn` in a worker thread; the call cancelled (by the client) stops the run it started."""
        try:
            return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            runs.cancel()
            raise

    @server.tool()
    async def new(name: str, template: str | None = None, dir: str = "projects") -> dict[str, Any]:
        """Scaffold a project: a known op (rmsnorm, layernorm, softmax, gelu, silu_mul, add, matmul, attention) or
        any name with a template (elementwise, row, gemm, attention). Writes dir/name/ (kernel.py, workbench.toml,
        AGENTS.md); never overwrites an existing folder."""
        try:
            validate_name(name)
            scaffold = Catalog.installed(pm.hook.workbench_register_scaffolds).choose(name, template)
            target = create_project(name, root / dir, scaffold)
        except ScaffoldError as exc:
            raise ToolError(str(exc)) from None
        return {"created": str(target), "scaffold": scaffold.name, "family": scaffold.family,
                "files": sorted(p.name for p in target.iterdir()),
                "next": f"read {target / 'AGENTS.md'}, edit {target / 'kernel.py'}, then verify('{dir}/{name}')"}

    @server.tool()
    async def verify(project: str, ctx: Context, cases: list[int] | None = None, interpret: bool | None = None,
                     compatibility: bool = False, timeout_s: float | None = None, page: int = 1,
                     seed: int | None = None) -> dict[str, Any]:
        """Verify a project's kernel against its reference on every case (and every autotune config): the
        verdict (VERIFIED, FAILED, NOT USABLE, GPU ONLY), failing cases with the worst element and a pattern
        hint, problems with their kernel.py line, shortcuts caught, and what to look at next. As the live loop
        runs a save, it leaves out the compatibility checks that compile anew (torch.compile, CUDA graphs,
        non-contiguous inputs) unless the project requires one or `compatibility` is true: then it is
        `workbench verify` exactly. `interpret`: run under the Triton interpreter on the CPU (the default where
        there is no GPU). `seed`: draw the inputs from it (the result's `seed` replays a run's; default: the
        project's [verify] seed, else the server's, the same for every call). Failing cases are paged."""
        proj = open_project(project, root)
        if seed is not None:
            try:
                seed = seed_value(seed)
            except ValueError as exc:
                raise ToolError(f"seed: {exc}") from None
        mode = default_interpret if interpret is None else interpret
        live = not compatibility and not required_but_not_live(proj)
        spec = RunSpec(("verify",), case_indices=cases, timeout_s=timeout_s, live=live, seed=seed)
        outcome = await run_in_thread(lambda: runs.run(proj, spec, Progress(ctx), interpret=mode))
        result = verify_result(outcome.to_record(), page)
        if live:
            result["compatibility_checks"] = "left out (compatibility=true runs them, as `workbench verify` does)"
        return result

    @server.tool()
    async def bench(project: str, ctx: Context, cases: list[int] | None = None, timeout_s: float | None = None,
                    page: int = 1) -> dict[str, Any]:
        """Verify, then time every benchmark case on this machine's GPU: the kernel's median time and spread,
        torch's and torch.compile's, GB/s and TFLOP/s as a share of this GPU's measured ceilings. A time that is
        not posted says why (a wrong output after timing, fewer launches than a real call, a rate past the
        ceilings). Needs a GPU (exit 3 without). Rows are paged."""
        proj = open_project(project, root)
        spec = RunSpec(BENCH_STAGES, case_indices=cases, timeout_s=timeout_s)
        outcome = await run_in_thread(lambda: runs.run(proj, spec, Progress(ctx), interpret=False))
        return bench_result(outcome.to_record(), page)

    @server.tool()
    async def profile(project: str, cases: list[int] | None = None, profiler: str | None = None,
                      full: bool = False) -> dict[str, Any]:
        """Profile a project's kernel with a profiler plugin (Nsight Compute: `ncu`): its summary lines and
        metrics. Needs the plugin and a GPU."""
        proj = open_project(project, root)
        profilers = collect_profilers(pm)
        if not profilers:
            raise ToolError("no profiler is installed (Nsight Compute comes as the workbench-ncu plugin)")
        if profiler is not None and profiler not in profilers:
            raise ToolError(f"no profiler named {profiler!r}; installed: {', '.join(profilers)}")
        chosen = profilers[profiler] if profiler else next(iter(profilers.values()))
        result = await run_in_thread(lambda: chosen.run(proj, {"cases": cases, "full": full, "timeout_s": None}))
        return {"profiler": chosen.name, "project": proj.name, "exit_code": result.exit_code,
                "summary": result.summary_lines, "metrics": result.metrics, "report": result.report_path}

    @server.tool()
    async def history(project: str, last: int = 10) -> dict[str, Any]:
        """The project's recorded runs, newest last: id, when, stages, verdict, counts, source hash, speed."""
        proj = open_project(project, root)
        unreadable: list[str] = []
        records = read_records(proj, unreadable)
        runs_out = [{"id": r.id, "when": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created)),
                     "stages": r.data.get("stages", []), "verdict": r.verdict, "counts": r.counts_text,
                     "source": r.source_hash[:8], "mode": r.data.get("mode"),
                     **({"bench": r.data["bench_summary"]} if r.data.get("bench_summary") else {})}
                    for r in records[-max(1, last):]]
        return {"project": proj.name, "runs": runs_out, "total": len(records),
                **({"unreadable": unreadable} if unreadable else {})}

    @server.tool()
    async def diff(project: str, older: str = "-2", newer: str = "-1", page: int = 1) -> dict[str, Any]:
        """What changed between two recorded runs (ids, id prefixes or indexes; default the last two): the
        verdicts, each benchmark case's time, and the source diff (paged by lines)."""
        proj = open_project(project, root)
        records = read_records(proj, [])
        try:
            a, b = find_record(records, older), find_record(records, newer)
        except KeyError as exc:
            raise ToolError(str(exc.args[0])) from None
        source = source_diff(proj, a, b)
        if not source:
            source = [f"(the same sources: {', '.join(sorted(record_files(proj, b)))})"]
        return {"older": {"id": a.id, "verdict": a.verdict}, "newer": {"id": b.id, "verdict": b.verdict},
                "timing": timing_change(a.data, b.data), "source": lines_page(source, page)}

    return server


def serve(pm: Any, root: Path, interpret: bool = False, prewarm: bool = True) -> int:
    runs = open_session(PluginHooks(pm))
    server = build_server(pm, root, runs, default_interpret=interpret)
    try:
        if prewarm:
            runs.prewarm(interpret)
        server.run("stdio")
    finally:
        runs.close(wait_s=CLOSE_WAIT_S)
    return 0
