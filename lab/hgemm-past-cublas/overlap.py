"""Attempt 3: keep one k tile's wgmmas in flight. Step 10's consumers wait for each k tile's wgmma group to finish
(wgmma_wait<0>) before they release its stage and issue the next; the variant commits k tile t's group, then waits
only for k tile t - 1's (wgmma_wait<1>) and releases that one's stage, so the tensor cores always have the next
group queued. The last group of a tile is waited for after the loop, before the epilogue reads the accumulators.

    python lab/hgemm-past-cublas/overlap.py verify [--backend cpu]   the variant against float64 (step 10's cases)
    python lab/hgemm-past-cublas/overlap.py time [ROUNDS]           10 and the variant with cuBLAS (H100 or H200):
                                                                   rotated order, then cold L2, at 4096 and 8192
"""
import sys

import numpy as np

import gemmlab
from gemmlab import bench
from gemmlab.runtime.source import kernel_path

STEP = "hgemm/10_tma_store"
SERIAL = """            wgmma_commit();
            wgmma_wait<0>();
            wgmma_fence_operands(d);
            if (threadIdx.x % 128 == 0) mbarrier_arrive(&empty[s]);  // the producer may refill it
        }
"""
OVERLAPPED = """            wgmma_commit();
            wgmma_wait<1>();  // k tile t - 1's group is done (t's may still run): its stage may be refilled
            if (t > 0 && threadIdx.x % 128 == 0) mbarrier_arrive(&empty[(ring_pos - 1) % NUM_STAGES]);
        }
        wgmma_wait<0>();  // the tile's last group, before the epilogue reads d
        wgmma_fence_operands(d);
        if (threadIdx.x % 128 == 0) mbarrier_arrive(&empty[(ring_pos - 1) % NUM_STAGES]);
"""


def variant_source() -> str:
    text = kernel_path(gemmlab.registry.get(STEP).file).read_text()
    if text.count(SERIAL) != 1:
        raise SystemExit(f"{STEP}: expected one serial wgmma wait in the k loop (what this experiment changes)")
    return text.replace(SERIAL, OVERLAPPED)


def kernels(backend: str) -> dict:
    return {"10": gemmlab.step(STEP, backend=backend),
            "overlap": gemmlab.step(STEP, backend=backend, source=variant_source())}


def verify(backend: str) -> None:
    for name, k in kernels(backend).items():
        print(name, gemmlab.verify(k), flush=True)


def time(rounds: int) -> None:
    import cupy
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    ks = kernels("gpu")
    flush_buf = cupy.ones(64 * 2**20, dtype=cupy.float32)  # 256 MB, more than the L2
    for n in (4096, 8192):
        rng = np.random.default_rng(n)
        a, b = (cupy.asarray((rng.random((n, n), dtype=np.float32) * 2 - 1).astype(np.float16)) for _ in range(2))
        ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
        outs = {key: cupy.empty((n, n), np.float16) for key in ks}
        calls = {"cupy.matmul": lambda: cupy.matmul(a, b), "torch.matmul": lambda: torch.matmul(ta, tb),
                 **{key: (lambda k=k, c=outs[key]: k.run(a, b, c)) for key, k in ks.items()}}
        for r in range(rounds):
            for mode, kw in (("rotated", {}), ("cold", {"between": flush_buf.sum})):
                t = {k: v["median_s"] for k, v in bench.time_interleaved(calls, 30, 3, **kw).items()}
                base = min(t["cupy.matmul"], t["torch.matmul"])
                print(f"{mode:8s} {n:5d} r{r}  cuBLAS {2 * n**3 / base / 1e12:6.1f} TFLOP/s   "
                      + "   ".join(f"{key} {100 * base / t[key]:5.1f}%" for key in ks)
                      + f"   (us: {', '.join(f'{k} {v * 1e6:.1f}' for k, v in t.items())})", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["verify"]:
        verify("cpu" if "cpu" in sys.argv[2:] else "gpu")
    else:
        time(int(sys.argv[2]) if len(sys.argv) > 2 else 3)
