// SOLUTION of exercise ch4/register_blocking: the lines of sgemm/05_2d_blocktiling.cu that fill the gap of ../ch4_register_blocking.cu.
// Try the exercise first: python -m gemmlab exercise check ch4/register_blocking
// ---- EXERCISE: 2D register blocking ----
#pragma unroll
for (int m = 0; m < THREAD_M; ++m) a[m] = sA[thread_row + m][k];
#pragma unroll
for (int n = 0; n < THREAD_N; ++n) b[n] = sB[k][thread_col + n];
// Outer product of the slivers: every register is reused THREAD_N (a) or THREAD_M (b) times.
#pragma unroll
for (int m = 0; m < THREAD_M; ++m) {
#pragma unroll
    for (int n = 0; n < THREAD_N; ++n) {
        acc[m][n] += a[m] * b[n];
    }
}
// ---- END ----
