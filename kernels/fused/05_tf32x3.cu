// fused track, step 05_tf32x3 (every step of the track, one line each: python -m gemmlab steps --track fused).
//
// Extends 04 by moving the multiply-adds from the FMA pipe to the tensor cores. 04 is bounded by
// FFMA: its phases reach a fraction of the fp32 peak, and at N = 512 the chain of two GEMMs is too
// short for more. mma.sync with TF32 inputs has several times the FFMA rate, but TF32 keeps only
// 10 of fp32's 23 mantissa bits: one TF32 product is off by about 2^-11 relative, not 2^-24.
// The 3xTF32 trick restores fp32 accuracy: split each operand x into a TF32 "big" part and what
// is left,
//     x = big + small,  big = tf32(x),  small = x - big   (|small| <= 2^-11 |x|)
// and compute a * b = big_a big_b + big_a small_b + small_a big_b (+ small_a small_b, about 2^-22
// relative: dropped). Three mmas per product instead of one, each exact in its products and
// accumulated in fp32, the small terms first so that they are not lost against the big one, and
// each K tile's sum added to the total with a rounded fp32 add (see compute: the tensor cores
// may truncate).
// The error is then of the order of fp32's, and the check (float64 reference, fp32 bound) is the
// same as for 01-04, Inf and NaN included. The split makes an Inf's small part NaN (Inf - Inf), so a
// tile's sums end NaN wherever their dot product meets an Inf or NaN; the epilogue recomputes those
// outputs, and only those, as plain fp32 dot products from global memory (common.cuh's repair_nans:
// phase 1 from A and B, phase 2 from T, whole after the grid barrier, and C), which gives Inf, -Inf
// or NaN where FFMA and float64 do. The split stays three instructions (clamping big in it instead cost
// this step 25% at N = 512: lab/inf-clamp); the epilogue adds one compare per output and a branch.
//
// The tile GEMM (gemm_tile) is hgemm/07's structure in fp32: a warp owns a WARP_M x WARP_N tile,
// (WARP_M / 16) x (WARP_N / 8) mma tiles of 16 x 8 with 4 accumulators per lane each; operand
// tiles come in by cp.async, NUM_STAGES K tiles in flight; one barrier per K tile, over the thread
// group only (bar.sync 1 + group): a group's stages are its own, so the SPLIT_K groups need not wait
// for one another until their sums are added up. The A fragment comes by one ldmatrix.x4: ldmatrix
// moves 8 x 8 matrices of 16-bit elements, which are 8 x 4 matrices of fp32, and the TF32 A fragment
// is four of them (rows 0-7 / 8-15, columns 0-3 / 4-7 of the 16 x 8 tile), each lane receiving (g, t)
// of each, the mma's layout. The B fragment (k = t, t + 4 at column g) is a transposed read, which
// ldmatrix cannot do for 32-bit elements: 32-bit loads. The padding of sX's rows (BLOCK_K + 4 floats)
// and sY's rows (BLOCK_N + 8) puts the lanes' reads of one fragment register in different banks. 04's SPLIT_K groups stay: at N = 512 the tiles are
// few, and more warps per tile is what hides the mma and shared-memory latencies.
//
// Layouts: row-major. A is M x K, B is K x L, C is L x N, T is M x L (scratch), E is M x N.
//   dynamic shared memory, per group g: NUM_STAGES stages of
//     sX[BLOCK_M][BLOCK_K + 4]: the left operand's tile (A, then T), row-major (M x K)
//     sY[BLOCK_K][BLOCK_N + 8]: the right operand's tile (B, then C), row-major (K x N)
//   then, once a tile's loop is done, the same bytes as the partial sums of groups 1 .. SPLIT_K - 1.
//   sync[0]: the grid barrier's one word (common.cuh: it resets itself); sync[1]: unused.
// Launch: blockDim (SPLIT_K * (BLOCK_M / WARP_M) * (BLOCK_N / WARP_N) * 32), gridDim (at most the
//         resident blocks, at most the number of tiles), dynamic shared memory
//         max(SPLIT_K * NUM_STAGES * stage bytes, (SPLIT_K - 1) * BLOCK_M * BLOCK_N * 4), sync
//         zeroed once before the first launch.
#include "common.cuh"

