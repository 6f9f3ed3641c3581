// EXERCISE ch2/coalesced_index (sgemm/02_coalesced): fill in the gap between the EXERCISE and END markers below.
// Check it: python -m gemmlab exercise check ch2/coalesced_index   (or gemmlab.exercises.check in a notebook)
//
// sgemm track: fp32 C = A * B on CUDA cores.
//   01_naive              one thread per element of C
//   02_coalesced          a warp's threads walk along a row of C, so its loads coalesce
//   03_smem_tiling        blocks stage BLOCK x BLOCK tiles of A and B in shared memory
//   04_1d_blocktiling     each thread computes THREAD_M elements of one column of C
//   05_2d_blocktiling     each thread computes a THREAD_M x THREAD_N tile of C from registers
//   06_vectorized         float4 global loads, A stored K-major, 128-bit shared loads
//   07_warptiling         block tile -> warp tile -> thread tile, no shared bank conflicts
//   08_register_prefetch  next tile loaded into registers during compute
//   09_double_buffer      two shared buffers: one barrier per K tile instead of two
//   10_cp_async           NUM_STAGES shared buffers filled by cp.async, no staging registers
//   11_fragment_prefetch  the next k step's slivers loaded from shared memory during the FMAs
//
// Extends 01 by changing which element of C each thread computes, so that a warp's loads coalesce.
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
// Launch: blockDim (BLOCK_X, BLOCK_Y), gridDim (cdiv(N, BLOCK_X), cdiv(M, BLOCK_Y)).
#include "common.cuh"

template <int BLOCK_X, int BLOCK_Y>
__global__ void sgemm_coalesced(int M, int N, int K, const float* A, const float* B, float* C) {
    // Which element (row, col) of C does this thread compute? A warp is 32 consecutive threadIdx.x
    // (same threadIdx.y). The code in the gap is 01's mapping, x picks the row: it is correct (with
    // BLOCK_X == BLOCK_Y), and its loads do not coalesce. Change it so that they do.
    // The launch (do not change it): blockDim (BLOCK_X, BLOCK_Y), gridDim (cdiv(N, BLOCK_X), cdiv(M, BLOCK_Y)).
    // ---- EXERCISE: the coalesced index mapping ----
    const int row = blockIdx.y * BLOCK_Y + threadIdx.x;  // x picks the row, as in 01
    const int col = blockIdx.x * BLOCK_X + threadIdx.y;
    // ---- END ----
    if (row >= M || col >= N) return;  // the grid is rounded up to whole blocks

    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += A[row * K + k] * B[k * N + col];
    }
    C[row * N + col] = acc;
}
