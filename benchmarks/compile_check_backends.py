"""Cost and reach of torch.compile backends for the torch.compile compatibility check (verify/compat.py).

    python benchmarks/compile_check_backends.py OUTDIR      # on a GPU; ~5 minutes

Each trial in a fresh process with fresh Triton and Inductor caches: import torch and triton, call a launcher
once (Triton compiles), import torch._dynamo and torch._inductor, then torch.compile(fullgraph=True) its first
call under one backend. Fixtures: a good launcher; a graph break (.item()); a float argument that Inductor
types fp64 (a loop-carried type change only Inductor's recompilation of the kernel meets); an in-place kernel.
Then the cost again: cold, with one Inductor compile thread, with warm on-disk caches. Results in
OUTDIR/compile_backends.json, one line per trial on stdout.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

FIXTURES = r'''
import torch, triton, triton.language as tl

@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], tl.float32)
    for i in range(0, 2):
        acc = acc + tl.load(x_ptr + offs, mask=mask) * scale
    tl.store(out_ptr + offs, acc, mask=mask)

@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

def good(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    _add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out

def graph_break(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    if x.abs().max().item() > 1e9:   # a host read: Dynamo breaks the graph
        return out
    _add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out

def inductor_only(x, y):  # a float scalar argument: Triton types it fp32, Inductor fp64 (loop-carried type changes)
    out = torch.empty_like(x)
    n = x.numel()
    _scale_kernel[(triton.cdiv(n, 1024),)](x, out, n, 0.5, BLOCK=1024)
    return out

def in_place(x, y):  # writes its input: functionalization must see the mutation
    n = x.numel()
    _add_kernel[(triton.cdiv(n, 1024),)](x, y, x, n, BLOCK=1024)
    return x
'''

TRIAL = r'''
import json, os, sys, time
t0 = time.perf_counter()
import torch, triton
sys.path.insert(0, sys.argv[1]); import fixtures
t1 = time.perf_counter()
x = torch.randn(1 << 20, device="cuda"); y = torch.randn_like(x)
fn = getattr(fixtures, sys.argv[3])
fn(x.clone(), y); torch.cuda.synchronize()
t2 = time.perf_counter()
import torch._dynamo, torch._inductor
t3 = time.perf_counter()
err = ""
try:
    out = torch.compile(fn, fullgraph=True, dynamic=False, backend=sys.argv[2])(x.clone(), y)
    torch.cuda.synchronize()
    ok = bool(torch.allclose(out, fn(x.clone(), y)))
except Exception as exc:
    ok, err = False, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
t4 = time.perf_counter()
print(json.dumps(dict(import_s=t1-t0, first_call_s=t2-t1, dynamo_import_s=t3-t2, compile_s=t4-t3, ok=ok, err=err)))
'''

def main(out):
    base = tempfile.mkdtemp()
    open(os.path.join(base, "fixtures.py"), "w").write(FIXTURES)
    open(os.path.join(base, "trial.py"), "w").write(TRIAL)
    rows = []
    def trial(backend, fixture, env_extra, label):
        env = dict(os.environ, **env_extra)
        t = time.perf_counter()
        p = subprocess.run([sys.executable, os.path.join(base, "trial.py"), base, backend, fixture], env=env,
                           capture_output=True, text=True, timeout=180)
        wall = time.perf_counter() - t
        try:
            row = json.loads(p.stdout.strip().splitlines()[-1])
        except Exception:
            row = dict(ok=False, err="trial died: " + p.stderr[-300:])
        row.update(backend=backend, fixture=fixture, label=label, wall_s=wall)
        rows.append(row); print(json.dumps(row), flush=True)
        with open(os.path.join(out, "compile_backends.json"), "w") as f:
            json.dump(rows, f, indent=1)
    def fresh():
        d = tempfile.mkdtemp()
        return {"TRITON_CACHE_DIR": d + "/triton", "TORCHINDUCTOR_CACHE_DIR": d + "/inductor"}
    # reach: which backend catches which failure
    for fixture in ("good", "graph_break", "inductor_only", "in_place"):
        for backend in ("eager", "aot_eager", "inductor"):
            trial(backend, fixture, fresh(), "cold")
    # cost: cold, cold with one compile thread, warm on-disk caches, warm inductor cache but fresh triton cache
    for rep in range(2):
        for backend in ("eager", "aot_eager", "inductor"):
            trial(backend, "good", fresh(), "cold")
        trial("inductor", "good", dict(fresh(), TORCHINDUCTOR_COMPILE_THREADS="1"), "cold, 1 compile thread")
    warm = fresh()
    for rep in range(3):
        trial("inductor", "good", warm, "warm caches" if rep else "filling caches")
    warm_ind = fresh()
    for rep in range(3):
        env = dict(warm_ind, TRITON_CACHE_DIR=tempfile.mkdtemp())
        trial("inductor", "good", env, "warm inductor cache, fresh triton cache" if rep else "filling")
    for rep in range(2):
        trial("inductor", "good", dict(warm, TORCHINDUCTOR_COMPILE_THREADS="1"), "warm caches, 1 compile thread")

if __name__ == "__main__":
    main(sys.argv[1])
