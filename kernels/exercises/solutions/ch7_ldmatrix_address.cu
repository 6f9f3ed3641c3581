// SOLUTION of exercise ch7/ldmatrix_address (a variation of hgemm/01_mma_tiling.cu): the lines that fill the gap of ../ch7_ldmatrix_address.cu.
// Try the exercise first: python -m gemmlab exercise check ch7/ldmatrix_address
// ---- EXERCISE: the ldmatrix address of each lane, B stored transposed ----
const int lane_row = (lane_id / 16) * 8 + lane_id % 8;  // n within the 16-wide piece
const int lane_col = (lane_id / 8) % 2 * 8;             // k: 0 or 8
// ---- END ----
