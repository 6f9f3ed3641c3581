// What chapter 2 shows of sgemm/02_coalesced.cu for the gap of exercise ch2/coalesced_1d (a variation):
// pasted as the answer it must fail the check (tests/test_exercises.py).
const int col = blockIdx.x * BLOCK_X + threadIdx.x;
const int row = blockIdx.y * BLOCK_Y + threadIdx.y;
