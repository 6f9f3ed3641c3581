// fused track: fp32 E = A * B * C in one kernel launch (chapters 8 and 9; this step: chapter 8).
// Every step of the fused track, one line each: python -m gemmlab steps --track fused
//
// Step 01: the seed's kernel, without its N <= 1024 limit. Block `row` first computes row `row`
// of T = A * B (L values) into shared memory, then row `row` of E = T * C from it. The seed gave
// each block exactly one thread per column, so N could not pass 1024 (the threads-per-block
// limit); here THREADS threads walk the columns with a stride, so any width works. What remains
// is shared memory: the row of T needs 4 * L bytes (the runtime rejects L > 12288, 48 KB).
//
// Cost: every block reads all of B and all of C (K*L + L*N floats) for one row of output, so
// global (in practice L2) traffic is M times the size of B and C. A warp's reads of B and C are
// coalesced (consecutive threads, consecutive columns); A[row][k] and sT[l] are broadcasts.
//
// Layouts: row-major. A is M x K, B is K x L, C is L x N, E is M x N.
//   sT[L] (dynamic shared memory): row `row` of T.
// Launch: blockDim (THREADS), gridDim (M), dynamic shared memory 4 * L bytes rounded up to a
//   multiple of 16: the compiler may read the tail of phase 2's loop over sT as one vector load.
#include "common.cuh"

template <int THREADS>
__global__ void fused_naive_row(int M, int K, int L, int N, const float* A, const float* B,
                                const float* C, float* E) {
    static_assert(THREADS >= 32 && THREADS <= 1024 && THREADS % 32 == 0,
                  "THREADS must be a whole number of warps, at most 1024");
    extern __shared__ float sT[];  // L floats: row `row` of T = A * B
    const int row = blockIdx.x;
    const int tid = threadIdx.x;

    // Phase 1: sT[l] = sum_k A[row][k] * B[k][l], THREADS columns of T at a time.
    for (int l = tid; l < L; l += THREADS) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * L + l];
        sT[l] = acc;
    }
    // Every value of the row must be in sT before any thread reads it.
    __syncthreads();

    // Phase 2: E[row][n] = sum_l sT[l] * C[l][n].
    for (int n = tid; n < N; n += THREADS) {
        float acc = 0.0f;
        for (int l = 0; l < L; ++l) acc += sT[l] * C[l * N + n];
        E[row * N + n] = acc;
    }
}
