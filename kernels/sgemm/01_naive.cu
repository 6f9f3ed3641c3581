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
//   12_tf32x3             sm_80+: the multiply-adds on the tensor cores, at fp32 accuracy (3xTF32)
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
