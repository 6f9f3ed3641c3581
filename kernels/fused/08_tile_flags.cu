// fused track, step 08_tile_flags (every step of the track, one line each: python -m gemmlab steps --track fused).
//
// Extends 07. At N = 512, 07's blocks wait 1.1 us at the grid barrier and 1.1 us more for their first
// K tile of T after it (results/experiments/fusion-tma, `timeline`): every block waits for the slowest
// block of all, then asks for its first tile only once it has passed. Yet K tile kt of phase 2's tile
// (i, j) reads one 64 x 32 piece of T, which one tile of phase 1 wrote: (i, kt * 32 / BLOCK_N). So:
//   - sync holds one counter per tile of T. The block that wrote a tile adds to it, with release
//     semantics, the number of phase-2 reads still to come of that tile (the tiles of E in its row
//     panel, times the K tiles it spans);
//   - before a tile of phase 2, the producer warp waits until the counters of its row panel of T are
//     all nonzero, its 32 lanes polling 32 counters at a time, then takes from each its reads;
//   - so each counter is back at zero when the launch ends, ready for the next one: nothing resets.
// A block waits for the 16 blocks (at N = 512) of its row panel, not for all 128, and its producer,
// which has fetched phase 1 long before its consumers finish it, is already polling when the last of
// them releases. A first try took each K tile's counter in turn, by the one producer thread: an L2
// round trip per K tile on the producer's path, which then fed the ring slower than the consumers
// emptied it (results/experiments/fusion-tma: perktile.patch, `flags`). Deadlock-free for the same reason as the grid
// barrier: a block finishes all its phase-1 tiles without waiting for anyone, and all blocks are
// resident. The proxies as in 07: each thread fences its T stores for the async proxy before the
// counter is released, and the producer fences after its acquire, before the copy.
//
// Layouts, launch and the rest: as 07; sync must hold at least cdiv(M, 64) * cdiv(L, BLOCK_N) words,
// zeroed once before the first launch.
#include "common.cuh"

// x = big + small, as in 05 and 06 (each step's file keeps its own copy: the experiments' patches of
// 05 and 06 rewrite theirs); an Inf's small part is NaN, and the epilogue repairs the NaN sums, as in 05.
__device__ __forceinline__ void split_tf32(float x, u32& big, u32& small) {
    big = tf32_round(x);
    small = __float_as_uint(x - __uint_as_float(big));
}

template <int BLOCK_N>
struct WgmmaTf32;  // the wgmma that multiplies one 64 x BLOCK_N x 8 slice, as in 06
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

// The epilogue's slow path (common.cuh's repair_nans), out of line: inlined, its registers counted against the
// consumers', and the lab's variants at 128 registers a thread spilled (lab/fusion-tma/limits.py).
__device__ __attribute__((noinline)) void repair_nans_out_of_line(float* out, const float* X, const float* Y, int rows,
                                                                  int cols, int inner, int warp_row, int warp_col,
                                                                  int count, int tiles_n) {
    repair_nans(out, X, Y, rows, cols, inner, warp_row, warp_col, count, tiles_n);
}

template <int BLOCK_N>
struct Stage {  // one K tile of both operands as TMA writes them: 128-byte rows, swizzled
    float x[TILE_M * TILE_K];
    float y[BLOCK_N / 32][TILE_K * 32];
};

template <int BLOCK_N>
struct SplitB {  // one K tile of the right operand, split, K-major and swizzled (as in 06)
    u32 big[BLOCK_N][TILE_K];
    u32 small[BLOCK_N][TILE_K];
};

// Element (r, c) of a swizzled tile with 32-float rows: chunk c / 4 of row r is stored at chunk (c / 4) ^ (r % 8).
__device__ __forceinline__ int swizzled(int r, int c) { return r * 32 + ((c / 4 ^ r % 8) * 4 | c % 4); }

