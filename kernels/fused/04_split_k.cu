// fused track, step 04_split_k (every step of the track, one line each: python -m gemmlab steps --track fused).
//
// Extends 03 for small N. At N = 512 there are only 256 output tiles of 32 x 32 for 132 SMs: with
// 64 threads per tile, 4 warps per SM are all the latency hiding there is: too few warps, and
// every shared-memory and global load waits in the open (chapter 6). Here a tile gets SPLIT_K groups
// of threads. Group g computes the same BLOCK_M x BLOCK_N tile over the K tiles g, g + SPLIT_K,
// g + 2 SPLIT_K, ... with its own two shared buffers; at the end groups 1 .. SPLIT_K - 1 write
// their partial sums into shared memory (the operand buffers, no longer needed) and group 0 adds
// them up and stores the tile. The FMAs per tile are the same; the warps per SM are SPLIT_K times
// more, and the sum over K is reassociated (SPLIT_K partial sums, then their total).
// Every group runs the same number of rounds, cdiv(K tiles, SPLIT_K), so that all threads meet
// the same barriers; a round past the last K tile loads zeros (load4's guards) and adds nothing.
//
// Layouts: row-major. A is M x K, B is K x L, C is L x N, T is M x L (scratch), E is M x N.
//   sX[SPLIT_K][2][BLOCK_K][BLOCK_M]: each group's left-operand tiles (A, then T), M-major.
//   sY[SPLIT_K][2][BLOCK_K][BLOCK_N]: each group's right-operand tiles (B, then C), row-major.
//   sync[0]: the grid barrier's one word (common.cuh: it resets itself); sync[1]: unused.
// Launch: blockDim (SPLIT_K * (BLOCK_M / THREAD_M) * (BLOCK_N / THREAD_N)), gridDim (at most the
//         resident blocks, at most the number of tiles), sync zeroed once before the first launch.
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
// Group g of the block (threads g * NUM_THREADS ..) sums K tiles g, g + SPLIT_K, ...; sX, sY are
// this group's buffers, `partial` the block's reduction area (aliasing every group's buffers).
template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int THREAD_M, int THREAD_N, int SPLIT_K>
__device__ void gemm_tile(int rows, int cols, int inner, const float* X, const float* Y, float* Out,
                          int block_row, int block_col, float (*sX)[BLOCK_K][BLOCK_M],
                          float (*sY)[BLOCK_K][BLOCK_N], float (*partial)[BLOCK_M * BLOCK_N]) {
    constexpr int NUM_THREADS = (BLOCK_M / THREAD_M) * (BLOCK_N / THREAD_N);  // per group
    constexpr int X_VECS = BLOCK_M * BLOCK_K / 4, Y_VECS = BLOCK_K * BLOCK_N / 4;  // float4s per tile
    constexpr int X_LOADS = cdiv(X_VECS, NUM_THREADS), Y_LOADS = cdiv(Y_VECS, NUM_THREADS);
    const int tid = threadIdx.x % NUM_THREADS;
    const int group = threadIdx.x / NUM_THREADS;
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

    const int rounds = cdiv(cdiv(inner, BLOCK_K), SPLIT_K);  // the same for every group
    auto k_of = [&](int r) { return (r * SPLIT_K + group) * BLOCK_K; };  // this group's r-th K tile
    load(k_of(0));
    store(0);
    __syncthreads();
    for (int t = 0; t < rounds; ++t) {
        const int buf = t & 1;
        if (t + 1 < rounds) load(k_of(t + 1));  // in flight during the FMAs below
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
        if (t + 1 < rounds) store(buf ^ 1);
        __syncthreads();
    }

    // Groups 1 .. SPLIT_K - 1 hand their partial tiles to group 0 through shared memory (every
    // group is past its last read of the operand buffers: the barrier above).
    if (SPLIT_K > 1) {
        if (group > 0) {
#pragma unroll
            for (int m = 0; m < THREAD_M; ++m)
#pragma unroll
                for (int n = 0; n < THREAD_N; n += 4)
                    *reinterpret_cast<float4*>(&partial[group - 1][(thread_row + m) * BLOCK_N + thread_col + n]) =
                        make_float4(acc[m][n], acc[m][n + 1], acc[m][n + 2], acc[m][n + 3]);
        }
        __syncthreads();
        if (group == 0) {
            for (int g = 0; g < SPLIT_K - 1; ++g)
#pragma unroll
                for (int m = 0; m < THREAD_M; ++m)
#pragma unroll
                    for (int n = 0; n < THREAD_N; n += 4) {
                        const float4 v = *reinterpret_cast<const float4*>(
                            &partial[g][(thread_row + m) * BLOCK_N + thread_col + n]);
                        acc[m][n] += v.x, acc[m][n + 1] += v.y, acc[m][n + 2] += v.z, acc[m][n + 3] += v.w;
                    }
        }
    }

    const bool out_vec = cols % 4 == 0 && block_row + BLOCK_M <= rows && block_col + BLOCK_N <= cols;
#pragma unroll
    for (int m = 0; m < THREAD_M && group == 0; ++m) {
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
    if (SPLIT_K > 1) __syncthreads();  // group 0 has read `partial` before the next tile refills it
}

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int THREAD_M, int THREAD_N, int SPLIT_K>
__global__ void fused_split_k(int M, int K, int L, int N, const float* A, const float* B,
                              const float* C, float* E, float* T, u32* sync) {
    static_assert(BLOCK_M % THREAD_M == 0 && BLOCK_N % THREAD_N == 0, "whole thread tiles per block");
    static_assert(THREAD_M % 4 == 0 && THREAD_N % 4 == 0 && BLOCK_K % 4 == 0,
                  "THREAD_M, THREAD_N and BLOCK_K must be multiples of 4 (float4 accesses)");
    static_assert(SPLIT_K >= 1, "SPLIT_K must be at least 1");
    static_assert(SPLIT_K * (BLOCK_M / THREAD_M) * (BLOCK_N / THREAD_N) <= 1024, "more than 1024 threads");
    constexpr int BUFFER_FLOATS = SPLIT_K * 2 * (BLOCK_M + BLOCK_N) * BLOCK_K;
    constexpr int PARTIAL_FLOATS = (SPLIT_K - 1) * BLOCK_M * BLOCK_N;
    constexpr int SMEM_FLOATS = BUFFER_FLOATS > PARTIAL_FLOATS ? BUFFER_FLOATS : PARTIAL_FLOATS;
    static_assert(SMEM_FLOATS * 4 <= 48 * 1024, "the operand buffers (or the partial tiles) exceed 48 KB");
    // One static array, seen three ways: each group's sX and sY, and the partial tiles.
    __shared__ __align__(16) float smem[SMEM_FLOATS];
    const int group = threadIdx.x / ((BLOCK_M / THREAD_M) * (BLOCK_N / THREAD_N));
    float* mine = smem + group * 2 * (BLOCK_M + BLOCK_N) * BLOCK_K;
    auto sX = reinterpret_cast<float (*)[BLOCK_K][BLOCK_M]>(mine);
    auto sY = reinterpret_cast<float (*)[BLOCK_K][BLOCK_N]>(mine + 2 * BLOCK_M * BLOCK_K);
    auto partial = reinterpret_cast<float (*)[BLOCK_M * BLOCK_N]>(smem);

    // Phase 1: T = A * B (M x L), tile by tile.
    const int t_cols = cdiv(L, BLOCK_N), t_tiles = cdiv(M, BLOCK_M) * t_cols;
    for (int tile = blockIdx.x; tile < t_tiles; tile += gridDim.x)
        gemm_tile<BLOCK_M, BLOCK_N, BLOCK_K, THREAD_M, THREAD_N, SPLIT_K>(
            M, L, K, A, B, T, tile / t_cols * BLOCK_M, tile % t_cols * BLOCK_N, sX, sY, partial);

    grid_barrier(sync);  // all of T is written before any block reads it

    // Phase 2: E = T * C (M x N), tile by tile.
    const int e_cols = cdiv(N, BLOCK_N), e_tiles = cdiv(M, BLOCK_M) * e_cols;
    for (int tile = blockIdx.x; tile < e_tiles; tile += gridDim.x)
        gemm_tile<BLOCK_M, BLOCK_N, BLOCK_K, THREAD_M, THREAD_N, SPLIT_K>(
            M, N, L, T, C, E, tile / e_cols * BLOCK_M, tile % e_cols * BLOCK_N, sX, sY, partial);
}
