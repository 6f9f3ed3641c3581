// SOLUTION of exercise ch6/register_prefetch: the lines of sgemm/08_register_prefetch.cu that fill the gap of ../ch6_register_prefetch.cu.
// Try the exercise first: python -m gemmlab exercise check ch6/register_prefetch
// ---- EXERCISE: prefetch into registers ----
const bool has_next = t + 1 < num_tiles;
if (has_next) load_tiles((t + 1) * BLOCK_K);  // in flight during the FMAs below
compute_tile();
// Barrier 1: no thread may overwrite the tiles with tile t + 1 while others still read them.
__syncthreads();
if (has_next) store_tiles();
// Barrier 2: tile t + 1 complete before anyone reads it.
__syncthreads();
// ---- END ----
