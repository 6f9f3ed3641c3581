"""Time the CPU emulator on the two reference launches of issue 2 (compile cached; wall time per
launch, child process included), on the real steps. Run from the repository root:
python tests/emulator_speed.py   (targets on a 2-core machine: 1 s and 2 s)"""
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import gemmlab  # noqa: E402


def median_seconds(kernel, a, b, reps=5):
    kernel(a, b)  # compile, warm the page cache and the binary
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        kernel(a, b)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


rng = np.random.default_rng(0)
for name, params, n, dtype in [("sgemm/03_smem_tiling", {"BLOCK": 32}, 256, np.float32),
                               ("hgemm/03_swizzled", {}, 512, np.float16)]:
    kernel = gemmlab.step(name, backend="cpu", **params)
    a, b = (rng.uniform(-1, 1, (n, n)).astype(dtype) for _ in range(2))
    print(f"{kernel.label} {n}^3 on the CPU: median {median_seconds(kernel, a, b) * 1e3:.0f} ms per launch")
