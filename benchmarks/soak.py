"""A day in the app: memory over hundreds of saves, in `workbench watch` and in `workbench mcp`.

    python benchmarks/soak.py app --saves 500 --interval 3 --out /tmp/soak     # the live loop
    python benchmarks/soak.py mcp --saves 500 --out /tmp/soak                  # an agent's verify calls

A project is scaffolded (`workbench new gelu`, --scaffold to change) in a fresh folder. Its kernel.py is then
rewritten --saves times, in turn: correct, wrong in 1% of its output's elements (kernel_fn's output, every
100th element, plus one), and a syntax error; each save differs from every other (a numbered comment).

- app: the real `workbench watch` in a pseudo-terminal (160x45). Each save is written the way an editor
  saves (temp file, rename), and its verdict waited for: the run's record in the project's history (the app
  records its runs); then the next save comes --interval seconds after this one, or at once when the run
  took longer.
- mcp: `workbench mcp` through the SDK's client over stdio; each save is followed by one `verify` call.

After each verdict the resident memory (RSS, from /proc) of the process under test and of each of its
descendants (workers, the fork server, compile processes) is sampled. Written to --out: soak_<mode>.csv (one
row per save) and soak_<mode>.json (the rows and a summary). The summary: RSS after the first verdict,
after 20 saves, at the end and at its highest, and the end against after-20 (target: within 10 MB over 500
saves). Works with or without a GPU (without one, the workers run the Triton interpreter).
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import json
import os
import pty
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.core.fsutil import process_stat  # noqa: E402 - the repository's own copy
from child_env import repo_env  # noqa: E402 - beside this script

TARGET_MB = 10.0
KINDS = ("correct", "wrong 1%", "syntax error")
WRONG = '''

_soak_kernel_fn = kernel_fn


def kernel_fn(*args, **kwargs):  # wrong in 1% of the output's elements
    out = _soak_kernel_fn(*args, **kwargs)
    out.view(-1)[::100] += 1.0
    return out
'''
BROKEN = "\n\ndef broken(:\n"


def variant(good: str, n: int) -> tuple[str, str]:
    kind = KINDS[n % 3]
    body = good + (WRONG if kind == "wrong 1%" else BROKEN if kind == "syntax error" else "")
    return kind, body + f"\n# soak save {n}\n"


def editor_save(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.soak")
    temp.write_text(text)
    os.replace(temp, path)


# -- /proc ---------------------------------------------------------------------------------------------------

def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return 0.0  # a zombie has no VmRSS line


def children_of() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = process_stat(int(entry))
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def descendants(pid: int) -> list[int]:
    tree, found, todo = children_of(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def command_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def sample(pid: int) -> dict:
    children = {child: rss_mb(child) for child in descendants(pid)}
    children = {child: mb for child, mb in children.items() if mb is not None}
    own = rss_mb(pid)
    return {"rss_mb": round(own, 2) if own is not None else None, "children": len(children),
            "children_rss_mb": round(sum(children.values()), 1),
            "largest_child_mb": round(max(children.values(), default=0.0), 1)}


# -- the project ---------------------------------------------------------------------------------------------

def scaffold(work: Path, name: str) -> Path:
    subprocess.run([sys.executable, "-m", "workbench.cli", "new", name, "--dir", str(work)], check=True,
                   capture_output=True, cwd=ROOT)
    return work / name


def limit_history(project: Path, keep_runs: int | None, live_rep_ms: float | None = None) -> None:
    """[history] keep_runs in the project's workbench.toml: a soak shorter than the default 500 runs that still
    passes the limit (the history is pruned as runs are recorded, in the process that records them). And
    [bench] live_rep_ms: on a GPU, a shorter timed series has more saves fit in an hour (every correct save
    is still benchmarked, and its timings kept as usual)."""
    extra = (f"\n[history]\nkeep_runs = {keep_runs}\n" if keep_runs is not None else "") + \
        (f"\n[bench]\nlive_rep_ms = {live_rep_ms}\n" if live_rep_ms is not None else "")
    if extra:
        with open(project / "workbench.toml", "a") as toml:
            toml.write(extra)


def records(project: Path) -> list[Path]:
    folder = project / ".workbench" / "history"
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith(".")) if folder.is_dir() else []


def record_of(project: Path, source_hash: str, seen: set[str], timeout: float) -> dict | None:
    """The first record not among `seen` (the files there before the save) whose source is `source_hash` (the
    save's run), waited for. By name, not by count: the history's limit prunes old records as new ones come."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in records(project):
            if path.name in seen:
                continue
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # being written
            if data.get("source_hash") == source_hash and data.get("verdict") != "cancelled":
                return data
        time.sleep(0.05)
    return None


def hash_of(path: Path) -> str:
    from workbench.core.project.folder import Project

    return Project.open(str(path.parent)).source_hash()


# -- app ------------------------------------------------------------------------------------------------------

def soak_app(project: Path, saves: int, interval: float, progress, keep_runs: int | None = None,
             live_rep_ms: float | None = None, until: float = float("inf")) -> list[dict]:
    limit_history(project, keep_runs, live_rep_ms)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 45, 160, 0, 0))
    env = repo_env({"TERM": "xterm-256color", "COLUMNS": "160", "LINES": "45"})
    app = subprocess.Popen([sys.executable, "-m", "workbench.cli", "watch", str(project)], stdin=slave, stdout=slave,
                           stderr=slave, env=env, cwd=str(project), start_new_session=True)
    os.close(slave)
    stop = threading.Event()

    def drain() -> None:  # the screen's output, read and dropped: a full terminal buffer would stall the app
        while not stop.is_set():
            if select.select([master], [], [], 0.2)[0]:
                try:
                    if not os.read(master, 65536):
                        return
                except OSError:
                    return

    threading.Thread(target=drain, daemon=True).start()
    rows: list[dict] = []
    try:
        kernel = project / "kernel.py"
        good = kernel.read_text()
        first = record_of(project, hash_of(kernel), set(), 300)
        if first is None:
            raise SystemExit("the app recorded no first run in 300 s")
        rows.append({"save": 0, "kind": "start", "verdict": first.get("verdict"), "verdict_s": None,
                     **sample(app.pid)})
        progress(rows[-1])
        for n in range(1, saves + 1):
            if time.monotonic() > until:
                break
            kind, text = variant(good, n)
            seen = {path.name for path in records(project)}
            saved = time.monotonic()
            editor_save(kernel, text)
            record = record_of(project, hash_of(kernel), seen, 300)
            took = time.monotonic() - saved
            if app.poll() is not None:
                raise SystemExit(f"the app exited ({app.returncode}) at save {n}")
            rows.append({"save": n, "kind": kind, "verdict": record.get("verdict") if record else "timed out",
                         "verdict_s": round(took, 2), **sample(app.pid)})
            progress(rows[-1])
            time.sleep(max(0.0, interval - (time.monotonic() - saved)))
    finally:
        stop.set()
        try:
            os.killpg(app.pid, signal.SIGTERM)
            app.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(app.pid, signal.SIGKILL)
        os.close(master)
    return rows


