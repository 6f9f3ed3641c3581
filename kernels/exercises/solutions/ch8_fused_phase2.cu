// SOLUTION of exercise ch8/fused_phase2 (a variation of fused/02_row_panel.cu): the lines that fill the gap of ../ch8_fused_phase2.cu.
// Try the exercise first: python -m gemmlab exercise check ch8/fused_phase2
// ---- EXERCISE: phase 2: E = T C from the M-major panel on chip ----
for (int n0 = 0; n0 < N; n0 += BLOCK_N) {
    for (int m = 0; m < THREAD_M; ++m)
        for (int n = 0; n < THREAD_N; ++n) acc[m][n] = 0.0f;
    for (int l0 = 0; l0 < L; l0 += BLOCK_K) {
        stage_Y(C, L, N, l0, n0);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BLOCK_K; ++k) {
            float a[THREAD_M], b[THREAD_N];
            // Column l0 + k of the panel holds a thread's THREAD_M rows side by side: float2s.
#pragma unroll
            for (int m = 0; m + 1 < THREAD_M; m += 2) {
                const float2 v = *reinterpret_cast<const float2*>(&sT[(l0 + k) * PANEL_M + thread_row + m]);
                a[m] = v.x, a[m + 1] = v.y;
            }
            if (THREAD_M % 2) a[THREAD_M - 1] = sT[(l0 + k) * PANEL_M + thread_row + THREAD_M - 1];
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
// ---- END ----
