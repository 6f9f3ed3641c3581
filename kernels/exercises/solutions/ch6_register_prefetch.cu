// SOLUTION of exercise ch6/register_prefetch (a variation of sgemm/08_register_prefetch.cu): the lines that fill the gap of ../ch6_register_prefetch.cu.
// Try the exercise first: python -m gemmlab exercise check ch6/register_prefetch
// ---- EXERCISE: prefetch two tiles ahead ----
// Two k tiles per trip, so that which set of registers and which slot each uses is known at
// compile time (a set picked at run time, by t % 2, would leave the registers for local memory).
for (int t = 0; t < num_tiles; t += 2) {
    // Tile t in slot 0, tile t + 1 in r1: load tile t + 2 into r0 (free: tile t left it), compute
    // tile t, then store tile t + 1 into slot 1 (last read a barrier ago) while its loads have had
    // a whole tile's FMAs to land.
    if (t + 2 < num_tiles) load_tiles(r0, (t + 2) * BLOCK_K);
    compute_tile(0);
    if (t + 1 < num_tiles) store_tiles(r1, 1);
    __syncthreads();  // the one barrier of tile t: slot 1 complete, slot 0 free
    if (t + 1 >= num_tiles) break;
    // The same with the roles swapped: tile t + 1 in slot 1, tile t + 2 in r0.
    if (t + 3 < num_tiles) load_tiles(r1, (t + 3) * BLOCK_K);
    compute_tile(1);
    if (t + 2 < num_tiles) store_tiles(r0, 0);
    __syncthreads();
}
// ---- END ----
