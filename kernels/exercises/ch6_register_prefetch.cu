// EXERCISE ch6/register_prefetch (sgemm/08_register_prefetch): fill in the gap between the EXERCISE and END markers below.
// Check it: python -m gemmlab exercise check ch6/register_prefetch   (or gemmlab.exercises.check in a notebook)
//
// sgemm track, step 08_register_prefetch (every step of the track, one line each: python -m gemmlab steps --track sgemm).
//
// A variation of 08 (chapter 6's exercise): the loads run two tiles ahead, not one. Two sets of
// staging registers (r0, r1) and two shared slots: while tile t is computed from one slot, tile
// t + 1 waits in registers and tile t + 2 is loading, so a load has two tiles' FMAs to land, and
// one barrier per K tile is enough. 08, which it varies, extends 07 by loading the next tile while
// computing this one, to hide the latency of global
// memory: the "makeshift async copy" of seed 001 (kernel 4) applied to the fp32 kernel. In 07 each
// tile is loaded, then waited for at a barrier, then computed: no FMA runs while its loads are in
// flight. Here the global loads of tile t+1 are issued into registers (staged_a, staged_b)
// before the FMAs of tile t, so their latency hides behind compute, and stored to shared memory
// after them. There is
// still one buffer: a barrier before the store (no thread still reads tile t) and one after it
// (tile t+1 complete before anyone reads it), two per K tile as in 07.
// The next tile waits in registers across the FMAs, so __launch_bounds__ budgets accumulators +
// 64 registers per thread: for an 8x8 thread tile a cap of 128, so that 2 blocks of 256 threads
// fit on an SM. Under the cap the loads go through per-thread base pointers (a_src, b_src).
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
//   sA[BLOCK_K][BLOCK_M]: the A tile transposed, M-major: sA[k][m] = A[block_row + m][k0 + k];
//   sB[BLOCK_K][BLOCK_N]: rows k0.., columns block_col.., row-major; out-of-range elements zero.
//   Warp w: rows warp_row = w / (BLOCK_N / WARP_N) * WARP_M.., columns warp_col = w % (..) * WARP_N..
//   Lane l: (lane_row, lane_col) = (l / LANES_N * 4, l % LANES_N * 4) in every sub-tile.
// Launch: blockDim ((BLOCK_M / WARP_M) * (BLOCK_N / WARP_N) * 32),
//         gridDim (cdiv(N, BLOCK_N), cdiv(M, BLOCK_M)).
#include "common.cuh"

// Blocks per SM that __launch_bounds__ asks ptxas to fit, budgeting accumulators + 64 registers a
// thread out of the 65536 an SM has: a cap of 128 registers for an 8x8 thread tile and 256
// threads (2 blocks per SM); at least 1.
__host__ __device__ constexpr int min_blocks_per_sm(int threads, int accumulators) {
    return 65536 / (threads * (accumulators + 64)) > 1 ? 65536 / (threads * (accumulators + 64)) : 1;
}

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARP_M, int WARP_N, int THREAD_M, int THREAD_N>
__global__ void __launch_bounds__((BLOCK_M / WARP_M) * (BLOCK_N / WARP_N) * 32,
                                  min_blocks_per_sm((BLOCK_M / WARP_M) * (BLOCK_N / WARP_N) * 32,
                                                    THREAD_M * THREAD_N))
