// sgemm track, step 10_cp_async (every step of the track, one line each: python -m gemmlab steps --track sgemm).
//
// Extends 09 by a NUM_STAGES-deep cp.async pipeline (sm_80+). cp.async copies 16 bytes from
// global to shared memory without passing through registers, so the staging registers of 09
// (staged_a, staged_b) are gone, and NUM_STAGES - 1 tiles are in flight while one is computed
// instead of one.
// Tile t waits for its copies (cp_async_wait_group<NUM_STAGES - 2>) and one barrier; right after
// that barrier the copies of tile t + NUM_STAGES - 1 are issued into the stage tile t - 1 used.
//
// A 16-byte copy cannot transpose, so sA keeps A's own orientation (K-major, 4 k-values per
// 16 bytes): a thread reads a float4 of 4 consecutive k of one of its rows, which serves 4 steps
// of k. To make those reads conflict-free, a thread's rows are interleaved (lane_row + i * LANES_M:
// a warp's lanes read LANES_M consecutive rows) and each sA row is padded by 4 floats: a row
// pitch of BLOCK_K + 4 floats = 4 * odd words, so 8 consecutive rows start in 8 different
// 16-byte bank groups (BLOCK_K % 8 == 0). B keeps 09's layout and reads.
//
// Edges: a copy reads src_bytes = 0..16 bytes and zero-fills the rest, so ragged M, N, K need no
// branch. cp.async needs 16-byte-aligned sources: when K % 4 != 0 (rows of A unaligned) or
// N % 4 != 0 (rows of B), the whole kernel fills the same stages with guarded scalar loads and
// float4 shared stores instead (a grid-uniform branch).
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
//   Dynamic shared memory, NUM_STAGES stages, each:
//     sA[BLOCK_M][BLOCK_K + 4]: sA[m][k] = A[block_row + m][k0 + k], K-major, rows padded by 4;
//     sB[BLOCK_K][BLOCK_N]:    sB[k][n] = B[k0 + k][block_col + n]; out-of-range elements zero.
//   Warp w: rows warp_row = w / (BLOCK_N / WARP_N) * WARP_M.., columns warp_col = w % (..) * WARP_N..
//   Lane l: rows warp_row + l / LANES_N + i * LANES_M (i < THREAD_M),
//           columns warp_col + l % LANES_N * 4 + j * WARP_SUB_N + (0..3) (j < THREAD_N / 4).
// Launch: blockDim ((BLOCK_M / WARP_M) * (BLOCK_N / WARP_N) * 32),
//         gridDim (cdiv(N, BLOCK_N), cdiv(M, BLOCK_M)),
//         dynamic shared bytes NUM_STAGES * 4 * (BLOCK_M * (BLOCK_K + 4) + BLOCK_K * BLOCK_N).
#include "common.cuh"

// Blocks per SM that __launch_bounds__ asks ptxas to fit, budgeting accumulators + 64 registers a
// thread out of the 65536 an SM has (as 09): a cap of 128 registers for an 8x8 thread tile and
// 256 threads (2 blocks per SM); at least 1.
__host__ __device__ constexpr int min_blocks_per_sm(int threads, int accumulators) {
    return 65536 / (threads * (accumulators + 64)) > 1 ? 65536 / (threads * (accumulators + 64)) : 1;
}

// The 4 floats src[row][col .. col+3] of a rows x cols row-major matrix, zeros outside it, by
// guarded scalar loads: the fallback when rows are not 16-byte aligned.
__device__ __forceinline__ float4 load_float4_scalar(const float* src, int row, int col, int rows, int cols) {
    const float* p = src + row * cols + col;
    const bool in = row < rows;
    return make_float4(in && col + 0 < cols ? p[0] : 0.0f, in && col + 1 < cols ? p[1] : 0.0f,
                       in && col + 2 < cols ? p[2] : 0.0f, in && col + 3 < cols ? p[3] : 0.0f);
}

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARP_M, int WARP_N, int THREAD_M, int THREAD_N,
          int NUM_STAGES>
__global__ void __launch_bounds__((BLOCK_M / WARP_M) * (BLOCK_N / WARP_N) * 32,
                                  min_blocks_per_sm((BLOCK_M / WARP_M) * (BLOCK_N / WARP_N) * 32,
                                                    THREAD_M * THREAD_N))
