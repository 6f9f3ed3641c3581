// EXERCISE ch4/register_blocking (sgemm/05_2d_blocktiling): fill in the gap between the EXERCISE and END markers below.
// Check it: python -m gemmlab exercise check ch4/register_blocking   (or gemmlab.exercises.check in a notebook)
//
// sgemm track, step 05_2d_blocktiling (every step of the track, one line each: python -m gemmlab steps --track sgemm).
//
// A variation of 05 (chapter 4's exercise): the register block is 4 x 16, not 8 x 8 (THREAD_M = 4,
// THREAD_N = 16; the check runs BLOCK_M = BLOCK_N = 128, BLOCK_K = 8, 256 threads). The same
// 64 FMAs per k step; a[] is a strided column of sA, b[] a contiguous 64-byte run of an sB row.
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
//   sA[BLOCK_M][BLOCK_K]: rows block_row.., columns k0..; sB[BLOCK_K][BLOCK_N]: rows k0..,
//   columns block_col..; both row-major, out-of-range elements zero.
// Launch: blockDim ((BLOCK_M / THREAD_M) * (BLOCK_N / THREAD_N)),
//         gridDim (cdiv(N, BLOCK_N), cdiv(M, BLOCK_M)).
#include "common.cuh"

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int THREAD_M, int THREAD_N>
__global__ void sgemm_2d_blocktiling(int M, int N, int K, const float* A, const float* B, float* C) {
    constexpr int NUM_THREADS = (BLOCK_M / THREAD_M) * (BLOCK_N / THREAD_N);  // one per thread tile
    static_assert(BLOCK_M % THREAD_M == 0, "THREAD_M must divide BLOCK_M (whole thread tiles per tile)");
    static_assert(BLOCK_N % THREAD_N == 0, "THREAD_N must divide BLOCK_N (whole thread tiles per tile)");
    static_assert(THREAD_N % 4 == 0, "THREAD_N must be a multiple of 4 (float4 reads of sB)");
    static_assert(NUM_THREADS <= 1024, "(BLOCK_M / THREAD_M) * (BLOCK_N / THREAD_N) threads exceed 1024");
    static_assert((BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 4 <= 48 * 1024,
                  "the A and B tiles exceed 48 KB of static shared memory");

    __shared__ float sA[BLOCK_M][BLOCK_K];  // BLOCK_M x BLOCK_K tile of A
    __shared__ __align__(16) float sB[BLOCK_K][BLOCK_N];  // BLOCK_K x BLOCK_N tile of B (float4 reads)

    const int tid = threadIdx.x;
    const int thread_col = tid % (BLOCK_N / THREAD_N) * THREAD_N;  // first of its THREAD_N columns
    const int thread_row = tid / (BLOCK_N / THREAD_N) * THREAD_M;  // first of its THREAD_M rows
    const int block_row = blockIdx.y * BLOCK_M;
    const int block_col = blockIdx.x * BLOCK_N;

    float acc[THREAD_M][THREAD_N] = {};  // THREAD_M x THREAD_N tile of C at (thread_row, thread_col)
    float a[THREAD_M];                   // THREAD_M x 1 sliver of sA: column k, rows thread_row..
    float b[THREAD_N];                   // 1 x THREAD_N sliver of sB: row k, columns thread_col..

    for (int k0 = 0; k0 < K; k0 += BLOCK_K) {
        // Stage the tiles: element e (row-major) goes to thread e % NUM_THREADS, so consecutive
        // threads load consecutive floats of a row. Zeros past the edges add nothing to acc.
        // The `% NUM_THREADS == 0 ||` drops a test that is always true: without it each guarded
        // load sits in its own branch and its value is stored before the next load is issued, so
        // a tile pays THREAD_M-fold the global latency; with it, all loads are in flight at once.
#pragma unroll
        for (int i = 0; i < cdiv(BLOCK_M * BLOCK_K, NUM_THREADS); ++i) {
            const int e = i * NUM_THREADS + tid;
            if ((BLOCK_M * BLOCK_K) % NUM_THREADS == 0 || e < BLOCK_M * BLOCK_K) {
                const int r = e / BLOCK_K, c = e % BLOCK_K;
                sA[r][c] = load_or_zero(A, block_row + r, k0 + c, M, K);
            }
        }
#pragma unroll
        for (int i = 0; i < cdiv(BLOCK_K * BLOCK_N, NUM_THREADS); ++i) {
            const int e = i * NUM_THREADS + tid;
            if ((BLOCK_K * BLOCK_N) % NUM_THREADS == 0 || e < BLOCK_K * BLOCK_N) {
                const int r = e / BLOCK_N, c = e % BLOCK_N;
                sB[r][c] = load_or_zero(B, k0 + r, block_col + c, K, N);
            }
        }
        // Barrier 1: no thread may read the tiles before every thread has written its elements.
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BLOCK_K; ++k) {
            // One k step of the thread's 4 x 16 tile (THREAD_M = 4 rows, THREAD_N = 16 columns): copy the 4
            // values of sA's column k (rows thread_row..) into a[] and the 16 values of sB's row k (columns
            // thread_col..) into b[], then add their outer product into acc[][]. Chapter 4's 8 x 8 block pays
            // 8 + 8 = 16 shared loads per k; here the same loop would pay 4 + 16 = 20 for the same 64 FMAs.
            // Read b[] with 128-bit loads (float4: sB is 16-byte aligned and thread_col a multiple of 16) so
            // that a k step costs 4 + 16 / 4 = 8 shared loads, and keep every array index a compile-time
            // constant after unrolling (#pragma unroll), or the arrays leave the registers for local memory.
            // ---- EXERCISE: a 4 x 16 register block, sB read as float4 ----
            // your code: load the slivers a[] and b[], then acc[m][n] += a[m] * b[n]
            // ---- END ----
        }
        // Barrier 2: no thread may overwrite the tiles (next k0) while others still read them.
        __syncthreads();
    }

#pragma unroll
    for (int m = 0; m < THREAD_M; ++m) {
#pragma unroll
        for (int n = 0; n < THREAD_N; ++n) {
            store_if_inside(C, block_row + thread_row + m, block_col + thread_col + n, M, N, acc[m][n]);
        }
    }
}
