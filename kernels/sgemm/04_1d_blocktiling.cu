// sgemm track, step 04_1d_blocktiling (every step of the track, one line each: python -m gemmlab steps --track sgemm).
//
// Extends 03 by 1D register blocking: a thread computes THREAD_M elements of one column of C.
// At each k it reads its B element from shared memory once and reuses it from a register for
// THREAD_M FMAs, so shared-memory loads per FMA fall from 2 to (THREAD_M + 1) / THREAD_M. The
// tiles become rectangles (BLOCK_M x BLOCK_K of A, BLOCK_K x BLOCK_N of B) that no longer match
// the thread count, so each thread stages several elements of each tile.
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
//   sA[BLOCK_M][BLOCK_K]: rows block_row.., columns k0..; sB[BLOCK_K][BLOCK_N]: rows k0..,
//   columns block_col..; both row-major, out-of-range elements zero.
// Launch: blockDim (BLOCK_M / THREAD_M * BLOCK_N), gridDim (cdiv(N, BLOCK_N), cdiv(M, BLOCK_M)).
#include "common.cuh"

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int THREAD_M>
__global__ void sgemm_1d_blocktiling(int M, int N, int K, const float* A, const float* B, float* C) {
    constexpr int NUM_THREADS = BLOCK_M / THREAD_M * BLOCK_N;  // one per THREAD_M x 1 piece of C
    static_assert(BLOCK_M % THREAD_M == 0, "THREAD_M must divide BLOCK_M (whole pieces per tile)");
    static_assert(NUM_THREADS <= 1024, "BLOCK_M / THREAD_M * BLOCK_N threads exceed the 1024 per block");
    static_assert((BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 4 <= 48 * 1024,
                  "the A and B tiles exceed 48 KB of static shared memory");

    __shared__ float sA[BLOCK_M][BLOCK_K];  // BLOCK_M x BLOCK_K tile of A
    __shared__ float sB[BLOCK_K][BLOCK_N];  // BLOCK_K x BLOCK_N tile of B

    const int tid = threadIdx.x;
    const int thread_col = tid % BLOCK_N;             // column inside the tile: a warp spans a row
    const int thread_row = tid / BLOCK_N * THREAD_M;  // first of this thread's THREAD_M rows
    const int block_row = blockIdx.y * BLOCK_M;
    const int block_col = blockIdx.x * BLOCK_N;

    float acc[THREAD_M] = {};  // THREAD_M x 1 piece of C: rows thread_row.., column thread_col

    for (int k0 = 0; k0 < K; k0 += BLOCK_K) {
        // Stage the tiles: element e (row-major) goes to thread e % NUM_THREADS, so consecutive
        // threads load consecutive floats of a row. Zeros past the edges add nothing to acc.
#pragma unroll
        for (int i = 0; i < cdiv(BLOCK_M * BLOCK_K, NUM_THREADS); ++i) {
            const int e = i * NUM_THREADS + tid;
            if (e < BLOCK_M * BLOCK_K) {
                const int r = e / BLOCK_K, c = e % BLOCK_K;
                sA[r][c] = load_or_zero(A, block_row + r, k0 + c, M, K);
            }
        }
#pragma unroll
        for (int i = 0; i < cdiv(BLOCK_K * BLOCK_N, NUM_THREADS); ++i) {
            const int e = i * NUM_THREADS + tid;
            if (e < BLOCK_K * BLOCK_N) {
                const int r = e / BLOCK_N, c = e % BLOCK_N;
                sB[r][c] = load_or_zero(B, k0 + r, block_col + c, K, N);
            }
        }
        // Barrier 1: no thread may read the tiles before every thread has written its elements.
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BLOCK_K; ++k) {
            const float b = sB[k][thread_col];  // loaded once, used THREAD_M times
#pragma unroll
            for (int m = 0; m < THREAD_M; ++m) {
                acc[m] += sA[thread_row + m][k] * b;  // BLOCK_N % 32 == 0: one address per warp
            }
        }
        // Barrier 2: no thread may overwrite the tiles (next k0) while others still read them.
        __syncthreads();
    }

#pragma unroll
    for (int m = 0; m < THREAD_M; ++m) {
        store_if_inside(C, block_row + thread_row + m, block_col + thread_col, M, N, acc[m]);
    }
}