sgemm_cp_async(int M, int N, int K, const float* A, const float* B, float* C) {
    constexpr int WARPS_N = BLOCK_N / WARP_N;                     // warps along a row of the block
    constexpr int NUM_THREADS = (BLOCK_M / WARP_M) * WARPS_N * 32;
    constexpr int LANES_N = WARP_N / THREAD_N;                    // lanes along a row of a sub-tile
    constexpr int LANES_M = WARP_M / THREAD_M;                    // lanes along a column
    constexpr int WARP_ITERS_N = THREAD_N / 4;                    // 1x4 pieces per thread, across
    constexpr int WARP_SUB_N = WARP_N / WARP_ITERS_N;             // = LANES_N * 4 columns
    constexpr int A_PITCH = BLOCK_K + 4;                          // floats per sA row (padded)
    constexpr int A_FLOATS = BLOCK_M * A_PITCH;                   // one stage of sA
    constexpr int STAGE_FLOATS = A_FLOATS + BLOCK_K * BLOCK_N;    // one stage of sA and sB
    static_assert(BLOCK_M % WARP_M == 0 && BLOCK_N % WARP_N == 0,
                  "WARP_M and WARP_N must divide BLOCK_M and BLOCK_N (whole warp tiles per block tile)");
    static_assert(THREAD_N % 4 == 0, "THREAD_N must be a multiple of 4: B is read as float4");
    static_assert(WARP_M % THREAD_M == 0 && WARP_N % THREAD_N == 0 && LANES_M * LANES_N == 32,
                  "a warp tile must hold exactly 32 thread tiles: (WARP_M/THREAD_M) * (WARP_N/THREAD_N) == 32");
    static_assert(BLOCK_K % 4 == 0, "BLOCK_K must be a multiple of 4: A is copied and read as float4 along k");
    static_assert(NUM_STAGES >= 2, "NUM_STAGES must be at least 2 (one tile computed, one in flight)");
    static_assert(NUM_THREADS <= 1024, "(BLOCK_M / WARP_M) * (BLOCK_N / WARP_N) warps exceed 1024 threads");
    constexpr int A_VECS = BLOCK_M * BLOCK_K / 4;       // float4s in the A tile (BLOCK_K / 4 per row)
    constexpr int B_VECS = BLOCK_K * BLOCK_N / 4;       // float4s in the B tile (BLOCK_N / 4 per row)
    constexpr int A_COPIES = cdiv(A_VECS, NUM_THREADS);  // float4s of A each thread copies
    constexpr int B_COPIES = cdiv(B_VECS, NUM_THREADS);

    extern __shared__ __align__(16) float smem[];  // NUM_STAGES x (sA, sB), see the header

    const int tid = threadIdx.x;
    const int warp_id = tid / 32, lane_id = tid % 32;
    const int warp_row = warp_id / WARPS_N * WARP_M;     // this warp's WARP_M x WARP_N tile
    const int warp_col = warp_id % WARPS_N * WARP_N;
    const int thread_row = warp_row + lane_id / LANES_N;       // first of its rows (stride LANES_M)
    const int thread_col = warp_col + lane_id % LANES_N * 4;   // its 1x4 piece in the first sub-tile
    const int block_row = blockIdx.y * BLOCK_M;
    const int block_col = blockIdx.x * BLOCK_N;
    const bool aligned = K % 4 == 0 && N % 4 == 0;  // rows of A and B start 16-byte aligned

    // acc[i][4j + c]: row thread_row + i * LANES_M, column thread_col + j * WARP_SUB_N + c.
    float acc[THREAD_M][THREAD_N] = {};

    // Copies: float4 e of a tile (row-major) goes to thread e % NUM_THREADS, so consecutive
    // threads copy consecutive 16 bytes of a row. Which rows and columns a thread copies is fixed;
    // only k0 moves, so the rows of A and the columns of B are checked once, here.
    const int a_r = tid / (BLOCK_K / 4), a_c = tid % (BLOCK_K / 4) * 4;  // first float4 in the A tile
    const int b_r = tid / (BLOCK_N / 4), b_c = tid % (BLOCK_N / 4) * 4;  // and in the B tile
    constexpr int A_ROW_STEP = NUM_THREADS / (BLOCK_K / 4);  // tile rows between its float4s of A
    constexpr int B_ROW_STEP = NUM_THREADS / (BLOCK_N / 4);  // (exact when BLOCK_K/4, BLOCK_N/4
    static_assert(NUM_THREADS % (BLOCK_K / 4) == 0 && NUM_THREADS % (BLOCK_N / 4) == 0,
                  "BLOCK_K/4 and BLOCK_N/4 must divide the thread count (a thread copies whole float4 columns)");
    const int b_cols_left = N - (block_col + b_c);  // columns of B from this thread's float4 on

    // Inside the matrices the copies go through a_src and b_src, this thread's first float4 of
    // tile 0, plus offsets (as 09): fewer integer instructions per copy than row * K + col.
    const float* a_src = A + (block_row + a_r) * K + a_c;
    const float* b_src = B + b_r * N + block_col + b_c;
    const bool block_inside = aligned && block_row + BLOCK_M <= M && block_col + BLOCK_N <= N;

    auto load_tile = [&](int stage, int k0) {
        const bool inside = block_inside && k0 + BLOCK_K <= K;  // one branch per tile
        float* sA = smem + stage * STAGE_FLOATS;
        float* sB = sA + A_FLOATS;
#pragma unroll
        for (int i = 0; i < A_COPIES; ++i) {
            if (A_VECS % NUM_THREADS == 0 || i * NUM_THREADS + tid < A_VECS) {
                const int r = a_r + i * A_ROW_STEP, row = block_row + r, col = k0 + a_c;
                float* dst = sA + r * A_PITCH + a_c;
                if (inside) {  // the common case: no bounds to compute, offsets fold into the copy
                    cp_async_16(dst, a_src + i * A_ROW_STEP * K + k0, 16);
                } else if (aligned) {
                    const int bytes = row < M ? min(max(K - col, 0), 4) * 4 : 0;
                    cp_async_16(dst, bytes > 0 ? A + row * K + col : A, bytes);
                } else {
                    *reinterpret_cast<float4*>(dst) = load_float4_scalar(A, row, col, M, K);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < B_COPIES; ++i) {
            if (B_VECS % NUM_THREADS == 0 || i * NUM_THREADS + tid < B_VECS) {
                const int r = b_r + i * B_ROW_STEP, row = k0 + r, col = block_col + b_c;
                float* dst = sB + r * BLOCK_N + b_c;
                if (inside) {
                    cp_async_16(dst, b_src + (i * B_ROW_STEP + k0) * N, 16);
                } else if (aligned) {
                    const int bytes = row < K ? min(max(b_cols_left, 0), 4) * 4 : 0;
                    cp_async_16(dst, bytes > 0 ? B + row * N + col : B, bytes);
                } else {
                    *reinterpret_cast<float4*>(dst) = load_float4_scalar(B, row, col, K, N);
                }
            }
        }
    };

    const int num_tiles = cdiv(K, BLOCK_K);
    // Prologue: tiles 0 .. NUM_STAGES - 2 in flight, one commit group each (empty past the end,
    // so that "group t is done" always means "tile t is done").
#pragma unroll
    for (int s = 0; s < NUM_STAGES - 1; ++s) {
        if (s < num_tiles) load_tile(s, s * BLOCK_K);
        cp_async_commit();
    }

    int stage = 0;                   // stage of tile t
    int next_stage = NUM_STAGES - 1;  // stage of tile t + NUM_STAGES - 1
    for (int t = 0; t < num_tiles; ++t) {
        // Tile t is in: at most NUM_STAGES - 2 younger groups may still be pending. The barrier
        // makes everyone's copies visible, and tells that every thread is done with tile t - 1,
        // whose stage (next_stage) is refilled right below.
        cp_async_wait_group<NUM_STAGES - 2>();
        __syncthreads();
        if (t + NUM_STAGES - 1 < num_tiles) load_tile(next_stage, (t + NUM_STAGES - 1) * BLOCK_K);
        cp_async_commit();

        const float* sA = smem + stage * STAGE_FLOATS;
        const float* sB = sA + A_FLOATS;
#pragma unroll
        for (int k4 = 0; k4 < BLOCK_K; k4 += 4) {
            // A sliver for 4 steps of k: a float4 of k4..k4+3 from each of the thread's rows.
            float4 a[THREAD_M];
#pragma unroll
            for (int i = 0; i < THREAD_M; ++i) {
                a[i] = *reinterpret_cast<const float4*>(&sA[(thread_row + i * LANES_M) * A_PITCH + k4]);
            }
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                float b[THREAD_N];  // 1 x THREAD_N sliver of sB: row k4 + kk, the thread's columns
#pragma unroll
                for (int j = 0; j < WARP_ITERS_N; ++j) {
                    const float4 v =
                        *reinterpret_cast<const float4*>(&sB[(k4 + kk) * BLOCK_N + thread_col + j * WARP_SUB_N]);
                    b[4 * j + 0] = v.x, b[4 * j + 1] = v.y, b[4 * j + 2] = v.z, b[4 * j + 3] = v.w;
                }
#pragma unroll
                for (int i = 0; i < THREAD_M; ++i) {
                    const float ai = kk == 0 ? a[i].x : kk == 1 ? a[i].y : kk == 2 ? a[i].z : a[i].w;
#pragma unroll
                    for (int n = 0; n < THREAD_N; ++n) acc[i][n] += ai * b[n];
                }
            }
        }
        stage = stage == NUM_STAGES - 1 ? 0 : stage + 1;
        next_stage = next_stage == NUM_STAGES - 1 ? 0 : next_stage + 1;
    }
    cp_async_wait_all();  // no copy may still target shared memory when the block exits

    // float4 stores of C: row thread_row + i * LANES_M, 4 columns per piece; guarded at the edges.
    const bool c_inside = aligned && block_row + BLOCK_M <= M && block_col + BLOCK_N <= N;
#pragma unroll
    for (int i = 0; i < THREAD_M; ++i) {
        const int row = block_row + thread_row + i * LANES_M;
#pragma unroll
        for (int j = 0; j < WARP_ITERS_N; ++j) {
            const int col = block_col + thread_col + j * WARP_SUB_N;
            const float4 v = make_float4(acc[i][4 * j + 0], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]);
            float* p = C + row * N + col;
            if (c_inside) {
                *reinterpret_cast<float4*>(p) = v;
            } else if (row < M) {
                if (col + 0 < N) p[0] = v.x;
                if (col + 1 < N) p[1] = v.y;
                if (col + 2 < N) p[2] = v.z;
                if (col + 3 < N) p[3] = v.w;
            }
        }
    }
}
