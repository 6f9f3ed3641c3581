// demo/mma_fragments.cu: one warp shows which lane holds which matrix element (chapter 7).
//
// Not a GEMM step: two single-warp kernels whose outputs are the raw registers, so the host can
// read off the fragment layouts that the hardware (or the emulator's twin) produced. The inputs
// are encodings: element (r, c) of a matrix holds a small integer that names r and c, exact in
// fp16 and fp32, so every backend prints the same numbers. gemmlab/chapters/tensorcores.py launches them
// and decodes the registers; gemmlab/chapters/layouts.py is the Python twin they are checked against.
//
//   mma_fragments<MMA_K>    MMA_K = 8: mma.m16n8k8 (sm_75); MMA_K = 16: mma.m16n8k16 (sm_80).
//                           A (16 x MMA_K) and B (MMA_K x 8), row-major, are staged in shared
//                           memory, loaded with ldmatrix (A as it is, B with .trans), multiplied
//                           with C = 0; every lane writes its A, B and D registers.
//   ldmatrix_fragments<NUM, TRANS>  ldmatrix.x1/.x2/.x4 (.trans): NUM 8x8 matrices in shared
//                           memory, lane 8*j + r gives the address of row r of matrix j; every
//                           lane writes its NUM registers.
// Launch: one block of 32 threads (one warp), no dynamic shared memory.
#include "common.cuh"

// a_regs: 32 x MMA_K/4 u32, b_regs: 32 x MMA_K/8 u32, d_regs: 32 x 4 floats, lane-major.
template <int MMA_K>
__global__ void mma_fragments(const __half* A, const __half* B, u32* a_regs, u32* b_regs,
                              float* d_regs) {
    static_assert(MMA_K == 8 || MMA_K == 16, "mma.sync f16 shapes: m16n8k8 and m16n8k16");
    __shared__ __align__(16) __half sA[16][MMA_K];  // 16 x MMA_K, K-major (rows of A)
    __shared__ __align__(16) __half sB[MMA_K][8];   // MMA_K x 8, N-major (rows of B)
    const int lane_id = threadIdx.x % 32;
    for (int i = lane_id; i < 16 * MMA_K; i += 32) sA[i / MMA_K][i % MMA_K] = A[i];
    for (int i = lane_id; i < MMA_K * 8; i += 32) sB[i / 8][i % 8] = B[i];
    __syncwarp();

    u32 a[MMA_K / 4], b[MMA_K / 8];
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f}, d[4];
    if constexpr (MMA_K == 8) {
        // x2: lanes 0-7 give rows 0-7 (matrix 0 -> a[0]), lanes 8-15 rows 8-15 (matrix 1 -> a[1]).
        ldmatrix_x2(a[0], a[1], &sA[lane_id % 16][0]);
        // x1.trans: lanes 0-7 give the 8 k-rows of B; transposed, lane l gets B(2(l%4).., l/4).
        ldmatrix_x1_trans(b[0], &sB[lane_id % 8][0]);
        mma_m16n8k8_f32(d, a, b, c);
    } else {
        // x4: lane l gives row l % 16, column 8 * (l / 16): matrices (rows 0-7, k 0-7),
        // (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) -> a[0..3].
        ldmatrix_x4(a[0], a[1], a[2], a[3], &sA[lane_id % 16][(lane_id / 16) * 8]);
        // x2.trans: lanes 0-15 give k-rows 0-15 -> b[0] (k 0-7), b[1] (k 8-15).
        ldmatrix_x2_trans(b[0], b[1], &sB[lane_id % 16][0]);
        mma_m16n8k16_f32(d, a, b, c);
    }
    for (int i = 0; i < MMA_K / 4; ++i) a_regs[lane_id * (MMA_K / 4) + i] = a[i];
    for (int i = 0; i < MMA_K / 8; ++i) b_regs[lane_id * (MMA_K / 8) + i] = b[i];
    for (int i = 0; i < 4; ++i) d_regs[lane_id * 4 + i] = d[i];
}

// mats: NUM 8x8 row-major matrices, one after another (NUM * 64 halves); regs: 32 x NUM u32.
template <int NUM, bool TRANS>
__global__ void ldmatrix_fragments(const __half* mats, u32* regs) {
    static_assert(NUM == 1 || NUM == 2 || NUM == 4, "ldmatrix loads .x1, .x2 or .x4");
    __shared__ __align__(16) __half sM[NUM * 64];  // matrix j, row r, col c at j*64 + r*8 + c
    const int lane_id = threadIdx.x % 32;
    for (int i = lane_id; i < NUM * 64; i += 32) sM[i] = mats[i];
    __syncwarp();

    // Lane 8j + r gives row r of matrix j; lanes past 8 * NUM are ignored (repeat valid rows).
    const __half* row = &sM[(lane_id % (8 * NUM)) * 8];
    u32 r[NUM];
    if constexpr (NUM == 1) {
        if constexpr (TRANS) ldmatrix_x1_trans(r[0], row); else ldmatrix_x1(r[0], row);
    } else if constexpr (NUM == 2) {
        if constexpr (TRANS) ldmatrix_x2_trans(r[0], r[1], row); else ldmatrix_x2(r[0], r[1], row);
    } else {
        if constexpr (TRANS) ldmatrix_x4_trans(r[0], r[1], r[2], r[3], row);
        else ldmatrix_x4(r[0], r[1], r[2], r[3], row);
    }
    for (int j = 0; j < NUM; ++j) regs[lane_id * NUM + j] = r[j];
}
