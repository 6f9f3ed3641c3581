// EXERCISE ch2/coalesced_1d (sgemm/02_coalesced): fill in the gap between the EXERCISE and END markers below.
// Check it: python -m gemmlab exercise check ch2/coalesced_1d   (or gemmlab.exercises.check in a notebook)
//
// sgemm track, step 02_coalesced (every step of the track, one line each: python -m gemmlab steps --track sgemm).
//
// A variation of 02 (chapter 2's exercise): the block is one-dimensional, BLOCK_X * BLOCK_Y threads
// along x, and still computes a BLOCK_Y x BLOCK_X tile of C (siboehm's kernel 2 is launched so).
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
// Launch: blockDim (BLOCK_X * BLOCK_Y, 1), gridDim (cdiv(N, BLOCK_X), cdiv(M, BLOCK_Y)).
#include "common.cuh"

template <int BLOCK_X, int BLOCK_Y>
__global__ void sgemm_coalesced(int M, int N, int K, const float* A, const float* B, float* C) {
    // Which element (row, col) of C does this thread compute? The block is one-dimensional here:
    // threadIdx.x runs from 0 to BLOCK_X * BLOCK_Y - 1 and threadIdx.y is always 0; the block still
    // covers the BLOCK_Y x BLOCK_X tile of C at (blockIdx.y * BLOCK_Y, blockIdx.x * BLOCK_X). The code
    // in the gap is correct and its loads do not coalesce. Change it so that they do, for any BLOCK_X
    // and BLOCK_Y (the check uses BLOCK_X = 32, BLOCK_Y = 8).
    // The launch (do not change it): blockDim (BLOCK_X * BLOCK_Y, 1), gridDim (cdiv(N, BLOCK_X), cdiv(M, BLOCK_Y)).
    // ---- EXERCISE: the coalesced mapping from a flat thread index ----
    const int col = blockIdx.x * BLOCK_X + threadIdx.x / BLOCK_Y;
    const int row = blockIdx.y * BLOCK_Y + threadIdx.x % BLOCK_Y;
    // ---- END ----
    if (row >= M || col >= N) return;  // the grid is rounded up to whole blocks

    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += A[row * K + k] * B[k * N + col];
    }
    C[row * N + col] = acc;
}
