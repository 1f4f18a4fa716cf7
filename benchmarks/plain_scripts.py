"""The plain scripts a user writes without the workbench, shared by the benchmarks that compare with them
(loop_latency.py, headless.py). Each takes kernel.py's path as its argument and runs in a fresh `python`.

- PLAIN_VERIFY: import torch, triton and kernel.py; each verification case's kernel_fn against reference_fn
  on float64 inputs (torch.testing.assert_close at the dtype's usual tolerance).
- PLAIN_BENCH: triton.testing.do_bench of kernel_fn and reference_fn on each benchmark case.
- PLAIN_VERIFY_COMPILED: PLAIN_VERIFY, then the workbench's torch.compile check written plainly: kernel_fn under
  torch.compile(fullgraph=True, dynamic=False) on the first verification case of each dtype, against reference_fn.
- COMPILE_CHECK_ALONE: that check and nothing else (import torch, triton, kernel.py, then the compiled calls).
  Inductor compiles as it does by default, with its pool of compile processes.
- COMPILE_CHECK_FLOOR: the same with Inductor compiling in the process (compile_threads 1, as the workbench's check
  does): the least a process that runs only the check pays, from its start.
"""

LOAD_KERNEL = '''
import time
_T0 = time.perf_counter()
def phase(name):  # where the script's time goes (headless.py reads these lines); costs microseconds
    print(f"PHASE {name} {time.perf_counter() - _T0:.3f}", file=sys.stderr, flush=True)
import importlib.util, sys, torch, triton
phase("torch and triton imported")
spec = importlib.util.spec_from_file_location("user_kernel", sys.argv[1])
km = importlib.util.module_from_spec(spec); spec.loader.exec_module(km)
phase("kernel.py imported")
cases = [dict(c) for c in getattr(km, "CASES", [{}])]
purpose = lambda case: case.get("purpose", "verify")
params = lambda case: {k: v for k, v in case.items() if k != "purpose"}
tol = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 1e-2}
'''

PLAIN_VERIFY = LOAD_KERNEL + '''
seen_first = False
for case in cases:
    if purpose(case) != "verify":
        continue
    inputs = km.get_inputs(**params(case))
    out = km.kernel_fn(*inputs)
    ref = km.reference_fn(*[x.double() if torch.is_tensor(x) and x.is_floating_point() else x for x in inputs])
    t = tol.get(out.dtype, 1e-5)
    torch.testing.assert_close(out, ref.to(out.dtype), rtol=t, atol=t)
    if not seen_first:
        seen_first = phase("first case (CUDA's start, the kernel's compile)") or True
phase("every case")
print("VERDICT passed", flush=True)
'''

PLAIN_BENCH = LOAD_KERNEL + '''
from triton.testing import do_bench
for case in cases:
    if purpose(case) != "bench":
        continue
    inputs = km.get_inputs(**params(case))
    ms = do_bench(lambda: km.kernel_fn(*inputs))
    ref_ms = do_bench(lambda: km.reference_fn(*inputs))
    print(f"BENCH {params(case)} kernel {ms:.4f} ms reference {ref_ms:.4f} ms", flush=True)
'''

COMPILE_CHECK = '''
import torch._dynamo, torch._inductor.compile_fx
seen = set()
for case in cases:
    if purpose(case) != "verify" or case.get("dtype") in seen:
        continue
    seen.add(case.get("dtype"))
    inputs = km.get_inputs(**params(case))
    torch._dynamo.reset()
    out = torch.compile(km.kernel_fn, fullgraph=True, dynamic=False)(*inputs)
    ref = km.reference_fn(*[x.double() if torch.is_tensor(x) and x.is_floating_point() else x for x in inputs])
    t = tol.get(out.dtype, 1e-5)
    torch.testing.assert_close(out, ref.to(out.dtype), rtol=t, atol=t)
print("TORCH_COMPILE_CHECK passed", flush=True)
'''

PLAIN_VERIFY_COMPILED = PLAIN_VERIFY + COMPILE_CHECK
COMPILE_CHECK_ALONE = LOAD_KERNEL + COMPILE_CHECK
COMPILE_CHECK_FLOOR = "import os\nos.environ['TORCHINDUCTOR_COMPILE_THREADS'] = '1'\n" + COMPILE_CHECK_ALONE
