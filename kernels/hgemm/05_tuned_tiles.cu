// hgemm track, step 05_tuned_tiles (every step of the track, one line each: python -m gemmlab steps --track hgemm).
//
// Extends 04 in two ways that belong together, as in the seed's kernel 5: the default tiles
// grow and the index arithmetic that larger unrolled loops would multiply shrinks.
// - Tiles: the block tile grows from 128 x 128 to 256 x 128 (8 warps of 64 x 64 instead of 4).
//   Per K step a block loads (BM + BN) * BK halves and does BM * BN * BK multiply-adds: BM * BN /
//   (BM + BN) = 85 multiply-adds per loaded half (85 flops per byte) against 64 for 128 x 128,
//   closer to, still left of, the balance points of chapter 1; half as many blocks re-read A and B.
// - Cheap swizzled addresses: the XOR in swizzle() only involves a row's low 3 bits (rows repeat
//   their pattern every 8) and the chunk bits of the column. Moving down by 16 rows is therefore
//   a plain add, and moving right by kk (sA) or by n * 8 columns (sB) flips chunk bits that the
//   lane's own base column leaves clear, so it is an XOR with a constant: each lane computes its
//   two swizzled base offsets once, and every ldmatrix address in the loop is base ^ constant +
//   constant. The global loads and shared stores likewise go through per-thread pointers set up
//   once. Same memory traffic as 04, fewer integer instructions per mma.
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
//   sA: BLOCK_M x BLOCK_K K-major tile of A, element (r, c) at swizzle<BLOCK_K>(r, c).
//   sB: BLOCK_K x BLOCK_N N-major tile of B, element (r, c) at swizzle<BLOCK_N>(r, c); read with
//   ldmatrix.trans. Elements past M, N or K are zero, so edge tiles need no special case.
// Launch: blockDim (BLOCK_M/WARP_M * BLOCK_N/WARP_N * 32), gridDim (cdiv(N, BLOCK_N),
//   cdiv(M, BLOCK_M)); static shared memory (BLOCK_M + BLOCK_N) * BLOCK_K * 2 bytes.
#include "common.cuh"

// Element offset of (row, col) in a row-major shared tile WIDTH halves wide whose 16-byte chunks
// are XOR-swizzled (03's helper): chunk col / 8 of a row sits at chunk (col / 8) ^ ((row / ROWS) % XOR).
template <int WIDTH>
__device__ __forceinline__ int swizzle(int row, int col) {
    constexpr int CHUNKS = WIDTH / 8;             // 16-byte chunks per row
    constexpr int XOR = CHUNKS < 8 ? CHUNKS : 8;  // chunk indices the XOR permutes
    constexpr int ROWS = 8 / XOR;                 // rows that share one 128-byte line of banks
    static_assert(WIDTH >= 16 && (WIDTH & (WIDTH - 1)) == 0,
                  "swizzled tile width must be a power of two, at least 16 halves");
    return row * WIDTH + (((col / 8) ^ (row / ROWS % XOR)) * 8) + col % 8;
}