# -- mcp ------------------------------------------------------------------------------------------------------

async def soak_mcp(work: Path, name: str, saves: int, progress, keep_runs: int | None = None,
                   live_rep_ms: float | None = None, until: float = float("inf")) -> list[dict]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "workbench.cli", "mcp", "--root", str(work)],
                                   env=repo_env(without=("WORKBENCH_DISABLE_PLUGIN_AUTOLOAD",)), cwd=str(work))
    rows: list[dict] = []
    async with Client(params, read_timeout_seconds=600) as client:
        servers = [p for p in descendants(os.getpid()) if "workbench.cli mcp" in command_of(p)]
        if not servers:
            raise SystemExit("no `workbench mcp` process found among this one's children")
        server = servers[0]
        await client.call_tool("new", {"name": name, "dir": "projects"})
        kernel = work / "projects" / name / "kernel.py"
        limit_history(kernel.parent, keep_runs, live_rep_ms)
        good = kernel.read_text()
        for n in range(0, saves + 1):
            if time.monotonic() > until:
                break
            kind, text = ("start", good) if n == 0 else variant(good, n)
            editor_save(kernel, text)
            started = time.monotonic()
            result = await client.call_tool("verify", {"project": f"projects/{name}"})
            data = result.structured_content or {}
            rows.append({"save": n, "kind": kind, "verdict": data.get("verdict"),
                         "verdict_s": round(time.monotonic() - started, 2), **sample(server)})
            progress(rows[-1])
    return rows


