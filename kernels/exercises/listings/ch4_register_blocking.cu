// What chapter 4 shows of sgemm/05_2d_blocktiling.cu for the gap of exercise ch4/register_blocking (a variation):
// pasted as the answer it must fail the check (tests/test_exercises.py).
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
