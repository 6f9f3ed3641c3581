// fused track, step 06_wgmma_tf32x3 (every step of the track, one line each: python -m gemmlab steps --track fused).
//
// Extends 05. At N = 512, 05's K loop keeps its tensor cores under half busy: for every 12
// mma.sync a warp issues some 45 other instructions, the loads and the splits of its fragments,
// and the right operand's fragments are split again by every warp that reads them (BLOCK_M / 16
// warps). Hopper's wgmma takes most of that off the warps: one instruction per warpgroup (4
// warps, 128 threads) multiplies a 64 x BLOCK_N x 8 slice, and the tensor cores read B from
// shared memory themselves. So, per K tile and per group:
//   - B (the right operand: B, then C) is split into big and small once per element, by the
//     whole warpgroup, into two tiles in the layout wgmma reads;
//   - A (the left operand: A, then T) stays as in 05: each warp owns 16 rows, brings its fragment
//     in by ldmatrix and splits it in registers (each element once), and wgmma takes A from
//     registers (its register layout for TF32 is mma.m16n8k8's, warp w holding rows 16w ..);
//   - three wgmmas per 8-wide slice of K (small terms first), into a fresh chunk as in 05.
// TF32 wgmma has no transposed form: B must be K-major, each of its columns one 128-byte row of
// 32 k values (BLOCK_K = 32). B arrives row-major (k rows of n), so the split also transposes:
// element (k, n) goes to row n, 16-byte chunk (k / 4) ^ (n % 8) (the 128-byte swizzle, which
// wgmma's descriptor names), and the lanes of a warp take k % 4 and n % 8 so that their 32
// stores hit 32 banks. A fence.proxy.async makes the stores visible to wgmma's reads.
// Everything else is 05's: cp.async stages, SPLIT_K groups (now warpgroups) summing their share of
// the K tiles, the reduction in shared memory, the persistent grid and its barrier.
//
// Layouts: row-major. A is M x K, B is K x L, C is L x N, T is M x L (scratch), E is M x N.
//   dynamic shared memory, rounded up to a 1024-byte boundary (the swizzle's atoms):
//     split[g] for each group g: big and small, BLOCK_N rows of 32 u32 each (the split B tile)
//     then per group NUM_STAGES stages of
//       sX[64][32 + 4]: the left operand's tile, row-major, padded as in 05 (for ldmatrix)
//       sY[32][BLOCK_N + 8]: the right operand's tile, row-major, as it arrives
//     once a tile's loop is done, the stages' bytes hold the partial sums of groups 1 .. SPLIT_K - 1.
// Launch: blockDim SPLIT_K * 128, gridDim (at most the resident blocks, at most the tiles),
//         dynamic shared memory 1024 + SPLIT_K * BLOCK_N * 256 + max(SPLIT_K * NUM_STAGES *
//         stage bytes, (SPLIT_K - 1) * 64 * BLOCK_N * 4), sync zeroed once before the first launch.
#include "common.cuh"

// x = big + small, as in 05: big = TF32 rounding of x, small = x - big (the mma reads its top bits); an Inf's
// small part is NaN (Inf - Inf), and the epilogue repairs the NaN sums it leaves, as in 05 (common.cuh).
__device__ __forceinline__ void split_tf32(float x, u32& big, u32& small) {
    big = tf32_round(x);
    small = __float_as_uint(x - __uint_as_float(big));
}

template <int BLOCK_N>
struct WgmmaTf32;  // the wgmma that multiplies one 64 x BLOCK_N x 8 slice
template <>
struct WgmmaTf32<32> {
    __device__ __forceinline__ static void mma(float (&d)[16], const u32 (&a)[4], unsigned long long b, int scale_d) {
        wgmma_m64n32k8_tf32(d, a, b, scale_d);
    }
};
template <>
struct WgmmaTf32<64> {
    __device__ __forceinline__ static void mma(float (&d)[32], const u32 (&a)[4], unsigned long long b, int scale_d) {
        wgmma_m64n64k8_tf32(d, a, b, scale_d);
    }
};

constexpr int TILE_M = 64, TILE_K = 32;  // a warpgroup's 64 rows; one 128-byte row of K

template <int BLOCK_N>
struct Stage {  // one K tile of both operands as cp.async brings them, rows padded as in 05
    float x[TILE_M][TILE_K + 4];
    float y[TILE_K][BLOCK_N + 8];
};

template <int BLOCK_N>
struct SplitB {  // one K tile of the right operand, split, K-major and swizzled: row n is column n
    u32 big[BLOCK_N][TILE_K];
    u32 small[BLOCK_N][TILE_K];
};

