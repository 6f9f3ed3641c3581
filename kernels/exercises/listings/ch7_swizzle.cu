// What chapter 7 shows of hgemm/03_swizzled.cu for the gap of exercise ch7/swizzle (a variation):
// pasted as the answer it must fail the check (tests/test_exercises.py).
constexpr int CHUNKS = WIDTH / 8;             // 16-byte chunks per row
constexpr int XOR = CHUNKS < 8 ? CHUNKS : 8;  // chunk indices the XOR permutes
constexpr int ROWS = 8 / XOR;                 // rows that share one 128-byte line of banks
return row * WIDTH + (((col / 8) ^ (row / ROWS % XOR)) * 8) + col % 8;
