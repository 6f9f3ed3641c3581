// What chapter 3 shows of sgemm/03_smem_tiling.cu for the gap of exercise ch3/rect_tile (a variation):
// pasted as the answer it must fail the check (tests/test_exercises.py).
// Each thread stages one element of each tile; zeros past the edges add nothing to acc.
// Threads outside C still load: their elements are needed by the rest of the block.
sA[ty][tx] = load_or_zero(A, row, k0 + tx, M, K);  // zero outside A (common.cuh)
sB[ty][tx] = load_or_zero(B, k0 + ty, col, K, N);
// Barrier 1: no thread may read the tiles before every thread has written its element.
__syncthreads();

for (int k = 0; k < BLOCK; ++k) {
    acc += sA[ty][k] * sB[k][tx];  // sA[ty][k]: broadcast; sB[k][tx]: one row, no conflict
}
// Barrier 2: no thread may overwrite the tiles (next k0) while others still read them.
__syncthreads();
