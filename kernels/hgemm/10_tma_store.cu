// hgemm track, step 10_tma_store (every step of the track, one line each: python -m gemmlab steps --track hgemm).
//
// Extends 09 by its epilogue. In 09 each consumer thread stores its 64 x BLOCK_N / 128 results to C
// itself, BLOCK_N / 4 four-byte global stores per thread per tile (64 at BLOCK_N = 256): they queue
// in the SM's load/store unit (the profiler's `lg_throttle` stall, chapter 7d's table of step 09 at
// 4096), and the warpgroup's next wgmma waits behind them. Here each consumer warpgroup writes its
// 64 x BLOCK_N accumulators, as fp16, into a staging buffer in shared memory, 64 columns at a time
// (a chunk: 64 x 64 halves, 8 KB, one 128-byte-swizzled TMA box), and one thread hands each chunk to
// the TMA unit (tma_store_2d): a single instruction stores the whole box to C, and the warpgroup goes
// on to the next chunk, then to the next tile's wgmmas, without waiting for global memory.
//   - the buffer is laid out as the C tensor map's 128-byte swizzle (16-byte chunk c of row r at
//     c ^ (r % 8)): a warp's __half2 stores, 8 rows x 4 lanes, then hit 32 different banks.
//   - each thread fences its stores for the TMA unit (fence_proxy_async), the warpgroup meets at
//     a named barrier, and thread 0 of the warpgroup issues the store and commits it as a group.
//   - a buffer is written again only after the store that read it has finished reading:
//     STORE_BUFS buffers per warpgroup form a ring, and before writing one, thread 0 waits until at
//     most STORE_BUFS - 1 of its groups are still reading (bulk_wait_group_read), then the barrier.
//   - TMA clips the box to the tensor: rows past M and columns past N are not written.
// Shared memory: 4 stages of 48 KB are 192 KB of the 227 KB a block may have, so a whole 64 x 256
// staging buffer per warpgroup (2 x 32 KB) does not fit beside them; STORE_BUFS = 2 chunks per
// warpgroup (2 x 2 x 8 KB = 32 KB, 225 KB in all) keeps the 4 stages, which 08 and 09 needed.
// STORE_BUFS = 4 with NUM_STAGES = 3 is the other choice (a whole tile staged, no wait inside it).
// What it costs: a second pass over the accumulators (registers -> shared memory), two named
// barriers per chunk, and 32 KB of shared memory.
//
// Layouts, A and B tensor maps: as 08. C's tensor map: boxes of 64 rows x 64 columns, 128-byte swizzle.
// Launch: blockDim 384, gridDim (min(tiles, SMs)), dynamic shared memory: the stages, the staging
// buffers, the mbarriers.
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

template <int BLOCK_N, int NUM_STAGES, int GROUP_M, int STORE_BUFS>
__global__ void __launch_bounds__(384, 1) hgemm_tma_store(int M, int N, int K, const __half* A, const __half* B,
                                                     __half* C, const TmaMap* a_map, const TmaMap* b_map,
                                                     const TmaMap* c_map) {
    constexpr int BLOCK_M = 128, BLOCK_K = 64;   // 64 halves = one 128-byte swizzled row
    constexpr int CONSUMERS = 2;                 // warpgroups 1 and 2, 64 rows each
    constexpr int A_BYTES = BLOCK_M * BLOCK_K * 2;
    constexpr int B_BOX_BYTES = 64 * BLOCK_K * 2;  // one 64-column box of the B tile
    constexpr int STAGE_BYTES = A_BYTES + BLOCK_N * BLOCK_K * 2;
    constexpr int ACC = BLOCK_N / 2;             // accumulators per consumer thread: 64 x BLOCK_N / 128
    static_assert(BLOCK_N == 128 || BLOCK_N == 256, "BLOCK_N must be 128 or 256 (one wgmma of that width)");
    static_assert(NUM_STAGES >= 2, "NUM_STAGES must be at least 2");
    static_assert(STORE_BUFS >= 1, "STORE_BUFS must be at least 1");
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
            for (int id = blockIdx.x; id < num_tile_ids; id += gridDim.x) {
                int block_row, block_col;
                tile_origin(id, block_row, block_col);
                for (int t = 0; t < num_tiles; ++t, ++ring_pos) {
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
    for (int id = blockIdx.x; id < num_tile_ids; id += gridDim.x) {
        int block_row, block_col;
        tile_origin(id, block_row, block_col);
        float d[ACC];
#pragma unroll
        for (int i = 0; i < ACC; ++i) d[i] = 0.0f;

        for (int t = 0; t < num_tiles; ++t, ++ring_pos) {
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
            wgmma_wait<0>();
            wgmma_fence_operands(d);
            if (threadIdx.x % 128 == 0) mbarrier_arrive(&empty[s]);  // the producer may refill it
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
