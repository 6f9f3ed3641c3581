// fused track, step 03_two_phase (every step of the track, one line each: python -m gemmlab steps --track fused).
//
// Extends 02 by moving T off chip and making the grid persistent. Step 02 ties the work of a
// block to a row panel, so a 512 x 512 problem has only cdiv(512, PANEL_M) blocks and the panel
// must fit in shared memory. Here both products are ordinary tiled GEMMs over BLOCK_M x BLOCK_N
// output tiles, run by one launch:
//   phase 1: T = A * B, tiles handed out round-robin (tile = blockIdx.x, + gridDim.x, ...)
//   grid_barrier: every block has finished phase 1, and its writes of T are visible
//   phase 2: E = T * C, the same way.
// T (M x L floats) lives in global scratch; at these sizes it stays in L2, so its round trip
// costs L2 bandwidth, not DRAM. What the fusion saves is the second launch and the gap between
// the two GEMMs (the tail of the first and the ramp of the second).
//
// The barrier (grid_barrier, in common.cuh: 04 and 05 use it too) spins: it is only correct if
// every block of the grid is resident at once (a block waiting for one that never starts waits
// forever). The runtime (gemmlab/runtime/fusion.py) sizes the grid from the occupancy API, resident blocks
// per SM x SMs, and refuses a larger one. It resets itself: the blocks' adds to its one word sum
// to 2^31, which flips the top bit and leaves the low bits as they were.
//
// The tile GEMM is sgemm/06's with sgemm/09's schedule: float4 global loads (A's tile transposed
// into M-major sX on its way to shared memory), THREAD_M x THREAD_N register tiles read with
// 128-bit shared loads, the next K tile loaded into registers while this one is computed, and two
// shared buffers, so one barrier per K tile.
//
// Layouts: row-major. A is M x K, B is K x L, C is L x N, T is M x L (scratch), E is M x N.
//   sX[2][BLOCK_K][BLOCK_M]: the left operand's tile (A, then T), M-major.
//   sY[2][BLOCK_K][BLOCK_N]: the right operand's tile (B, then C), row-major; zeros outside.
//   sync[0]: the grid barrier's one word (common.cuh: it resets itself); sync[1]: unused.
// Launch: blockDim ((BLOCK_M / THREAD_M) * (BLOCK_N / THREAD_N)), gridDim (at most the resident
//         blocks, at most the number of tiles), sync zeroed once before the first launch.
#include "common.cuh"

// The 4 floats src[row][col .. col+3] of a rows x cols row-major matrix, zeros outside it: one
// 16-byte load when `vec` (cols % 4 == 0) and all 4 are inside, else guarded scalar loads.
__device__ __forceinline__ float4 load4(const float* src, int row, int col, int rows, int cols, bool vec) {
    const float* p = src + row * cols + col;
    if (vec && row < rows && col + 4 <= cols) return *reinterpret_cast<const float4*>(p);
    const bool in = row < rows;
    return make_float4(in && col + 0 < cols ? p[0] : 0.0f, in && col + 1 < cols ? p[1] : 0.0f,
                       in && col + 2 < cols ? p[2] : 0.0f, in && col + 3 < cols ? p[3] : 0.0f);
}

