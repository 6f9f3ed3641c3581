// hgemm track: fp16 C = A * B on tensor cores (fp32 accumulation), after Alex Armbruster's
// ladder for the T4, and past it.
//   08_wgmma ... 11_mma_in_flight: TMA, mbarriers, wgmma, a persistent grid, TMA stores, one group in flight
//
// Lab kernel hgemm-past-cublas/clusters11 (attempt 5, lab/hgemm-past-cublas/README.md): step 11 with attempt 1's
// clusters. CLUSTER_M blocks stacked along M form a cluster and share each stage's B tile: each block loads
// B_BOXES / CLUSTER_M of its 64-column boxes and multicasts them into every block of the cluster, so a block reads
// 16 KB of A and 32 / CLUSTER_M KB of B from L2 per stage instead of 48 KB. A stage may be refilled only when the
// consumers of every block of the cluster are done with it: each consumer warpgroup arrives on the `empty`
// barrier of every block (mbarrier_arrive_cluster), and `empty` counts CONSUMERS x CLUSTER_M arrivals. The
// blocks end with cluster_sync(), the producers too, so no block's shared memory goes while another may still
// multicast into it or arrive on its barriers. The tiles of a block whose rows are past M are still loaded (its
// B share feeds the others) and its TMA stores are clipped away.
//
// Layouts and launch: as 11; gridDim is whole clusters (registry._cluster_grid).
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