// x = big + small (see the header) in three instructions. x - big is exact in fp32 and has at
// most 12 significant bits; the mma reads the top 19 bits of small's register, dropping at most
// one of them (2^-23 of x), so small is not rounded here. A NaN always reaches small (NaN - big
// is NaN), even where tf32_round wraps its bits, and so does an Inf (Inf - Inf): the epilogue's
// repair_nans turns those NaN sums into what fp32 gives.
__device__ __forceinline__ void split_tf32(float x, u32& big, u32& small) {
    big = tf32_round(x);
    small = __float_as_uint(x - __uint_as_float(big));
}

template <int BLOCK_M, int BLOCK_N, int BLOCK_K>
struct Stage {  // one K tile of both operands in shared memory, rows padded (see the header)
    float x[BLOCK_M][BLOCK_K + 4];
    float y[BLOCK_K][BLOCK_N + 8];
};

// Out[block_row.., block_col..] = X (rows x inner) * Y (inner x cols), one BLOCK_M x BLOCK_N tile.
// Group g of the block (threads g * NUM_THREADS ..) sums K tiles g, g + SPLIT_K, ...; `stages`
// are this group's NUM_STAGES buffers, `partial` the block's reduction area (aliasing them all).
template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARP_M, int WARP_N, int SPLIT_K, int NUM_STAGES>
__device__ void gemm_tile(int rows, int cols, int inner, const float* X, const float* Y, float* Out,
                          int block_row, int block_col, Stage<BLOCK_M, BLOCK_N, BLOCK_K>* stages,
                          float* partial) {
    constexpr int WARPS_N = BLOCK_N / WARP_N;
    constexpr int NUM_THREADS = (BLOCK_M / WARP_M) * WARPS_N * 32;  // per group
    constexpr int MMA_M = WARP_M / 16, MMA_N = WARP_N / 8;          // mma tiles per warp
    constexpr int X_VECS = BLOCK_M * BLOCK_K / 4, Y_VECS = BLOCK_K * BLOCK_N / 4;  // 16-byte pieces
    const int tid = threadIdx.x % NUM_THREADS;
    const int group = threadIdx.x / NUM_THREADS;
    const int warp_id = tid / 32, lane_id = tid % 32;
    const int g = lane_id / 4, t = lane_id % 4;  // the fragment layout's groupID, threadID_in_group
    const int warp_row = warp_id / WARPS_N * WARP_M, warp_col = warp_id % WARPS_N * WARP_N;
    // cp.async needs 16-byte aligned rows: every row start is when the pointer is and the row
    // length is a multiple of 4 floats; otherwise (odd shapes, offset views) plain guarded copies.
    const bool x_vec = inner % 4 == 0 && reinterpret_cast<size_t>(X) % 16 == 0;
    const bool y_vec = cols % 4 == 0 && reinterpret_cast<size_t>(Y) % 16 == 0;

    float acc[MMA_M][MMA_N][4] = {};

    auto load = [&](int stage, int k0) {  // global -> shared, this group's share; zeros outside
        Stage<BLOCK_M, BLOCK_N, BLOCK_K>& s = stages[stage];
        for (int e = tid; e < X_VECS; e += NUM_THREADS) {
            const int r = e / (BLOCK_K / 4), c = e % (BLOCK_K / 4) * 4;
            const int row = block_row + r, col = k0 + c;
            if (x_vec) {  // a piece is wholly inside or wholly outside (inner % 4 == 0)
                const bool in = row < rows && col < inner;
                cp_async_16(&s.x[r][c], in ? X + row * inner + col : X, in ? 16 : 0);
            } else {
                for (int j = 0; j < 4; ++j)
                    s.x[r][c + j] = row < rows && col + j < inner ? X[row * inner + col + j] : 0.0f;
            }
        }
        for (int e = tid; e < Y_VECS; e += NUM_THREADS) {
            const int r = e / (BLOCK_N / 4), c = e % (BLOCK_N / 4) * 4;
            const int row = k0 + r, col = block_col + c;
            if (y_vec) {
                const bool in = row < inner && col < cols;
                cp_async_16(&s.y[r][c], in ? Y + row * cols + col : Y, in ? 16 : 0);
            } else {
                for (int j = 0; j < 4; ++j)
                    s.y[r][c + j] = row < inner && col + j < cols ? Y[row * cols + col + j] : 0.0f;
            }
        }
    };

    // The tensor cores may add with truncation (rounding toward zero; how they round is not
    // documented). If they do, an accumulator fed mma after mma drifts toward zero by up to an ulp
    // per mma: over K = 4096 (1536 mmas), 50x fp32's error. So each K tile is summed into a fresh `chunk` (12 mmas for BLOCK_K = 32)
    // and added to acc with an ordinary, rounded fp32 add.
    auto compute = [&](const Stage<BLOCK_M, BLOCK_N, BLOCK_K>& s) {
        float chunk[MMA_M][MMA_N][4] = {};
#pragma unroll
        for (int kk = 0; kk < BLOCK_K; kk += 8) {
            u32 a_big[MMA_M][4], a_small[MMA_M][4], b_big[MMA_N][2], b_small[MMA_N][2];
#pragma unroll
            for (int i = 0; i < MMA_M; ++i) {  // the A fragment in one ldmatrix.x4 (see the header)
                u32 raw[4];
                ldmatrix_x4(raw[0], raw[1], raw[2], raw[3], &s.x[warp_row + i * 16 + lane_id % 16][kk + lane_id / 16 * 4]);
#pragma unroll
                for (int q = 0; q < 4; ++q) split_tf32(__uint_as_float(raw[q]), a_big[i][q], a_small[i][q]);
            }
#pragma unroll
            for (int j = 0; j < MMA_N; ++j) {
                const int c = warp_col + j * 8 + g;
                split_tf32(s.y[kk + t][c], b_big[j][0], b_small[j][0]);
                split_tf32(s.y[kk + t + 4][c], b_big[j][1], b_small[j][1]);
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

    // The pipeline: K tiles r, r + 1, ..., r + NUM_STAGES - 2 are in flight while tile r is
    // computed. One commit per round, empty or not, so that wait_group counts rounds.
    const int rounds = cdiv(cdiv(inner, BLOCK_K), SPLIT_K);  // the same for every group
    auto k_of = [&](int r) { return (r * SPLIT_K + group) * BLOCK_K; };  // this group's r-th K tile
    for (int r = 0; r < NUM_STAGES - 1; ++r) {
        if (r < rounds) load(r, k_of(r));
        cp_async_commit();
    }
    for (int r = 0; r < rounds; ++r) {
        cp_async_wait_group<NUM_STAGES - 2>();  // this thread's copies of round r have landed
        bar_sync(1 + group, NUM_THREADS);  // the group's have; and it has finished computing round r - 1
        if (r + NUM_STAGES - 1 < rounds)  // refill the stage that round r - 1 used
            load((r + NUM_STAGES - 1) % NUM_STAGES, k_of(r + NUM_STAGES - 1));
        cp_async_commit();
        compute(stages[r % NUM_STAGES]);
    }
    cp_async_wait_all();
    __syncthreads();  // every group is done with its stages: they become `partial`, or the next tile's

    // Groups 1 .. SPLIT_K - 1 hand their accumulators to group 0 through shared memory, register
    // q of thread tid at partial[group - 1][q][tid] (consecutive lanes, consecutive banks).
    constexpr int ACC = MMA_M * MMA_N * 4;
    if (SPLIT_K > 1) {
        if (group > 0) {
#pragma unroll
            for (int q = 0; q < ACC; ++q)
                partial[((group - 1) * ACC + q) * NUM_THREADS + tid] = (&acc[0][0][0])[q];
        }
        __syncthreads();
        if (group == 0) {
            for (int h = 0; h < SPLIT_K - 1; ++h)
#pragma unroll
                for (int q = 0; q < ACC; ++q) (&acc[0][0][0])[q] += partial[(h * ACC + q) * NUM_THREADS + tid];
        }
    }

    // Accumulator q of mma tile (i, j): row g (q < 2) or g + 8, column 2t + q % 2 of the tile.
    const bool pair = cols % 2 == 0 && reinterpret_cast<size_t>(Out) % 8 == 0;  // 8-byte stores
#pragma unroll
    for (int i = 0; i < MMA_M && group == 0; ++i)
#pragma unroll
        for (int j = 0; j < MMA_N; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = block_row + warp_row + i * 16 + g + 8 * h;
                const int col = block_col + warp_col + j * 8 + 2 * t;
                if (row >= rows) continue;
                if (pair && col + 1 < cols) {
                    *reinterpret_cast<float2*>(Out + row * cols + col) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
                } else {
                    if (col < cols) Out[row * cols + col] = acc[i][j][2 * h];
                    if (col + 1 < cols) Out[row * cols + col + 1] = acc[i][j][2 * h + 1];
                }
            }
    // An Inf input made its outputs NaN (Inf - Inf in the split): recompute those in fp32 (common.cuh).
    if (group == 0 && any_nan<ACC>(&acc[0][0][0]))
        repair_nans(Out, X, Y, rows, cols, inner, block_row + warp_row, block_col + warp_col, ACC, MMA_N);
    if (SPLIT_K > 1) __syncthreads();  // group 0 has read `partial` before the next tile refills it
}

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARP_M, int WARP_N, int SPLIT_K, int NUM_STAGES>
__global__ void fused_tf32x3(int M, int K, int L, int N, const float* A, const float* B,
                             const float* C, float* E, float* T, u32* sync) {
    static_assert(BLOCK_M % WARP_M == 0 && BLOCK_N % WARP_N == 0, "whole warp tiles per block");
    static_assert(WARP_M % 16 == 0 && WARP_N % 8 == 0 && BLOCK_K % 8 == 0,
                  "WARP_M a multiple of 16, WARP_N and BLOCK_K of 8 (the 16 x 8 x 8 mma)");
    static_assert(SPLIT_K >= 1 && SPLIT_K <= 15 && NUM_STAGES >= 2, "1 <= SPLIT_K <= 15 (a named barrier each), NUM_STAGES >= 2");
    static_assert(SPLIT_K * (BLOCK_M / WARP_M) * (BLOCK_N / WARP_N) * 32 <= 1024, "more than 1024 threads");
    using StageT = Stage<BLOCK_M, BLOCK_N, BLOCK_K>;
    extern __shared__ __align__(16) unsigned char smem[];
    const int group = threadIdx.x / ((BLOCK_M / WARP_M) * (BLOCK_N / WARP_N) * 32);
    StageT* stages = reinterpret_cast<StageT*>(smem) + group * NUM_STAGES;
    float* partial = reinterpret_cast<float*>(smem);

    // Phase 1: T = A * B (M x L), tile by tile.
    const int t_cols = cdiv(L, BLOCK_N), t_tiles = cdiv(M, BLOCK_M) * t_cols;
    for (int tile = blockIdx.x; tile < t_tiles; tile += gridDim.x)
        gemm_tile<BLOCK_M, BLOCK_N, BLOCK_K, WARP_M, WARP_N, SPLIT_K, NUM_STAGES>(
            M, L, K, A, B, T, tile / t_cols * BLOCK_M, tile % t_cols * BLOCK_N, stages, partial);

    grid_barrier(sync);  // all of T is written before any block reads it

    // Phase 2: E = T * C (M x N), tile by tile.
    const int e_cols = cdiv(N, BLOCK_N), e_tiles = cdiv(M, BLOCK_M) * e_cols;
    for (int tile = blockIdx.x; tile < e_tiles; tile += gridDim.x)
        gemm_tile<BLOCK_M, BLOCK_N, BLOCK_K, WARP_M, WARP_N, SPLIT_K, NUM_STAGES>(
            M, N, L, T, C, E, tile / e_cols * BLOCK_M, tile % e_cols * BLOCK_N, stages, partial);
}
