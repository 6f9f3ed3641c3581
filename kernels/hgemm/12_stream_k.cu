// hgemm track, step 12_stream_k (every step of the track, one line each: python -m gemmlab steps --track hgemm).
//
// Extends 11 by its schedule. A persistent grid of G blocks deals out `tiles` tiles wave by wave;
// when G does not divide them, the last wave has tiles % G tiles and the other blocks wait for it
// (4096 x 4096 on an H200: 512 tiles on 132 SMs, 116 in the fourth wave, 16 SMs idle for a quarter
// of the launch). Here the full waves' tiles are dealt whole, as in 11, and the last wave's k tiles,
// laid end to end, are cut into one contiguous range per block (stream-K):
//   - the block whose range holds a tile's last k tile finishes the tile: it adds the partial sums
//     of the blocks before it that share the tile and stores C as in 11;
//   - every other block of the tile writes its partial sums (fp32) to its slot of `partials` and
//     sets its flag with release semantics; the finishing block waits for the flag (acquire) and
//     clears it, so each launch leaves the flags at zero;
//   - a range is at most one tile long, so it touches two tiles at most: the end of one (to finish)
//     and the beginning of the next (to hand over). The block does the next tile's part first: it
//     waits last, and only for blocks of lower index, which handed over before they waited. No
//     cycle, and by then the partial sums are there.
// MAX_SPLIT bounds the blocks that share one tile (a last wave of 2 tiles goes to 2 x MAX_SPLIT
// blocks, not to all G); MAX_SPLIT = 1 is 11's schedule.
// Sharing is not free: the hand-over through L2, the finishing block's wait and its loads cost each block
// about 8 k tiles' time (H200, lab/hgemm-past-cublas/README.md, attempt 6). It saves each block the last
// wave's idle time, num_tiles x (G - tiles % G) / G k tiles. The last wave is shared only when that
// saving is at least MIN_GAIN k tiles: at 4096 (64 k tiles, 116 of 132 SMs busy in the last wave) it is
// 7.8, and the wave is dealt whole as in 11; at 8192 (128 k tiles, 68 of 132) it is 62.
// What it costs: `partials` of G x 128 x BLOCK_N floats and 2 G flags, zeroed once; a handed-over part
// goes through L2 (64 x BLOCK_N floats per warpgroup: 64 KB at BLOCK_N = 256), written once, read once.
//
// Layouts and launch: as 10, plus `partials` and `flags`.
#include "common.cuh"

template <int BLOCK_N>
struct WgmmaTile;  // the wgmma that multiplies one 64 x BLOCK_N x 16 slice
template <>
struct WgmmaTile<128> {
    __device__ __forceinline__ static void mma(float (&d)[64], unsigned long long a, unsigned long long b) {
        wgmma_m64n128k16_f32(d, a, b);
    }
};
template <>
struct WgmmaTile<256> {
    __device__ __forceinline__ static void mma(float (&d)[128], unsigned long long a, unsigned long long b) {
        wgmma_m64n256k16_f32(d, a, b);
    }
};

