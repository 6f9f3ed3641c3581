// hgemm track, step 07_cp_async (every step of the track, one line each: python -m gemmlab steps --track hgemm).
//
// Extends 06 with the two things Ampere (sm_80) added for exactly this loop; it does not run on
// a T4. (1) cp.async copies 16 bytes from global to shared memory without passing through
// registers, so the staging registers of 04-06 go and NUM_STAGES tiles can be in flight at once
// (the sgemm track's step 10, here in fp16): tile t + NUM_STAGES - 1 is requested while tile t is
// computed, one commit group per tile, cp.async.wait_group keeps at most NUM_STAGES - 2 younger
// groups pending. (2) mma.m16n8k16 does the work of two m16n8k8 in one instruction: the ldmatrix
// registers of 03-06 already hold its 16-deep A fragment ({0,1} for k 0-7, {2,3} for k 8-15) and
// its B fragment, so only the call changes, and the tensor cores see half as many instructions.
// Chunks that cross the edge of A or B are zero-filled by cp.async itself (src_bytes < 16);
// when K or N is not a multiple of 8 (rows not 16-byte aligned) copies fall back to 16-byte
// register stores built element by element.
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
//   sA: BLOCK_M x BLOCK_K K-major tile of A, element (r, c) at swizzle<BLOCK_K>(r, c).
//   sB: BLOCK_K x BLOCK_N N-major tile of B, element (r, c) at swizzle<BLOCK_N>(r, c); read with
//   ldmatrix.trans. Elements past M, N or K are zero, so edge tiles need no special case.
// Launch: blockDim (BLOCK_M/WARP_M * BLOCK_N/WARP_N * 32), gridDim (cdiv(N, BLOCK_N),
//   cdiv(M, BLOCK_M)); dynamic shared memory NUM_STAGES * (BLOCK_M + BLOCK_N) * BLOCK_K * 2 bytes:
//   smem = [sA stage 0][sB stage 0][sA stage 1][sB stage 1] ...
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

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARP_M, int WARP_N, int NUM_STAGES>
__global__ void hgemm_cp_async(int M, int N, int K, const __half* A, const __half* B, __half* C) {
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
    constexpr int A_CHUNKS = BLOCK_M * BLOCK_K / 8;         // 16-byte chunks in the A tile
    constexpr int B_CHUNKS = BLOCK_K * BLOCK_N / 8;         // 16-byte chunks in the B tile
    constexpr int A_COPIES = cdiv(A_CHUNKS, NUM_THREADS);  // chunks of A each thread copies
    constexpr int B_COPIES = cdiv(B_CHUNKS, NUM_THREADS);

    static_assert(NUM_STAGES >= 2, "NUM_STAGES must be at least 2 (one tile computed, one in flight)");
    constexpr int STAGE_HALVES = (BLOCK_M + BLOCK_N) * BLOCK_K;  // one stage of sA and sB
    extern __shared__ __align__(16) __half smem[];  // NUM_STAGES stages, see the header
    auto sA = [&](int buf) { return smem + buf * STAGE_HALVES; };  // BLOCK_M x BLOCK_K, K-major, swizzled
    auto sB = [&](int buf) { return smem + buf * STAGE_HALVES + BLOCK_M * BLOCK_K; };  // BLOCK_K x BLOCK_N

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

    // Global -> shared stage `buf`, by cp.async: no registers on the way, nothing to wait for here.
    // One branch per tile: wholly inside and aligned (the common case), or per chunk at the edges.
    const bool aligned = a_vec && b_vec;
    auto copy_tiles = [&](int buf, int k0) {
        __half* a_tile = sA(buf);
        __half* b_tile = sB(buf);
        const bool a_inside = a_vec && block_row + BLOCK_M <= M && k0 + BLOCK_K <= K;
        const bool b_inside = b_vec && k0 + BLOCK_K <= K && block_col + BLOCK_N <= N;
#pragma unroll
        for (int i = 0; i < A_COPIES; ++i) {
            if (A_CHUNKS % NUM_THREADS == 0 || i * NUM_THREADS + tid < A_CHUNKS) {
                __half* dst = &a_tile[a_dst_of(i)];
                const int row = block_row + a_row + i * A_ROW_STEP, col = k0 + a_col;
                if (a_inside) {
                    cp_async_16(dst, a_src + i * A_ROW_STEP * K + k0, 16);
                } else if (aligned) {  // zero-fill what lies past M or K
                    const int bytes = row < M ? min(max(K - col, 0), 8) * 2 : 0;
                    cp_async_16(dst, bytes > 0 ? A + row * K + col : A, bytes);
                } else {
                    *reinterpret_cast<uint4*>(dst) = load_chunk_guarded(A, row, col, M, K, a_vec);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < B_COPIES; ++i) {
            if (B_CHUNKS % NUM_THREADS == 0 || i * NUM_THREADS + tid < B_CHUNKS) {
                __half* dst = &b_tile[b_dst_of(i)];
                const int row = k0 + b_row + i * B_ROW_STEP, col = block_col + b_col;
                if (b_inside) {
                    cp_async_16(dst, b_src + (i * B_ROW_STEP + k0) * N, 16);
                } else if (aligned) {
                    const int bytes = row < K ? min(max(N - col, 0), 8) * 2 : 0;
                    cp_async_16(dst, bytes > 0 ? B + row * N + col : B, bytes);
                } else {
                    *reinterpret_cast<uint4*>(dst) = load_chunk_guarded(B, row, col, K, N, b_vec);
                }
            }
        }
    };

    const int num_tiles = cdiv(K, BLOCK_K);
    // Prologue: tiles 0 .. NUM_STAGES - 2 in flight, one commit group each (empty past the end,
    // so that "group t is done" always means "tile t is done").
#pragma unroll
    for (int s = 0; s < NUM_STAGES - 1; ++s) {
        if (s < num_tiles) copy_tiles(s, s * BLOCK_K);
        cp_async_commit();
    }

    // ldmatrix.x4 base offsets: lane l points at row l % 16, column 8 * (l / 16) of the warp's
    // first 16x16 piece of sA, and of sB (k rows 0-15, the warp's first 16 columns). Then
    //   A piece (m, kk): (a_frag ^ kk) + m * 16 * BLOCK_K   (kk flips chunk bits; +16 rows keeps the XOR)
    //   B piece (kk, n): (b_frag ^ n * 8) + kk * BLOCK_N    (n * 8 < WARP_N flips bits warp_col leaves clear)
    static_assert((WARP_N & (WARP_N - 1)) == 0, "WARP_N must be a power of two for XOR-advanced addresses");
    const int lane_row = lane_id % 16;
    const int lane_col = (lane_id / 16) * 8;
    const int a_frag = swizzle<BLOCK_K>(warp_row + lane_row, lane_col);
    const int b_frag = swizzle<BLOCK_N>(lane_row, warp_col + lane_col);
    int stage = 0;                    // stage of tile t
    int next_stage = NUM_STAGES - 1;  // stage of tile t + NUM_STAGES - 1
    for (int t = 0; t < num_tiles; ++t) {
        // Tile t is in once at most NUM_STAGES - 2 younger groups are pending. The barrier makes
        // everyone's copies visible and says every thread is done with tile t - 1, whose stage
        // (next_stage) is refilled right below, while tile t is computed.
        cp_async_wait_group<NUM_STAGES - 2>();
        __syncthreads();
        if (t + NUM_STAGES - 1 < num_tiles) copy_tiles(next_stage, (t + NUM_STAGES - 1) * BLOCK_K);
        cp_async_commit();
        const __half* a_tile = sA(stage);
        const __half* b_tile = sB(stage);

#pragma unroll
        for (int kk = 0; kk < BLOCK_K; kk += 2 * MMA_K) {
            u32 rA[MMA_TILES_M][4];  // [mma tile][register]: the m16n8k16 A fragment
#pragma unroll
            for (int m = 0; m < MMA_TILES_M; ++m)
                ldmatrix_x4(rA[m][0], rA[m][1], rA[m][2], rA[m][3],
                            &a_tile[(a_frag ^ kk) + m * MMA_M * BLOCK_K]);
            u32 rB[MMA_TILES_N][2];  // [mma tile][register]: the m16n8k16 B fragment
#pragma unroll
            for (int n = 0; n < MMA_TILES_N; n += 2)
                ldmatrix_x4_trans(rB[n][0], rB[n][1], rB[n + 1][0], rB[n + 1][1],
                                  &b_tile[(b_frag ^ (n * MMA_N)) + kk * BLOCK_N]);
#pragma unroll
            for (int m = 0; m < MMA_TILES_M; ++m)
#pragma unroll
                for (int n = 0; n < MMA_TILES_N; ++n)
                    mma_m16n8k16_f32(rC[m][n], rA[m], rB[n], rC[m][n]);
        }

        stage = stage + 1 == NUM_STAGES ? 0 : stage + 1;
        next_stage = next_stage + 1 == NUM_STAGES ? 0 : next_stage + 1;
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
