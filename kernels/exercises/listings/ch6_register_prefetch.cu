// What chapter 6 shows of sgemm/08_register_prefetch.cu for the gap of exercise ch6/register_prefetch (a variation):
// pasted as the answer it must fail the check (tests/test_exercises.py).
for (int t = 0; t < num_tiles; ++t) {
    const bool has_next = t + 1 < num_tiles;
    if (has_next) load_tiles((t + 1) * BLOCK_K);  // in flight during the FMAs below

#pragma unroll
    for (int k = 0; k < BLOCK_K; ++k) {
        // The slivers as float4s, one per sub-tile: sA row k holds column k of the A tile.
#pragma unroll
        for (int i = 0; i < WARP_ITERS_M; ++i) {
            const float4 v = *reinterpret_cast<const float4*>(&sA[k][thread_row + i * WARP_SUB_M]);
            a[4 * i + 0] = v.x, a[4 * i + 1] = v.y, a[4 * i + 2] = v.z, a[4 * i + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < WARP_ITERS_N; ++j) {
            const float4 v = *reinterpret_cast<const float4*>(&sB[k][thread_col + j * WARP_SUB_N]);
            b[4 * j + 0] = v.x, b[4 * j + 1] = v.y, b[4 * j + 2] = v.z, b[4 * j + 3] = v.w;
        }
#pragma unroll
        for (int m = 0; m < THREAD_M; ++m) {
#pragma unroll
            for (int n = 0; n < THREAD_N; ++n) {
                acc[m][n] += a[m] * b[n];
            }
        }
    }

    // Barrier 1: no thread may overwrite the tiles with tile t + 1 while others still read them.
    __syncthreads();
    if (has_next) store_tiles();
    // Barrier 2: tile t + 1 complete before anyone reads it.
    __syncthreads();
}
