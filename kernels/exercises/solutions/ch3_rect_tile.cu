// SOLUTION of exercise ch3/rect_tile (a variation of sgemm/03_smem_tiling.cu): the lines that fill the gap of ../ch3_rect_tile.cu.
// Try the exercise first: python -m gemmlab exercise check ch3/rect_tile
// ---- EXERCISE: the tile loads and the barriers, BLOCK_K != BLOCK ----
// Thread (tx, ty) stages the elements of each tile in its row of sA (its column of sB) that are
// BLOCK apart: none, one or several, as BLOCK_K < BLOCK or > BLOCK; zeros past the edges.
for (int kk = tx; kk < BLOCK_K; kk += BLOCK) sA[ty][kk] = load_or_zero(A, row, k0 + kk, M, K);
for (int kk = ty; kk < BLOCK_K; kk += BLOCK) sB[kk][tx] = load_or_zero(B, k0 + kk, col, K, N);
// Barrier 1, outside any branch: every thread of the block reaches it, loads or not.
__syncthreads();

for (int k = 0; k < BLOCK_K; ++k) {
    acc += sA[ty][k] * sB[k][tx];
}
// Barrier 2: no thread may overwrite the tiles (next k0) while others still read them.
__syncthreads();
// ---- END ----
