"""ldmatrix latency: a warp's chain of dependent ldmatrix.x4, alone, with other ldmatrix warps, and
while other warps keep cp.async copies from global memory in flight (one block per SM)."""
import cupy, numpy as np
SRC = r'''
extern "C" __global__ void ldsm_latency(const int4* __restrict__ src, long long window, int chain_warps,
                                         int chain, int copy_rounds, long long* cycles, unsigned* sink) {
    extern __shared__ __align__(16) unsigned char smem[];   // [0, 8 KB): ldmatrix tiles; [16 KB, 80 KB): copy ring
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int i = threadIdx.x; i < 8192 / 4; i += blockDim.x) reinterpret_cast<unsigned*>(smem)[i] = 0u;
    __syncthreads();
    if (warp < chain_warps) {
        unsigned addr = (unsigned)__cvta_generic_to_shared(smem) + (warp * 512 + lane * 16) % 8192;
        unsigned acc = 0;
        long long t0 = clock64();
        for (int i = 0; i < chain; ++i) {
            unsigned r0, r1, r2, r3;
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                         : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
            addr += r0;          // r0 is 0 at run time: the next load waits for this one
            acc ^= r1 ^ r2 ^ r3;
        }
        long long t1 = clock64();
        if (lane == 0) cycles[blockIdx.x * 32 + warp] = t1 - t0;
        if (acc == 0x12345678u) sink[0] = acc;
    } else {
        const int cw = warp - chain_warps, copy_warps = blockDim.x / 32 - chain_warps;
        const unsigned ring = (unsigned)__cvta_generic_to_shared(smem) + 16384;
        long long g = (long long)blockIdx.x * 4096 + cw * 256 + lane;
        for (int r = 0; r < copy_rounds; ++r) {
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const int4* p = src + (g % window);
                const unsigned dst = ring + (((r * 8 + u) * copy_warps + cw) * 32 + lane) % 4096 * 16;
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(p));
                g += 32 * copy_warps * 8 + 7;
            }
            asm volatile("cp.async.commit_group;");
            asm volatile("cp.async.wait_group 3;");
        }
        asm volatile("cp.async.wait_all;");
    }
}
'''
mod = cupy.RawModule(code=SRC)
f = mod.get_function("ldsm_latency")
f.max_dynamic_shared_size_bytes = 16384 + 65536
sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
window = 256 * 2**20 // 16   # 256 MB: most copies miss L2, as the GEMM's do at 8192
src = cupy.zeros(window * 4, dtype=cupy.int32)
cycles = cupy.zeros(sms * 32, dtype=cupy.int64)
sink = cupy.zeros(1, dtype=cupy.uint32)
chain = 20000
print(f"{'chain warps':>11s} {'copy warps':>10s}  cycles per ldmatrix.x4 (dependent chain, median over SMs)")
for chain_warps, copy_warps in ((1, 0), (8, 0), (1, 4), (8, 4), (8, 8)):
    rounds = 4000 if copy_warps else 0
    cycles.fill(0)
    for _ in range(2):  # the second run is the one kept
        f((sms,), (32 * (chain_warps + copy_warps),), (src, np.int64(window), np.int32(chain_warps), np.int32(chain),
                                                       np.int32(rounds), cycles, sink), shared_mem=16384 + 65536)
    cupy.cuda.Device().synchronize()
    c = cycles.get().reshape(sms, 32)[:, :chain_warps] / chain
    print(f"{chain_warps:11d} {copy_warps:10d}  {np.median(c):8.1f}   (p90 {np.percentile(c, 90):.1f})", flush=True)
