"""Fusion at N = 512: the launch floor of the event protocol, and kernel-only durations (under ncu).

    python lab/fusion-kernel-time/floor.py time 512
    ncu --metrics gpu__time_duration.sum --csv --page raw python lab/fusion-kernel-time/floor.py once 512
"""
import sys, numpy as np, cupy
from cupyx.profiler import benchmark
from gemmlab import fusion
n = int(sys.argv[2]) if len(sys.argv) > 2 else 512
rng = cupy.random.default_rng(0)
a, b, c = (rng.random((n, n), dtype=cupy.float32) for _ in range(3))
e = cupy.empty((n, n), dtype=cupy.float32)
kern = fusion.step("fused/04_split_k", backend="gpu")
fn = kern.launcher(a, b, c, e)
import torch
torch.backends.cuda.matmul.allow_tf32 = False
ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
empty = cupy.RawKernel(r'extern "C" __global__ void empty_kernel() {}', "empty_kernel")
if sys.argv[1] == "once":  # under ncu: one call of each after a warm-up
    fn(); ta @ tb @ tc; empty((1,), (32,), ()); cupy.cuda.Device().synchronize()
    fn(); ta @ tb @ tc; empty((1,), (32,), ()); cupy.cuda.Device().synchronize()
    sys.exit(0)
out = {}
for name, f in [("empty RawKernel", lambda: empty((1,), (32,), ())), ("fused/04 default", fn),
                ("torch a@b@c", lambda: ta @ tb @ tc), ("torch empty op", lambda: torch.empty(0, device="cuda").add_(1))]:
    r = benchmark(f, (), n_repeat=500, n_warmup=50)
    out[name] = float(np.median(r.gpu_times[0]) * 1e6)
    print(f"{name:20s} n={n} median event time {out[name]:.1f} us  cpu {np.median(r.cpu_times)*1e6:.1f} us")
# batched: 100 back-to-back calls between two events, per call
for name, f in [("fused/04 default", fn), ("torch a@b@c", lambda: ta @ tb @ tc)]:
    s, t = cupy.cuda.Event(), cupy.cuda.Event()
    ts = []
    for _ in range(20):
        s.record(); [f() for _ in range(100)]; t.record(); t.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(s, t) * 1e3 / 100)
    print(f"{name:20s} n={n} batched per-call {np.median(ts):.1f} us")
