#include "common.cuh"
// The wgmmas of fused step 08's K tile and nothing else (results/experiments/fusion-tma, `limits.py rate`):
// GROUPS warpgroups per block each issue, per iteration, 4 slices x 3 wgmma m64nNk8 tf32 (A in registers,
// B from a 128-byte-swizzled shared tile, big and small parts as in 08), commit, and wait for
// them, as 08 does at the end of each K tile. FP16 (N = 32; `limits.py fp16` puts its wgmma_m64n32k16_f16
// in front): 2 slices x 3 wgmma m64n32k16 fp16, the same multiply-adds in half the instructions. No loads,
// no split, no barriers: the tensor pipe's rate for these instructions. Thread 0 of each group writes
// the cycles (clock64) its loop took.
template <int N, int GROUPS, bool FP16 = false>
__global__ void __launch_bounds__(GROUPS * 128, 1) wgmma_rate(int iters, float* out, long long* cycles) {
    __shared__ __align__(1024) u32 big[N * 32];
    __shared__ __align__(1024) u32 small[N * 32];
    for (int i = threadIdx.x; i < N * 32; i += blockDim.x) { big[i] = 0x3f800000u; small[i] = 0x33800000u; }
    fence_proxy_async();
    __syncthreads();
    u32 a[4] = {0x3f800000u, 0x3f800000u ^ (threadIdx.x & 7), 0x3f800000u, 0x3f800000u};
    float acc[N / 2] = {};
    const long long t0 = clock64();
    for (int it = 0; it < iters; ++it) {
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            const unsigned long long db = wgmma_desc_sw128(&big[kk * 8], 16, 1024);
            const unsigned long long ds = wgmma_desc_sw128(&small[kk * 8], 16, 1024);
            if constexpr (FP16) {
                if (kk % 2 == 0) {
                    wgmma_m64n32k16_f16(acc, a, db, 1);
                    wgmma_m64n32k16_f16(acc, a, ds, 1);
                    wgmma_m64n32k16_f16(acc, a, db, 1);
                }
            } else if constexpr (N == 32) {
                wgmma_m64n32k8_tf32(acc, a, db, 1);
                wgmma_m64n32k8_tf32(acc, a, ds, 1);
                wgmma_m64n32k8_tf32(acc, a, db, 1);
            } else {
                wgmma_m64n64k8_tf32(acc, a, db, 1);
                wgmma_m64n64k8_tf32(acc, a, ds, 1);
                wgmma_m64n64k8_tf32(acc, a, db, 1);
            }
        }
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operands(acc);
    }
    const long long t1 = clock64();
    if (threadIdx.x % 128 == 0) cycles[blockIdx.x * GROUPS + threadIdx.x / 128] = t1 - t0;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) s += acc[i];
    if (s == -1.0f) out[threadIdx.x] = s;
}
