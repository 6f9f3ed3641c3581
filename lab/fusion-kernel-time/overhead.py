"""Fusion at N = 512: where a fused call's event time goes, beyond its kernel's own run.

    python lab/fusion-kernel-time/overhead.py time [N] > results/experiments/fusion-kernel-time/overhead-<date>.log
    ncu --metrics gpu__time_duration.sum --csv --page raw python lab/fusion-kernel-time/overhead.py once [N] > results/experiments/fusion-kernel-time/overhead-ncu-<date>.csv
    python lab/fusion-kernel-time/overhead.py record      # the logs -> results.json["overhead"]

Step 05 with its fastest recorded tiles at N, next to: an empty kernel (1 block of 32 threads), a
no-op kernel with step 05's launch configuration (its grid, its threads, its dynamic shared memory;
it returns at once), and torch a @ b @ c. Each is timed three ways: launch by launch in turn with the
others (bench.time_interleaved, the course's protocol), alone (an event pair around each call, the
stream synchronized after it: cupyx.profiler.benchmark, which also gives the host time of a call),
and 100 calls back to back between two events (per call). GPU only.
"""
import csv
import json
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent  # lab/<name>: this experiment's scripts
DATA = HERE.parents[1] / "results" / "experiments" / HERE.name  # its logs and results.json


def record() -> dict:
    """results.json["overhead"] from the newest overhead-<date>.log and overhead-ncu-<date>.csv."""
    log = sorted(DATA.glob("overhead-2*.log"))[-1]
    date = log.stem.split("overhead-")[1]
    text = log.read_text()
    out = {"date": date, "setup": text.splitlines()[0], "interleaved_us": {}, "alone_event_us": {},
           "alone_host_us": {}, "back_to_back_us": {}}
    names = list(dict.fromkeys(m.group(1).strip() for m in re.finditer(r"round \d alone: (.+?)\s+event", text)))
    for line in text.splitlines():
        if " interleaved: " in line:
            for name in names:
                out["interleaved_us"].setdefault(name, []).append(
                    float(re.search(re.escape(name) + r" ([\d.]+) us", line).group(1)))
        elif m := re.match(r"round \d alone: (.+?)\s+event\s+([\d.]+) us\s+host\s+([\d.]+) us", line):
            out["alone_event_us"].setdefault(m.group(1).strip(), []).append(float(m.group(2)))
            out["alone_host_us"].setdefault(m.group(1).strip(), []).append(float(m.group(3)))
        elif m := re.match(r"round \d back to back: (.+?)\s+([\d.]+) us per call", line):
            out["back_to_back_us"].setdefault(m.group(1).strip(), []).append(float(m.group(2)))
    rows = [r for r in csv.reader(open(DATA / f"overhead-ncu-{date}.csv")) if len(r) > 5]
    name_at, time_at = rows[0].index("Kernel Name"), rows[0].index("gpu__time_duration.sum")
    kernels = [(r[name_at], float(r[time_at].replace(",", ""))) for r in rows[2:]]
    # the last call of each (the measured round; cuBLAS's a @ b @ c is its last four GEMM kernels)
    cublas = [(k, t) for k, t in kernels if k.startswith("sm") and "gemm" in k][-4:]
    last = {"fused/05": [t for k, t in kernels if k.startswith("void fused_tf32x3")][-1],
            "torch a@b@c (4 cuBLAS kernels)": sum(t for _, t in cublas),
            "no-op, step 05's launch": [t for k, t in kernels if k.startswith("noop")][-1],
            "empty kernel": [t for k, t in kernels if k.startswith("empty")][-1]}
    out["kernel_us"] = {k: t / 1e3 for k, t in last.items()}
    out["cublas_kernels"] = [{"kernel": k[:120], "duration_ns": t} for k, t in cublas]
    return out


mode = sys.argv[1]
if mode == "record":
    path = DATA / "results.json"
    rec = json.loads(path.read_text())
    rec["overhead"] = record()
    path.write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps({k: v for k, v in rec["overhead"].items() if k != "cublas_kernels"}, indent=1))
    sys.exit(0)

import cupy  # noqa: E402  (the record mode above runs without a GPU)
import numpy as np  # noqa: E402
from cupyx.profiler import benchmark  # noqa: E402

from gemmlab import bench, fusion  # noqa: E402

n = int(sys.argv[2]) if len(sys.argv) > 2 else 512
top = fusion.best([r for r in fusion.load() if "pct_of_baseline" in r], "fused/05_tf32x3", n)
kern = fusion.step("fused/05_tf32x3", backend="gpu", **top["params"])
a, b, c = fusion.random_inputs(n)
e = cupy.empty((n, n), dtype=cupy.float32)
fused = kern.launcher(a, b, c, e)
cfg = kern.launch_config((n, n, n, n))
noop = cupy.RawKernel(r'''extern "C" __global__ void noop_like_step05(float* p) {
    extern __shared__ float s[];
    if (threadIdx.x == 100000) p[0] = s[0];  // never: the block starts and ends
}''', "noop_like_step05")
noop.max_dynamic_shared_size_bytes = cfg.shared_bytes
empty = cupy.RawKernel(r'extern "C" __global__ void empty_kernel() {}', "empty_kernel")
import torch  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
calls = {
    "torch a@b@c": lambda: ta @ tb @ tc,
    "fused/05": fused,
    "no-op, step 05's launch": lambda: noop(cfg.grid, cfg.block, (e,), shared_mem=cfg.shared_bytes),
    "empty kernel": lambda: empty((1,), (32,), ()),
}
if mode == "once":  # under ncu: each call twice after the warm-up
    for _ in range(2):
        for f in calls.values():
            f()
        cupy.cuda.Device().synchronize()
    sys.exit(0)
print(f"N={n}, step 05 params {top['params']}: grid {cfg.grid[0]} x {cfg.block[0]} threads, "
      f"{cfg.shared_bytes} bytes of dynamic shared memory")
for rnd in range(2):
    t = bench.time_interleaved(calls, 300, 20)
    print(f"round {rnd} interleaved: " + ", ".join(f"{k} {v['median_s'] * 1e6:.1f} us" for k, v in t.items()), flush=True)
    for name, f in calls.items():
        r = benchmark(f, (), n_repeat=300, n_warmup=20)
        print(f"round {rnd} alone: {name:26s} event {np.median(r.gpu_times[0]) * 1e6:6.1f} us   "
              f"host {np.median(r.cpu_times) * 1e6:6.1f} us", flush=True)
    for name, f in calls.items():
        s, t2 = cupy.cuda.Event(), cupy.cuda.Event()
        ts = []
        for _ in range(20):
            s.record()
            for _ in range(100):
                f()
            t2.record()
            t2.synchronize()
            ts.append(cupy.cuda.get_elapsed_time(s, t2) * 1e3 / 100)
        print(f"round {rnd} back to back: {name:26s} {np.median(ts):6.1f} us per call", flush=True)
