// EXERCISE ch7/swizzle (hgemm/03_swizzled): fill in the gap between the EXERCISE and END markers below.
// Check it: python -m gemmlab exercise check ch7/swizzle   (or gemmlab.exercises.check in a notebook)
//
// hgemm track, step 03_swizzled (every step of the track, one line each: python -m gemmlab steps --track hgemm).
//
// A variation of 03 (chapter 7's exercise): BLOCK_K = 48, so a row of sA is 96 bytes (6 chunks of
// 16 bytes), a width that is not a power of two; sB keeps BLOCK_N = 128 (256-byte rows).
// 03 extends 02 by XOR-swizzled shared tiles. In 02 the 8 rows of one 8x8 matrix that an ldmatrix
// reads are BLOCK_K * 2 (sA) or BLOCK_N * 2 (sB) bytes apart: with 64-byte rows, rows r and r+2
// fall on the same 4 banks (4 wavefronts per matrix instead of 1); with rows of 128 bytes or
// more all 8 do (8 wavefronts). Stores and ldmatrix row addresses go through the one helper
// `swizzle<WIDTH>(row, col)`; the memory and the copy are those of 02, only where each 16-byte
// chunk sits in shared memory changes.
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
//   sA[m][k], k contiguous (row-major), BLOCK_M x BLOCK_K: element (r, c) at swizzle<BLOCK_K>(r, c);
//   ldmatrix reads its rows as they are.
//   sB[k][n], n contiguous (row-major), BLOCK_K x BLOCK_N: element (r, c) at swizzle<BLOCK_N>(r, c);
//   mma wants B with k contiguous ("col"), so ldmatrix.trans transposes each 8x8 matrix into registers.
//   Elements past M, N or K are stored as zero, so edge tiles need no special case.
// Launch: blockDim (BLOCK_M/WARP_M * BLOCK_N/WARP_N * 32), gridDim (cdiv(N, BLOCK_N),
//   cdiv(M, BLOCK_M)); static shared memory (BLOCK_M + BLOCK_N) * BLOCK_K * 2 bytes.
#include "common.cuh"

// Element offset of (row, col) in a row-major shared tile WIDTH halves wide (WIDTH = BLOCK_K = 48
// for sA, BLOCK_N = 128 for sB) whose 16-byte chunks (8 halves) are XOR-swizzled.
template <int WIDTH>
__device__ __forceinline__ int swizzle(int row, int col) {
    static_assert(WIDTH >= 16 && WIDTH % 16 == 0,
                  "swizzled tile width must be a whole, even number of 16-byte chunks");
    // Return where element (row, col) is stored. The rules: (1) a permutation inside each row: every
    // (row, col) of the tile gets its own offset, in the same row; (2) the 8 halves of a 16-byte chunk
    // stay together and in order (the copy stores whole chunks, ldmatrix reads whole chunks); (3) the 8
    // consecutive rows of any 8x8 matrix that an ldmatrix reads (8 rows, one 16-byte chunk column) fall
    // on 8 different 16-byte groups of banks. 32 banks x 4 bytes = 128 bytes: a row of sA (96 bytes,
    // BLOCK_K = 48 here) is three quarters of that, a row of sB (256 bytes) two of it. One function
    // serves both widths. The gap as shipped does not swizzle.
    // ---- EXERCISE: the swizzle for 96-byte rows ----
    return row * WIDTH + col;  // not swizzled: correct, with bank conflicts
    // ---- END ----
}