sgemm_register_prefetch(int M, int N, int K, const float* A, const float* B, float* C) {
    constexpr int WARPS_N = BLOCK_N / WARP_N;                     // warps along a row of the block
    constexpr int NUM_THREADS = (BLOCK_M / WARP_M) * WARPS_N * 32;
    constexpr int LANES_N = WARP_N / THREAD_N;                    // lanes along a row of a sub-tile
    constexpr int LANES_M = WARP_M / THREAD_M;                    // lanes along a column
    constexpr int WARP_ITERS_M = THREAD_M / 4;                    // 4x4 pieces per thread, down
    constexpr int WARP_ITERS_N = THREAD_N / 4;                    // and across
    constexpr int WARP_SUB_M = WARP_M / WARP_ITERS_M;             // = LANES_M * 4 rows
    constexpr int WARP_SUB_N = WARP_N / WARP_ITERS_N;             // = LANES_N * 4 columns
    static_assert(BLOCK_M % WARP_M == 0 && BLOCK_N % WARP_N == 0,
                  "WARP_M and WARP_N must divide BLOCK_M and BLOCK_N (whole warp tiles per block tile)");
    static_assert(THREAD_M % 4 == 0 && THREAD_N % 4 == 0,
                  "THREAD_M and THREAD_N must be multiples of 4: a thread's outputs come in 4x4 pieces");
    static_assert(WARP_M % THREAD_M == 0 && WARP_N % THREAD_N == 0 && LANES_M * LANES_N == 32,
                  "a warp tile must hold exactly 32 thread tiles: (WARP_M/THREAD_M) * (WARP_N/THREAD_N) == 32");
    static_assert(BLOCK_K % 4 == 0, "BLOCK_K must be a multiple of 4: A is loaded as float4 along k");
    static_assert(NUM_THREADS % (BLOCK_K / 4) == 0 && NUM_THREADS % (BLOCK_N / 4) == 0,
                  "BLOCK_K/4 and BLOCK_N/4 must divide the thread count (a thread stages one float4 column)");
    static_assert(NUM_THREADS <= 1024, "(BLOCK_M / WARP_M) * (BLOCK_N / WARP_N) warps exceed 1024 threads");
    static_assert(2 * (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 4 <= 48 * 1024,
                  "two slots of the A and B tiles exceed 48 KB of static shared memory");
    constexpr int A_VECS = BLOCK_M * BLOCK_K / 4;       // float4s in the A tile (BLOCK_K / 4 per row)
    constexpr int B_VECS = BLOCK_K * BLOCK_N / 4;       // float4s in the B tile (BLOCK_N / 4 per row)
    constexpr int A_LOADS = cdiv(A_VECS, NUM_THREADS);  // float4s of A each thread stages
    constexpr int B_LOADS = cdiv(B_VECS, NUM_THREADS);
    constexpr int A_ROW_STEP = NUM_THREADS / (BLOCK_K / 4);  // rows between a thread's float4s of A
    constexpr int B_ROW_STEP = NUM_THREADS / (BLOCK_N / 4);  // and of B

    __shared__ __align__(16) float sA[2][BLOCK_K][BLOCK_M];  // two slots: BLOCK_M x BLOCK_K tiles of A, M-major
    __shared__ __align__(16) float sB[2][BLOCK_K][BLOCK_N];  // two slots: BLOCK_K x BLOCK_N tiles of B

    const int tid = threadIdx.x;
    const int warp_id = tid / 32, lane_id = tid % 32;
    const int warp_row = warp_id / WARPS_N * WARP_M;     // this warp's WARP_M x WARP_N tile
    const int warp_col = warp_id % WARPS_N * WARP_N;
    const int thread_row = warp_row + lane_id / LANES_N * 4;  // its 4x4 piece in the first sub-tile
    const int thread_col = warp_col + lane_id % LANES_N * 4;
    const int block_row = blockIdx.y * BLOCK_M;
    const int block_col = blockIdx.x * BLOCK_N;
    const bool a_vec = K % 4 == 0;  // every row of A starts 16-byte aligned
    const bool b_vec = N % 4 == 0;  // every row of B and of C starts 16-byte aligned

    // acc[4i + r][4j + c]: row thread_row + i * WARP_SUB_M + r, column thread_col + j * WARP_SUB_N + c.
    float acc[THREAD_M][THREAD_N] = {};  // THREAD_M x THREAD_N outputs, as 4x4 pieces
    float a[THREAD_M];                   // THREAD_M x 1 sliver of the A tile: column k, the thread's rows
    float b[THREAD_N];                   // 1 x THREAD_N sliver of sB: row k, the thread's columns
    struct Staged {                      // this thread's float4s of one A and B tile, on their way to shared
        float4 a[A_LOADS];
        float4 b[B_LOADS];
    };
    Staged r0, r1;                       // two sets: one tile waits in one while the next loads into the other

    // Staging, half 1: global -> registers. Float4 e of a tile (row-major) goes to thread
    // e % NUM_THREADS, so consecutive threads load consecutive 16 bytes of a row. Inside the
    // matrices the loads go through a_src and b_src, this thread's first float4 of tile 0, plus
    // offsets, instead of recomputing row * K + col: fewer registers, so no spills under the cap.
    const float* a_src = A + (block_row + tid / (BLOCK_K / 4)) * K + tid % (BLOCK_K / 4) * 4;
    const float* b_src = B + tid / (BLOCK_N / 4) * N + block_col + tid % (BLOCK_N / 4) * 4;
    auto load_tiles = [&](Staged& s, int k0) {  // global -> registers s
        // One branch per tile: the whole tile inside the matrix and float4-aligned, or not.
        const bool a_inside = a_vec && block_row + BLOCK_M <= M && k0 + BLOCK_K <= K;
        const bool b_inside = b_vec && k0 + BLOCK_K <= K && block_col + BLOCK_N <= N;
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int e = i * NUM_THREADS + tid;
            const int row = block_row + e / (BLOCK_K / 4), col = k0 + e % (BLOCK_K / 4) * 4;
            if (e < A_VECS) {
                s.a[i] = a_inside ? *reinterpret_cast<const float4*>(a_src + i * A_ROW_STEP * K + k0)
                               : load_float4_guarded(A, row, col, M, K, a_vec);
            }
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int e = i * NUM_THREADS + tid;
            const int row = k0 + e / (BLOCK_N / 4), col = block_col + e % (BLOCK_N / 4) * 4;
            if (e < B_VECS) {
                s.b[i] = b_inside ? *reinterpret_cast<const float4*>(b_src + (i * B_ROW_STEP + k0) * N)
                               : load_float4_guarded(B, row, col, K, N, b_vec);
            }
        }
    };
    // Staging, half 2: registers -> shared. A's float4 runs along k, so it is transposed into one
    // float of 4 consecutive sA rows; B's float4 is stored whole.
    auto store_tiles = [&](const Staged& s, int slot) {  // registers s -> shared slot
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int e = i * NUM_THREADS + tid;
            const int r = e / (BLOCK_K / 4), c = e % (BLOCK_K / 4) * 4;
            if (e < A_VECS) {
                sA[slot][c + 0][r] = s.a[i].x;
                sA[slot][c + 1][r] = s.a[i].y;
                sA[slot][c + 2][r] = s.a[i].z;
                sA[slot][c + 3][r] = s.a[i].w;
            }
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int e = i * NUM_THREADS + tid;
            const int r = e / (BLOCK_N / 4), c = e % (BLOCK_N / 4) * 4;
            if (e < B_VECS) *reinterpret_cast<float4*>(&sB[slot][r][c]) = s.b[i];
        }
    };

    // The FMAs of the tile in shared slot `slot`: acc += its A tile x its B tile.
    auto compute_tile = [&](int slot) {
#pragma unroll
        for (int k = 0; k < BLOCK_K; ++k) {
            // The slivers as float4s, one per sub-tile: sA row k holds column k of the A tile.
#pragma unroll
            for (int i = 0; i < WARP_ITERS_M; ++i) {
                const float4 v = *reinterpret_cast<const float4*>(&sA[slot][k][thread_row + i * WARP_SUB_M]);
                a[4 * i + 0] = v.x, a[4 * i + 1] = v.y, a[4 * i + 2] = v.z, a[4 * i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < WARP_ITERS_N; ++j) {
                const float4 v = *reinterpret_cast<const float4*>(&sB[slot][k][thread_col + j * WARP_SUB_N]);
                b[4 * j + 0] = v.x, b[4 * j + 1] = v.y, b[4 * j + 2] = v.z, b[4 * j + 3] = v.w;
            }
#pragma unroll
            for (int m = 0; m < THREAD_M; ++m) {
#pragma unroll
                for (int n = 0; n < THREAD_N; ++n) {
                    acc[m][n] += a[m] * b[n];
                }
            }
        }
    };

    const int num_tiles = cdiv(K, BLOCK_K);
    load_tiles(r0, 0);
    store_tiles(r0, 0);
    if (num_tiles > 1) load_tiles(r1, BLOCK_K);  // tile 1 waits in r1
    __syncthreads();  // tile 0 is in slot 0 for everyone

    // The K loop. Before it, tile 0 is in shared slot 0 and tile 1 in the registers r1. The helpers:
    // load_tiles(r, k0) (global -> the registers r), store_tiles(r, slot) (registers -> shared slot 0
    // or 1) and compute_tile(slot) (the FMAs of the tile in that slot). Chapter 6's step 08 keeps one
    // tile ahead, in one set of registers and one buffer, with two barriers per tile. Here keep two
    // tiles ahead: while tile t is computed, tile t + 1 waits in one set of registers and the loads of
    // tile t + 2 are in flight into the other; one __syncthreads() per K tile. The registers must stay
    // registers: which set a line uses has to be known at compile time. The gap as shipped is 07's
    // order: correct, and nothing overlaps the loads.
    // ---- EXERCISE: prefetch two tiles ahead ----
    for (int t = 0; t < num_tiles; ++t) {  // 07's order: nothing overlaps the loads
        compute_tile(0);
        __syncthreads();
        if (t + 1 < num_tiles) load_tiles(r0, (t + 1) * BLOCK_K);  // waits for global memory
        if (t + 1 < num_tiles) store_tiles(r0, 0);
        __syncthreads();
    }
    // ---- END ----

    // float4 stores of C; one branch for the block: inside and aligned, or guarded.
    const bool c_inside = b_vec && block_row + BLOCK_M <= M && block_col + BLOCK_N <= N;
#pragma unroll
    for (int m = 0; m < THREAD_M; ++m) {
#pragma unroll
        for (int n = 0; n < THREAD_N; n += 4) {
            const int row = block_row + thread_row + m / 4 * WARP_SUB_M + m % 4;
            const int col = block_col + thread_col + n / 4 * WARP_SUB_N;
            const float4 v = make_float4(acc[m][n + 0], acc[m][n + 1], acc[m][n + 2], acc[m][n + 3]);
            if (c_inside) {
                *reinterpret_cast<float4*>(C + row * N + col) = v;
            } else {
                store_float4_guarded(C, row, col, M, N, b_vec, v);
            }
        }
    }
}
