"""What does a launch's context cost steps 09 and 10 against cuBLAS? At 4096 and 8192, one set of inputs, four ways:

  fixed      the protocol of 2026-11-24 to 11-27: cupy, torch, 09, 10 in that order every turn
  rotated    the protocol since 2026-11-28: the order rotates every turn (bench.time_interleaved)
  cold       rotated, with a 256 MB read before every timed launch (untimed), so each starts with the L2
             holding none of A, B or C, as under Nsight Compute's cache control
  other      rotated, but every launch takes the other of two sets of inputs than the launch before it: the L2
             holds the previous launch's data (and its C's written lines), none of it this launch's
  alone      each call by itself, launches back to back (bench.time_alone)

then each call alone for about 2 s while nvidia-smi samples the SM clock and the board power every 20 ms.

    python lab/hgemm-past-cublas/context.py [ROUNDS [STEP ...]]   (an H100 or H200; one line per mode, size, round;
                                                                  default steps: 09 and 10)
A STEP is a name, or a name and parameters: hgemm-past-cublas/clusters11:CLUSTER_M=4,NUM_STAGES=3 (its label:
"clusters11 CLUSTER_M=4,NUM_STAGES=3"); a course step's label is its number ("10").
"""
import statistics
import subprocess
import sys
import time

import cupy
import numpy as np
import torch

import gemmlab
from gemmlab import bench

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
NAMES = sys.argv[2:] or ["hgemm/09_persistent", "hgemm/10_tma_store"]


def label(spec: str) -> str:
    name, _, params = spec.partition(":")
    short = name.split("/")[1]
    return (short[:2] if short[:2].isdigit() else short) + (f" {params}" if params else "")


def make(spec: str):
    name, _, params = spec.partition(":")
    values = dict(item.split("=") for item in params.split(",")) if params else {}
    return gemmlab.step(name, backend="gpu", **{k: int(v) for k, v in values.items()})


STEPS = {label(spec): spec for spec in NAMES}  # "hgemm/10_tma_store" -> "10"
torch.backends.cuda.matmul.allow_tf32 = False


def line(mode: str, n: int, r: int, t: dict) -> None:
    base = min(t["cupy.matmul"], t["torch.matmul"])
    pct = "   ".join(f"{key} {100 * base / t[key]:5.1f}%" for key in STEPS)
    print(f"{mode:8s} {n:5d} r{r}  cuBLAS {2 * n**3 / base / 1e12:6.1f} TFLOP/s   {pct}   "
          f"(us: {', '.join(f'{k} {v * 1e6:.1f}' for k, v in t.items())})", flush=True)


def sampled(fn, seconds: float = 2.0) -> str:
    """Run fn back to back for `seconds` while nvidia-smi samples clocks and power; the samples' medians."""
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                            "--format=csv,noheader,nounits", "--loop-ms=20"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)  # nvidia-smi's own start
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(10):
            fn()
        cupy.cuda.runtime.deviceSynchronize()
    smi.terminate()
    rows = [r.split(",") for r in smi.communicate()[0].strip().splitlines() if r.count(",") == 2]
    rows = rows[len(rows) // 3:]  # the first third may still show the previous load
    clock, power, temp = (statistics.median(float(r[i]) for r in rows) for i in range(3))
    return f"SM clock {clock:6.0f} MHz   power {power:6.1f} W   {temp:3.0f} C   ({len(rows)} samples)"


print(gemmlab.gpu.device()["name"], flush=True)
flush_buf = cupy.ones(64 * 2**20, dtype=cupy.float32)  # 256 MB: more than the L2 (50 MB on an H100, 60 on an H200)
for n in (4096, 8192):
    rng = np.random.default_rng(n)
    sets = []  # two sets of inputs: (a, b, torch's views of them)
    for _ in range(2):
        a, b = (cupy.asarray((rng.random((n, n), dtype=np.float32) * 2 - 1).astype(np.float16)) for _ in range(2))
        sets.append((a, b, torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")))
    kernels = {key: make(spec) for key, spec in STEPS.items()}
    outs = {key: cupy.empty((n, n), np.float16) for key in STEPS}

    def launches(pick):
        """The calls, each on the inputs pick() returns when it is launched."""
        return {"cupy.matmul": lambda: cupy.matmul(*pick()[:2]), "torch.matmul": lambda: torch.matmul(*pick()[2:]),
                **{key: (lambda k=k, c=outs[key]: k.run(*pick()[:2], c)) for key, k in kernels.items()}}

    turn = [0]

    def alternate():  # each launch takes the other set than the launch before it
        turn[0] ^= 1
        return sets[turn[0]]

    calls, calls_other = launches(lambda: sets[0]), launches(alternate)
    for r in range(ROUNDS):
        for mode, fns, kw in (("fixed", calls, {"rotate": False}), ("rotated", calls, {}),
                              ("cold", calls, {"between": flush_buf.sum}), ("other", calls_other, {})):
            line(mode, n, r, {k: v["median_s"] for k, v in bench.time_interleaved(fns, 30, 3, **kw).items()})
        line("alone", n, r, {k: v["median_s"] for k, v in bench.time_alone(calls, 30, 3).items()})
    for key, fn in calls.items():
        print(f"power    {n:5d} {key:13s} {sampled(fn)}", flush=True)
