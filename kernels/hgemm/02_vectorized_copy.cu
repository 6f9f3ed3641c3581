// hgemm track, step 02_vectorized_copy (every step of the track, one line each: python -m gemmlab steps --track hgemm).
//
// Extends 01 by 16-byte global -> shared copies. A 16-byte chunk is 8 consecutive halves of a
// row; each thread copies whole chunks with one 128-bit global load (LDG.128) and one 128-bit
// shared store (STS.128) instead of 8 LDG.16 + 8 STS.16. The chunks of a tile are dealt out
// round-robin (chunk e to thread e % NUM_THREADS), so a warp's 32 chunks are whole tile rows,
// each contiguous in global memory; the trip counts are compile-time constants (chunks per
// thread) and the loops unroll fully.
//
// A 16-byte access must be 16-byte aligned: A + row*K + col is when K % 8 == 0 (the base
// pointers are and col is a multiple of 8), B + row*N + col when N % 8 == 0. One block-uniform
// branch per tile: a tile wholly inside its matrix with aligned rows takes the plain 16-byte
// path; any other tile (an edge tile, or K or N not a multiple of 8) takes the guarded path,
// which still moves a chunk in 16 bytes when it is all inside and aligned, else element by
// element with zeros outside the matrix. The shared tiles and the math are those of 01.
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
//   sA[BLOCK_M][BLOCK_K]: sA[m][k], k contiguous (row-major); ldmatrix reads its rows as they are.
//   sB[BLOCK_K][BLOCK_N]: sB[k][n], n contiguous (row-major); mma wants B with k contiguous ("col"), so
//   ldmatrix.trans transposes each 8x8 matrix on the way into registers.
//   Elements past M, N or K are stored as zero, so edge tiles need no special case.
// Launch: blockDim (BLOCK_M/WARP_M * BLOCK_N/WARP_N * 32), gridDim (cdiv(N, BLOCK_N),
//   cdiv(M, BLOCK_M)); static shared memory (BLOCK_M + BLOCK_N) * BLOCK_K * 2 bytes.
#include "common.cuh"

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
__global__ void hgemm_vectorized_copy(int M, int N, int K, const __half* A, const __half* B,
                                      __half* C) {
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

    // 16-byte alignment: every ldmatrix row address must be 16-byte aligned. Row strides are
    // BLOCK_K * 2 and BLOCK_N * 2 bytes, multiples of 16 by the asserts above.
    __shared__ __align__(16) __half sA[BLOCK_M][BLOCK_K];  // BLOCK_M x BLOCK_K, sA[m][k], k contiguous
    __shared__ __align__(16) __half sB[BLOCK_K][BLOCK_N];  // BLOCK_K x BLOCK_N, sB[k][n], n contiguous

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
                    *reinterpret_cast<uint4*>(&sA[r][c]) =
                        *reinterpret_cast<const uint4*>(A + (block_row + r) * K + k0 + c);
                else
                    copy_chunk_guarded(&sA[r][c], A, block_row + r, k0 + c, M, K, a_vec);
            }
        }
#pragma unroll
        for (int i = 0; i < B_COPIES; ++i) {
            const int e = i * NUM_THREADS + tid;
            const int r = e / (BLOCK_N / 8), c = e % (BLOCK_N / 8) * 8;
            if (B_CHUNKS % NUM_THREADS == 0 || e < B_CHUNKS) {
                if (b_inside)
                    *reinterpret_cast<uint4*>(&sB[r][c]) =
                        *reinterpret_cast<const uint4*>(B + (k0 + r) * N + block_col + c);
                else
                    copy_chunk_guarded(&sB[r][c], B, k0 + r, block_col + c, K, N, b_vec);
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
                            &sA[warp_row + m * MMA_M + lane_row][kk + lane_col]);
            }
            u32 rB[MMA_TILES_N][2][1];  // [mma tile][k half][register]
#pragma unroll
            for (int n = 0; n < MMA_TILES_N; n += 2) {
                ldmatrix_x4_trans(rB[n][0][0], rB[n][1][0], rB[n + 1][0][0], rB[n + 1][1][0],
                                  &sB[kk + lane_row][warp_col + n * MMA_N + lane_col]);
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
