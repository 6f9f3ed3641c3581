// Test kernel for the emulator: fp16 GEMM with cp.async, ldmatrix and mma.sync m16n8k16.
// Block tile 128 x 128 x 32, 4 warps in 2 x 2, each warp 64 x 64 (4 x 8 mma tiles of 16 x 8).
// Calls the emu:: twins directly (kernels/common.cuh wraps them the same way). Needs M, N, K
// multiples of 128, 128, 32.
typedef unsigned int u32;

template <int BLOCK_M, int BLOCK_N, int BLOCK_K>
__global__ void hgemm_mma(int M, int N, int K, const __half* A, const __half* B, __half* C) {
    constexpr int PAD = 8;  // halves of padding per shared row
    __shared__ __align__(16) __half sA[BLOCK_M][BLOCK_K + PAD];   // M x K, K-major
    __shared__ __align__(16) __half sB[BLOCK_K][BLOCK_N + PAD];   // K x N, N-major
    const int tid = threadIdx.x, warp_id = tid / 32, lane_id = tid % 32;
    const int warp_m = warp_id / 2, warp_n = warp_id % 2;
    const int bm = blockIdx.y * BLOCK_M, bn = blockIdx.x * BLOCK_N;
    float acc[4][8][4] = {};
    for (int k0 = 0; k0 < K; k0 += BLOCK_K) {
        for (int i = tid; i < BLOCK_M * BLOCK_K / 8; i += blockDim.x) {
            int r = i / (BLOCK_K / 8), c = i % (BLOCK_K / 8) * 8;
            emu::cp_async_16(&sA[r][c], &A[(bm + r) * K + k0 + c], 16);
        }
        for (int i = tid; i < BLOCK_K * BLOCK_N / 8; i += blockDim.x) {
            int r = i / (BLOCK_N / 8), c = i % (BLOCK_N / 8) * 8;
            emu::cp_async_16(&sB[r][c], &B[(k0 + r) * N + bn + c], 16);
        }
        emu::cp_async_commit();
        emu::cp_async_wait_group<0>();
        __syncthreads();
        for (int kk = 0; kk < BLOCK_K; kk += 16) {
            u32 a[4][4], b[8][2];
            for (int mi = 0; mi < 4; ++mi) {
                int r = warp_m * 64 + mi * 16 + lane_id % 16, c = kk + lane_id / 16 * 8;
                emu::ldmatrix_x4(a[mi][0], a[mi][1], a[mi][2], a[mi][3], &sA[r][c]);
            }
            for (int ni = 0; ni < 8; ni += 2) {
                // x4.trans: matrices (k 0-7, n), (k 8-15, n), (k 0-7, n+8), (k 8-15, n+8)
                int r = kk + lane_id % 16, c = warp_n * 64 + ni * 8 + lane_id / 16 * 8;
                emu::ldmatrix_x4_trans(b[ni][0], b[ni][1], b[ni + 1][0], b[ni + 1][1], &sB[r][c]);
            }
            for (int mi = 0; mi < 4; ++mi)
                for (int ni = 0; ni < 8; ++ni)
                    emu::mma_m16n8k16_f32(acc[mi][ni], a[mi], b[ni], acc[mi][ni]);
        }
        __syncthreads();
    }
    const int g = lane_id / 4, t = lane_id % 4;
    for (int mi = 0; mi < 4; ++mi)
        for (int ni = 0; ni < 8; ++ni) {
            int r = bm + warp_m * 64 + mi * 16 + g, c = bn + warp_n * 64 + ni * 8 + 2 * t;
            C[r * N + c] = __float2half(acc[mi][ni][0]);
            C[r * N + c + 1] = __float2half(acc[mi][ni][1]);
            C[(r + 8) * N + c] = __float2half(acc[mi][ni][2]);
            C[(r + 8) * N + c + 1] = __float2half(acc[mi][ni][3]);
        }
}