template <int BLOCK_N, int NUM_STAGES, int GROUP_M, int STORE_BUFS, int CLUSTER_M>
__global__ void __cluster_dims__(CLUSTER_M, 1, 1) __launch_bounds__(384, 1)
    hgemm_clusters11(int M, int N, int K, const __half* A, const __half* B, __half* C, const TmaMap* a_map,
                     const TmaMap* b_map, const TmaMap* c_map) {
    constexpr int BLOCK_M = 128, BLOCK_K = 64;   // 64 halves = one 128-byte swizzled row
    constexpr int CONSUMERS = 2;                 // warpgroups 1 and 2, 64 rows each
    constexpr int A_BYTES = BLOCK_M * BLOCK_K * 2;
    constexpr int B_BOX_BYTES = 64 * BLOCK_K * 2;  // one 64-column box of the B tile: the multicast unit
    constexpr int B_BOXES = BLOCK_N / 64;
    constexpr int GROUP = GROUP_M / CLUSTER_M;   // cluster rows per band
    constexpr int STAGE_BYTES = A_BYTES + BLOCK_N * BLOCK_K * 2;
    constexpr int ACC = BLOCK_N / 2;             // accumulators per consumer thread: 64 x BLOCK_N / 128
    static_assert(BLOCK_N == 128 || BLOCK_N == 256, "BLOCK_N must be 128 or 256 (one wgmma of that width)");
    static_assert(NUM_STAGES >= 2, "NUM_STAGES must be at least 2");
    static_assert(STORE_BUFS >= 1, "STORE_BUFS must be at least 1");
    static_assert(B_BOXES % CLUSTER_M == 0, "each block of a cluster multicasts the same number of B boxes");
    static_assert(GROUP >= 1 && GROUP_M % CLUSTER_M == 0, "a band holds whole clusters");
    constexpr int CHUNK_BYTES = 64 * 64 * 2;     // one C box: 64 rows x 64 columns of halves
    constexpr int CHUNKS = BLOCK_N / 64;         // boxes per consumer's 64 x BLOCK_N part of the tile

    extern __shared__ __align__(1024) unsigned char smem_raw[];
    // Swizzled tiles must start on a 1024-byte boundary of the shared window: round up (the same
    // offset in every block, so one block's stage s is at the same offset in the others).
    unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    unsigned char* staging = smem + NUM_STAGES * STAGE_BYTES;  // STORE_BUFS chunks per consumer
    unsigned long long* full =
        reinterpret_cast<unsigned long long*>(staging + CONSUMERS * STORE_BUFS * CHUNK_BYTES);
    unsigned long long* empty = full + NUM_STAGES;
    auto sA = [&](int s) { return smem + s * STAGE_BYTES; };
    auto sB = [&](int s) { return smem + s * STAGE_BYTES + A_BYTES; };

    // Cluster tile `id` of the banded order (08), over cluster tiles of CLUSTER_M block rows.
    const int rank = (int)cluster_ctarank();
    const int cluster = blockIdx.x / CLUSTER_M, clusters = gridDim.x / CLUSTER_M;
    const int tiles_n = cdiv(N, BLOCK_N), tiles_m = cdiv(M, BLOCK_M * CLUSTER_M), num_tile_ids = tiles_m * tiles_n;
    auto tile_origin = [&](int id, int& block_row, int& block_col) {
        const int band = id / (GROUP * tiles_n);
        const int band_rows = min(GROUP, tiles_m - band * GROUP);
        const int in_band = id % (GROUP * tiles_n);
        block_row = ((band * GROUP + in_band % band_rows) * CLUSTER_M + rank) * BLOCK_M;
        block_col = (in_band / band_rows) * BLOCK_N;
    };
    const int warpgroup = threadIdx.x / 128;
    const int num_tiles = cdiv(K, BLOCK_K);

    if (threadIdx.x == 0) {
        for (int s = 0; s < NUM_STAGES; ++s) {
            mbarrier_init(&full[s], 1);                       // this block's arrive_expect_tx, plus the bytes
            mbarrier_init(&empty[s], CONSUMERS * CLUSTER_M);  // every consumer warpgroup of the cluster
        }
        fence_barrier_init();
    }
    cluster_sync();  // every block's barriers are initialised before anyone multicasts or arrives

    if (warpgroup == 0) {
        // Producer: it needs few registers; give them to the consumers.
        setmaxnreg_dec<40>();
        if (threadIdx.x == 0) {
            tma_map_acquire(a_map);
            tma_map_acquire(b_map);
            int step = 0;  // k tiles issued by this block so far, over all its tiles: the ring position
            for (int id = cluster; id < num_tile_ids; id += clusters) {
                int block_row, block_col;
                tile_origin(id, block_row, block_col);
                for (int t = 0; t < num_tiles; ++t, ++step) {
                    const int s = step % NUM_STAGES;
                    // Free in every block of the cluster: this block's B boxes land in all of them.
                    mbarrier_wait_cluster(&empty[s], ((step / NUM_STAGES) & 1) ^ 1);
                    mbarrier_arrive_expect_tx(&full[s], STAGE_BYTES);  // all of it: own A, every block's B boxes
                    const int k0 = t * BLOCK_K;
                    tma_load_2d(sA(s), a_map, k0, block_row, &full[s]);
#pragma unroll
                    for (int i = 0; i < B_BOXES / CLUSTER_M; ++i) {
                        const int j = i * CLUSTER_M + rank;  // this block's share of the B boxes
                        tma_load_2d_multicast(sB(s) + j * B_BOX_BYTES, b_map, block_col + 64 * j, k0, &full[s],
                                              (1u << CLUSTER_M) - 1);
                    }
                }
            }
        }
        cluster_sync();  // the producers, too: no block exits while another may still multicast into it
        return;
    }

    setmaxnreg_inc<232>();
    const int consumer = warpgroup - 1;  // rows 64 * consumer .. + 63 of each block tile
    const int lane = threadIdx.x % 32, warp = threadIdx.x % 128 / 32;
    int step = 0;   // the same count as the producer's: k tiles consumed so far
    int chunk = 0;  // C boxes this warpgroup has stored so far: the staging ring's position
    if (threadIdx.x % 128 == 0) tma_map_acquire(c_map);
    for (int id = cluster; id < num_tile_ids; id += clusters) {
        int block_row, block_col;
        tile_origin(id, block_row, block_col);
        float d[ACC];
#pragma unroll
        for (int i = 0; i < ACC; ++i) d[i] = 0.0f;

        for (int t = 0; t < num_tiles; ++t, ++step) {
            const int s = step % NUM_STAGES;
            mbarrier_wait(&full[s], (step / NUM_STAGES) & 1);
            const unsigned char* a_tile = sA(s) + consumer * 64 * 128;
            const unsigned char* b_tile = sB(s);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BLOCK_K / 16; ++kk)
                WgmmaTile<BLOCK_N>::mma(d, wgmma_desc_sw128(a_tile + kk * 32, 16, 1024),
                                        wgmma_desc_sw128(b_tile + kk * 16 * 128, B_BOX_BYTES, 1024));
            wgmma_commit();
            wgmma_wait<1>();  // k tile t - 1's group is done (t's may still run): its stage may be refilled
            if (t > 0 && threadIdx.x % 128 == 0)  // tell every producer that writes into that stage
#pragma unroll
                for (int r = 0; r < CLUSTER_M; ++r) mbarrier_arrive_cluster(&empty[(step - 1) % NUM_STAGES], r);
        }
        wgmma_wait<0>();  // the tile's last group, before the epilogue reads d
        wgmma_fence_operands(d);
        if (threadIdx.x % 128 == 0)
#pragma unroll
            for (int r = 0; r < CLUSTER_M; ++r) mbarrier_arrive_cluster(&empty[(step - 1) % NUM_STAGES], r);

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
    cluster_sync();  // no block exits while another may still arrive on its barriers
}