// Consumer group g's part of one 64 x BLOCK_N tile: Out[block_row.., block_col..] = X (rows x inner) *
// Y (inner x cols), K tiles g, g + SPLIT_K, ..., which are ring positions ring_pos0 + g, ring_pos0 + g + SPLIT_K, ...
// (the ring brings X and Y; the pointers are for the epilogue's repair of NaN sums only).
template <int BLOCK_N, int SPLIT_K, int NUM_STAGES>
__device__ void gemm_tile(int rows, int cols, int inner, const float* X, const float* Y, float* Out, int block_row,
                          int block_col, u32 ring_pos0,
                          Stage<BLOCK_N>* stages, SplitB<BLOCK_N>& split, float* partial,
                          unsigned long long* full, unsigned long long* empty, u32* done, u32 reads) {
    constexpr int NUM_THREADS = 128, ACC = BLOCK_N / 2, CONSUMERS = SPLIT_K * 128;
    const int tid = threadIdx.x % NUM_THREADS;
    const int group = threadIdx.x / NUM_THREADS;
    const int warp_id = tid / 32, lane_id = tid % 32;
    const int g = lane_id / 4, t = lane_id % 4;
    const int warp_row = warp_id * 16;

    float acc[ACC] = {}, chunk[ACC] = {};

    // The B tile, split once per element into `split` (see the header for the lanes). This thread's
    // element i is in piece p = 4 i + warp of 32 elements: the 8 x 8 block (k 8a.., n 8b..) of p / 2,
    // half h = p % 2. Eight loads first, then their splits and stores: written element by element, the
    // compiler kept each load after the previous element's two stores (it cannot tell the stage from
    // `split`), a shared-memory round trip per element (results/experiments/fusion-tma, `ring`).
    auto element = [&](int i, int& k, int& n) {
        const int p = i * 4 + warp_id, h = p % 2, a = p / 2 % 4, b = p / 8, j = lane_id / 8;
        k = 8 * a + 2 * j + ((j >> 1) ^ h);
        n = 8 * b + lane_id % 8;
    };
    auto split_y = [&](const Stage<BLOCK_N>& s) {
        constexpr int BATCH = 8;  // BLOCK_N / 4 elements a thread; more loads in flight would cost registers
#pragma unroll
        for (int i0 = 0; i0 < BLOCK_N / 4; i0 += BATCH) {
            float v[BATCH];
#pragma unroll
            for (int i = 0; i < BATCH; ++i) {
                int k, n;
                element(i0 + i, k, n);
                v[i] = s.y[n / 32][swizzled(k, n % 32)];
            }
#pragma unroll
            for (int i = 0; i < BATCH; ++i) {
                int k, n;
                element(i0 + i, k, n);
                const int at = (k / 4 ^ n % 8) * 4 + k % 4;
                split_tf32(v[i], split.big[n][at], split.small[n][at]);
            }
        }
        fence_proxy_async();  // these stores, visible to the wgmmas' reads
    };

    const int ktiles = cdiv(inner, TILE_K);
    for (int kt = group; kt < ktiles; kt += SPLIT_K) {
        const u32 ring_pos = ring_pos0 + kt, stage = ring_pos % NUM_STAGES;
        const Stage<BLOCK_N>& s = stages[stage];
        mbarrier_wait(&full[stage], (ring_pos / NUM_STAGES) & 1);  // the K tile has landed
        bar_sync(1 + group, NUM_THREADS);  // and the group's wgmmas of its last K tile are done with `split`
        split_y(s);
        u32 raw[TILE_K / 8][4];
#pragma unroll
        for (int kk = 0; kk < TILE_K / 8; ++kk)  // the A fragment by one ldmatrix.x4, as in 06, swizzled
            ldmatrix_x4(raw[kk][0], raw[kk][1], raw[kk][2], raw[kk][3], &s.x[swizzled(warp_row + lane_id % 16, kk * 8 + lane_id / 16 * 4)]);
        bar_sync(1 + group, NUM_THREADS);  // the split tile is whole, and nobody reads the stage any more
        if (tid == 0) mbarrier_arrive(&empty[stage]);  // the producer may refill it
#pragma unroll
        for (int kk = 0; kk < TILE_K / 8; ++kk) {  // three wgmmas per 8-wide slice, small terms first, as in 06
            u32 a_big[4], a_small[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) split_tf32(__uint_as_float(raw[kk][q]), a_big[q], a_small[q]);
            wgmma_fence_operands(a_big);  // split before the fence, not in between the wgmmas (see common.cuh)
            wgmma_fence_operands(a_small);
            wgmma_fence();
            const unsigned long long big = wgmma_desc_sw128(&split.big[0][kk * 8], 16, 1024);
            const unsigned long long small = wgmma_desc_sw128(&split.small[0][kk * 8], 16, 1024);
            WgmmaTf32<BLOCK_N>::mma(chunk, a_small, big, kk > 0);
            WgmmaTf32<BLOCK_N>::mma(chunk, a_big, small, 1);
            WgmmaTf32<BLOCK_N>::mma(chunk, a_big, big, 1);
        }
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operands(chunk);
#pragma unroll
        for (int q = 0; q < ACC; ++q) acc[q] += chunk[q];
    }

    // Groups 1 .. SPLIT_K - 1 hand their sums to group 0, as in 06, over a barrier of the consumers
    // only (barrier 9: the producer is already fetching the next tile).
    if (SPLIT_K > 1) {
        if (group > 0) {
#pragma unroll
            for (int q = 0; q < ACC; ++q) partial[((group - 1) * ACC + q) * NUM_THREADS + tid] = acc[q];
        }
        bar_sync(9, CONSUMERS);
        if (group == 0) {
            for (int h = 0; h < SPLIT_K - 1; ++h)
#pragma unroll
                for (int q = 0; q < ACC; ++q) acc[q] += partial[(h * ACC + q) * NUM_THREADS + tid];
        }
    }

    // The accumulator layout of 06: acc[4j + 2h + 0..1] is row 16 warp + g + 8h, columns 8j + 2t, + 1.
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
    // Phase 2 reads row r of T, all L columns: its row panel, whose counters the producer acquired before
    // fetching this tile's K tile 0; this group's wait on that stage's `full` carries that acquire to it.
    if (group == 0 && any_nan<ACC>(acc))
        repair_nans_out_of_line(Out, X, Y, rows, cols, inner, block_row + warp_row, block_col, ACC, BLOCK_N / 8);
    if (done && group == 0) {  // phase 1: the tile of T is stored; announce how many reads may come
        fence_proxy_async_global();  // this thread's stores, ordered before TMA's reads of them
        bar_sync(10, NUM_THREADS);   // the group's stores all made (barrier 10: group 0 alone)
        if (tid == 0) atom_add_release_gpu(done, reads);
    }
    if (SPLIT_K > 1) bar_sync(9, CONSUMERS);  // group 0 has read `partial` before the next tile's sums
}

