"""Time the emulator on the two reference launches (compile cached; wall time per launch, including
the child process). Run from the repository root: python tests/kernels/measure_speed.py"""
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from gemmlab import cpu  # noqa: E402

HERE = Path(__file__).parent


def measure(module, grid, block, args, reps=5):
    cpu.launch(module, grid, block, args)  # warm the page cache and the binary
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        cpu.launch(module, grid, block, args)
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times)


rng = np.random.default_rng(0)
n = 256
sgemm = cpu.compile_kernel((HERE / "sgemm_smem_tiling.cu").read_text(), "sgemm_smem_tiling<32>", label="sgemm")
A, B = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
C = np.zeros((n, n), np.float32)
med, best = measure(sgemm, (n // 32, n // 32), (32, 32), [n, n, n, A, B, C])
assert np.allclose(C, A @ B, atol=1e-3)
print(f"sgemm 256^3, 32x32 tiles, 1024 threads/block: median {med * 1e3:.0f} ms, best {best * 1e3:.0f} ms")

n = 512
hgemm = cpu.compile_kernel((HERE / "hgemm_mma.cu").read_text(), "hgemm_mma<128, 128, 32>", label="hgemm")
A, B = rng.standard_normal((n, n)).astype(np.float16), rng.standard_normal((n, n)).astype(np.float16)
C = np.zeros((n, n), np.float16)
med, best = measure(hgemm, (n // 128, n // 128), 128, [n, n, n, A, B, C])
assert np.allclose(C.astype(np.float32), A.astype(np.float32) @ B.astype(np.float32), atol=0.1, rtol=1e-2)
print(f"hgemm 512^3, ldmatrix + mma m16n8k16, 128x128x32, 4 warps: median {med * 1e3:.0f} ms, best {best * 1e3:.0f} ms")