# -- the summary --------------------------------------------------------------------------------------------

def summary(rows: list[dict]) -> dict:
    rss = [r["rss_mb"] for r in rows if r["rss_mb"] is not None]
    after = {r["save"]: r["rss_mb"] for r in rows}
    saves = max(after)
    at20 = after.get(20)
    tail = [r["rss_mb"] for r in rows if r["save"] > saves - max(5, saves // 10)]
    times = [r["verdict_s"] for r in rows if r["verdict_s"] is not None]
    out = {"saves": saves, "rss_start_mb": round(rss[0], 1), "rss_after_20_mb": round(at20, 1) if at20 else None,
           "rss_end_mb": round(rss[-1], 1), "rss_max_mb": round(max(rss), 1),
           "rss_tail_median_mb": round(statistics.median(tail), 1),
           "children_end": rows[-1]["children"], "children_rss_end_mb": rows[-1]["children_rss_mb"],
           "verdicts": {v: sum(r["verdict"] == v for r in rows) for v in sorted({str(r["verdict"]) for r in rows})},
           "verdict_s_median": round(statistics.median(times), 2) if times else None,
           "verdict_s_range": [min(times), max(times)] if times else None}
    if at20:
        out["growth_after_20_mb"] = round(rss[-1] - at20, 1)
        out["growth_per_save_kb"] = round((rss[-1] - at20) * 1024 / max(1, saves - 20), 1)
        out["within_target"] = abs(rss[-1] - at20) <= TARGET_MB and max(rss[20:], default=at20) - at20 <= TARGET_MB
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("app", "mcp"))
    parser.add_argument("--saves", type=int, default=500)
    parser.add_argument("--interval", type=float, default=3.0, help="seconds from one save to the next (app)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scaffold", default="gelu")
    parser.add_argument("--keep", action="store_true", help="keep the scaffolded project's folder")
    parser.add_argument("--keep-runs", type=int, help="the project's [history] keep_runs (default: as scaffolded, "
                        "500): a lower one has a shorter soak prune the history too")
    parser.add_argument("--live-rep-ms", type=float, help="the project's [bench] live_rep_ms (a GPU's timed series "
                        "per correct save; default as scaffolded)")
    parser.add_argument("--minutes", type=float, default=float("inf"), help="start no save after this long: the "
                        "rows so far are summarised (a machine held for a limited time)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # killed: the app and its workers are ended too
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    started = time.monotonic()
    until = started + args.minutes * 60
    written = open(args.out / f"soak_{args.mode}.rows.jsonl", "w")  # each row as it comes: a killed soak keeps them

    def progress(row: dict) -> None:
        written.write(json.dumps(row) + "\n")
        written.flush()
        if row["save"] % 10 == 0 or row["verdict"] == "timed out":
            print(f"  save {row['save']:>4} {row['kind']:<12} {str(row['verdict']):<10} "
                  f"{row['verdict_s'] or 0:6.2f} s  RSS {row['rss_mb']:7.1f} MB  children {row['children']} "
                  f"({row['children_rss_mb']:.0f} MB)  [{time.monotonic() - started:.0f} s]", flush=True)

    try:
        if args.mode == "app":
            rows = soak_app(scaffold(work, args.scaffold), args.saves, args.interval, progress, args.keep_runs,
                            args.live_rep_ms, until)
        else:
            import anyio

            rows = anyio.run(soak_mcp, work, args.scaffold, args.saves, progress, args.keep_runs, args.live_rep_ms,
                             until)
    finally:
        written.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    result = {"mode": args.mode, "scaffold": args.scaffold, "interval_s": args.interval, "keep_runs": args.keep_runs,
              "live_rep_ms": args.live_rep_ms,
              "wall_s": round(time.monotonic() - started, 1), "summary": summary(rows), "rows": rows}
    with open(args.out / f"soak_{args.mode}.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (args.out / f"soak_{args.mode}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
