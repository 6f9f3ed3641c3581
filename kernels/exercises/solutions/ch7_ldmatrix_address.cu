// SOLUTION of exercise ch7/ldmatrix_address: the lines of hgemm/01_mma_tiling.cu that fill the gap of ../ch7_ldmatrix_address.cu.
// Try the exercise first: python -m gemmlab exercise check ch7/ldmatrix_address
// ---- EXERCISE: the ldmatrix address of each lane ----
const int lane_row = lane_id % 16;
const int lane_col = (lane_id / 16) * 8;
// ---- END ----
