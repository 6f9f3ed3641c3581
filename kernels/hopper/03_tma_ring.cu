// hopper track, step 03_tma_ring (every step of the track, one line each: python -m gemmlab steps --track hopper).
//
// Extends 02 by a ring. In 02 the block waits for each tile's TMA, multiplies it, then waits at
// __syncthreads() before the next TMA may start: the copy and the math take turns. Here the shared
// memory holds NUM_STAGES stages, and thread 0 keeps up to NUM_STAGES tiles' loads in flight. Two
// mbarriers per stage replace __syncthreads():
//   full[s]  (count 1): thread 0's arrive_expect_tx, then the TMA bytes: the stage holds its tile;
//   empty[s] (count 2): one arrival per warpgroup once its wgmmas are done reading the stage.
// Tile t uses stage s = t % NUM_STAGES in round t / NUM_STAGES; round r's phases have parity r & 1.
// Thread 0 loads tile t + NUM_STAGES into stage s as soon as both warpgroups released it, so it
// waits for the slower warpgroup in the middle of its own: hgemm/08 gives that job to a
// warpgroup of its own.
//
// Layouts: row-major. A is M x K, B is K x N, C is M x N; K and N multiples of 8 (TMA needs
// 16-byte row strides; gemmlab rejects other shapes before launch).
//   stage s: sA (128 x 64 halves, 128-byte rows, swizzled: K-major for wgmma's A), then sB:
//   BLOCK_N / 64 boxes of 64 (k) x 64 (n) halves, each row one k, swizzled (N-major: wgmma's B
//   "transposed"). The stages start 1024-byte aligned; the 2 * NUM_STAGES mbarriers follow them.
// Launch: blockDim 256 (2 warpgroups), gridDim (cdiv(N, BLOCK_N), cdiv(M, 128)), tiles handed out
//   in bands of GROUP_M block rows (see below); dynamic shared
//   memory NUM_STAGES * (128 + BLOCK_N) * 64 * 2 + 1024 (alignment) + 16 * NUM_STAGES bytes;
//   two tensor maps (gemmlab/runtime/tma.py): A with 64 x 128 boxes, B with 64 x 64 boxes, both 128B-swizzled.
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

template <int BLOCK_N, int NUM_STAGES, int GROUP_M>
__global__ void __launch_bounds__(256, 1) hopper_tma_ring(int M, int N, int K, const __half* A, const __half* B,
                                                          __half* C, const TmaMap* a_map, const TmaMap* b_map) {
    constexpr int BLOCK_M = 128, BLOCK_K = 64;   // 64 halves = one 128-byte swizzled row
    constexpr int CONSUMERS = 2;                 // warpgroups 0 and 1, 64 rows each
    constexpr int A_BYTES = BLOCK_M * BLOCK_K * 2;
    constexpr int B_BOX_BYTES = 64 * BLOCK_K * 2;  // one 64-column box of the B tile
    constexpr int STAGE_BYTES = A_BYTES + BLOCK_N * BLOCK_K * 2;
    constexpr int ACC = BLOCK_N / 2;             // accumulators per thread: 64 x BLOCK_N / 128
    static_assert(BLOCK_N == 128 || BLOCK_N == 256, "BLOCK_N must be 128 or 256 (one wgmma of that width)");
    static_assert(NUM_STAGES >= 2, "NUM_STAGES must be at least 2");

    extern __shared__ __align__(1024) unsigned char smem_raw[];
    // Swizzled tiles must start on a 1024-byte boundary of the shared window: round up.
    unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + NUM_STAGES * STAGE_BYTES);
    unsigned long long* empty = full + NUM_STAGES;
    auto sA = [&](int s) { return smem + s * STAGE_BYTES; };
    auto sB = [&](int s) { return smem + s * STAGE_BYTES + A_BYTES; };

    // Which tile: blocks start roughly in launch order (blockIdx.x fastest), and the blocks running
    // at one time share L2. Row-major order (GROUP_M = 1) puts a wave of 132 blocks on a few block
    // rows and every block column: it reads all of B per wave. Grouped order walks down bands of
    // GROUP_M block rows first, so a wave covers a squarer patch of C and re-reads less from DRAM.
    const int tiles_n = gridDim.x, tiles_m = gridDim.y;
    const int id = blockIdx.y * tiles_n + blockIdx.x;
    const int band = id / (GROUP_M * tiles_n);                 // which band of GROUP_M block rows
    const int band_rows = min(GROUP_M, tiles_m - band * GROUP_M);
    const int in_band = id % (GROUP_M * tiles_n);
    const int block_row = (band * GROUP_M + in_band % band_rows) * BLOCK_M;
    const int block_col = (in_band / band_rows) * BLOCK_N;
    const int warpgroup = threadIdx.x / 128;
    const int num_tiles = cdiv(K, BLOCK_K);

    if (threadIdx.x == 0) {
        for (int s = 0; s < NUM_STAGES; ++s) {
            mbarrier_init(&full[s], 1);            // thread 0's arrive_expect_tx, plus the bytes
            mbarrier_init(&empty[s], CONSUMERS);   // one arrival per warpgroup
        }
        fence_barrier_init();
    }
    __syncthreads();

    // Thread 0 loads tile t into stage t % NUM_STAGES.
    auto load = [&](int t) {
        const int s = t % NUM_STAGES;
        // Round t / NUM_STAGES of stage s: wait until both warpgroups released the previous
        // round (parity 1 passes at once in round 0: the buffers start empty).
        mbarrier_wait(&empty[s], ((t / NUM_STAGES) & 1) ^ 1);
        mbarrier_arrive_expect_tx(&full[s], STAGE_BYTES);
        const int k0 = t * BLOCK_K;
        tma_load_2d(sA(s), a_map, k0, block_row, &full[s]);
#pragma unroll
        for (int j = 0; j < BLOCK_N / 64; ++j)
            tma_load_2d(sB(s) + j * B_BOX_BYTES, b_map, block_col + 64 * j, k0, &full[s]);
    };
    if (threadIdx.x == 0) {
        tma_map_acquire(a_map);
        tma_map_acquire(b_map);
        for (int t = 0; t < min(NUM_STAGES, num_tiles); ++t) load(t);  // fill the ring
    }

    const int consumer = warpgroup;  // rows 64 * consumer .. + 63 of the block tile
    float d[ACC];
#pragma unroll
    for (int i = 0; i < ACC; ++i) d[i] = 0.0f;

    for (int t = 0; t < num_tiles; ++t) {
        const int s = t % NUM_STAGES;
        mbarrier_wait(&full[s], (t / NUM_STAGES) & 1);
        // A: this warpgroup's 64 rows, K-major; one k16 slice is 32 bytes further along each row.
        // B: N-major; one k16 slice is 16 rows (2048 bytes) further down; 64-column boxes 8 KB apart.
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
        if (threadIdx.x % 128 == 0) mbarrier_arrive(&empty[s]);  // stage s may be refilled
        if (threadIdx.x == 0 && t + NUM_STAGES < num_tiles) load(t + NUM_STAGES);
    }

    // Epilogue: the accumulator layout of common.cuh, rounded to fp16, two columns per store
    // (N is a multiple of 8, so a pair is either wholly inside C or wholly outside).
    const int lane = threadIdx.x % 32, warp = threadIdx.x % 128 / 32;
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
