// sgemm track, step 06_vectorized (every step of the track, one line each: python -m gemmlab steps --track sgemm).
//
// Extends 05 by 128-bit accesses. Global loads and stores move a float4 (16 bytes) per
// instruction, a quarter of the instructions of 05. The A tile is stored transposed (M-major):
// in 05 a thread's A sliver is a column of sA, THREAD_M floats BLOCK_K apart, which nvcc can
// vectorize only across k (4 steps of k at once, 4 * THREAD_M registers, and only when it can
// prove the alignment); in sA[k][m] the sliver is THREAD_M consecutive floats, read with
// THREAD_M / 4 LDS.128 at the k that uses them. The B sliver was already contiguous and is now
// read as float4s explicitly. Per k a thread issues (THREAD_M + THREAD_N) / 4 shared loads for
// THREAD_M * THREAD_N FMAs (8x8: 4 loads for 64 FMAs). The float4 of A is transposed in registers
// on its way to shared memory, so staging has two halves: global -> registers -> shared.
//
// A float4 access must be 16-byte aligned: A + row*K + col is when K % 4 == 0 (the base pointers
// are), B and C when N % 4 == 0. Other shapes, and tiles that cross the edge of a matrix, take a
// guarded path (scalar loads, zeros outside); the interior tiles take one branch per tile.
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
//   sA[BLOCK_K][BLOCK_M]: the A tile transposed, M-major: sA[k][m] = A[block_row + m][k0 + k];
//   sB[BLOCK_K][BLOCK_N]: rows k0.., columns block_col.., row-major; out-of-range elements zero.
// Launch: blockDim ((BLOCK_M / THREAD_M) * (BLOCK_N / THREAD_N)),
//         gridDim (cdiv(N, BLOCK_N), cdiv(M, BLOCK_M)).
#include "common.cuh"

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int THREAD_M, int THREAD_N>
__global__ void sgemm_vectorized(int M, int N, int K, const float* A, const float* B, float* C) {
    constexpr int NUM_THREADS = (BLOCK_M / THREAD_M) * (BLOCK_N / THREAD_N);  // one per thread tile
    static_assert(BLOCK_M % THREAD_M == 0, "THREAD_M must divide BLOCK_M (whole thread tiles per tile)");
    static_assert(BLOCK_N % THREAD_N == 0, "THREAD_N must divide BLOCK_N (whole thread tiles per tile)");
    static_assert(THREAD_M % 4 == 0 && THREAD_N % 4 == 0,
                  "THREAD_M and THREAD_N must be multiples of 4: slivers are read as float4");
    static_assert(BLOCK_K % 4 == 0, "BLOCK_K must be a multiple of 4: A is loaded as float4 along k");
    static_assert(NUM_THREADS <= 1024, "(BLOCK_M / THREAD_M) * (BLOCK_N / THREAD_N) threads exceed 1024");
    static_assert((BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 4 <= 48 * 1024,
                  "the A and B tiles exceed 48 KB of static shared memory");
    constexpr int A_VECS = BLOCK_M * BLOCK_K / 4;       // float4s in the A tile (BLOCK_K / 4 per row)
    constexpr int B_VECS = BLOCK_K * BLOCK_N / 4;       // float4s in the B tile (BLOCK_N / 4 per row)
    constexpr int A_LOADS = cdiv(A_VECS, NUM_THREADS);  // float4s of A each thread stages
    constexpr int B_LOADS = cdiv(B_VECS, NUM_THREADS);

    __shared__ __align__(16) float sA[BLOCK_K][BLOCK_M];  // BLOCK_M x BLOCK_K tile of A, M-major
    __shared__ __align__(16) float sB[BLOCK_K][BLOCK_N];  // BLOCK_K x BLOCK_N tile of B

    const int tid = threadIdx.x;
    const int thread_col = tid % (BLOCK_N / THREAD_N) * THREAD_N;  // first of its THREAD_N columns
    const int thread_row = tid / (BLOCK_N / THREAD_N) * THREAD_M;  // first of its THREAD_M rows
    const int block_row = blockIdx.y * BLOCK_M;
    const int block_col = blockIdx.x * BLOCK_N;
    const bool a_vec = K % 4 == 0;  // every row of A starts 16-byte aligned
    const bool b_vec = N % 4 == 0;  // every row of B and of C starts 16-byte aligned

    float acc[THREAD_M][THREAD_N] = {};  // THREAD_M x THREAD_N tile of C at (thread_row, thread_col)
    float a[THREAD_M];                   // THREAD_M x 1 sliver of the A tile: column k, rows thread_row..
    float b[THREAD_N];                   // 1 x THREAD_N sliver of sB: row k, columns thread_col..
    float4 staged_a[A_LOADS];            // this thread's float4s of the A tile, on their way to sA
    float4 staged_b[B_LOADS];            // this thread's float4s of the B tile, on their way to sB

    // Staging, half 1: global -> registers. Float4 e of a tile (row-major) goes to thread
    // e % NUM_THREADS, so consecutive threads load consecutive 16 bytes of a row.
    auto load_tiles = [&](int k0) {
        // One branch per tile: the whole tile inside the matrix and float4-aligned, or not.
        const bool a_inside = a_vec && block_row + BLOCK_M <= M && k0 + BLOCK_K <= K;
        const bool b_inside = b_vec && k0 + BLOCK_K <= K && block_col + BLOCK_N <= N;
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int e = i * NUM_THREADS + tid;
            const int row = block_row + e / (BLOCK_K / 4), col = k0 + e % (BLOCK_K / 4) * 4;
            if (e < A_VECS) {
                staged_a[i] = a_inside ? *reinterpret_cast<const float4*>(A + row * K + col)
                                 : load_float4_guarded(A, row, col, M, K, a_vec);
            }
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int e = i * NUM_THREADS + tid;
            const int row = k0 + e / (BLOCK_N / 4), col = block_col + e % (BLOCK_N / 4) * 4;
            if (e < B_VECS) {
                staged_b[i] = b_inside ? *reinterpret_cast<const float4*>(B + row * N + col)
                                 : load_float4_guarded(B, row, col, K, N, b_vec);
            }
        }
    };
    // Staging, half 2: registers -> shared. A's float4 runs along k, so it is transposed into one
    // float of 4 consecutive sA rows; B's float4 is stored whole.
    auto store_tiles = [&]() {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int e = i * NUM_THREADS + tid;
            const int r = e / (BLOCK_K / 4), c = e % (BLOCK_K / 4) * 4;
            if (e < A_VECS) {
                sA[c + 0][r] = staged_a[i].x;
                sA[c + 1][r] = staged_a[i].y;
                sA[c + 2][r] = staged_a[i].z;
                sA[c + 3][r] = staged_a[i].w;
            }
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int e = i * NUM_THREADS + tid;
            const int r = e / (BLOCK_N / 4), c = e % (BLOCK_N / 4) * 4;
            if (e < B_VECS) *reinterpret_cast<float4*>(&sB[r][c]) = staged_b[i];
        }
    };

    for (int k0 = 0; k0 < K; k0 += BLOCK_K) {
        load_tiles(k0);
        store_tiles();
        // Barrier 1: no thread may read the tiles before every thread has written its elements.
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BLOCK_K; ++k) {
            // The slivers as float4s: sA row k holds column k of the A tile.
#pragma unroll
            for (int m = 0; m < THREAD_M; m += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&sA[k][thread_row + m]);
                a[m + 0] = v.x, a[m + 1] = v.y, a[m + 2] = v.z, a[m + 3] = v.w;
            }
