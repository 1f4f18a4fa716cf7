"""Built-in commands that look without running kernels: list, doctor, plugins, history, diff."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..commands import (
    EXIT_ENVIRONMENT,
    EXIT_OK,
    Command,
    CommandError,
    Context,
    hookimpl,
)
from ..core.fsutil import inductor_cache_dir
from ..core.project.folder import Project, ProjectError, find_projects
from ..core.project.config import ConfigError
from ..core.project.history import (
    changed_since,
    find_record,
    holding,
    last_record,
    pins,
    prune,
    read_records,
    record_files,
    set_pin,
    source_diff,
)
from ..core.run.workers import WorkerProcess, WorkerStartError
from ..core.text import plural
from ..plugins import loaded_plugins
from .benchmarking import cached_ceilings_row, measure_ceilings


def _open_project(path: str) -> Project:
    try:
        return Project.open(path)
    except ProjectError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:  # a name too long for the file system, a folder not ours to read
        raise CommandError(f"{path[:80]}{'...' if len(path) > 80 else ''}: {exc.strerror or exc}") from None


# -- list -------------------------------------------------------------------------------

def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default="projects", type=Path, help="folder holding projects (default: ./projects)")


def _list(args: argparse.Namespace, context: Context) -> int:
    projects = find_projects(args.dir)
    if not projects:
        here = Path.cwd()
        if (here / "kernel.py").is_file() and str(args.dir) == "projects":  # inside a project, not above one
            print(f"this folder is the project {here.name}: `workbench history` shows its runs; `workbench list` "
                  "lists the projects under ./projects from the folder above")
            return EXIT_OK
        print(f"no projects under {args.dir}/ (create one: workbench new rmsnorm)")
        return EXIT_OK
    for project in projects:
        unreadable: list[str] = []
        record = last_record(project, unreadable)
        say_unreadable(unreadable)
        if record is None:
            print(f"{project.name:<20} never run")
            continue
        changed = changed_since(project, record)
        stale = f" ({', '.join(changed)} changed since)" if changed else ""
        where = record.data.get("mode") or "?"
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.created)) + f" on {where}"
        print(f"{project.name:<20} {record.verdict_label + stale:<40} {when}  {record.counts_text}")
    return EXIT_OK


def say_unreadable(unreadable: list[str]) -> None:
    """History records that could not be read (and were skipped), one warning line each, on stderr."""
    for line in unreadable:
        print(f"workbench: warning: {line}", file=sys.stderr)


# -- doctor -----------------------------------------------------------------------------

def _doctor_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--interpret", action="store_true", help="probe the interpreter path even with a GPU")
    parser.add_argument("--measure", action="store_true",
                        help="re-measure this GPU's ceilings (copy GB/s, bf16 matmul TFLOP/s) and cache them")


def _nvidia_smi() -> str:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "not found"
    try:
        out = subprocess.run([exe, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"failed: {exc}"
    return out.stdout.strip().replace("\n", "; ") or out.stderr.strip()[:200]


def _doctor(args: argparse.Namespace, context: Context) -> int:
    rows: list[tuple[str, str]] = []
    code = EXIT_OK
    worker = WorkerProcess(interpret=args.interpret)
    try:
        ready = worker.wait_ready(timeout=120)
    except WorkerStartError as exc:
        rows.append(("worker", f"FAILED: {exc.problem.message}"))
        if exc.problem.traceback:
            rows.append(("", exc.problem.traceback.strip().splitlines()[-1]))
        code = EXIT_ENVIRONMENT
        ready = None
    finally:
        worker.close_unused()
    if ready is not None:
        rows += [("mode", ready.mode + (f" ({ready.reason})" if ready.reason else "")),
                 ("device", ready.device_name), ("torch", ready.torch_version), ("triton", ready.triton_version),
                 ("python (worker)", ready.python_version), ("worker warm-up", f"{ready.warmup_s:.2f} s")]
    if ready is not None and ready.mode == "gpu":
        rows.append(cached_ceilings_row(ready.device_name))
    if args.measure:
        measured, measure_code = measure_ceilings(args.interpret)
        rows += measured
        code = max(code, measure_code)
    rows.append(("nvidia-smi", _nvidia_smi()))
    for tool in ("ncu", "compute-sanitizer"):
        rows.append((tool, shutil.which(tool) or "not on PATH"))
    rows.append(("user triton cache", os.environ.get("TRITON_CACHE_DIR") or str(Path.home() / ".triton" / "cache")))
    rows.append(("project caches", "<project>/.workbench/triton-cache (cleared before every run)"))
    rows.append(("torch.compile cache", str(inductor_cache_dir())))
    rows.append(("plugins", ", ".join(name for name, _ in loaded_plugins(context.pm))))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return code


# -- plugins ----------------------------------------------------------------------------

def _plugins_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("project", nargs="?", help="also the plugin of this project (its workbench_plugin.py)")


def _plugins(args: argparse.Namespace, context: Context) -> int:
    # One row a plugin: its name, where it comes from (built-in, project, or the distribution and
    # version pluggy loaded it from), then the entry point or the project's file.
    from ..plugins import plugin_sources

    rows = []
    for source in plugin_sources(context.pm):
        detail = (f"entry point {source.entry_point}" if source.entry_point else
                  f"file {_shown_path(source.file)}" if source.file else "")
        rows.append((source.name, source.origin, detail))
    name_width = max((len(name) for name, _, _ in rows if len(name) <= 40), default=0)  # a longer one overflows
    origin_width = max((len(origin) for _, origin, detail in rows if detail), default=0)
    for name, origin, detail in rows:
        print(f"{name:<{name_width}}  {origin:<{origin_width}}  {detail}".rstrip())
    return EXIT_OK


def _shown_path(file: str) -> str:
    """A path under the current folder relative to it, any other as it is."""
    try:
        return str(Path(file).resolve().relative_to(Path.cwd().resolve()))
    except (OSError, ValueError):
        return file


# -- history / diff ---------------------------------------------------------------------

def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {text!r}")
    return value


def _is_project_path(arg: str) -> bool:
    """Whether a command-line argument names a project (a folder holding kernel.py, or a .py file)."""
    path = Path(arg)
    try:
        return (path.is_dir() and (path / "kernel.py").is_file()) or (path.suffix == ".py" and path.is_file())
    except OSError:
        return False


def _this_project(command: str) -> Project:
    """No project named: the one this folder holds (as `workbench verify` does), else a one-line refusal."""
    here = Path.cwd()
    if (here / "kernel.py").is_file():
        return _open_project(str(here))
    found = [f"projects/{p.name}" for p in find_projects(here / "projects")]
    hint = f" ({', '.join(found[:5])}{', ...' if len(found) > 5 else ''})" if found else ""
    raise CommandError(f"no project given and this folder is not one (no kernel.py here); name it: "
                       f"workbench {command} PROJECT{hint}")


def _history_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("project", nargs="?",
                        help="project folder or kernel .py file (default: this folder's project)")
    parser.add_argument("-n", type=_positive_int, default=20, help="show the last N runs (default 20)")
    parser.add_argument("--prune", action="store_true",
                        help="remove the oldest runs past workbench.toml's [history] keep_runs / keep_mb now")
    parser.add_argument("--pin", metavar="RUN", help="keep this run whatever the limits (id, id prefix or index)")
    parser.add_argument("--unpin", metavar="RUN", help="let the limits remove this run again")


def _history(args: argparse.Namespace, context: Context) -> int:
    project = _open_project(args.project) if args.project is not None else _this_project("history")
    unreadable: list[str] = []
    records = read_records(project, unreadable)
    say_unreadable(unreadable)
    for ref, why in ((args.pin, "pinned"), (args.unpin, None)):
        if ref is not None:
            try:
                record = find_record(records, ref)
            except KeyError as exc:
                raise CommandError(str(exc.args[0])) from None
            set_pin(project, record.id, why)
            print(f"{project.name}: run {record.id} {'pinned: the limits never remove it' if why else 'unpinned'}")
    if args.prune:
        try:
            limits = project.load_config().history
        except ConfigError as exc:
            raise CommandError(str(exc)) from None
        removed = prune(project, limits.keep_runs, limits.keep_mb)
        print(f"{project.name}: removed {plural(len(removed), 'run')}"
              + (f" ({removed[0]})" if len(removed) == 1 else f" ({removed[0]} .. {removed[-1]})" if removed else "")
              + f"; {holding(project).describe()} left")
        records = read_records(project)
    if not records:
        print(f"{project.name}: no runs recorded yet")
        return EXIT_OK
    pinned = pins(project)
    for record in records[-args.n:]:
        d = record.data
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created))
        bench = d.get("bench_summary") or ""
        mark = f"  [{pinned[record.id]}]" if record.id in pinned else ""
        print(f"{record.id}  {when}  {'+'.join(d.get('stages', [])):<12} {record.verdict_label:<15} "
              f"{record.counts_text}  src {record.source_hash[:8]}  {d.get('mode') or '-'}"
              + (f"  seed {d['seed']}" if d.get("seed") is not None else "") + f"  {bench}{mark}".rstrip())
    print(f"{project.name}: {holding(project).describe()} in {project.state_dir} (limits: [history] keep_runs, "
          f"keep_mb in workbench.toml; --prune applies them now)")
    return EXIT_OK


def _diff_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("project", nargs="?",
                        help="project folder or kernel .py file (default: this folder's project, whose runs "
                             "then come first: `workbench diff A B`)")
    parser.add_argument("a", nargs="?", help="older run: id, id prefix or index (default -2)")
    parser.add_argument("b", nargs="?", help="newer run (default -1, the latest)")


def _diff(args: argparse.Namespace, context: Context) -> int:
    where, runs = args.project, [r for r in (args.a, args.b) if r is not None]
    if where is not None and not _is_project_path(where) and (Path.cwd() / "kernel.py").is_file():
        # Inside a project, `workbench diff A [B]`: the arguments are its runs.
        if len(runs) == 2:
            raise CommandError(f"{where}: not a project (a folder holding kernel.py, or a .py file); "
                               "inside a project, give at most two runs: workbench diff A B")
        where, runs = None, [where, *runs]
    older_ref, newer_ref = runs + ["-2", "-1"][len(runs):]
    project = _open_project(where) if where is not None else _this_project("diff")
    unreadable: list[str] = []
    records = read_records(project, unreadable)
    say_unreadable(unreadable)
    try:
        older, newer = find_record(records, older_ref), find_record(records, newer_ref)
    except KeyError as exc:
        raise CommandError(str(exc.args[0])) from None
    print(f"{older.id} ({older.verdict_label}) -> {newer.id} ({newer.verdict_label})")
    from ..reports import timing_change

    for line in timing_change(older.data, newer.data):
        print(line)
    diff = source_diff(project, older, newer)
    print("\n".join(diff) if diff else f"(the same sources: {', '.join(sorted(record_files(project, newer)))})")
    return EXIT_OK


@hookimpl
def workbench_register_commands(register):
    register(Command("list", "projects and their last verdict", _list_arguments, _list))
    register(Command("doctor", "GPU, driver, torch, triton, interpreter, profilers, caches", _doctor_arguments,
                     _doctor))
    register(Command("plugins", "the plugins loaded and where they come from", _plugins_arguments, _plugins))
    register(Command("history", "a project's recorded runs", _history_arguments, _history))
    register(Command("diff", "the kernel source diff between two runs, beside the change in time",
                     _diff_arguments, _diff))
