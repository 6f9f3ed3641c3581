// What chapter 8 shows of fused/02_row_panel.cu for the gap of exercise ch8/fused_phase2 (a variation):
// pasted as the answer it must fail the check (tests/test_exercises.py).
for (int n0 = 0; n0 < N; n0 += BLOCK_N) {
    for (int m = 0; m < THREAD_M; ++m)
        for (int n = 0; n < THREAD_N; ++n) acc[m][n] = 0.0f;
    for (int l0 = 0; l0 < L; l0 += BLOCK_K) {
        stage_Y(C, L, N, l0, n0);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BLOCK_K; ++k) {
            float a[THREAD_M], b[THREAD_N];
#pragma unroll
            for (int m = 0; m < THREAD_M; ++m) a[m] = sT[(thread_row + m) * LP + l0 + k];
#pragma unroll
            for (int n = 0; n < THREAD_N; ++n) b[n] = sY[k][thread_col + n];
#pragma unroll
            for (int m = 0; m < THREAD_M; ++m)
#pragma unroll
                for (int n = 0; n < THREAD_N; ++n) acc[m][n] += a[m] * b[n];
        }
        __syncthreads();
    }
    for (int m = 0; m < THREAD_M; ++m) {
        const int row = panel_row + thread_row + m;
        for (int n = 0; n < THREAD_N; ++n) {
            const int col = n0 + thread_col + n;
            if (row < M && col < N) E[row * N + col] = acc[m][n];
        }
    }
}
