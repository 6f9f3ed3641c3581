// SOLUTION of exercise ch2/coalesced_index: the lines of sgemm/02_coalesced.cu that fill the gap of ../ch2_coalesced_index.cu.
// Try the exercise first: python -m gemmlab exercise check ch2/coalesced_index
// ---- EXERCISE: the coalesced index mapping ----
const int col = blockIdx.x * BLOCK_X + threadIdx.x;
const int row = blockIdx.y * BLOCK_Y + threadIdx.y;
// ---- END ----
