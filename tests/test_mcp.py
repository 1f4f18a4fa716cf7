"""`workbench mcp` (issue 30; plugins/mcp): the workbench as an MCP server, driven by the SDK's own client over
stdio, under the Triton interpreter. A session lists the tools, scaffolds a project, verifies a broken then a
fixed kernel, gets a shortcut named as such, is refused a missing project, and is told why bench cannot run
here; another cancels a hung run and goes on. The compact results are tested on records (results.py)."""

import os
import sys
import time

import kernels
import pytest

# the MCP SDK and the plugin are the mcp plugin distribution's (CI installs them); a machine without them skips
anyio = pytest.importorskip("anyio")
pytest.importorskip("mcp")
pytest.importorskip("workbench_mcp")
from mcp import Client, StdioServerParameters  # noqa: E402
from workbench_mcp.results import PAGE_SIZE, bench_row, page_of, verify_result  # noqa: E402


def server(root):
    env = {k: v for k, v in os.environ.items() if k != "WORKBENCH_DISABLE_PLUGIN_AUTOLOAD"}
    return StdioServerParameters(command=sys.executable, args=["-m", "workbench.cli", "mcp", "--root", str(root)],
                                 env=env, cwd=str(root))


def structured(result):
    assert not result.is_error, result.content
    return result.structured_content


BROKEN_LINE = "out = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))"


def break_gelu(source):
    """The scaffold's gelu with the kernel's erf argument scaled wrong: wrong almost everywhere."""
    assert BROKEN_LINE in source
    return source.replace(BROKEN_LINE, BROKEN_LINE.replace("0.7071067811865476", "0.7"))


