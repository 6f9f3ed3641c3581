// EXERCISE ch3/rect_tile (sgemm/03_smem_tiling): fill in the gap between the EXERCISE and END markers below.
// Check it: python -m gemmlab exercise check ch3/rect_tile   (or gemmlab.exercises.check in a notebook)
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
