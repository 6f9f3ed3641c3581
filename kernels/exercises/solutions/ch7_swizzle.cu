// SOLUTION of exercise ch7/swizzle (a variation of hgemm/03_swizzled.cu): the lines that fill the gap of ../ch7_swizzle.cu.
// Try the exercise first: python -m gemmlab exercise check ch7/swizzle
// ---- EXERCISE: the swizzle for 96-byte rows ----
constexpr int CHUNKS = WIDTH / 8;             // 16-byte chunks per row: 6 in sA (48 halves), 16 in sB
constexpr int POW2 = CHUNKS & -CHUNKS;        // the largest power of two dividing CHUNKS: 2 in sA
constexpr int XOR = POW2 < 8 ? POW2 : 8;      // an XOR below POW2 keeps every chunk inside its row
constexpr int ROWS = 8 / XOR;                 // rows r and r + ROWS start on the same bank group
return row * WIDTH + (((col / 8) ^ (row / ROWS % XOR)) * 8) + col % 8;
// ---- END ----
