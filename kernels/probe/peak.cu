// Throughput probes: how fast can this GPU issue one instruction, with no memory traffic at all?
// Each thread keeps CHAINS independent accumulators in registers and updates them in a long
// loop, so the only limit is the pipe that executes the instruction. The results are the ceilings
// that the GEMM steps are held against (gemmlab.hardware.measure_peaks):
//   ffma_peak           fp32 fused multiply-add (FFMA): the sgemm track's ceiling
//   mma_peak<false>     mma.sync.m16n8k8 f16 -> f32 (the T4's shape, hgemm steps 01-06)
//   mma_peak<true>      mma.sync.m16n8k16 f16 -> f32 (sm_80+, hgemm step 07)
//   mma_tf32_peak<8>    mma.sync.m16n8k8 tf32 -> f32 (sm_80+, fused step 05's three per product)
// Neither loop can be folded away: every result feeds the next iteration, and the final values
// are written out only under a condition the compiler cannot prove false.
#include "common.cuh"

// 2 * CHAINS * 16 flops per iteration per thread.
template <int CHAINS>
__global__ void ffma_peak(int iters, float a, float b, float* out) {
    float x[CHAINS];
#pragma unroll
    for (int i = 0; i < CHAINS; ++i) x[i] = threadIdx.x + i;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
            for (int i = 0; i < CHAINS; ++i) x[i] = fmaf(x[i], a, b);
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < CHAINS; ++i) sum += x[i];
    if (sum == -1.0f) out[threadIdx.x] = sum;  // never true for the inputs we pass; keeps the loop
}

// 8 independent mma tiles per warp; per iteration 8 mmas of 2 * 16 * 8 * (K16 ? 16 : 8) flops.
template <bool K16>
__global__ void mma_peak(int iters, float* out) {
    const u32 bits = 0x3c003c00u ^ (threadIdx.x & 7u);  // fp16 pairs close to 1.0
    const u32 a[4] = {bits, bits, bits, bits};
    const u32 b[2] = {bits, bits};
    float c[8][4] = {};
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            if constexpr (K16) {
                mma_m16n8k16_f32(c[j], a, b, c[j]);
            } else {
                const u32 a2[2] = {a[0], a[1]};
                const u32 b1[1] = {b[0]};
                mma_m16n8k8_f32(c[j], a2, b1, c[j]);
            }
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) sum += c[j][0] + c[j][1] + c[j][2] + c[j][3];
    if (sum == -1.0f) out[threadIdx.x] = sum;
}

// The same with TF32 inputs: 8 independent m16n8k8 tiles per warp, 8 mmas of 2 * 16 * 8 * 8 flops.
// A template, like the others, so that it is compiled only when named: a T4 (sm_75) has no TF32 mma.
template <int CHAINS>
__global__ void mma_tf32_peak(int iters, float* out) {
    const u32 bits = 0x3f800000u ^ ((threadIdx.x & 7u) << 13);  // TF32 values close to 1.0
    const u32 a[4] = {bits, bits, bits, bits};
    const u32 b[2] = {bits, bits};
    float c[CHAINS][4] = {};
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < CHAINS; ++j) mma_m16n8k8_tf32(c[j], a, b, c[j]);
    }
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) sum += c[j][0] + c[j][1] + c[j][2] + c[j][3];
    if (sum == -1.0f) out[threadIdx.x] = sum;
}
