// demo/01_f16_accumulate.cu: step hgemm/01 with fp16 accumulators (chapter 7), the variant seed 001
// measured: mma.sync.m16n8k8.row.col.f16.f16.f16.f16 instead of ...f32.f16.f16.f32.
//
// Not a step of the ladder: the same tiles, copies and ldmatrix loads as hgemm/01_mma_tiling; only
// the accumulators change. Each lane keeps an mma tile's four results as two u32 registers of two
// halves (half2) instead of four floats, and every mma rounds its sum to fp16. That halves the
// accumulator registers; the price is accuracy, which chapter 7 measures as K grows.
//
// Layouts: as hgemm/01. C/D fragment of mma.m16n8k8 with f16 accumulators: register 0 holds
// (row l/4, cols 2*(l%4), 2*(l%4)+1), register 1 the same columns of row l/4 + 8, low half first.
// Launch: as hgemm/01; static shared memory (BLOCK_M + BLOCK_N) * BLOCK_K * 2 bytes.
#include "common.cuh"

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARP_M, int WARP_N>
__global__ void hgemm_f16_accumulate(int M, int N, int K, const __half* A, const __half* B,
                                     __half* C) {
    constexpr int MMA_M = 16, MMA_N = 8, MMA_K = 8;
    constexpr int WARPS_N = BLOCK_N / WARP_N;
    constexpr int NUM_THREADS = (BLOCK_M / WARP_M) * WARPS_N * 32;
    constexpr int MMA_TILES_M = WARP_M / MMA_M;  // mma tiles per warp tile, down
    constexpr int MMA_TILES_N = WARP_N / MMA_N;  // mma tiles per warp tile, across
    static_assert(BLOCK_M % WARP_M == 0, "BLOCK_M must be a multiple of WARP_M");
    static_assert(BLOCK_N % WARP_N == 0, "BLOCK_N must be a multiple of WARP_N");
    static_assert(WARP_M % MMA_M == 0, "WARP_M must be a multiple of 16 (mma M)");
    static_assert(WARP_N % (2 * MMA_N) == 0,
                  "WARP_N must be a multiple of 16: ldmatrix.x4.trans loads two 8-wide B tiles");
    static_assert(BLOCK_K % (2 * MMA_K) == 0,
                  "BLOCK_K must be a multiple of 16: one ldmatrix.x4 loads a 16-deep A tile");
    static_assert(NUM_THREADS <= 1024, "too many warps: at most 1024 threads per block");
    static_assert((BLOCK_M + BLOCK_N) * BLOCK_K * 2 <= 48 * 1024,
                  "tiles exceed the 48 KiB of static shared memory");

    // 16-byte alignment: every ldmatrix row address must be 16-byte aligned. Row strides are
    // BLOCK_K * 2 and BLOCK_N * 2 bytes, multiples of 16 by the asserts above.
    __shared__ __align__(16) __half sA[BLOCK_M][BLOCK_K];  // BLOCK_M x BLOCK_K, sA[m][k], k contiguous
    __shared__ __align__(16) __half sB[BLOCK_K][BLOCK_N];  // BLOCK_K x BLOCK_N, sB[k][n], n contiguous

    const int tid = threadIdx.x;
    const int warp_id = tid / 32;
    const int lane_id = tid % 32;
    const int warp_row = (warp_id / WARPS_N) * WARP_M;  // warp tile's first row in the block tile
    const int warp_col = (warp_id % WARPS_N) * WARP_N;  // warp tile's first column
    const int block_row = blockIdx.y * BLOCK_M;
    const int block_col = blockIdx.x * BLOCK_N;

    // rC: the warp tile, MMA_TILES_M x MMA_TILES_N mma tiles of 2 registers (4 halves) per lane.
    u32 rC[MMA_TILES_M][MMA_TILES_N][2];
#pragma unroll
    for (int m = 0; m < MMA_TILES_M; ++m)
#pragma unroll
        for (int n = 0; n < MMA_TILES_N; ++n)
#pragma unroll
            for (int i = 0; i < 2; ++i) rC[m][n][i] = 0u;  // two fp16 +0.0

    for (int k0 = 0; k0 < K; k0 += BLOCK_K) {
        // gmem -> smem, one half per thread per iteration; consecutive threads take consecutive
        // elements of a row, so a warp's loads are contiguous. Plain and slow on purpose: the
        // next steps vectorize this copy and then overlap it with the math.
#pragma unroll 4
        for (int i = tid; i < BLOCK_M * BLOCK_K; i += NUM_THREADS) {
            const int r = i / BLOCK_K, c = i % BLOCK_K;
            const int gr = block_row + r, gc = k0 + c;
            sA[r][c] = (gr < M && gc < K) ? A[gr * K + gc] : __float2half(0.0f);
        }
#pragma unroll 4
        for (int i = tid; i < BLOCK_K * BLOCK_N; i += NUM_THREADS) {
            const int r = i / BLOCK_N, c = i % BLOCK_N;
            const int gr = k0 + r, gc = block_col + c;
            sB[r][c] = (gr < K && gc < N) ? B[gr * N + gc] : __float2half(0.0f);
        }
        // Every warp reads tiles that other warps wrote.
        __syncthreads();

#pragma unroll
        for (int kk = 0; kk < BLOCK_K; kk += 2 * MMA_K) {
            // One ldmatrix.x4 per 16x16 piece. Lane l points at row (l % 16), column
            // 8 * (l / 16) of the piece, so matrices 0..3 are its (top, k 0-7), (bottom, k 0-7),
            // (top, k 8-15), (bottom, k 8-15) 8x8 quarters.
            //   A piece (m16 x k16): registers {0,1} are the mma A fragment for k 0-7, {2,3} for
            //   k 8-15 (together: the m16n8k16 A fragment).
            //   B piece (k16 x n16), transposed: registers {0,1} are the B fragments of the left
            //   8 columns for k 0-7 and k 8-15, {2,3} those of the right 8 columns.
            const int lane_row = lane_id % 16;
            const int lane_col = (lane_id / 16) * 8;

            u32 rA[MMA_TILES_M][2][2];  // [mma tile][k half][register]
#pragma unroll
            for (int m = 0; m < MMA_TILES_M; ++m) {
                ldmatrix_x4(rA[m][0][0], rA[m][0][1], rA[m][1][0], rA[m][1][1],
                            &sA[warp_row + m * MMA_M + lane_row][kk + lane_col]);
            }
            u32 rB[MMA_TILES_N][2][1];  // [mma tile][k half][register]
#pragma unroll
            for (int n = 0; n < MMA_TILES_N; n += 2) {
                ldmatrix_x4_trans(rB[n][0][0], rB[n][1][0], rB[n + 1][0][0], rB[n + 1][1][0],
                                  &sB[kk + lane_row][warp_col + n * MMA_N + lane_col]);
            }

#pragma unroll
            for (int kh = 0; kh < 2; ++kh)
#pragma unroll
                for (int m = 0; m < MMA_TILES_M; ++m)
#pragma unroll
                    for (int n = 0; n < MMA_TILES_N; ++n)
                        mma_m16n8k8_f16(rC[m][n], rA[m][kh], rB[n][kh], rC[m][n]);
        }
        // No warp may overwrite the tiles (next k0) while another still reads them.
        __syncthreads();
    }

    // Epilogue: lane l holds rows l/4 and l/4 + 8, columns 2*(l%4) and 2*(l%4)+1 of each
    // mma tile (the accumulator layout), already fp16: element i is half i % 2 of register i / 2.
    const int group_id = lane_id / 4;
    const int thread_in_group = lane_id % 4;
#pragma unroll
    for (int m = 0; m < MMA_TILES_M; ++m)
#pragma unroll
        for (int n = 0; n < MMA_TILES_N; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int row = block_row + warp_row + m * MMA_M + group_id + (i / 2) * 8;
                const int col = block_col + warp_col + n * MMA_N + thread_in_group * 2 + i % 2;
                const __half2 pair = *reinterpret_cast<const __half2*>(&rC[m][n][i / 2]);
                if (row < M && col < N) C[row * N + col] = i % 2 ? pair.y : pair.x;
            }
}