#pragma unroll
            for (int n = 0; n < THREAD_N; n += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&sB[k][thread_col + n]);
                b[n + 0] = v.x, b[n + 1] = v.y, b[n + 2] = v.z, b[n + 3] = v.w;
            }
#pragma unroll
            for (int m = 0; m < THREAD_M; ++m) {
#pragma unroll
                for (int n = 0; n < THREAD_N; ++n) {
                    acc[m][n] += a[m] * b[n];
                }
            }
        }
        // Barrier 2: no thread may overwrite the tiles (next k0) while others still read them.
        __syncthreads();
    }

    // float4 stores of C; one branch for the block: inside and aligned, or guarded.
    const bool c_inside = b_vec && block_row + BLOCK_M <= M && block_col + BLOCK_N <= N;
#pragma unroll
    for (int m = 0; m < THREAD_M; ++m) {
#pragma unroll
        for (int n = 0; n < THREAD_N; n += 4) {
            const int row = block_row + thread_row + m, col = block_col + thread_col + n;
            const float4 v = make_float4(acc[m][n + 0], acc[m][n + 1], acc[m][n + 2], acc[m][n + 3]);
            if (c_inside) {
                *reinterpret_cast<float4*>(C + row * N + col) = v;
            } else {
                store_float4_guarded(C, row, col, M, N, b_vec, v);
            }
        }
    }
}
