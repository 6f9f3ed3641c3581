// hgemm track: fp16 C = A * B on tensor cores (fp32 accumulation), after Alex Armbruster's
// ladder for the T4, and past it.
//   01_mma_tiling ... 07_cp_async: mma.sync, fed by ldmatrix from tiles the warps copy (see 07)
//   08_wgmma            sm_90a: TMA fills a ring of stages, wgmma multiplies from shared memory
//   09_persistent       sm_90a: one block per SM walks over the tiles; the next tile's loads run
//                       under this tile's epilogue
//
// Lab kernel hgemm-past-cublas/clusters (measured as step hgemm/10_clusters, 2026-11-26; it lost to 09 on
// an H100 and left the ladder: lab/hgemm-past-cublas/README.md). Clusters of CLUSTER_M blocks stacked
// along M share each B tile: each block loads a part of it and TMA multicasts that part to all of them.
//
// Extends 09 with thread-block clusters. In 09 two blocks that compute vertically adjacent tiles
// (the same block_col, rows 128 apart) each read the same 64 x BLOCK_N slice of B from L2 for every
// k tile: with BLOCK_N = 256 that is 32 KB of B against 16 KB of A per stage, two thirds of what a
// block reads. Here CLUSTER_M such blocks form a cluster (__cluster_dims__: the hardware runs them
// at once on SMs of one GPC), and each stage's B tile is read once per cluster: block `rank` loads
// the 64-column boxes j with j % CLUSTER_M == rank and multicasts each into the same stage of every
// block of the cluster. Each block still loads its own A. Per stage, a block's L2 reads drop from
// 48 KB to 16 + 32 / CLUSTER_M KB (32 KB with 2), so L2 bandwidth, which 08's profile showed busy,
// has more room for the tensor cores' demand.
//
// What the sharing costs is synchronisation between blocks:
//   - a stage's `full` barrier counts bytes from every block of the cluster (its own A and B part,
//     the others' B parts); the expected total is unchanged, STAGE_BYTES.
//   - a stage may be refilled only when the consumers of every block are done with it, since a
//     refill writes into all of them: `empty` counts CONSUMERS x CLUSTER_M arrivals, and each
//     consumer warpgroup arrives on `empty` of every block of its cluster (mbarrier_arrive_cluster).
//   - the barriers must be initialised before another block arrives on them or multicasts into
//     them, and no block may exit while another can still do so: cluster_sync() at both ends.
// The cluster walks over cluster tiles of (128 x CLUSTER_M) x BLOCK_N in 09's banded order
// (GROUP_M block rows per band); block `rank` computes rows rank * 128 .. + 127 of it. All blocks of
// a cluster take the same number of k tiles, so their rings stay in step.
//
// Layouts, shared memory and tensor maps: as 08 (the B map's box, 64 x 64, is the multicast unit).
// Launch: blockDim 384, gridDim (a multiple of CLUSTER_M: min(tiles, SMs) rounded down), dynamic
// shared memory as 08; the cluster shape is the kernel's own attribute (__cluster_dims__).
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

template <int BLOCK_N, int NUM_STAGES, int GROUP_M, int CLUSTER_M>
__global__ void __cluster_dims__(CLUSTER_M, 1, 1) __launch_bounds__(384, 1)
    hgemm_clusters(int M, int N, int K, const __half* A, const __half* B, __half* C, const TmaMap* a_map,
                   const TmaMap* b_map) {
    constexpr int BLOCK_M = 128, BLOCK_K = 64;   // 64 halves = one 128-byte swizzled row
    constexpr int CONSUMERS = 2;                 // warpgroups 1 and 2, 64 rows each
    constexpr int A_BYTES = BLOCK_M * BLOCK_K * 2;
    constexpr int B_BOX_BYTES = 64 * BLOCK_K * 2;  // one 64-column box of the B tile: the multicast unit
    constexpr int B_BOXES = BLOCK_N / 64;
    constexpr int STAGE_BYTES = A_BYTES + BLOCK_N * BLOCK_K * 2;
    constexpr int ACC = BLOCK_N / 2;             // accumulators per consumer thread: 64 x BLOCK_N / 128
    constexpr int GROUP = GROUP_M / CLUSTER_M;   // cluster rows per band
    static_assert(BLOCK_N == 128 || BLOCK_N == 256, "BLOCK_N must be 128 or 256 (one wgmma of that width)");
    static_assert(NUM_STAGES >= 2, "NUM_STAGES must be at least 2");
    static_assert(B_BOXES % CLUSTER_M == 0, "each block of a cluster multicasts the same number of B boxes");
    static_assert(GROUP >= 1 && GROUP_M % CLUSTER_M == 0, "a band holds whole clusters");

    extern __shared__ __align__(1024) unsigned char smem_raw[];
    // Swizzled tiles must start on a 1024-byte boundary of the shared window: round up (the same
    // offset in every block, so one block's stage s is at the same offset in the others).
    unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + NUM_STAGES * STAGE_BYTES);
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
    } else {
        setmaxnreg_inc<232>();
        const int consumer = warpgroup - 1;  // rows 64 * consumer .. + 63 of each block tile
        const int lane = threadIdx.x % 32, warp = threadIdx.x % 128 / 32;
        int step = 0;  // the same count as the producer's: k tiles consumed so far
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
                wgmma_wait<0>();
                wgmma_fence_operands(d);
                if (threadIdx.x % 128 == 0)  // stage s is free here; tell every producer that writes into it
#pragma unroll
                    for (int r = 0; r < CLUSTER_M; ++r) mbarrier_arrive_cluster(&empty[s], r);
            }

            // Epilogue (08's); meanwhile the producer is loading the next tile into the freed stages.
            // A block whose rows are all past M (the last cluster row) still took part in the loads.
            const int row0 = block_row + consumer * 64 + warp * 16 + lane / 4;
#pragma unroll
            for (int j = 0; j < BLOCK_N / 8; ++j) {
                const int col = block_col + 8 * j + 2 * (lane % 4);
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const int row = row0 + 8 * half;
                    if (row < M && col < N)
                        *reinterpret_cast<__half2*>(&C[row * N + col]) =
                            __floats2half2_rn(d[4 * j + 2 * half], d[4 * j + 2 * half + 1]);
                }
            }
        }
    }
    cluster_sync();  // no block exits while another may still arrive on its barriers
}