// Copies the 8 halves src[row][col .. col+7] of a rows x cols row-major matrix to the 16-byte
// aligned dst in shared memory, zeros outside the matrix: one 16-byte load and store when `vec`
// (cols % 8 == 0) and the whole chunk is inside, else element by element.
__device__ __forceinline__ void copy_chunk_guarded(__half* dst, const __half* src, int row, int col,
                                                   int rows, int cols, bool vec) {
    const __half* p = src + row * cols + col;
    if (vec && row < rows && col + 8 <= cols) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(p);
        return;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j)
        dst[j] = (row < rows && col + j < cols) ? p[j] : __float2half(0.0f);
}

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARP_M, int WARP_N>
__global__ void hgemm_swizzled(int M, int N, int K, const __half* A, const __half* B, __half* C) {
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

    // 16-byte alignment: every ldmatrix row address must be 16-byte aligned. Swizzling moves
    // whole 16-byte chunks, so every chunk still starts at a multiple of 16 bytes.
    __shared__ __align__(16) __half sA[BLOCK_M * BLOCK_K];  // BLOCK_M x BLOCK_K, sA[m][k], swizzled
    __shared__ __align__(16) __half sB[BLOCK_K * BLOCK_N];  // BLOCK_K x BLOCK_N, sB[k][n], swizzled

    const int tid = threadIdx.x;
    const int warp_id = tid / 32;
    const int lane_id = tid % 32;
    const int warp_row = (warp_id / WARPS_N) * WARP_M;  // warp tile's first row in the block tile
    const int warp_col = (warp_id % WARPS_N) * WARP_N;  // warp tile's first column
    const int block_row = blockIdx.y * BLOCK_M;
    const int block_col = blockIdx.x * BLOCK_N;
    const bool a_vec = K % 8 == 0;  // every row of A starts 16-byte aligned
    const bool b_vec = N % 8 == 0;  // every row of B starts 16-byte aligned

    // rC: the warp tile, MMA_TILES_M x MMA_TILES_N mma tiles of 4 floats per lane each.
    float rC[MMA_TILES_M][MMA_TILES_N][4];
#pragma unroll
    for (int m = 0; m < MMA_TILES_M; ++m)
#pragma unroll
        for (int n = 0; n < MMA_TILES_N; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) rC[m][n][i] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BLOCK_K) {
        // gmem -> smem, 16 bytes per thread per iteration: chunk e of a tile (row-major, 8
        // halves each) goes to thread e % NUM_THREADS, so consecutive threads copy consecutive
        // chunks of a row. One branch per tile: wholly inside and aligned, or guarded.
        const bool a_inside = a_vec && block_row + BLOCK_M <= M && k0 + BLOCK_K <= K;
        const bool b_inside = b_vec && k0 + BLOCK_K <= K && block_col + BLOCK_N <= N;
#pragma unroll
        for (int i = 0; i < A_COPIES; ++i) {
            const int e = i * NUM_THREADS + tid;
            const int r = e / (BLOCK_K / 8), c = e % (BLOCK_K / 8) * 8;
            if (A_CHUNKS % NUM_THREADS == 0 || e < A_CHUNKS) {
                if (a_inside)
                    *reinterpret_cast<uint4*>(&sA[swizzle<BLOCK_K>(r, c)]) =
                        *reinterpret_cast<const uint4*>(A + (block_row + r) * K + k0 + c);
                else
                    copy_chunk_guarded(&sA[swizzle<BLOCK_K>(r, c)], A, block_row + r, k0 + c, M, K,
                                       a_vec);
            }
        }
#pragma unroll
        for (int i = 0; i < B_COPIES; ++i) {
            const int e = i * NUM_THREADS + tid;
            const int r = e / (BLOCK_N / 8), c = e % (BLOCK_N / 8) * 8;
            if (B_CHUNKS % NUM_THREADS == 0 || e < B_CHUNKS) {
                if (b_inside)
                    *reinterpret_cast<uint4*>(&sB[swizzle<BLOCK_N>(r, c)]) =
                        *reinterpret_cast<const uint4*>(B + (k0 + r) * N + block_col + c);
                else
                    copy_chunk_guarded(&sB[swizzle<BLOCK_N>(r, c)], B, k0 + r, block_col + c, K, N,
                                       b_vec);
            }
        }
        // Every warp reads tiles that other warps wrote.
        __syncthreads();

#pragma unroll
        for (int kk = 0; kk < BLOCK_K; kk += 2 * MMA_K) {
            // One ldmatrix.x4 per 16x16 piece. Lane l points at row (l % 16), column
            // 8 * (l / 16) of the piece, so matrices 0..3 are its (top, k 0-7), (bottom, k 0-7),
            // (top, k 8-15), (bottom, k 8-15) 8x8 quarters.
            //   A piece (m16 x k16): registers {0,1} are the mma A fragment for k 0-7, {2,3} for
            //   k 8-15 (together: the m16n8k16 A fragment).
            //   B piece (k16 x n16), transposed: registers {0,1} are the B fragments of the left
            //   8 columns for k 0-7 and k 8-15, {2,3} those of the right 8 columns.
            const int lane_row = lane_id % 16;
            const int lane_col = (lane_id / 16) * 8;

            u32 rA[MMA_TILES_M][2][2];  // [mma tile][k half][register]
#pragma unroll
            for (int m = 0; m < MMA_TILES_M; ++m) {
                ldmatrix_x4(rA[m][0][0], rA[m][0][1], rA[m][1][0], rA[m][1][1],
                            &sA[swizzle<BLOCK_K>(warp_row + m * MMA_M + lane_row, kk + lane_col)]);
            }
            u32 rB[MMA_TILES_N][2][1];  // [mma tile][k half][register]
#pragma unroll
            for (int n = 0; n < MMA_TILES_N; n += 2) {
                ldmatrix_x4_trans(
                    rB[n][0][0], rB[n][1][0], rB[n + 1][0][0], rB[n + 1][1][0],
                    &sB[swizzle<BLOCK_N>(kk + lane_row, warp_col + n * MMA_N + lane_col)]);
            }

#pragma unroll
            for (int kh = 0; kh < 2; ++kh)
#pragma unroll
                for (int m = 0; m < MMA_TILES_M; ++m)
#pragma unroll
                    for (int n = 0; n < MMA_TILES_N; ++n)
                        mma_m16n8k8_f32(rC[m][n], rA[m][kh], rB[n][kh], rC[m][n]);
        }
        // No warp may overwrite the tiles (next k0) while another still reads them.
        __syncthreads();
    }

    // Epilogue: lane l holds rows l/4 and l/4 + 8, columns 2*(l%4) and 2*(l%4)+1 of each
    // mma tile (the accumulator layout). Each element is rounded to fp16 and stored if inside C.
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
