// sgemm track: fp32 C = A * B on CUDA cores.
// Every step of the sgemm track, one line each: python -m gemmlab steps --track sgemm
//
// Extends nothing: the starting point.
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
// Launch: blockDim (BLOCK_X, BLOCK_Y), gridDim (cdiv(M, BLOCK_X), cdiv(N, BLOCK_Y)).
#include "common.cuh"

template <int BLOCK_X, int BLOCK_Y>
__global__ void sgemm_naive(int M, int N, int K, const float* A, const float* B, float* C) {
    // x picks the row: consecutive threads of a warp walk DOWN a column of C, so at every k
    // they read A at addresses K floats apart and write C at addresses N floats apart.
    const int row = blockIdx.x * BLOCK_X + threadIdx.x;
    const int col = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (row >= M || col >= N) return;  // the grid is rounded up to whole blocks

    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += A[row * K + k] * B[k * N + col];
    }
    C[row * N + col] = acc;
}
