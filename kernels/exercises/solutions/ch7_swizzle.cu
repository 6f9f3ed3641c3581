// SOLUTION of exercise ch7/swizzle: the lines of hgemm/03_swizzled.cu that fill the gap of ../ch7_swizzle.cu.
// Try the exercise first: python -m gemmlab exercise check ch7/swizzle
// ---- EXERCISE: the swizzle ----
constexpr int CHUNKS = WIDTH / 8;             // 16-byte chunks per row
constexpr int XOR = CHUNKS < 8 ? CHUNKS : 8;  // chunk indices the XOR permutes
constexpr int ROWS = 8 / XOR;                 // rows that share one 128-byte line of banks
return row * WIDTH + (((col / 8) ^ (row / ROWS % XOR)) * 8) + col % 8;
// ---- END ----
