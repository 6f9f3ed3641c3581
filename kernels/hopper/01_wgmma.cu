// hopper track: fp16 C = A * B with Hopper's instructions, one at a time (chapter 7c; Hopper only:
// compiled for sm_90a). hgemm/08_wgmma is where it ends.
// Every step of the hopper track, one line each: python -m gemmlab steps --track hopper
//
// Extends hgemm/07's idea (a block tile in shared memory, tensor cores on it) with Hopper's wgmma.
// A warpgroup (4 consecutive warps, 128 threads) multiplies a 64 x BLOCK_N x 16 slice with one
// instruction whose A and B it reads straight from shared memory through two 64-bit descriptors (no
// ldmatrix, no fragment registers); the accumulators stay in registers, BLOCK_N / 2 per thread.
// Two warpgroups share a 128 x BLOCK_N block tile, 64 rows each. The tiles must be in the layout
// the descriptor names, here the 128-byte swizzle: rows of 128 bytes (64 halves), and the 16-byte
// chunk c of row r stored at chunk c ^ (r % 8). All 256 threads copy them there, 16 bytes at a time,
// then fence.proxy.async (wgmma reads shared memory through the async proxy, which does not see the
// threads' ordinary stores without it) and __syncthreads(). wgmma is asynchronous: wgmma_fence
// before, commit the group, wait for it before reading d or overwriting the tiles.
//
// Layouts: row-major. A is M x K, B is K x N, C is M x N; K and N multiples of 8 (16-byte copies
// need 16-byte row strides; gemmlab rejects other shapes before launch).
//   sA (128 x 64 halves, 128-byte rows, swizzled: K-major for wgmma's A), then sB: BLOCK_N / 64
//   boxes of 64 (k) x 64 (n) halves, each row one k, swizzled (N-major: wgmma's B "transposed").
//   The tiles start 1024-byte aligned.
// Launch: blockDim 256 (2 warpgroups), gridDim (cdiv(N, BLOCK_N), cdiv(M, 128)), tiles handed out
//   in bands of GROUP_M block rows (see below); dynamic shared
//   memory (128 + BLOCK_N) * 64 * 2 + 1024 (alignment) bytes.
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

template <int BLOCK_N, int GROUP_M>
__global__ void __launch_bounds__(256, 1) hopper_wgmma(int M, int N, int K, const __half* A, const __half* B,
                                                          __half* C) {
    constexpr int BLOCK_M = 128, BLOCK_K = 64;   // 64 halves = one 128-byte swizzled row
    constexpr int A_BYTES = BLOCK_M * BLOCK_K * 2;
    constexpr int B_BOX_BYTES = 64 * BLOCK_K * 2;  // one 64-column box of the B tile
    constexpr int STAGE_BYTES = A_BYTES + BLOCK_N * BLOCK_K * 2;
    constexpr int ACC = BLOCK_N / 2;             // accumulators per thread: 64 x BLOCK_N / 128
    static_assert(BLOCK_N == 128 || BLOCK_N == 256, "BLOCK_N must be 128 or 256 (one wgmma of that width)");

    extern __shared__ __align__(1024) unsigned char smem_raw[];
    // Swizzled tiles must start on a 1024-byte boundary of the shared window: round up.
    unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    unsigned char* sA = smem;
    unsigned char* sB = smem + A_BYTES;

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

    const int consumer = warpgroup;  // rows 64 * consumer .. + 63 of the block tile
    float d[ACC];
#pragma unroll
    for (int i = 0; i < ACC; ++i) d[i] = 0.0f;

    for (int t = 0; t < num_tiles; ++t) {
        // Every thread copies 16-byte chunks into the 128-byte swizzle: chunk c of row r goes to
        // chunk c ^ (r % 8) of that row. Chunks past the edge of A or B are zeros.
        const int k0 = t * BLOCK_K;
#pragma unroll
        for (int i = threadIdx.x; i < BLOCK_M * 8; i += 256) {  // A: 128 rows of 8 chunks
            const int r = i / 8, c = i % 8, row = block_row + r, k = k0 + 8 * c;
            uint4 v = make_uint4(0, 0, 0, 0);
            if (row < M && k < K) v = *reinterpret_cast<const uint4*>(&A[row * K + k]);
            *reinterpret_cast<uint4*>(sA + r * 128 + (c ^ (r % 8)) * 16) = v;
        }
#pragma unroll
        for (int i = threadIdx.x; i < BLOCK_K * BLOCK_N / 8; i += 256) {  // B: 64 rows of BLOCK_N / 8 chunks
            const int r = i / (BLOCK_N / 8), box = i % (BLOCK_N / 8) / 8, c = i % 8;
            const int k = k0 + r, col = block_col + 64 * box + 8 * c;
            uint4 v = make_uint4(0, 0, 0, 0);
            if (k < K && col < N) v = *reinterpret_cast<const uint4*>(&B[k * N + col]);
            *reinterpret_cast<uint4*>(sB + box * B_BOX_BYTES + r * 128 + (c ^ (r % 8)) * 16) = v;
        }
        fence_proxy_async();  // these stores, visible to wgmma's reads
        __syncthreads();      // every thread's chunks are in
        // A: this warpgroup's 64 rows, K-major; one k16 slice is 32 bytes further along each row.
        // B: N-major; one k16 slice is 16 rows (2048 bytes) further down; 64-column boxes 8 KB apart.
        const unsigned char* a_tile = sA + consumer * 64 * 128;
        const unsigned char* b_tile = sB;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BLOCK_K / 16; ++kk)
            WgmmaTile<BLOCK_N>::mma(d, wgmma_desc_sw128(a_tile + kk * 32, 16, 1024),
                                    wgmma_desc_sw128(b_tile + kk * 16 * 128, B_BOX_BYTES, 1024));
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operands(d);
        __syncthreads();  // both warpgroups are done reading the tiles: they may be overwritten
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
