// fused track, step 02_row_panel (every step of the track, one line each: python -m gemmlab steps --track fused).
//
// Extends 01 by tiling. A block owns PANEL_M rows of E. Phase 1 computes those rows of T = A * B
// (PANEL_M x L) into shared memory, BLOCK_N columns at a time, staging BLOCK_K-deep slices of A
// and B in shared memory and giving each thread a THREAD_M x THREAD_N register tile (chapter 4's
// idea). Phase 2 computes the same rows of E = T * C, BLOCK_N columns at a time: the left operand
// is already on chip (sT), only C is staged. B and C are now read cdiv(M, PANEL_M) times instead
// of M times, and each shared value feeds THREAD_M or THREAD_N FMAs from registers.
//
// The price: the panel of T must fit in shared memory, PANEL_M * LP * 4 bytes (LP = L rounded up
// to BLOCK_K), so large L needs a small PANEL_M, and a small PANEL_M means few rows per block and
// many reads of B and C. Step 03 moves T to global memory to escape that trade.
//
// Layouts: row-major. A is M x K, B is K x L, C is L x N, E is M x N.
//   sT[PANEL_M][LP] (dynamic shared memory): rows panel_row.. of T; columns L..LP-1 hold zeros.
//   sX[BLOCK_K][PANEL_M]: a slice of the A panel, M-major (sX[k][m] = A[panel_row + m][k0 + k]).
//   sY[BLOCK_K][BLOCK_N]: a slice of B (phase 1) or of C (phase 2), row-major; zeros outside.
// Launch: blockDim ((PANEL_M / THREAD_M) * (BLOCK_N / THREAD_N)), gridDim (cdiv(M, PANEL_M)),
//         dynamic shared memory 4 * PANEL_M * LP bytes.
#include "common.cuh"

template <int PANEL_M, int BLOCK_N, int BLOCK_K, int THREAD_M, int THREAD_N>
__global__ void fused_row_panel(int M, int K, int L, int N, const float* A, const float* B,
                                const float* C, float* E) {
    constexpr int NUM_THREADS = (PANEL_M / THREAD_M) * (BLOCK_N / THREAD_N);
    static_assert(PANEL_M % THREAD_M == 0 && BLOCK_N % THREAD_N == 0, "whole thread tiles per block");
    static_assert(NUM_THREADS <= 1024, "(PANEL_M / THREAD_M) * (BLOCK_N / THREAD_N) threads exceed 1024");
    extern __shared__ float sT[];                // PANEL_M x LP: the panel of T = A * B
    __shared__ float sX[BLOCK_K][PANEL_M];       // BLOCK_K x PANEL_M slice of the A panel, M-major
    __shared__ float sY[BLOCK_K][BLOCK_N];       // BLOCK_K x BLOCK_N slice of B, then of C

    const int tid = threadIdx.x;
    const int thread_col = tid % (BLOCK_N / THREAD_N) * THREAD_N;  // first of its THREAD_N columns
    const int thread_row = tid / (BLOCK_N / THREAD_N) * THREAD_M;  // first of its THREAD_M rows
    const int panel_row = blockIdx.x * PANEL_M;
    const int LP = cdiv(L, BLOCK_K) * BLOCK_K;   // sT's row length: whole K slices for phase 2

    float acc[THREAD_M][THREAD_N];

    // Stage rows k0.. of the rows x cols matrix Y, columns n0..n0+BLOCK_N, into sY (zeros outside).
    auto stage_Y = [&](const float* Y, int rows, int cols, int k0, int n0) {
        for (int e = tid; e < BLOCK_K * BLOCK_N; e += NUM_THREADS) {
            const int k = e / BLOCK_N, n = e % BLOCK_N;
            sY[k][n] = (k0 + k < rows && n0 + n < cols) ? Y[(k0 + k) * cols + n0 + n] : 0.0f;
        }
    };

    // Phase 1: sT = A[panel rows] * B, BLOCK_N columns of T at a time (up to LP: the zero pad).
    for (int n0 = 0; n0 < LP; n0 += BLOCK_N) {
        for (int m = 0; m < THREAD_M; ++m)
            for (int n = 0; n < THREAD_N; ++n) acc[m][n] = 0.0f;
        for (int k0 = 0; k0 < K; k0 += BLOCK_K) {
            for (int e = tid; e < PANEL_M * BLOCK_K; e += NUM_THREADS) {
                const int m = e / BLOCK_K, k = e % BLOCK_K;  // consecutive threads: consecutive k
                sX[k][m] = (panel_row + m < M && k0 + k < K) ? A[(panel_row + m) * K + k0 + k] : 0.0f;
            }
            stage_Y(B, K, L, k0, n0);
            __syncthreads();  // the slices are complete before anyone reads them
#pragma unroll
            for (int k = 0; k < BLOCK_K; ++k) {
                float a[THREAD_M], b[THREAD_N];
#pragma unroll
                for (int m = 0; m < THREAD_M; ++m) a[m] = sX[k][thread_row + m];
#pragma unroll
                for (int n = 0; n < THREAD_N; ++n) b[n] = sY[k][thread_col + n];
#pragma unroll
                for (int m = 0; m < THREAD_M; ++m)
#pragma unroll
                    for (int n = 0; n < THREAD_N; ++n) acc[m][n] += a[m] * b[n];
            }
            __syncthreads();  // everyone is done with the slices before they are overwritten
        }
        for (int m = 0; m < THREAD_M; ++m)
            for (int n = 0; n < THREAD_N; ++n)
                if (n0 + thread_col + n < LP) sT[(thread_row + m) * LP + n0 + thread_col + n] = acc[m][n];
    }
    __syncthreads();  // the whole panel of T is on chip before phase 2 reads it

    // Phase 2: E[panel rows] = sT * C, BLOCK_N columns of E at a time.
    for (int n0 = 0; n0 < N; n0 += BLOCK_N) {
        for (int m = 0; m < THREAD_M; ++m)
            for (int n = 0; n < THREAD_N; ++n) acc[m][n] = 0.0f;
        for (int l0 = 0; l0 < L; l0 += BLOCK_K) {
            stage_Y(C, L, N, l0, n0);
            __syncthreads();
#pragma unroll
            for (int k = 0; k < BLOCK_K; ++k) {
                float a[THREAD_M], b[THREAD_N];
#pragma unroll
                for (int m = 0; m < THREAD_M; ++m) a[m] = sT[(thread_row + m) * LP + l0 + k];
#pragma unroll
                for (int n = 0; n < THREAD_N; ++n) b[n] = sY[k][thread_col + n];
#pragma unroll
                for (int m = 0; m < THREAD_M; ++m)
#pragma unroll
                    for (int n = 0; n < THREAD_N; ++n) acc[m][n] += a[m] * b[n];
            }
            __syncthreads();
        }
        for (int m = 0; m < THREAD_M; ++m) {
            const int row = panel_row + thread_row + m;
            for (int n = 0; n < THREAD_N; ++n) {
                const int col = n0 + thread_col + n;
                if (row < M && col < N) E[row * N + col] = acc[m][n];
            }
        }
    }
}
