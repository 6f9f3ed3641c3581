// sgemm track, step 12_tf32x3 (every step of the track, one line each: python -m gemmlab steps --track sgemm).
//
// Past the FFMA ladder. Step 11 keeps the FMA pipe busy most of the time and still stops short of
// cuBLAS; the FMA pipe itself is the ceiling. An H100's tensor cores run TF32 mma.sync at several
// times the FFMA rate, but TF32 keeps 10 of fp32's 23 mantissa bits, so one TF32 product is off by
// about 2^-11 relative. The 3xTF32 split restores fp32 accuracy (chapter 8 analyses it in detail,
// for its fused step 05):
//     x = big + small,  big = tf32(x),  small = x - big   (|small| <= 2^-11 |x|)
//     a * b = big_a big_b + big_a small_b + small_a big_b   (+ small_a small_b ~ 2^-22: dropped)
// Three mmas per product instead of one, small terms first; each K tile's products are summed in
// a fresh `chunk` and added to the total with a rounded fp32 add, because the tensor cores' adds
// are not documented to round to nearest. The result passes the same float64 check (fp32 bound)
// as steps 01-11, Inf and NaN included. The split makes an Inf's small part NaN (Inf - Inf), so every output whose dot product
// meets an Inf or NaN ends NaN; the epilogue recomputes those (and only those) as a plain fp32 dot
// product over K from global memory (common.cuh's repair_nans), which gives Inf, -Inf or NaN as FFMA
// does. The split stays three instructions: one compare per output after the K loop (a clamp in
// the split cost 10%: lab/inf-clamp).
//
// The structure is hgemm/07's in fp32 (and chapter 8's step 05 without its split K): a warp owns a
// WARP_M x WARP_N tile of (WARP_M / 16) x (WARP_N / 8) mma tiles (m16n8k8, 4 accumulators per lane
// each); NUM_STAGES K tiles are in flight through cp.async; one barrier per K tile. Fragments are
// read with 32-bit shared loads (ldmatrix moves 16-bit elements); padded rows (BLOCK_K + 4 floats
// for A, BLOCK_N + 8 for B) put a fragment register's 32 lanes in 32 different banks.
//
// Layouts: row-major. A is M x K (A[m*K + k]), B is K x N (B[k*N + n]), C is M x N (C[m*N + n]).
//   dynamic shared memory: NUM_STAGES stages of sA[BLOCK_M][BLOCK_K + 4], sB[BLOCK_K][BLOCK_N + 8].
// Launch: blockDim ((BLOCK_M / WARP_M) * (BLOCK_N / WARP_N) * 32), gridDim (cdiv(N, BLOCK_N),
//         cdiv(M, BLOCK_M)), dynamic shared memory NUM_STAGES * sizeof(Stage).
#include "common.cuh"

// x = big + small in three instructions; x - big is exact in fp32 (see chapter 8's step 05).
__device__ __forceinline__ void split_tf32(float x, u32& big, u32& small) {
    big = tf32_round(x);
    small = __float_as_uint(x - __uint_as_float(big));
}