// The producer's part of one tile: K tile kt of X's row panel and Y's column panel into ring position ring_pos0 + kt.
template <int BLOCK_N, int NUM_STAGES>
__device__ void fetch_tile(int inner, const TmaMap* x_map, const TmaMap* y_map, int block_row, int block_col,
                           u32 ring_pos0, Stage<BLOCK_N>* stages, unsigned long long* full, unsigned long long* empty) {
    const int ktiles = cdiv(inner, TILE_K);
    for (int kt = 0; kt < ktiles; ++kt) {
        const u32 ring_pos = ring_pos0 + kt, stage = ring_pos % NUM_STAGES;
        mbarrier_wait(&empty[stage], ((ring_pos / NUM_STAGES) & 1) ^ 1);  // its last K tile was read (at once the first time)
        mbarrier_arrive_expect_tx(&full[stage], sizeof(Stage<BLOCK_N>));
        tma_load_2d(stages[stage].x, x_map, kt * TILE_K, block_row, &full[stage]);
#pragma unroll
        for (int j = 0; j < BLOCK_N / 32; ++j)
            tma_load_2d(stages[stage].y[j], y_map, block_col + 32 * j, kt * TILE_K, &full[stage]);
    }
}

template <int BLOCK_N, int SPLIT_K, int NUM_STAGES>
__global__ void __launch_bounds__(SPLIT_K * 128 + 32, 1)
fused_tile_flags(int M, int K, int L, int N, const float* A, const float* B, const float* C, float* E, float* T,
                 u32* sync, const TmaMap* a_map, const TmaMap* b_map, const TmaMap* t_map, const TmaMap* c_map) {
    static_assert(BLOCK_N == 32 || BLOCK_N == 64, "BLOCK_N must be 32 or 64 (one wgmma of that width)");
    static_assert(SPLIT_K >= 1 && SPLIT_K <= 7 && NUM_STAGES >= 2 && NUM_STAGES >= SPLIT_K,
                  "1 <= SPLIT_K <= 7 (a warpgroup each, and the producer warp, at most 1024 threads), "
                  "NUM_STAGES >= 2 and >= SPLIT_K (see the ring's parities)");
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);  // the swizzle's alignment
    Stage<BLOCK_N>* stages = reinterpret_cast<Stage<BLOCK_N>*>(smem);
    SplitB<BLOCK_N>* splits = reinterpret_cast<SplitB<BLOCK_N>*>(stages + NUM_STAGES);
    float* partial = reinterpret_cast<float*>(splits + SPLIT_K);
    unsigned long long* full = reinterpret_cast<unsigned long long*>(partial + (SPLIT_K - 1) * TILE_M * BLOCK_N);
    unsigned long long* empty = full + NUM_STAGES;
    const bool producer = threadIdx.x >= SPLIT_K * 128;
    const bool fetcher = threadIdx.x == SPLIT_K * 128;  // the producer warp's one working lane

    if (threadIdx.x == 0) {
        for (int s = 0; s < NUM_STAGES; ++s) {
            mbarrier_init(&full[s], 1);   // the producer's arrive_expect_tx, plus the bytes
            mbarrier_init(&empty[s], 1);  // one arrival by the group that read the stage
        }
        fence_barrier_init();
    }
    if (fetcher) {
        tma_map_acquire(a_map);
        tma_map_acquire(b_map);
        tma_map_acquire(t_map);
        tma_map_acquire(c_map);
    }
    __syncthreads();

    u32 ring_pos = 0;  // K tiles through the ring so far: the producer and the consumers count alike
    const int t_cols = cdiv(L, BLOCK_N);  // tiles of T per row panel: counter (i, j) is sync[i * t_cols + j]
    // The K tiles of 32 that a tile of T spans, `width` columns of it left (the last may be narrower).
    auto k_tiles_in = [](int width) { return (u32)cdiv(width < BLOCK_N ? width : BLOCK_N, TILE_K); };
    // One phase: Out (M x cols) = X (M x inner) * Y (inner x cols), tile by tile; X and Y by their maps.
    // Phase 1 releases each tile's counter; phase 2 waits on the counters of its row panel of T.
    auto phase = [&](int cols, int inner, const TmaMap* x_map, const TmaMap* y_map, float* Out, bool first) {
        const int n_cols = cdiv(cols, BLOCK_N), tiles = cdiv(M, TILE_M) * n_cols;
        const float *X = first ? A : T, *Y = first ? B : C;  // for the repair: T = A B, E = T C
        for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x, ring_pos += cdiv(inner, TILE_K)) {
            const int row = tile / n_cols * TILE_M, col = tile % n_cols * BLOCK_N;
            // phase 1: E's tiles in this row panel read this tile of T once per K tile it spans
            const u32 reads = cdiv(N, BLOCK_N) * k_tiles_in(cols - col);
            if (producer && !first) {  // phase 2: the whole producer warp waits for the row panel of T
                wait_counters(sync + row / TILE_M * t_cols, t_cols, [&](int j) { return k_tiles_in(L - j * BLOCK_N); });
                if (fetcher) fence_proxy_async_global();  // TMA's reads of T after what the warp acquired
            }
            if (fetcher) fetch_tile<BLOCK_N, NUM_STAGES>(inner, x_map, y_map, row, col, ring_pos, stages, full, empty);
            if (!producer)
                gemm_tile<BLOCK_N, SPLIT_K, NUM_STAGES>(M, cols, inner, X, Y, Out, row, col, ring_pos, stages,
                                                        splits[threadIdx.x / 128], partial, full, empty,
                                                        first ? sync + tile : nullptr, reads);
        }
    };

    phase(L, K, a_map, b_map, T, true);   // phase 1: T = A * B (M x L), each tile announced when stored
    phase(N, L, t_map, c_map, E, false);  // phase 2: E = T * C (M x N), each K tile of T awaited
}
