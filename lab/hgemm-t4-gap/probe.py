"""Sustained mma.m16n8k8 throughput with fp32 and with fp16 accumulators, and the power it draws.

    python lab/hgemm-t4-gap/probe.py [SECONDS]

Each warp runs 8 independent m16n8k8 tiles (no memory traffic), launched back to back for SECONDS
(default 3) per variant while nvidia-smi samples the SM clock and the board power every 100 ms.
The question: does the T4-compatible instruction itself run faster, or cooler, when it accumulates
in fp16 (the seed's kernels) instead of fp32 (ours)? GPU only.
"""
import subprocess
import sys
import time

import cupy
import numpy as np

SOURCE = r"""
typedef unsigned int u32;
extern "C" __global__ void k8_f32(int iters, float* out) {
    const u32 bits = 0x3c003c00u ^ (threadIdx.x & 7u);  // fp16 pairs close to 1.0
    float c[8][4] = {};
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < 8; ++j)
            asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
                         "{%0,%1,%2,%3};\n"
                         : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
                         : "r"(bits), "r"(bits), "r"(bits));
    }
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) sum += c[j][0] + c[j][1] + c[j][2] + c[j][3];
    if (sum == -1.0f) out[threadIdx.x] = sum;  // never true; keeps the loop
}
extern "C" __global__ void k8_f16(int iters, float* out) {
    const u32 bits = 0x3c003c00u ^ (threadIdx.x & 7u);
    u32 c[8][2] = {};
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < 8; ++j)
            asm volatile("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3}, {%4}, {%0,%1};\n"
                         : "+r"(c[j][0]), "+r"(c[j][1])
                         : "r"(bits), "r"(bits), "r"(bits));
    }
    u32 x = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) x ^= c[j][0] ^ c[j][1];
    if (x == 0x12345678u) out[threadIdx.x] = 1.0f;
}
"""


def sample_smi(seconds: float) -> subprocess.Popen:
    return subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                             "-lms", "100"], stdout=subprocess.PIPE, text=True)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    mod = cupy.RawModule(code=SOURCE, options=("-std=c++17",))
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    out = cupy.zeros(1024, cupy.float32)
    grid, block, iters = sms * 4, 256, 4096
    flops = grid * block // 32 * iters * 8 * 2 * 16 * 8 * 8
    print(f"{cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}: grid {grid} x {block} threads, "
          f"{iters} iterations of 8 mma.m16n8k8 per warp")
    for name in ("k8_f32", "k8_f16"):
        fn = mod.get_function(name)
        for _ in range(3):
            fn((grid,), (block,), (np.int32(iters), out))
        cupy.cuda.Device().synchronize()
        smi = sample_smi(seconds)
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        times, t0 = [], time.time()
        while time.time() - t0 < seconds:
            start.record()
            fn((grid,), (block,), (np.int32(iters), out))
            end.record()
            end.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
        smi.terminate()
        rows = [line.split(",") for line in smi.communicate()[0].splitlines() if line.count(",") == 1]
        clock = np.median([float(r[0]) for r in rows]) if rows else float("nan")
        power = np.median([float(r[1]) for r in rows]) if rows else float("nan")
        t = float(np.median(times))
        print(f"{name}: {flops / t / 1e12:7.1f} TFLOP/s (median of {len(times)} launches)  "
              f"SM clock median {clock:6.0f} MHz  power median {power:5.0f} W  ({len(rows)} samples)", flush=True)


if __name__ == "__main__":
    main()