// Out[block_row.., block_col..] = X (rows x inner) * Y (inner x cols), one BLOCK_M x BLOCK_N tile.
template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int THREAD_M, int THREAD_N>
__device__ void gemm_tile(int rows, int cols, int inner, const float* X, const float* Y, float* Out,
                          int block_row, int block_col, float (*sX)[BLOCK_K][BLOCK_M],
                          float (*sY)[BLOCK_K][BLOCK_N]) {
    constexpr int NUM_THREADS = (BLOCK_M / THREAD_M) * (BLOCK_N / THREAD_N);
    constexpr int X_VECS = BLOCK_M * BLOCK_K / 4, Y_VECS = BLOCK_K * BLOCK_N / 4;  // float4s per tile
    constexpr int X_LOADS = cdiv(X_VECS, NUM_THREADS), Y_LOADS = cdiv(Y_VECS, NUM_THREADS);
    const int tid = threadIdx.x;
    const int thread_col = tid % (BLOCK_N / THREAD_N) * THREAD_N;
    const int thread_row = tid / (BLOCK_N / THREAD_N) * THREAD_M;
    const bool x_vec = inner % 4 == 0, y_vec = cols % 4 == 0;

    float acc[THREAD_M][THREAD_N] = {};
    float4 staged_x[X_LOADS], staged_y[Y_LOADS];  // the next K tile, on its way from global to shared memory

    auto load = [&](int k0) {  // global -> registers; float4 e of a tile goes to thread e % NUM_THREADS
#pragma unroll
        for (int i = 0; i < X_LOADS; ++i) {
            const int e = i * NUM_THREADS + tid;
            if (e < X_VECS) staged_x[i] = load4(X, block_row + e / (BLOCK_K / 4), k0 + e % (BLOCK_K / 4) * 4, rows, inner, x_vec);
        }
#pragma unroll
        for (int i = 0; i < Y_LOADS; ++i) {
            const int e = i * NUM_THREADS + tid;
            if (e < Y_VECS) staged_y[i] = load4(Y, k0 + e / (BLOCK_N / 4), block_col + e % (BLOCK_N / 4) * 4, inner, cols, y_vec);
        }
    };
    auto store = [&](int buf) {  // registers -> shared; X's float4 runs along k: transpose it
#pragma unroll
        for (int i = 0; i < X_LOADS; ++i) {
            const int e = i * NUM_THREADS + tid;
            const int r = e / (BLOCK_K / 4), c = e % (BLOCK_K / 4) * 4;
            if (e < X_VECS) {
                sX[buf][c + 0][r] = staged_x[i].x;
                sX[buf][c + 1][r] = staged_x[i].y;
                sX[buf][c + 2][r] = staged_x[i].z;
                sX[buf][c + 3][r] = staged_x[i].w;
            }
        }
#pragma unroll
        for (int i = 0; i < Y_LOADS; ++i) {
            const int e = i * NUM_THREADS + tid;
            if (e < Y_VECS) *reinterpret_cast<float4*>(&sY[buf][e / (BLOCK_N / 4)][e % (BLOCK_N / 4) * 4]) = staged_y[i];
        }
    };

    const int k_tiles = cdiv(inner, BLOCK_K);
    load(0);
    store(0);
    __syncthreads();
    for (int t = 0; t < k_tiles; ++t) {
        const int buf = t & 1;
        if (t + 1 < k_tiles) load((t + 1) * BLOCK_K);  // in flight during the FMAs below
#pragma unroll
        for (int k = 0; k < BLOCK_K; ++k) {
            float a[THREAD_M], b[THREAD_N];
#pragma unroll
            for (int m = 0; m < THREAD_M; m += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&sX[buf][k][thread_row + m]);
                a[m + 0] = v.x, a[m + 1] = v.y, a[m + 2] = v.z, a[m + 3] = v.w;
            }
#pragma unroll
            for (int n = 0; n < THREAD_N; n += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&sY[buf][k][thread_col + n]);
                b[n + 0] = v.x, b[n + 1] = v.y, b[n + 2] = v.z, b[n + 3] = v.w;
            }
#pragma unroll
            for (int m = 0; m < THREAD_M; ++m)
#pragma unroll
                for (int n = 0; n < THREAD_N; ++n) acc[m][n] += a[m] * b[n];
        }
        // The other buffer was last read in step t - 1, which every thread has finished (the
        // barrier below, one step earlier): fill it now, then one barrier per K tile.
        if (t + 1 < k_tiles) store(buf ^ 1);
        __syncthreads();
    }

    const bool out_vec = cols % 4 == 0 && block_row + BLOCK_M <= rows && block_col + BLOCK_N <= cols;
#pragma unroll
    for (int m = 0; m < THREAD_M; ++m) {
        const int row = block_row + thread_row + m;
#pragma unroll
        for (int n = 0; n < THREAD_N; n += 4) {
            const int col = block_col + thread_col + n;
            if (out_vec) {
                *reinterpret_cast<float4*>(Out + row * cols + col) =
                    make_float4(acc[m][n], acc[m][n + 1], acc[m][n + 2], acc[m][n + 3]);
            } else if (row < rows) {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (col + j < cols) Out[row * cols + col + j] = acc[m][n + j];
            }
        }
    }
}

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int THREAD_M, int THREAD_N>
__global__ void fused_two_phase(int M, int K, int L, int N, const float* A, const float* B,
                                const float* C, float* E, float* T, u32* sync) {
    static_assert(BLOCK_M % THREAD_M == 0 && BLOCK_N % THREAD_N == 0, "whole thread tiles per block");
    static_assert(THREAD_M % 4 == 0 && THREAD_N % 4 == 0 && BLOCK_K % 4 == 0,
                  "THREAD_M, THREAD_N and BLOCK_K must be multiples of 4 (float4 accesses)");
    static_assert((BLOCK_M / THREAD_M) * (BLOCK_N / THREAD_N) <= 1024, "more than 1024 threads");
    static_assert(2 * (BLOCK_M + BLOCK_N) * BLOCK_K * 4 <= 48 * 1024, "two buffers exceed 48 KB");
    __shared__ __align__(16) float sX[2][BLOCK_K][BLOCK_M];  // 2 buffers of the left tile, BLOCK_M x BLOCK_K, M-major
    __shared__ __align__(16) float sY[2][BLOCK_K][BLOCK_N];  // 2 buffers of the right tile, BLOCK_K x BLOCK_N

    // Phase 1: T = A * B (M x L), tile by tile.
    const int t_cols = cdiv(L, BLOCK_N), t_tiles = cdiv(M, BLOCK_M) * t_cols;
    for (int tile = blockIdx.x; tile < t_tiles; tile += gridDim.x)
        gemm_tile<BLOCK_M, BLOCK_N, BLOCK_K, THREAD_M, THREAD_N>(
            M, L, K, A, B, T, tile / t_cols * BLOCK_M, tile % t_cols * BLOCK_N, sX, sY);

    grid_barrier(sync);  // all of T is written before any block reads it

    // Phase 2: E = T * C (M x N), tile by tile.
    const int e_cols = cdiv(N, BLOCK_N), e_tiles = cdiv(M, BLOCK_M) * e_cols;
    for (int tile = blockIdx.x; tile < e_tiles; tile += gridDim.x)
        gemm_tile<BLOCK_M, BLOCK_N, BLOCK_K, THREAD_M, THREAD_N>(
            M, N, L, T, C, E, tile / e_cols * BLOCK_M, tile % e_cols * BLOCK_N, sX, sY);
}
