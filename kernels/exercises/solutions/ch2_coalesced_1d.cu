// SOLUTION of exercise ch2/coalesced_1d (a variation of sgemm/02_coalesced.cu): the lines that fill the gap of ../ch2_coalesced_1d.cu.
// Try the exercise first: python -m gemmlab exercise check ch2/coalesced_1d
// ---- EXERCISE: the coalesced mapping from a flat thread index ----
const int col = blockIdx.x * BLOCK_X + threadIdx.x % BLOCK_X;
const int row = blockIdx.y * BLOCK_Y + threadIdx.x / BLOCK_X;
// ---- END ----
