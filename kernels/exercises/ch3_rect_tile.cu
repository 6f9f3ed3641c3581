// EXERCISE ch3/rect_tile (sgemm/03_smem_tiling): fill in the gap between the EXERCISE and END markers below.
// Check it: python -m gemmlab exercise check ch3/rect_tile   (or gemmlab.exercises.check in a notebook)
//
// sgemm track, step 03_smem_tiling (every step of the track, one line each: python -m gemmlab steps --track sgemm).
//
// A variation of 03 (chapter 3's exercise): the window along K is BLOCK_K wide, not BLOCK, so the
// tiles are rectangular (sA BLOCK x BLOCK_K, sB BLOCK_K x BLOCK) while the block is still
// BLOCK x BLOCK threads, one element of C each.
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
//   sA[BLOCK][BLOCK_K]: rows block_row.., columns k0..; sB[BLOCK_K][BLOCK]: rows k0.., columns
//   block_col..; both row-major, out-of-range elements zero.
// Launch: blockDim (BLOCK, BLOCK), gridDim (cdiv(N, BLOCK), cdiv(M, BLOCK)).
#include "common.cuh"

template <int BLOCK, int BLOCK_K>
__global__ void sgemm_smem_tiling(int M, int N, int K, const float* A, const float* B, float* C) {
    __shared__ float sA[BLOCK][BLOCK_K];  // (BLOCK_M = BLOCK) x BLOCK_K tile of A
    __shared__ float sB[BLOCK_K][BLOCK];  // BLOCK_K x (BLOCK_N = BLOCK) tile of B

    const int tx = threadIdx.x;  // column inside the tile: a warp spans a row, as in 02
    const int ty = threadIdx.y;  // row inside the tile
    const int row = blockIdx.y * BLOCK + ty;
    const int col = blockIdx.x * BLOCK + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BLOCK_K) {
        // Stage the tiles of this k0 and place the barriers. sA is BLOCK x BLOCK_K and sB BLOCK_K x BLOCK,
        // while the block has BLOCK x BLOCK threads: when BLOCK_K < BLOCK some threads have nothing to
        // copy, when BLOCK_K > BLOCK each copies several elements. Copy A[row][k0 + kk] into sA[ty][kk] and
        // B[k0 + kk][col] into sB[kk][tx], zero outside A or B (load_or_zero(X, r, c, rows, cols) from
        // common.cuh), keep each warp's loads coalesced, and put a __syncthreads() wherever one thread could
        // otherwise read or overwrite what another has not yet written or finished reading. The check runs
        // BLOCK = 32 with BLOCK_K = 8 and BLOCK_K = 64.
        // ---- EXERCISE: the tile loads and the barriers, BLOCK_K != BLOCK ----
        for (int k = 0; k < BLOCK_K; ++k) {
            acc += sA[ty][k] * sB[k][tx];
        }
        // ---- END ----
    }
    store_if_inside(C, row, col, M, N, acc);
}
