"""mma.sync throughput against warps per SM and independent accumulators per warp (no memory traffic)."""
import cupy, numpy as np
from cupyx.profiler import benchmark
SRC = r'''
template <int CH, bool K16>
__global__ void probe(int iters, float* out) {
    unsigned x = 0x3c003c00u ^ (threadIdx.x & 7u);
    float c[CH][4];
    for (int j = 0; j < CH; ++j) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < CH; ++j) {
            if (K16)
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                             : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3]) : "r"(x), "r"(x), "r"(x), "r"(x), "r"(x), "r"(x));
            else
                asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                             : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3]) : "r"(x), "r"(x), "r"(x));
        }
    }
    float s = 0.f;
    for (int j = 0; j < CH; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
    if (s == -1.0f) out[threadIdx.x] = s;
}
'''
names = [f"probe<{ch},{'true' if k16 else 'false'}>" for ch in (2, 4, 8, 16, 32) for k16 in (True, False)]
mod = cupy.RawModule(code=SRC, options=("-std=c++17",), name_expressions=names)
out = cupy.zeros(1024, dtype=cupy.float32)
sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
print(f"{'k':>3} {'chains':>6} {'warps/SM':>8} {'TFLOP/s':>8}")
for k16 in (True, False):
    for ch in (2, 4, 8, 16, 32):
        f = mod.get_function(f"probe<{ch},{'true' if k16 else 'false'}>")
        for threads, blocks_per_sm in ((128, 1), (256, 1), (256, 2), (256, 4), (512, 2)):
            iters = 2048
            grid = sms * blocks_per_sm
            if threads * f.num_regs > cupy.cuda.Device().attributes["MaxRegistersPerBlock"]:
                print(f"{16 if k16 else 8:>3} {ch:>6} {threads // 32 * blocks_per_sm:>8}  (does not fit: {f.num_regs} registers)")
                continue  # the recorded run of 2026-11-23 stopped here with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
            r = benchmark(lambda: f((grid,), (threads,), (np.int32(iters), out)), (), n_repeat=10, n_warmup=2)
            t = float(np.median(r.gpu_times[0]))
            flops = grid * threads / 32 * iters * ch * 2 * 16 * 8 * (16 if k16 else 8)
            print(f"{16 if k16 else 8:>3} {ch:>6} {threads // 32 * blocks_per_sm:>8} {flops / t / 1e12:8.1f}", flush=True)
