"""Steps 05 and 06 with fp16 accumulators (s05_f16acc, s06_f16acc) on the seed's larger tiles, against cuBLAS.

    python lab/hgemm-t4-gap/f16acc.py [SIZES] [ROUNDS]

fp16 accumulators take half the registers of fp32 ones, which is what lets the seed's kernels use
256 x 256 block tiles with 128 x 64 warp tiles; with fp32 accumulators a 128 x 64 warp tile needs
256 registers per thread for the sums alone, so the step's rules refuse it. This script lifts that
one rule for the fp16 variant (nothing else), checks every configuration against float64 on a
shape that is not a tile multiple, reports the error at full size for uniform and for positive
inputs, and times each against cuBLAS launch by launch in turn (bench.time_interleaved). GPU only.
"""
import dataclasses
import pathlib
import sys

import cupy

from gemmlab import registry
from lab import experiments
from lab.experiments import variant_source
from gemmlab.runtime.kernel import Kernel

FOLDER = pathlib.Path(__file__).parent
TILES = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "WARP_M", "WARP_N")
VARIANTS = [  # (label, step, variant, block/warp tiles)
    ("06 fp32 acc, 256x128x32, warp 64x64 (step 06)", "hgemm/06_double_buffer", "step", (256, 128, 32, 64, 64)),
    ("06 fp16 acc, 256x128x32, warp 64x64", "hgemm/06_double_buffer", "s06_f16acc", (256, 128, 32, 64, 64)),
    ("06 fp16 acc, 256x256x16, warp 128x64", "hgemm/06_double_buffer", "s06_f16acc", (256, 256, 16, 128, 64)),
    ("06 fp16 acc, 256x256x32, warp 128x64", "hgemm/06_double_buffer", "s06_f16acc", (256, 256, 32, 128, 64)),
    ("05 fp32 acc, 256x128x32, warp 64x64 (step 05)", "hgemm/05_tuned_tiles", "step", (256, 128, 32, 64, 64)),
    # the seed's kernel 5: one shared buffer, register prefetch, fp16 sums, 256x256x32, warp 128x64
    ("05 fp16 acc, 256x256x32, warp 128x64 (seed kernel 5)", "hgemm/05_tuned_tiles", "s05_f16acc",
     (256, 256, 32, 128, 64)),
]


def kernel(step_name: str, variant: str, tiles: tuple) -> Kernel:
    base = step = registry.get(step_name)
    if variant != "step":  # only the fp32-accumulator register rule is lifted, for the fp16 variants
        step = dataclasses.replace(base, rules=lambda p: [r for r in base.rules(p) if "fp32 accumulators" not in r])
    return Kernel(step, dict(zip(TILES, tiles)), "gpu", source_text=variant_source(FOLDER, base, variant))


def rel_error(k: Kernel, m: int, n: int, kk: int, positive: bool, seed: int = 0) -> float:
    rng = cupy.random.default_rng(seed)
    a, b = (rng.random(s, dtype=cupy.float32) for s in ((m, kk), (kk, n)))
    if not positive:
        a, b = a * 2 - 1, b * 2 - 1
    a, b = a.astype(cupy.float16), b.astype(cupy.float16)
    c = cupy.full((m, n), cupy.nan, dtype=cupy.float16)  # NaN where the kernel fails to write
    k.run(a, b, c)
    want = a.astype(cupy.float64) @ b.astype(cupy.float64)
    err = cupy.abs(c.astype(cupy.float64) - want).max() / cupy.abs(want).max()
    return float(err) if not bool(cupy.isnan(c).any()) else float("nan")


def main():
    sizes = [int(s) for s in sys.argv[1].split()] if len(sys.argv) > 1 else [4096, 8192]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    kernels = {}
    for label, step_name, variant, tiles in VARIANTS:
        k = kernel(step_name, variant, tiles)
        small = rel_error(k, 300, 328, 520, positive=False)  # not a multiple of any tile
        big_u = rel_error(k, 8192, 8192, 8192, positive=False)
        big_p = rel_error(k, 8192, 8192, 8192, positive=True)
        ok = small < (2e-3 if variant == "step" else 2e-2)
        print(f"{label:55s} error / max|C|: 300x328x520 {small:.2e}, 8192 uniform(-1,1) {big_u:.2e}, "
              f"8192 uniform(0,1) {big_p:.2e}  {'ok' if ok else 'FAILED'}", flush=True)
        if ok:
            kernels[label] = k
    experiments.time_against_cublas(kernels, sizes, rounds, cupy.float16)


if __name__ == "__main__":
    main()