@pytest.mark.slow
def test_a_session_verifies_broken_then_fixed_and_names_what_it_caught(tmp_path):
    seen = {}

    async def session():
        async with Client(server(tmp_path), read_timeout_seconds=240) as client:
            seen["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
            seen["new"] = structured(await client.call_tool("new", {"name": "gelu"}))
            kernel = tmp_path / "projects" / "gelu" / "kernel.py"
            good = kernel.read_text()
            kernel.write_text(break_gelu(good))
            progress = []

            async def on_progress(step, total, message):
                progress.append(message)

            seen["broken"] = structured(await client.call_tool("verify", {"project": "projects/gelu"},
                                                               progress_callback=on_progress))
            seen["progress"] = progress
            seen["page2"] = structured(await client.call_tool("verify", {"project": "projects/gelu", "page": 2}))
            seen["seeded"] = structured(await client.call_tool("verify", {"project": "projects/gelu", "seed": 7}))
            seen["bad_seed"] = await client.call_tool("verify", {"project": "projects/gelu", "seed": -1})
            kernel.write_text(good)
            started = time.perf_counter()
            seen["fixed"] = structured(await client.call_tool("verify", {"project": "projects/gelu"}))
            seen["fixed_s"] = time.perf_counter() - started
            seen["full"] = structured(await client.call_tool("verify", {"project": "projects/gelu",
                                                                        "compatibility": True}))
            seen["history"] = structured(await client.call_tool("history", {"project": "projects/gelu"}))
            seen["diff"] = structured(await client.call_tool("diff", {"project": "projects/gelu", "older": "0",
                                                                      "newer": "-1"}))
            (tmp_path / "shortcut").mkdir()
            (tmp_path / "shortcut" / "kernel.py").write_text(kernels.NO_TRITON)
            seen["shortcut"] = structured(await client.call_tool("verify", {"project": "shortcut"}))
            seen["missing"] = await client.call_tool("verify", {"project": "projects/nope"})
            seen["bench"] = structured(await client.call_tool("bench", {"project": "projects/gelu"}))
            seen["again"] = await client.call_tool("new", {"name": "gelu"})

    anyio.run(session)
    assert seen["tools"] == ["bench", "diff", "history", "new", "profile", "verify"]
    assert seen["new"]["created"] == str(tmp_path / "projects" / "gelu") and "AGENTS.md" in seen["new"]["files"]

    broken = seen["broken"]
    assert broken["verdict"] == "FAILED" and broken["exit_code"] == 1 and broken["mode"] == "interpreter"
    first = broken["failing_cases"][0]
    assert "values" in first["failed_checks"] and first["worst"]["kernel"] != first["worst"]["reference"]
    assert broken["next"].startswith(f"case {first['case']} (") and "worst at" in broken["next"]
    paging = broken["failing_cases_paging"]
    assert paging["total"] > PAGE_SIZE and paging["pages"] >= 2 and len(broken["failing_cases"]) == PAGE_SIZE
    assert seen["page2"]["failing_cases_paging"]["page"] == 2
    assert seen["page2"]["failing_cases"][0]["case"] != first["case"]
    assert any(m.startswith("verifying") for m in seen["progress"]) and any(" failed" in m for m in seen["progress"])
    # the inputs' seed: the server's draw, the same on every call, or the one asked for
    assert isinstance(broken["seed"], int) and seen["page2"]["seed"] == broken["seed"]
    assert seen["seeded"]["seed"] == 7
    assert seen["bad_seed"].is_error and "seed: expected a whole number" in seen["bad_seed"].content[0].text

    fixed = seen["fixed"]
    assert fixed["verdict"] == "VERIFIED" and fixed["exit_code"] == 0 and "failing_cases" not in fixed
    assert fixed["next"].startswith("VERIFIED: call bench")
    # as a save in the live loop: the checks that compile anew left out, and said so; asked for, they run
    assert fixed["compatibility_checks"].startswith("left out") and "noncontiguous" not in fixed.get("findings", {})
    assert seen["full"]["findings"]["noncontiguous"]["status"] == "refused" and "compatibility_checks" not in seen["full"]
    print(f"second verify through the MCP server: {seen['fixed_s']:.2f} s")  # the figure: RESULTS, benchmarks

    assert [r["verdict"] for r in seen["history"]["runs"]] == ["failed", "failed", "failed", "passed", "passed"]
    assert seen["diff"]["older"]["verdict"] == "failed" and seen["diff"]["newer"]["verdict"] == "passed"
    assert any(line.startswith("-") and "x * 0.7))" in line for line in seen["diff"]["source"]["lines"])

    shortcut = seen["shortcut"]
    assert shortcut["verdict"] == "FAILED"
    assert shortcut["shortcuts_caught"] == ["no Triton kernel launched: kernel_fn must compute with a Triton kernel"]
    assert "the verdict counts it as a failure, not a pass" in shortcut["next"]

    missing = seen["missing"]
    assert missing.is_error and "projects/nope: no such file or folder" in missing.content[0].text

    bench = seen["bench"]  # no GPU here: said as such, with the exit code the CLI gives
    assert bench["exit_code"] == 3 and bench["problems"][0]["kind"] == "environment"
    assert bench["verdict"] == "CANNOT RUN HERE"  # the word the CLI says for it (not "NOT USABLE": exit 2's)
    assert seen["again"].is_error and "exists" in seen["again"].content[0].text


@pytest.mark.slow
def test_a_hung_run_is_cancelled_and_the_server_goes_on(tmp_path):
    project = tmp_path / "hang"
    project.mkdir()
    (project / "kernel.py").write_text(kernels.HANGS)  # sleeps an hour in case 1 (n=1000)
    seen = {}

    async def session():
        async with Client(server(tmp_path), read_timeout_seconds=240) as client:
            hanging = anyio.Event()

            async def on_progress(step, total, message):
                if "n=1000" in (message or ""):
                    hanging.set()

            async def call():
                await client.call_tool("verify", {"project": "hang"}, progress_callback=on_progress)

            started = time.perf_counter()
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                with anyio.fail_after(120):
                    await hanging.wait()
                await anyio.sleep(0.5)
                group.cancel_scope.cancel()
            seen["cancelled_after_s"] = time.perf_counter() - started
            (project / "kernel.py").write_text(kernels.GOOD)
            seen["next"] = structured(await client.call_tool("verify", {"project": "hang"}))

    anyio.run(session)
    assert seen["cancelled_after_s"] < 60  # not the hour, nor the 300 s time-out
    assert seen["next"]["verdict"] == "VERIFIED"  # the cancelled run ended: one run at a time, and this one ran


# -- the compact results, on records ---------------------------------------------------------------------

def case(index, status="passed", **extra):
    return {"case_index": index, "label": f"n={index}", "status": status, "config": "", "phase": "",
            "generated": False, "checks": {}, "messages": [], "worst": None, "pattern": "", **extra}


def test_a_problem_comes_first_with_its_line():
    record = {"verdict": "error", "exit_code": 2, "cases": [],
              "problems": [{"kind": "compile", "message": "the kernel does not compile", "file": "/p/kernel.py",
                            "line": 37}]}
    out = verify_result(record)
    assert out["verdict"] == "NOT USABLE" and out["problems"][0]["where"] == "kernel.py:37"
    assert out["next"] == "fix the compile problem at kernel.py:37 first: the kernel does not compile"


def test_failing_cases_are_paged_and_trimmed():
    failing = [case(i, "failed", checks={"values": "failed"}, messages=[f"m{j}" for j in range(5)])
               for i in range(PAGE_SIZE + 3)]
    record = {"verdict": "failed", "exit_code": 1, "cases": [case(100)] + failing}
    out = verify_result(record, page=2)
    assert out["failing_cases_paging"] == {"page": 2, "pages": 2, "total": PAGE_SIZE + 3}
    assert [c["case"] for c in out["failing_cases"]] == [PAGE_SIZE, PAGE_SIZE + 1, PAGE_SIZE + 2]
    assert out["failing_cases"][0]["messages"] == ["m0", "m1", "m2", "... 2 more (workbench verify --json)"]
    assert page_of([1, 2, 3], 9, size=2) == ([3], {"page": 2, "pages": 2, "total": 3})


def test_a_generated_edge_shape_points_at_masks_and_the_grid():
    record = {"verdict": "failed", "exit_code": 1,
              "cases": [case(7, "failed", generated=True, checks={"unwritten": "failed"},
                             pattern="all in the last 31 columns: a boundary mask?")]}
    out = verify_result(record)
    assert "generated edge shape" in out["next"] and "triton.cdiv" in out["next"]
    assert "a boundary mask?" in out["next"]


def test_a_nan_the_kernel_wrote_is_named_not_null():
    worst = {"index": [0, 1], "kernel": None, "reference": 4.4e-278, "kernel_special": "nan"}
    record = {"verdict": "failed", "exit_code": 1,
              "cases": [case(29, "failed", checks={"nan": "failed"}, worst=worst)]}
    out = verify_result(record)
    assert out["failing_cases"][0]["worst"]["kernel"] == "nan"
    assert "kernel nan vs reference 4.4e-278" in out["next"]
    older = {**worst, "kernel_special": ""}  # a record from before the field: null, as it was
    assert verify_result({**record, "cases": [case(29, "failed", worst=older)]})["failing_cases"][0]["worst"][
        "kernel"] is None


def test_a_time_not_posted_and_a_slow_case_are_what_to_look_at():
    row = {"case_index": 3, "label": "n=1M", "kernel": None, "median_ms": None, "recheck": "passed",
           "withheld": "timed calls launched 0 Triton kernels per call; the checked call launched 1"}
    assert bench_row(row)["time_not_posted"].startswith("timed calls launched 0")
    record = {"verdict": "passed", "exit_code": 0, "cases": [case(3)], "bench": [row]}
    assert verify_result(record)["next"].startswith("case 3: no time posted (timed calls launched 0")
    slow = {"case_index": 4, "label": "n=2M", "median_ms": 0.2, "recheck": "passed", "withheld": "",
            "kernel": {"median_ms": 0.2, "q25_ms": 0.19, "q75_ms": 0.21}, "speedup_vs_compiled": 0.8,
            "bandwidth_fraction": 0.7}
    row_out = bench_row(slow)
    assert row_out["spread"] == 0.1 and row_out["pct_of_copy_ceiling"] == 70.0 and row_out["x_torch_compile"] == 0.8
    record["bench"] = [slow]
    assert "slower than torch.compile (0.8x)" in verify_result(record)["next"]
    record["bench"] = [{**slow, "speedup_vs_compiled": 0.986, "bandwidth_fraction": 0.95}]  # noise, at the ceiling
    assert verify_result(record)["next"] == "near this GPU's ceilings: keep the edit if the verdict stays VERIFIED"


def test_a_required_check_the_live_loop_leaves_out_makes_verify_run_it():
    from workbench.core.project import ProjectConfig

    assert ProjectConfig().verify.required_but_not_live() == []  # storage_offset is required, and runs live too
    config = ProjectConfig.from_dict({"verify": {"torch_compile": "require", "noncontiguous": "require"}}, "t")
    assert config.verify.required_but_not_live() == ["torch_compile", "noncontiguous"]
