// sgemm track, step 03_smem_tiling (every step of the track, one line each: python -m gemmlab steps --track sgemm).
//
// Extends 02 by shared-memory tiling: the block slides a BLOCK-wide window along K, each thread
// copies one element of A and one of B into shared memory, and the block then reuses every
// staged element BLOCK times. Global loads per output element drop from 2K to 2K / BLOCK.
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
//   sA[BLOCK][BLOCK]: rows block_row.., columns k0..; sB[BLOCK][BLOCK]: rows k0.., columns
//   block_col..; both row-major, out-of-range elements zero.
// Launch: blockDim (BLOCK, BLOCK), gridDim (cdiv(N, BLOCK), cdiv(M, BLOCK)).
#include "common.cuh"

template <int BLOCK>
__global__ void sgemm_smem_tiling(int M, int N, int K, const float* A, const float* B, float* C) {
    __shared__ float sA[BLOCK][BLOCK];  // (BLOCK_M = BLOCK) x (BLOCK_K = BLOCK) tile of A
    __shared__ float sB[BLOCK][BLOCK];  // (BLOCK_K = BLOCK) x (BLOCK_N = BLOCK) tile of B

    const int tx = threadIdx.x;  // column inside the tile: a warp spans a row, as in 02
    const int ty = threadIdx.y;  // row inside the tile
    const int row = blockIdx.y * BLOCK + ty;
    const int col = blockIdx.x * BLOCK + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BLOCK) {
        // Each thread stages one element of each tile; zeros past the edges add nothing to acc.
        // Threads outside C still load: their elements are needed by the rest of the block.
        sA[ty][tx] = load_or_zero(A, row, k0 + tx, M, K);  // zero outside A (common.cuh)
        sB[ty][tx] = load_or_zero(B, k0 + ty, col, K, N);
        // Barrier 1: no thread may read the tiles before every thread has written its element.
        __syncthreads();

        for (int k = 0; k < BLOCK; ++k) {
            acc += sA[ty][k] * sB[k][tx];  // sA[ty][k]: broadcast; sB[k][tx]: one row, no conflict
        }
        // Barrier 2: no thread may overwrite the tiles (next k0) while others still read them.
        __syncthreads();
    }
    store_if_inside(C, row, col, M, N, acc);
}
