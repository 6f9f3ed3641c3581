// sgemm track, step 02_coalesced (every step of the track, one line each: python -m gemmlab steps --track sgemm).
//
// Extends 01 by swapping x and y: threadIdx.x now picks the column, so a warp reads one B row
// segment and writes one C row segment (coalesced), and all its lanes share one A element.
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
// Launch: blockDim (BLOCK_X, BLOCK_Y), gridDim (cdiv(N, BLOCK_X), cdiv(M, BLOCK_Y)).
#include "common.cuh"

template <int BLOCK_X, int BLOCK_Y>
__global__ void sgemm_coalesced(int M, int N, int K, const float* A, const float* B, float* C) {
    // x picks the column: consecutive threads of a warp walk ALONG a row of C, so at every k
    // they read one A element (a broadcast) and consecutive floats of B and C.
    const int col = blockIdx.x * BLOCK_X + threadIdx.x;
    const int row = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (row >= M || col >= N) return;  // the grid is rounded up to whole blocks

    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += A[row * K + k] * B[k * N + col];
    }
    C[row * N + col] = acc;
}
