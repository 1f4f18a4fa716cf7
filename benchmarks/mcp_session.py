"""An agent's session with `workbench mcp`, through the SDK's own client over stdio, timed.

    python benchmarks/mcp_session.py --out /tmp/mcp [--project rmsnorm] [--verifies 4] [--bench]

Lists the tools; scaffolds a project (a known op) in a fresh folder; breaks its kernel (the value of its
first store times 1.5: wrong almost everywhere) and verifies; restores it
and verifies --verifies times (the first of those pays for nothing the broken one did not: the workers
are warm since the server started); with --bench, benches it. Each call's wall time as the client sees
it, the verdicts, the progress messages' count; beside them, `workbench verify` of the same project in
a fresh process (what an agent shelling out pays each time). JSON in --out, a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from child_env import repo_env

ROOT = Path(__file__).resolve().parents[1]


def broken(source: str) -> str:
    """The kernel's first `v.to(ptr.dtype.element_ty)` (the value of a store), times 1.5."""
    found = re.search(r"(\w+)\.to\((\w+)\.dtype\.element_ty\)", source)
    if found is None:
        raise SystemExit("no `v.to(ptr.dtype.element_ty)` in this kernel.py to break: pick another --project")
    return source[:found.start()] + f"({found.group(1)} * 1.5).to({found.group(2)}.dtype.element_ty)" + \
        source[found.end():]


async def session(work: Path, name: str, verifies: int, bench: bool) -> dict:
    params = StdioServerParameters(command=sys.executable, args=["-m", "workbench.cli", "mcp", "--root", str(work)],
                                   env=repo_env(without=("WORKBENCH_DISABLE_PLUGIN_AUTOLOAD",)), cwd=str(work))
    calls: list[dict] = []

    async def call(client: Client, tool: str, args: dict) -> dict:
        progress: list[str] = []

        async def on_progress(step, total, message):
            progress.append(message or "")

        started = time.perf_counter()
        result = await client.call_tool(tool, args, progress_callback=on_progress)
        seconds = time.perf_counter() - started
        data = result.structured_content or {"error": result.content[0].text if result.content else ""}
        calls.append({"tool": tool, "args": args, "seconds": seconds, "progress": len(progress),
                      "verdict": data.get("verdict"), "exit_code": data.get("exit_code"), "next": data.get("next"),
                      "result": data})
        return data

    started = time.perf_counter()
    async with Client(params, read_timeout_seconds=600) as client:
        connected = time.perf_counter() - started
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        await call(client, "new", {"name": name})
        kernel = work / "projects" / name / "kernel.py"
        good = kernel.read_text()
        kernel.write_text(broken(good))
        await call(client, "verify", {"project": f"projects/{name}"})
        kernel.write_text(good)
        for _ in range(verifies):
            await call(client, "verify", {"project": f"projects/{name}"})
        if bench:
            await call(client, "bench", {"project": f"projects/{name}"})
    return {"connect_s": connected, "tools": tools, "calls": calls}


def cli_verify(project: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "workbench.cli", "verify", str(project), "--json"], capture_output=True,
                   cwd=ROOT, env=repo_env())
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--project", default="rmsnorm")
    parser.add_argument("--verifies", type=int, default=4)
    parser.add_argument("--bench", action="store_true")
    parser.add_argument("--cli-verifies", type=int, default=2, help="`workbench verify` runs in fresh processes")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp())
    result = anyio.run(session, work, args.project, args.verifies, args.bench)
    result["cli_verify_s"] = [cli_verify(work / "projects" / args.project) for _ in range(args.cli_verifies)]
    (args.out / "mcp_session.json").write_text(json.dumps(result, indent=1, default=str))
    print(f"connected in {result['connect_s']:.2f} s; tools: {', '.join(result['tools'])}")
    for c in result["calls"]:
        print(f"  {c['tool']:<7} {c['seconds']:7.2f} s  {c['verdict'] or '':<10} exit {c['exit_code']}  "
              f"progress {c['progress']:>3}  next: {(c['next'] or '')[:90]}")
    fixed = [c["seconds"] for c in result["calls"] if c["tool"] == "verify" and c["verdict"] == "VERIFIED"]
    if len(fixed) > 1:
        print(f"verify (VERIFIED) through the server: first {fixed[0]:.2f} s, then median "
              f"{statistics.median(fixed[1:]):.2f} s [{min(fixed[1:]):.2f}-{max(fixed[1:]):.2f}]; "
              f"`workbench verify` in a fresh process: {', '.join(f'{s:.2f}' for s in result['cli_verify_s'])} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
