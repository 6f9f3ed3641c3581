// SOLUTION of exercise ch4/register_blocking (a variation of sgemm/05_2d_blocktiling.cu): the lines that fill the gap of ../ch4_register_blocking.cu.
// Try the exercise first: python -m gemmlab exercise check ch4/register_blocking
// ---- EXERCISE: a 4 x 16 register block, sB read as float4 ----
#pragma unroll
for (int m = 0; m < THREAD_M; ++m) a[m] = sA[thread_row + m][k];  // a column of sA: strided
// Row k of sB is contiguous and thread_col a multiple of 16 floats: THREAD_N / 4 float4s.
#pragma unroll
for (int j = 0; j < THREAD_N / 4; ++j) {
    const float4 v = *reinterpret_cast<const float4*>(&sB[k][thread_col + 4 * j]);
    b[4 * j + 0] = v.x, b[4 * j + 1] = v.y, b[4 * j + 2] = v.z, b[4 * j + 3] = v.w;
}
#pragma unroll
for (int m = 0; m < THREAD_M; ++m) {
#pragma unroll
    for (int n = 0; n < THREAD_N; ++n) {
        acc[m][n] += a[m] * b[n];
    }
}
// ---- END ----
