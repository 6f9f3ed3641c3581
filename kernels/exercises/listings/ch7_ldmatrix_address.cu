// What chapter 7 shows of hgemm/01_mma_tiling.cu for the gap of exercise ch7/ldmatrix_address (a variation):
// pasted as the answer it must fail the check (tests/test_exercises.py).
const int lane_row = lane_id % 16;
const int lane_col = (lane_id / 16) * 8;