template <int BLOCK_N, int NUM_STAGES, int GROUP_M, int STORE_BUFS, int MAX_SPLIT, int MIN_GAIN>
__global__ void __launch_bounds__(384, 1) hgemm_stream_k(int M, int N, int K, const __half* A, const __half* B,
                                                     __half* C, const TmaMap* a_map, const TmaMap* b_map,
                                                     const TmaMap* c_map, float* partials, u32* flags) {
    constexpr int BLOCK_M = 128, BLOCK_K = 64;   // 64 halves = one 128-byte swizzled row
    constexpr int CONSUMERS = 2;                 // warpgroups 1 and 2, 64 rows each
    constexpr int A_BYTES = BLOCK_M * BLOCK_K * 2;
    constexpr int B_BOX_BYTES = 64 * BLOCK_K * 2;  // one 64-column box of the B tile
    constexpr int STAGE_BYTES = A_BYTES + BLOCK_N * BLOCK_K * 2;
    constexpr int ACC = BLOCK_N / 2;             // accumulators per consumer thread: 64 x BLOCK_N / 128
    static_assert(BLOCK_N == 128 || BLOCK_N == 256, "BLOCK_N must be 128 or 256 (one wgmma of that width)");
    static_assert(NUM_STAGES >= 2, "NUM_STAGES must be at least 2");
    static_assert(STORE_BUFS >= 1, "STORE_BUFS must be at least 1");
    static_assert(MAX_SPLIT >= 1, "MAX_SPLIT must be at least 1");
    constexpr int CHUNK_BYTES = 64 * 64 * 2;     // one C box: 64 rows x 64 columns of halves
    constexpr int CHUNKS = BLOCK_N / 64;         // boxes per consumer's 64 x BLOCK_N part of the tile

    extern __shared__ __align__(1024) unsigned char smem_raw[];
    // Swizzled tiles must start on a 1024-byte boundary of the shared window: round up.
    unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    unsigned char* staging = smem + NUM_STAGES * STAGE_BYTES;  // STORE_BUFS chunks per consumer
    unsigned long long* full =
        reinterpret_cast<unsigned long long*>(staging + CONSUMERS * STORE_BUFS * CHUNK_BYTES);
    unsigned long long* empty = full + NUM_STAGES;
    auto sA = [&](int s) { return smem + s * STAGE_BYTES; };
    auto sB = [&](int s) { return smem + s * STAGE_BYTES + A_BYTES; };

    // Tile `id` of the banded order (08): bands of GROUP_M block rows, down a band before across.
    const int tiles_n = cdiv(N, BLOCK_N), tiles_m = cdiv(M, BLOCK_M), num_tile_ids = tiles_m * tiles_n;
    auto tile_origin = [&](int id, int& block_row, int& block_col) {
        const int band = id / (GROUP_M * tiles_n);
        const int band_rows = min(GROUP_M, tiles_m - band * GROUP_M);
        const int in_band = id % (GROUP_M * tiles_n);
        block_row = (band * GROUP_M + in_band % band_rows) * BLOCK_M;
        block_col = (in_band / band_rows) * BLOCK_N;
    };
    const int warpgroup = threadIdx.x / 128;
    const int num_tiles = cdiv(K, BLOCK_K);

    // The schedule, which the producer and the consumers walk alike: whole tiles in the full waves, then
    // this block's range of the last wave's k tiles (numbered tile by tile: k tile t of the i-th tile of
    // the last wave is number i * num_tiles + t).
    const int G = gridDim.x;
    const int last_wave = num_tile_ids % G;
    const bool share = MAX_SPLIT > 1 && (long long)num_tiles * (G - last_wave) >= (long long)MIN_GAIN * G;
    const int split_tiles = share ? last_wave : 0;  // the last wave, shared out
    const int whole_tiles = num_tile_ids - split_tiles;
    const int split_blocks = min(G, split_tiles * MAX_SPLIT);
    auto range_start = [&](int j) {  // block j's range: range_start(j) .. range_start(j + 1) - 1
        return (int)((long long)split_tiles * num_tiles * j / max(split_blocks, 1));
    };
    const int whole_count = whole_tiles > (int)blockIdx.x ? cdiv(whole_tiles - (int)blockIdx.x, G) : 0;
    // The u-th piece of this block's work: tile `id`, k tiles k_begin .. k_end - 1; false after the last.
    auto unit = [&](int u, int& id, int& k_begin, int& k_end) {
        if (u < whole_count) {
            id = blockIdx.x + u * G, k_begin = 0, k_end = num_tiles;
            return true;
        }
        const int begin = range_start(blockIdx.x), end = range_start(blockIdx.x + 1);
        if ((int)blockIdx.x >= split_blocks || begin == end) return false;
        const int first = begin / num_tiles, last = (end - 1) / num_tiles;  // the tiles the range touches
        if (u == whole_count) {  // the beginning of the range's last tile: handed over unless the tile ends here
            id = whole_tiles + last, k_begin = max(begin - last * num_tiles, 0), k_end = end - last * num_tiles;
            return true;
        }
        if (u == whole_count + 1 && first != last) {  // the end of its first tile: finished here
            id = whole_tiles + first, k_begin = begin - first * num_tiles, k_end = num_tiles;
            return true;
        }
        return false;
    };

    if (threadIdx.x == 0) {
        for (int s = 0; s < NUM_STAGES; ++s) {
            mbarrier_init(&full[s], 1);            // the producer's arrive_expect_tx, plus the bytes
            mbarrier_init(&empty[s], CONSUMERS);   // one arrival per consumer warpgroup
        }
        fence_barrier_init();
    }
    __syncthreads();

    if (warpgroup == 0) {
        // Producer: it needs few registers; give them to the consumers.
        setmaxnreg_dec<40>();
        if (threadIdx.x == 0) {
            tma_map_acquire(a_map);
            tma_map_acquire(b_map);
            int ring_pos = 0;  // k tiles issued by this block so far, over all its tiles: the ring position
            for (int u = 0, id, k_begin, k_end; unit(u, id, k_begin, k_end); ++u) {
                int block_row, block_col;
                tile_origin(id, block_row, block_col);
                for (int t = k_begin; t < k_end; ++t, ++ring_pos) {
                    const int s = ring_pos % NUM_STAGES;
                    mbarrier_wait(&empty[s], ((ring_pos / NUM_STAGES) & 1) ^ 1);  // round ring_pos / NUM_STAGES
                    mbarrier_arrive_expect_tx(&full[s], STAGE_BYTES);
                    const int k0 = t * BLOCK_K;
                    tma_load_2d(sA(s), a_map, k0, block_row, &full[s]);
#pragma unroll
                    for (int j = 0; j < BLOCK_N / 64; ++j)
                        tma_load_2d(sB(s) + j * B_BOX_BYTES, b_map, block_col + 64 * j, k0, &full[s]);
                }
            }
        }
        return;
    }

    setmaxnreg_inc<232>();
    const int consumer = warpgroup - 1;  // rows 64 * consumer .. + 63 of each block tile
    const int lane = threadIdx.x % 32, warp = threadIdx.x % 128 / 32;
    int ring_pos = 0;   // the same count as the producer's: k tiles consumed so far
    int chunk = 0;  // C boxes this warpgroup has stored so far: the staging ring's position
    if (threadIdx.x % 128 == 0) tma_map_acquire(c_map);
    for (int u = 0, id, k_begin, k_end; unit(u, id, k_begin, k_end); ++u) {
        int block_row, block_col;
        tile_origin(id, block_row, block_col);
        float d[ACC];
#pragma unroll
        for (int i = 0; i < ACC; ++i) d[i] = 0.0f;

        for (int t = 0; t < k_end - k_begin; ++t, ++ring_pos) {  // t counts from this unit's first k tile
            const int s = ring_pos % NUM_STAGES;
            mbarrier_wait(&full[s], (ring_pos / NUM_STAGES) & 1);
            const unsigned char* a_tile = sA(s) + consumer * 64 * 128;
            const unsigned char* b_tile = sB(s);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BLOCK_K / 16; ++kk)
                WgmmaTile<BLOCK_N>::mma(d, wgmma_desc_sw128(a_tile + kk * 32, 16, 1024),
                                        wgmma_desc_sw128(b_tile + kk * 16 * 128, B_BOX_BYTES, 1024));
            wgmma_commit();
            wgmma_wait<1>();  // k tile t - 1's group is done (t's may still run): its stage may be refilled
            if (t > 0 && threadIdx.x % 128 == 0) mbarrier_arrive(&empty[(ring_pos - 1) % NUM_STAGES]);
        }
        wgmma_wait<0>();  // the tile's last group, before the epilogue reads d
        wgmma_fence_operands(d);
        if (threadIdx.x % 128 == 0) mbarrier_arrive(&empty[(ring_pos - 1) % NUM_STAGES]);

        // A part of a shared tile. Each thread keeps its accumulators in its own column of the warpgroup's
        // slot (float4 i of thread x at i * 128 + x: a warp's accesses are 512 contiguous bytes).
        auto slot = [&](int block) {
            return reinterpret_cast<float4*>(partials) + (block * CONSUMERS + consumer) * (ACC / 4) * 128 + threadIdx.x % 128;
        };
        if (k_end < num_tiles) {  // not the tile's end: hand the partial sums over to the block that ends it
            float4* mine = slot(blockIdx.x);
#pragma unroll
            for (int i = 0; i < ACC / 4; ++i) mine[i * 128] = make_float4(d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]);
            bar_sync(1 + consumer, 128);  // the warpgroup's sums all written, before one thread releases them
            if (threadIdx.x % 128 == 0) atom_add_release_gpu(&flags[blockIdx.x * CONSUMERS + consumer], 1u);
            continue;
        }
        // The tile's end: add the parts of the blocks before this one whose ranges reach into the tile.
        const int tile_begin = (id - whole_tiles) * num_tiles;  // in the last wave's numbering
        for (int j = (int)blockIdx.x - 1; k_begin > 0 && j >= 0 && range_start(j + 1) > tile_begin; --j) {
            if (range_start(j) == range_start(j + 1)) continue;  // block j has no range
            if (warp == 0) wait_counters(&flags[j * CONSUMERS + consumer], 1, [](int) { return 1u; });  // and clear it
            bar_sync(1 + consumer, 128);  // the acquire, passed on to the warpgroup before it reads
            const float4* theirs = slot(j);
#pragma unroll
            for (int i = 0; i < ACC / 4; ++i) {
                const float4 v = __ldcg(&theirs[i * 128]);  // from L2: another SM wrote it
                d[4 * i] += v.x, d[4 * i + 1] += v.y, d[4 * i + 2] += v.z, d[4 * i + 3] += v.w;
            }
        }

        // Epilogue: 64 columns at a time through a staging buffer and a TMA store; meanwhile the
        // producer is loading the next tile into the freed stages.
        const int r0 = warp * 16 + lane / 4;  // this thread's rows r0 and r0 + 8 of the 64-row part
