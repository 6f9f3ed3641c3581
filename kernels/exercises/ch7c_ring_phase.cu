// EXERCISE ch7c/ring_phase (hgemm/08_wgmma): fill in the gap between the EXERCISE and END markers below.
// Check it: python -m gemmlab exercise check ch7c/ring_phase   (or gemmlab.exercises.check in a notebook)
//
// hgemm track, step 08_wgmma (every step of the track, one line each: python -m gemmlab steps --track hgemm).
//
// Step 08 (Hopper only: compiled for sm_90a) computes the same C = A * B the way Hopper wants it.
// A variation of it (chapter 7c's exercise): the consumers keep their place in the ring as a
// (stage, phase) pair carried from one k tile to the next, as CUTLASS's PipelineState does,
// instead of computing it from t.
// Chapter 7c builds it in steps, the hopper track (kernels/hopper/): wgmma from tiles the threads
// copy (01), TMA and one mbarrier (02), a ring of full/empty mbarriers (03).
//
// Extends hopper/03_tma_ring by warp specialization. In 03 thread 0 is both the loader and a
// consumer: it refills a stage only after its own warpgroup's wgmmas, and waits there for the
// other warpgroup's release. Here the block has a third warpgroup, the producer (warpgroup 0: one
// thread issues the TMA loads into the ring); warpgroups 1 and 2 are the consumers (each multiplies
// 64 rows of the 128-row block tile by the BLOCK_N columns). The producer waits on `empty`, the
// consumers on `full`, and neither waits inside the other's work. 384 threads cap each at 168
// registers (__launch_bounds__(384, 1)); setmaxnreg moves them at run time: the producer gives
// its registers back (40), the consumers may claim up to 232 (at BLOCK_N = 256 they fit in 168).
//
// Layouts: row-major. A is M x K, B is K x N, C is M x N; K and N multiples of 8 (TMA needs
// 16-byte row strides; gemmlab rejects other shapes before launch).
//   stage s: sA (128 x 64 halves, 128-byte rows, swizzled: K-major for wgmma's A), then sB:
//   BLOCK_N / 64 boxes of 64 (k) x 64 (n) halves, each row one k, swizzled (N-major: wgmma's B
//   "transposed"). The stages start 1024-byte aligned; the 2 * NUM_STAGES mbarriers follow them.
// Launch: blockDim 384 (3 warpgroups), gridDim (cdiv(N, BLOCK_N), cdiv(M, 128)), tiles handed out
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
__global__ void __launch_bounds__(384, 1) hgemm_wgmma(int M, int N, int K, const __half* A, const __half* B,
                                                      __half* C, const TmaMap* a_map, const TmaMap* b_map) {
    constexpr int BLOCK_M = 128, BLOCK_K = 64;   // 64 halves = one 128-byte swizzled row
    constexpr int CONSUMERS = 2;                 // warpgroups 1 and 2, 64 rows each
    constexpr int A_BYTES = BLOCK_M * BLOCK_K * 2;
    constexpr int B_BOX_BYTES = 64 * BLOCK_K * 2;  // one 64-column box of the B tile
    constexpr int STAGE_BYTES = A_BYTES + BLOCK_N * BLOCK_K * 2;
    constexpr int ACC = BLOCK_N / 2;             // accumulators per consumer thread: 64 x BLOCK_N / 128
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
            for (int t = 0; t < num_tiles; ++t) {
                const int s = t % NUM_STAGES;
                // Round t / NUM_STAGES of stage s: wait until the consumers released the previous
                // round (parity 1 passes at once in round 0: the buffers start empty).
                mbarrier_wait(&empty[s], ((t / NUM_STAGES) & 1) ^ 1);
                mbarrier_arrive_expect_tx(&full[s], STAGE_BYTES);
                const int k0 = t * BLOCK_K;
                tma_load_2d(sA(s), a_map, k0, block_row, &full[s]);
#pragma unroll
                for (int j = 0; j < BLOCK_N / 64; ++j)
                    tma_load_2d(sB(s) + j * B_BOX_BYTES, b_map, block_col + 64 * j, k0, &full[s]);
            }
        }
        return;
    }

    setmaxnreg_inc<232>();
    const int consumer = warpgroup - 1;  // rows 64 * consumer .. + 63 of the block tile
    float d[ACC];
#pragma unroll
    for (int i = 0; i < ACC; ++i) d[i] = 0.0f;

    int s = 0;           // the stage this consumer reads next
    unsigned phase = 0;  // the parity of the phase of full[s] it waits for (its round, mod 2)
    for (int t = 0; t < num_tiles; ++t) {
        mbarrier_wait(&full[s], phase);
        // A: this consumer's 64 rows, K-major; one k16 slice is 32 bytes further along each row.
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
        // The consumer keeps its place in the ring in two variables carried across k tiles: s, the stage
        // it reads next, and phase, the parity it passes to mbarrier_wait(&full[s], phase). Both start at
        // 0. Update them for the next tile. No division by NUM_STAGES: the check runs NUM_STAGES = 3 and 5,
        // with enough k tiles for several trips round the ring.
        // ---- EXERCISE: advance the consumer's (stage, phase) ----
        // your code: advance s and phase
        // ---- END ----
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
