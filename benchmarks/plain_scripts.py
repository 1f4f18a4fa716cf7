"""The plain scripts a user writes without the workbench, shared by the benchmarks that compare with them
(loop_latency.py, headless.py). Each takes kernel.py's path as its argument and runs in a fresh `python`.

- PLAIN_VERIFY: import torch, triton and kernel.py; each verification case's kernel_fn against reference_fn
  on float64 inputs (torch.testing.assert_close at the dtype's usual tolerance).
- PLAIN_BENCH: triton.testing.do_bench of kernel_fn and reference_fn on each benchmark case.
"""

LOAD_KERNEL = '''
import importlib.util, sys, time, torch, triton
spec = importlib.util.spec_from_file_location("user_kernel", sys.argv[1])
km = importlib.util.module_from_spec(spec); spec.loader.exec_module(km)
cases = [dict(c) for c in getattr(km, "CASES", [{}])]
'''

PLAIN_VERIFY = LOAD_KERNEL + '''
tol = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 1e-2}
for case in cases:
    if case.pop("purpose", "verify") != "verify":
        continue
    inputs = km.get_inputs(**case)
    out = km.kernel_fn(*inputs)
    ref = km.reference_fn(*[x.double() if torch.is_tensor(x) and x.is_floating_point() else x for x in inputs])
    t = tol.get(out.dtype, 1e-5)
    torch.testing.assert_close(out, ref.to(out.dtype), rtol=t, atol=t)
print("VERDICT passed", flush=True)
'''

PLAIN_BENCH = LOAD_KERNEL + '''
from triton.testing import do_bench
for case in cases:
    if case.pop("purpose", "verify") != "bench":
        continue
    inputs = km.get_inputs(**case)
    ms = do_bench(lambda: km.kernel_fn(*inputs))
    ref_ms = do_bench(lambda: km.reference_fn(*inputs))
    print(f"BENCH {case} kernel {ms:.4f} ms reference {ref_ms:.4f} ms", flush=True)
'''