// Out[block_row.., block_col..] = X (rows x inner) * Y (inner x cols), one 64 x BLOCK_N tile.
// Group g (warpgroup g of the block) sums K tiles g, g + SPLIT_K, ...; `stages` are its
// NUM_STAGES buffers, `split` its split B tile, `partial` the block's reduction area.
template <int BLOCK_N, int SPLIT_K, int NUM_STAGES>
__device__ void gemm_tile(int rows, int cols, int inner, const float* X, const float* Y, float* Out,
                          int block_row, int block_col, Stage<BLOCK_N>* stages, SplitB<BLOCK_N>& split,
                          float* partial) {
    constexpr int NUM_THREADS = 128, ACC = BLOCK_N / 2;  // per group; accumulators per thread
    constexpr int X_VECS = TILE_M * TILE_K / 4, Y_VECS = TILE_K * BLOCK_N / 4;  // 16-byte pieces
    const int tid = threadIdx.x % NUM_THREADS;
    const int group = threadIdx.x / NUM_THREADS;
    const int warp_id = tid / 32, lane_id = tid % 32;
    const int g = lane_id / 4, t = lane_id % 4;
    const int warp_row = warp_id * 16;
    const bool x_vec = inner % 4 == 0 && reinterpret_cast<size_t>(X) % 16 == 0;
    const bool y_vec = cols % 4 == 0 && reinterpret_cast<size_t>(Y) % 16 == 0;

    float acc[ACC] = {}, chunk[ACC] = {};

    auto load = [&](int stage, int k0) {  // global -> shared, as in 05
        Stage<BLOCK_N>& s = stages[stage];
        for (int e = tid; e < X_VECS; e += NUM_THREADS) {
            const int r = e / (TILE_K / 4), c = e % (TILE_K / 4) * 4;
            const int row = block_row + r, col = k0 + c;
            if (x_vec) {
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

    // The right operand's tile, split once per element and transposed into `split` (see the
    // header). Piece p of 32 elements: k = p % 8 * 4 + lane % 4, n = p / 8 * 8 + lane / 4; the
    // swizzled chunk (k / 4) ^ (n % 8) then differs across the 8 values of lane / 4.
    auto split_y = [&](const Stage<BLOCK_N>& s) {
#pragma unroll
        for (int i = 0; i < BLOCK_N / 4; ++i) {
            const int p = i * 4 + warp_id;
            const int k = p % 8 * 4 + lane_id % 4, n = p / 8 * 8 + lane_id / 4;
            const int at = (k / 4 ^ n % 8) * 4 + k % 4;
            split_tf32(s.y[k][n], split.big[n][at], split.small[n][at]);
        }
        fence_proxy_async();  // these stores, visible to the wgmmas' reads
    };

    // The tensor cores may truncate their sums (not documented; see 05): each K tile goes into a fresh
    // chunk (the first wgmma ignores the chunk's old value), added to acc with a rounded fp32 add.
    auto compute = [&](const Stage<BLOCK_N>& s) {
        u32 a_big[TILE_K / 8][4], a_small[TILE_K / 8][4];
#pragma unroll
        for (int kk = 0; kk < TILE_K / 8; ++kk) {  // the A fragment by one ldmatrix.x4, as in 05
            u32 raw[4];
            ldmatrix_x4(raw[0], raw[1], raw[2], raw[3], &s.x[warp_row + lane_id % 16][kk * 8 + lane_id / 16 * 4]);
#pragma unroll
            for (int q = 0; q < 4; ++q) split_tf32(__uint_as_float(raw[q]), a_big[kk][q], a_small[kk][q]);
        }
        wgmma_fence();  // the registers written above, handed to the wgmmas
#pragma unroll
        for (int kk = 0; kk < TILE_K / 8; ++kk) {  // k kk*8 .. +7: 32 bytes into each 128-byte row
            const unsigned long long big = wgmma_desc_sw128(&split.big[0][kk * 8], 16, 1024);
            const unsigned long long small = wgmma_desc_sw128(&split.small[0][kk * 8], 16, 1024);
            WgmmaTf32<BLOCK_N>::mma(chunk, a_small[kk], big, kk > 0);  // the small terms first
            WgmmaTf32<BLOCK_N>::mma(chunk, a_big[kk], small, 1);
            WgmmaTf32<BLOCK_N>::mma(chunk, a_big[kk], big, 1);
        }
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operands(chunk);
#pragma unroll
        for (int q = 0; q < ACC; ++q) acc[q] += chunk[q];
    };

    // The pipeline, as in 05, with the split between a round's arrival and its wgmmas, before the refill.
    const int rounds = cdiv(cdiv(inner, TILE_K), SPLIT_K);
    auto k_of = [&](int r) { return (r * SPLIT_K + group) * TILE_K; };
    for (int r = 0; r < NUM_STAGES - 1; ++r) {
        if (r < rounds) load(r, k_of(r));
        cp_async_commit();
    }
    for (int r = 0; r < rounds; ++r) {
        cp_async_wait_group<NUM_STAGES - 2>();
        bar_sync(1 + group, NUM_THREADS);  // round r's tiles have landed; round r - 1's wgmmas are done with `split`
        split_y(stages[r % NUM_STAGES]);  // first: it is what this round's wgmmas wait for
        if (r + NUM_STAGES - 1 < rounds)
            load((r + NUM_STAGES - 1) % NUM_STAGES, k_of(r + NUM_STAGES - 1));
        cp_async_commit();
        bar_sync(1 + group, NUM_THREADS);  // the whole split tile is written before a wgmma reads it
        compute(stages[r % NUM_STAGES]);
    }
    cp_async_wait_all();
    __syncthreads();

    // Groups 1 .. SPLIT_K - 1 hand their accumulators to group 0, as in 05.
    if (SPLIT_K > 1) {
        if (group > 0) {
#pragma unroll
            for (int q = 0; q < ACC; ++q) partial[((group - 1) * ACC + q) * NUM_THREADS + tid] = acc[q];
        }
        __syncthreads();
        if (group == 0) {
            for (int h = 0; h < SPLIT_K - 1; ++h)
#pragma unroll
                for (int q = 0; q < ACC; ++q) acc[q] += partial[(h * ACC + q) * NUM_THREADS + tid];
        }
    }

    // wgmma's accumulator layout (common.cuh): acc[4j + 2h + 0..1] is row 16 warp + g + 8h,
    // columns 8j + 2t, + 1.
    const bool pair = cols % 2 == 0 && reinterpret_cast<size_t>(Out) % 8 == 0;
#pragma unroll
    for (int j = 0; j < BLOCK_N / 8 && group == 0; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = block_row + warp_row + g + 8 * h, col = block_col + j * 8 + 2 * t;
            if (row >= rows) continue;
            if (pair && col + 1 < cols) {
                *reinterpret_cast<float2*>(Out + row * cols + col) = make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
            } else {
                if (col < cols) Out[row * cols + col] = acc[4 * j + 2 * h];
                if (col + 1 < cols) Out[row * cols + col + 1] = acc[4 * j + 2 * h + 1];
            }
        }
    // An Inf input made its outputs NaN (Inf - Inf in the split): recompute those in fp32, as in 05.
    if (group == 0 && any_nan<ACC>(acc))
        repair_nans(Out, X, Y, rows, cols, inner, block_row + warp_row, block_col, ACC, BLOCK_N / 8);
    if (SPLIT_K > 1) __syncthreads();
}

template <int BLOCK_N, int SPLIT_K, int NUM_STAGES>
__global__ void __launch_bounds__(SPLIT_K * 128, 1)
fused_wgmma_tf32x3(int M, int K, int L, int N, const float* A, const float* B, const float* C, float* E,
                   float* T, u32* sync) {
    static_assert(BLOCK_N == 32 || BLOCK_N == 64, "BLOCK_N must be 32 or 64 (one wgmma of that width)");
    static_assert(SPLIT_K >= 1 && SPLIT_K <= 8 && NUM_STAGES >= 2,
                  "1 <= SPLIT_K <= 8 (a warpgroup each, at most 1024 threads), NUM_STAGES >= 2");
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);  // the swizzle's alignment
    const int group = threadIdx.x / 128;
    SplitB<BLOCK_N>& split = reinterpret_cast<SplitB<BLOCK_N>*>(smem)[group];
    unsigned char* rest = smem + SPLIT_K * sizeof(SplitB<BLOCK_N>);
    Stage<BLOCK_N>* stages = reinterpret_cast<Stage<BLOCK_N>*>(rest) + group * NUM_STAGES;
    float* partial = reinterpret_cast<float*>(rest);

    // Phase 1: T = A * B (M x L), tile by tile.
    const int t_cols = cdiv(L, BLOCK_N), t_tiles = cdiv(M, TILE_M) * t_cols;
    for (int tile = blockIdx.x; tile < t_tiles; tile += gridDim.x)
        gemm_tile<BLOCK_N, SPLIT_K, NUM_STAGES>(M, L, K, A, B, T, tile / t_cols * TILE_M, tile % t_cols * BLOCK_N,
                                                stages, split, partial);

    grid_barrier(sync);  // all of T is written before any block reads it

    // Phase 2: E = T * C (M x N), tile by tile.
    const int e_cols = cdiv(N, BLOCK_N), e_tiles = cdiv(M, TILE_M) * e_cols;
    for (int tile = blockIdx.x; tile < e_tiles; tile += gridDim.x)
        gemm_tile<BLOCK_N, SPLIT_K, NUM_STAGES>(M, N, L, T, C, E, tile / e_cols * TILE_M, tile % e_cols * BLOCK_N,
                                                stages, split, partial);
}
