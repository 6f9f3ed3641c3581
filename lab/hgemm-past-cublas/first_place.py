"""Does the kernel timed first after cuBLAS pay for its place? Step 10 (and 09) at 4096 and 8192, each launched
twice per turn of the interleaved loop: once right after cuBLAS's calls ("first") and once after that ("second").

    python lab/hgemm-past-cublas/first_place.py [ROUNDS]      (an H100 or H200; one line per size, step and round)
"""
import sys

import cupy
import numpy as np
import torch

import gemmlab
from gemmlab import bench

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
torch.backends.cuda.matmul.allow_tf32 = False
print(gemmlab.gpu.device()["name"])
for n in (4096, 8192):
    rng = np.random.default_rng(n)
    a, b = (cupy.asarray(rng.standard_normal((n, n)).astype(np.float16)) for _ in range(2))
    ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
    for name in ("hgemm/09_persistent", "hgemm/10_tma_store"):
        k = gemmlab.step(name, backend="gpu")
        c1, c2 = cupy.empty((n, n), np.float16), cupy.empty((n, n), np.float16)
        calls = {"cupy.matmul": lambda: cupy.matmul(a, b), "torch.matmul": lambda: torch.matmul(ta, tb),
                 "first": lambda: k.run(a, b, c1), "second": lambda: k.run(a, b, c2)}
        for r in range(ROUNDS):
            t = {key: v["median_s"] for key, v in bench.time_interleaved(calls, 30, 3, rotate=False).items()}
            base = min(t["cupy.matmul"], t["torch.matmul"])
            print(f"{name:20s} {n}  cuBLAS {2 * n**3 / base / 1e12:6.1f} TFLOP/s   first {100 * base / t['first']:5.1f}%"
                  f"   second {100 * base / t['second']:5.1f}%   ({t['first'] * 1e6:8.1f} vs {t['second'] * 1e6:8.1f} us)",
                  flush=True)