#pragma unroll
        for (int q = 0; q < CHUNKS; ++q, ++chunk) {
            unsigned char* buf = staging + (consumer * STORE_BUFS + chunk % STORE_BUFS) * CHUNK_BYTES;
            if (threadIdx.x % 128 == 0) bulk_wait_group_read<STORE_BUFS - 1>();  // buf's last store has read it
            bar_sync(1 + consumer, 128);
#pragma unroll
            for (int jj = 0; jj < 8; ++jj) {  // 8-column block j = 8q + jj: 16-byte chunk jj of each row
                const int j = 8 * q + jj;
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const int r = r0 + 8 * half;
                    *reinterpret_cast<__half2*>(buf + r * 128 + ((jj ^ (r % 8)) * 16) + 4 * (lane % 4)) =
                        __floats2half2_rn(d[4 * j + 2 * half], d[4 * j + 2 * half + 1]);
                }
            }
            fence_proxy_async();  // this thread's writes to buf, before the TMA unit reads it
            bar_sync(1 + consumer, 128);
            if (threadIdx.x % 128 == 0) {
                tma_store_2d(c_map, buf, block_col + 64 * q, block_row + consumer * 64);
                bulk_commit_group();
            }
        }
    }
    if (threadIdx.x % 128 == 0) bulk_wait_group<0>();  // every store done before the block exits
}