template <int BLOCK_M, int BLOCK_N, int BLOCK_K>
struct Stage {  // one K tile of A and of B in shared memory, rows padded (see the header)
    float a[BLOCK_M][BLOCK_K + 4];
    float b[BLOCK_K][BLOCK_N + 8];
};

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARP_M, int WARP_N, int NUM_STAGES>
__global__ void sgemm_tf32x3(int M, int N, int K, const float* A, const float* B, float* C) {
    static_assert(BLOCK_M % WARP_M == 0 && BLOCK_N % WARP_N == 0, "whole warp tiles per block");
    static_assert(WARP_M % 16 == 0 && WARP_N % 8 == 0 && BLOCK_K % 8 == 0,
                  "WARP_M a multiple of 16, WARP_N and BLOCK_K of 8 (the 16 x 8 x 8 mma)");
    static_assert(NUM_STAGES >= 2, "NUM_STAGES must be at least 2");
    constexpr int WARPS_N = BLOCK_N / WARP_N;
    constexpr int NUM_THREADS = (BLOCK_M / WARP_M) * WARPS_N * 32;
    constexpr int MMA_M = WARP_M / 16, MMA_N = WARP_N / 8;  // mma tiles per warp
    constexpr int A_VECS = BLOCK_M * BLOCK_K / 4, B_VECS = BLOCK_K * BLOCK_N / 4;  // 16-byte pieces
    static_assert(NUM_THREADS <= 1024, "more than 1024 threads per block");
    using StageT = Stage<BLOCK_M, BLOCK_N, BLOCK_K>;
    extern __shared__ __align__(16) unsigned char smem[];
    StageT* stages = reinterpret_cast<StageT*>(smem);

    const int tid = threadIdx.x;
    const int warp_id = tid / 32, lane_id = tid % 32;
    const int g = lane_id / 4, t = lane_id % 4;  // the fragment layout's groupID, threadID_in_group
    const int warp_row = warp_id / WARPS_N * WARP_M, warp_col = warp_id % WARPS_N * WARP_N;
    const int block_row = blockIdx.y * BLOCK_M, block_col = blockIdx.x * BLOCK_N;
    // cp.async needs 16-byte aligned rows: every row starts aligned when the row length is a
    // multiple of 4 floats (the runtime passes aligned arrays); otherwise guarded scalar copies.
    const bool a_vec = K % 4 == 0, b_vec = N % 4 == 0;

    auto load = [&](int stage, int k0) {  // global -> shared, zeros outside the matrices
        StageT& s = stages[stage];
        for (int e = tid; e < A_VECS; e += NUM_THREADS) {
            const int r = e / (BLOCK_K / 4), c = e % (BLOCK_K / 4) * 4;
            const int row = block_row + r, col = k0 + c;
            if (a_vec) {  // a piece is wholly inside or wholly outside (K % 4 == 0)
                const bool in = row < M && col < K;
                cp_async_16(&s.a[r][c], in ? A + row * K + col : A, in ? 16 : 0);
            } else {
                for (int j = 0; j < 4; ++j) s.a[r][c + j] = row < M && col + j < K ? A[row * K + col + j] : 0.0f;
            }
        }
        for (int e = tid; e < B_VECS; e += NUM_THREADS) {
            const int r = e / (BLOCK_N / 4), c = e % (BLOCK_N / 4) * 4;
            const int row = k0 + r, col = block_col + c;
            if (b_vec) {
                const bool in = row < K && col < N;
                cp_async_16(&s.b[r][c], in ? B + row * N + col : B, in ? 16 : 0);
            } else {
                for (int j = 0; j < 4; ++j) s.b[r][c + j] = row < K && col + j < N ? B[row * N + col + j] : 0.0f;
            }
        }
    };

    float acc[MMA_M][MMA_N][4] = {};
    // One K tile into a fresh chunk (the tensor cores' rounding: see the header), then acc += chunk.
    auto compute = [&](const StageT& s) {
        float chunk[MMA_M][MMA_N][4] = {};
#pragma unroll
        for (int kk = 0; kk < BLOCK_K; kk += 8) {
            u32 a_big[MMA_M][4], a_small[MMA_M][4], b_big[MMA_N][2], b_small[MMA_N][2];
#pragma unroll
            for (int i = 0; i < MMA_M; ++i) {  // a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
                const int r = warp_row + i * 16 + g;
                split_tf32(s.a[r][kk + t], a_big[i][0], a_small[i][0]);
                split_tf32(s.a[r + 8][kk + t], a_big[i][1], a_small[i][1]);
                split_tf32(s.a[r][kk + t + 4], a_big[i][2], a_small[i][2]);
                split_tf32(s.a[r + 8][kk + t + 4], a_big[i][3], a_small[i][3]);
            }
#pragma unroll
            for (int j = 0; j < MMA_N; ++j) {  // b0 (k t, col g), b1 (k t + 4, col g)
                const int c = warp_col + j * 8 + g;
                split_tf32(s.b[kk + t][c], b_big[j][0], b_small[j][0]);
                split_tf32(s.b[kk + t + 4][c], b_big[j][1], b_small[j][1]);
            }
#pragma unroll
            for (int i = 0; i < MMA_M; ++i)
#pragma unroll
                for (int j = 0; j < MMA_N; ++j) {  // the small terms first, then the big one
                    mma_m16n8k8_tf32(chunk[i][j], a_small[i], b_big[j], chunk[i][j]);
                    mma_m16n8k8_tf32(chunk[i][j], a_big[i], b_small[j], chunk[i][j]);
                    mma_m16n8k8_tf32(chunk[i][j], a_big[i], b_big[j], chunk[i][j]);
                }
        }
#pragma unroll
        for (int i = 0; i < MMA_M; ++i)
#pragma unroll
            for (int j = 0; j < MMA_N; ++j)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[i][j][q] += chunk[i][j][q];
    };

    // The pipeline (step 10's): tiles kt + 1 .. kt + NUM_STAGES - 1 in flight while tile kt is
    // computed; one commit per tile, empty past the end, so that wait_group counts tiles.
    const int num_tiles = cdiv(K, BLOCK_K);
    for (int s = 0; s < NUM_STAGES - 1; ++s) {
        if (s < num_tiles) load(s, s * BLOCK_K);
        cp_async_commit();
    }
    for (int kt = 0; kt < num_tiles; ++kt) {
        cp_async_wait_group<NUM_STAGES - 2>();  // this thread's copies of tile kt have landed
        __syncthreads();  // everyone's have; and everyone has finished computing tile kt - 1
        if (kt + NUM_STAGES - 1 < num_tiles)  // refill the stage that tile kt - 1 used
            load((kt + NUM_STAGES - 1) % NUM_STAGES, (kt + NUM_STAGES - 1) * BLOCK_K);
        cp_async_commit();
        compute(stages[kt % NUM_STAGES]);
    }

    // Accumulator q of mma tile (i, j): row g (q < 2) or g + 8, column 2t + q % 2 of the tile.
    const bool pair = N % 2 == 0;  // 8-byte stores: every row of C starts 8-byte aligned
#pragma unroll
    for (int i = 0; i < MMA_M; ++i)
#pragma unroll
        for (int j = 0; j < MMA_N; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = block_row + warp_row + i * 16 + g + 8 * h;
                const int col = block_col + warp_col + j * 8 + 2 * t;
                if (row >= M) continue;
                if (pair && col + 1 < N) {
                    *reinterpret_cast<float2*>(C + row * N + col) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
                } else {
                    if (col < N) C[row * N + col] = acc[i][j][2 * h];
                    if (col + 1 < N) C[row * N + col + 1] = acc[i][j][2 * h + 1];
                }
            }
    // An Inf input made its outputs NaN (Inf - Inf in the split): recompute those in fp32 (common.cuh).
    if (any_nan<MMA_M * MMA_N * 4>(&acc[0][0][0]))
        repair_nans(C, A, B, M, N, K, block_row + warp_row, block_col + warp_col, MMA_M * MMA_N * 4, MMA_N);
}