// The 8 halves src[row][col .. col+7] of a rows x cols row-major matrix as one 16-byte value,
// zeros outside the matrix: one 16-byte load when `vec` (cols % 8 == 0) and the chunk is inside,
// else element by element (edge tiles only).
__device__ __forceinline__ uint4 load_chunk_guarded(const __half* src, int row, int col, int rows,
                                                    int cols, bool vec) {
    const __half* p = src + row * cols + col;
    if (vec && row < rows && col + 8 <= cols) return *reinterpret_cast<const uint4*>(p);
    u32 w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const bool lo_in = row < rows && col + 2 * j < cols, hi_in = row < rows && col + 2 * j + 1 < cols;
        const u32 lo = lo_in ? __half_as_ushort(p[2 * j]) : 0u;  // fp16 zero is all-zero bits
        const u32 hi = hi_in ? __half_as_ushort(p[2 * j + 1]) : 0u;
        w[j] = lo | (hi << 16);  // the lower address in the low half, as a 16-byte load would put it
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARP_M, int WARP_N>
__global__ void hgemm_tuned_tiles(int M, int N, int K, const __half* A, const __half* B, __half* C) {
    constexpr int MMA_M = 16, MMA_N = 8, MMA_K = 8;
    constexpr int WARPS_N = BLOCK_N / WARP_N;
    constexpr int NUM_THREADS = (BLOCK_M / WARP_M) * WARPS_N * 32;
    constexpr int MMA_TILES_M = WARP_M / MMA_M;  // mma tiles per warp tile, down
    constexpr int MMA_TILES_N = WARP_N / MMA_N;  // mma tiles per warp tile, across
    static_assert(BLOCK_M % WARP_M == 0, "BLOCK_M must be a multiple of WARP_M");
    static_assert(BLOCK_N % WARP_N == 0, "BLOCK_N must be a multiple of WARP_N");
    static_assert(WARP_M % MMA_M == 0, "WARP_M must be a multiple of 16 (mma M)");
    static_assert(WARP_N % (2 * MMA_N) == 0,
                  "WARP_N must be a multiple of 16: ldmatrix.x4.trans loads two 8-wide B tiles");
    static_assert(BLOCK_K % (2 * MMA_K) == 0,
                  "BLOCK_K must be a multiple of 16: one ldmatrix.x4 loads a 16-deep A tile");
    static_assert(NUM_THREADS <= 1024, "too many warps: at most 1024 threads per block");
    static_assert((BLOCK_M + BLOCK_N) * BLOCK_K * 2 <= 48 * 1024,
                  "tiles exceed the 48 KiB of static shared memory");
    constexpr int A_CHUNKS = BLOCK_M * BLOCK_K / 8;         // 16-byte chunks in the A tile
    constexpr int B_CHUNKS = BLOCK_K * BLOCK_N / 8;         // 16-byte chunks in the B tile
    constexpr int A_COPIES = cdiv(A_CHUNKS, NUM_THREADS);  // chunks of A each thread copies
    constexpr int B_COPIES = cdiv(B_CHUNKS, NUM_THREADS);

    __shared__ __align__(16) __half sA[BLOCK_M * BLOCK_K];  // BLOCK_M x BLOCK_K, K-major, swizzled
    __shared__ __align__(16) __half sB[BLOCK_K * BLOCK_N];  // BLOCK_K x BLOCK_N, N-major, swizzled

    const int tid = threadIdx.x;
    const int warp_id = tid / 32;
    const int lane_id = tid % 32;
    const int warp_row = (warp_id / WARPS_N) * WARP_M;  // warp tile's first row in the block tile
    const int warp_col = (warp_id % WARPS_N) * WARP_N;  // warp tile's first column
    const int block_row = blockIdx.y * BLOCK_M;
    const int block_col = blockIdx.x * BLOCK_N;
    const bool a_vec = K % 8 == 0;  // every row of A starts 16-byte aligned
    const bool b_vec = N % 8 == 0;  // every row of B starts 16-byte aligned

    float rC[MMA_TILES_M][MMA_TILES_N][4];
#pragma unroll
    for (int m = 0; m < MMA_TILES_M; ++m)
#pragma unroll
        for (int n = 0; n < MMA_TILES_N; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) rC[m][n][i] = 0.0f;

    // This thread's chunks of the next tile, between global and shared memory.
    uint4 stage_a[A_COPIES];
    uint4 stage_b[B_COPIES];

    // Chunk e of a tile goes to thread e % NUM_THREADS (as in 03), so this thread's i-th chunk
    // sits A_ROW_STEP (B_ROW_STEP) rows below its first. Its first chunk's global address and
    // swizzled shared offset are computed once; the i-th adds a constant. A multiple of 8 rows
    // keeps the swizzle pattern, so the shared offset of chunk i is first + i * step * width.
    constexpr int A_ROW_STEP = NUM_THREADS / (BLOCK_K / 8);
    constexpr int B_ROW_STEP = NUM_THREADS / (BLOCK_N / 8);
    static_assert(NUM_THREADS % (BLOCK_K / 8) == 0 && NUM_THREADS % (BLOCK_N / 8) == 0,
                  "a thread's chunks must stay in one column: BLOCK_K / 8 and BLOCK_N / 8 must divide the threads");
    const int a_row = tid / (BLOCK_K / 8), a_col = tid % (BLOCK_K / 8) * 8;  // first chunk of A
    const int b_row = tid / (BLOCK_N / 8), b_col = tid % (BLOCK_N / 8) * 8;  // first chunk of B
    const __half* a_src = A + (block_row + a_row) * K + a_col;
    const __half* b_src = B + b_row * N + block_col + b_col;
    const int a_dst = swizzle<BLOCK_K>(a_row, a_col);
    const int b_dst = swizzle<BLOCK_N>(b_row, b_col);
    auto a_dst_of = [&](int i) {  // shared offset of this thread's i-th chunk of A
        return A_ROW_STEP % 8 == 0 ? a_dst + i * A_ROW_STEP * BLOCK_K : swizzle<BLOCK_K>(a_row + i * A_ROW_STEP, a_col);
    };
    auto b_dst_of = [&](int i) {
        return B_ROW_STEP % 8 == 0 ? b_dst + i * B_ROW_STEP * BLOCK_N : swizzle<BLOCK_N>(b_row + i * B_ROW_STEP, b_col);
    };

    // Global -> registers. One branch per tile: wholly inside and aligned, or guarded.
    auto load_tiles = [&](int k0) {
        const bool a_inside = a_vec && block_row + BLOCK_M <= M && k0 + BLOCK_K <= K;
        const bool b_inside = b_vec && k0 + BLOCK_K <= K && block_col + BLOCK_N <= N;
#pragma unroll
        for (int i = 0; i < A_COPIES; ++i) {
            if (A_CHUNKS % NUM_THREADS == 0 || i * NUM_THREADS + tid < A_CHUNKS)
                stage_a[i] = a_inside ? *reinterpret_cast<const uint4*>(a_src + i * A_ROW_STEP * K + k0)
                                      : load_chunk_guarded(A, block_row + a_row + i * A_ROW_STEP, k0 + a_col, M, K, a_vec);
        }
#pragma unroll
        for (int i = 0; i < B_COPIES; ++i) {
            if (B_CHUNKS % NUM_THREADS == 0 || i * NUM_THREADS + tid < B_CHUNKS)
                stage_b[i] = b_inside ? *reinterpret_cast<const uint4*>(b_src + (i * B_ROW_STEP + k0) * N)
                                      : load_chunk_guarded(B, k0 + b_row + i * B_ROW_STEP, block_col + b_col, K, N, b_vec);
        }
    };
    // Registers -> shared, one 16-byte store per chunk.
    auto store_tiles = [&]() {
#pragma unroll
        for (int i = 0; i < A_COPIES; ++i)
            if (A_CHUNKS % NUM_THREADS == 0 || i * NUM_THREADS + tid < A_CHUNKS)
                *reinterpret_cast<uint4*>(&sA[a_dst_of(i)]) = stage_a[i];
#pragma unroll
        for (int i = 0; i < B_COPIES; ++i)
            if (B_CHUNKS % NUM_THREADS == 0 || i * NUM_THREADS + tid < B_CHUNKS)
                *reinterpret_cast<uint4*>(&sB[b_dst_of(i)]) = stage_b[i];
    };

    const int num_tiles = cdiv(K, BLOCK_K);
    load_tiles(0);
    store_tiles();
    __syncthreads();  // tile 0 is in shared memory for everyone

    // ldmatrix.x4 base offsets: lane l points at row l % 16, column 8 * (l / 16) of the warp's
    // first 16x16 piece of sA, and of sB (k rows 0-15, the warp's first 16 columns). Then
    //   A piece (m, kk): (a_frag ^ kk) + m * 16 * BLOCK_K   (kk flips chunk bits; +16 rows keeps the XOR)
    //   B piece (kk, n): (b_frag ^ n * 8) + kk * BLOCK_N    (n * 8 < WARP_N flips bits warp_col leaves clear)
    static_assert((WARP_N & (WARP_N - 1)) == 0, "WARP_N must be a power of two for XOR-advanced addresses");
    const int lane_row = lane_id % 16;
    const int lane_col = (lane_id / 16) * 8;
    const int a_frag = swizzle<BLOCK_K>(warp_row + lane_row, lane_col);
    const int b_frag = swizzle<BLOCK_N>(lane_row, warp_col + lane_col);
    for (int t = 0; t < num_tiles; ++t) {
        const bool has_next = t + 1 < num_tiles;
        if (has_next) load_tiles((t + 1) * BLOCK_K);  // in flight during the mmas below

#pragma unroll
        for (int kk = 0; kk < BLOCK_K; kk += 2 * MMA_K) {
            u32 rA[MMA_TILES_M][2][2];  // [mma tile][k half][register], as in 03
#pragma unroll
            for (int m = 0; m < MMA_TILES_M; ++m)
                ldmatrix_x4(rA[m][0][0], rA[m][0][1], rA[m][1][0], rA[m][1][1],
                            &sA[(a_frag ^ kk) + m * MMA_M * BLOCK_K]);
            u32 rB[MMA_TILES_N][2][1];
#pragma unroll
            for (int n = 0; n < MMA_TILES_N; n += 2)
                ldmatrix_x4_trans(rB[n][0][0], rB[n][1][0], rB[n + 1][0][0], rB[n + 1][1][0],
                                  &sB[(b_frag ^ (n * MMA_N)) + kk * BLOCK_N]);
#pragma unroll
            for (int kh = 0; kh < 2; ++kh)
#pragma unroll
                for (int m = 0; m < MMA_TILES_M; ++m)
#pragma unroll
                    for (int n = 0; n < MMA_TILES_N; ++n)
                        mma_m16n8k8_f32(rC[m][n], rA[m][kh], rB[n][kh], rC[m][n]);
        }

        if (has_next) {
            __syncthreads();  // nobody still reads tile t from the one buffer
            store_tiles();
            __syncthreads();  // tile t + 1 complete before anyone reads it
        }
    }

    // Epilogue (03's): lane l holds rows l/4 and l/4 + 8, columns 2*(l%4) and 2*(l%4)+1 of each
    // mma tile; each element is rounded to fp16 and stored if inside C.
    const int group_id = lane_id / 4;
    const int thread_in_group = lane_id % 4;
#pragma unroll
    for (int m = 0; m < MMA_TILES_M; ++m)
#pragma unroll
        for (int n = 0; n < MMA_TILES_N; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int row = block_row + warp_row + m * MMA_M + group_id + (i / 2) * 8;
                const int col = block_col + warp_col + n * MMA_N + thread_in_group * 2 + i % 2;
                if (row < M && col < N) C[row * N + col] = __float2half(rC[m][n][i]);
            }
}
