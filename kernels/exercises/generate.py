"""Writes the exercises (kernels/exercises/*.cu) and their solutions (solutions/*.cu) from the real steps: each
exercise is its step's file with one gap (defined below), so a step's edit reaches its exercise by running this
again. tests/test_exercises.py fails when the committed files differ from what this writes.

    python kernels/exercises/generate.py [OUT_DIR]      (default: kernels/exercises itself)
"""
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # kernels/
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "exercises"
SOL = OUT / "solutions"
OUT.mkdir(exist_ok=True); SOL.mkdir(exist_ok=True)

def once(text, old, new):
    assert text.count(old) == 1, (old[:80], text.count(old))
    return text.replace(old, new)

def _dedent(text):
    lines = text.split("\n")
    d = min(len(l) - len(l.lstrip()) for l in lines if l.strip() and not l.startswith("#"))
    return "\n".join(l if l.startswith("#") else l[d:] for l in lines)

def make(name, step, title, edits, gap_old, gap_task, shipped, check_line=None, listing=None):
    """listing: for a variation, the step's own lines for the gap (what the chapter shows), written to
    listings/ so tests/test_exercises.py can paste them as an answer and see them fail;
    edits: (old, new) applied to both; gap_old: the real code the gap replaces (its lines kept in the
    solution); gap_task: comment lines put above the marker; shipped: the template's gap code."""
    text = (ROOT / f"{step}.cu").read_text()
    if listing is not None:
        # the step's lines, in order (a line the exercise moves out of the gap, a static_assert, may lie between)
        assert text.count(listing) == 1 or all(l in text for l in listing.split("\n")), (name, listing[:60])
        (OUT / "listings").mkdir(exist_ok=True)
        (OUT / "listings" / f"{name.replace('/', '_')}.cu").write_text(
            f"// What chapter {name[2:].split('/')[0]} shows of {step}.cu for the gap of exercise {name} (a variation):\n"
            "// pasted as the answer it must fail the check (tests/test_exercises.py).\n" + _dedent(listing))
    for old, new in edits:
        text = once(text, old, new)
    assert text.count(gap_old) == 1, (name, gap_old[:60])
    start = text.index(gap_old)
    line_start = text.rindex("\n", 0, start) + 1
    indent = text[line_start:start]
    assert indent.strip() == "", (name, indent)
    if not indent:  # the gap starts with a #pragma at column 0: indent like its first statement
        indent = next(re.match(r"\s*", l).group(0) for l in gap_old.split("\n") if not l.startswith("#"))
    task = "".join(f"{indent}// {l}".rstrip() + "\n" for l in textwrap.dedent(gap_task).strip("\n").split("\n"))
    head = f"{task}{indent}// ---- EXERCISE: {title} ----\n"
    tail = f"{indent}// ---- END ----\n"
    body_real = text[line_start:start + len(gap_old)]
    if not body_real.endswith("\n"):
        body_real += "\n"; after = start + len(gap_old) + 1
    else:
        after = start + len(gap_old)
    rest = text[after:]
    pre = text[:line_start]
    shipped_txt = textwrap.indent(textwrap.dedent(shipped).strip("\n"), indent, lambda l: True) + "\n"
    stem = name.replace("/", "_")
    banner = (f"// EXERCISE {name} ({step}): fill in the gap between the EXERCISE and END markers below.\n"
              f"// Check it: python -m gemmlab exercise check {name}   (or gemmlab.exercises.check in a notebook)\n//\n")
    (OUT / f"{stem}.cu").write_text(banner + pre + head + shipped_txt + tail + rest)
    (SOL / f"{stem}.cu").write_text(
        (f"// SOLUTION of exercise {name}: the lines of {step}.cu that fill the gap of ../{stem}.cu.\n" if listing is None
         else f"// SOLUTION of exercise {name} (a variation of {step}.cu): the lines that fill the gap of ../{stem}.cu.\n")
        + f"// Try the exercise first: python -m gemmlab exercise check {name}\n"
        + head.split("\n")[-2].lstrip() + "\n" + _dedent(body_real) + "// ---- END ----\n")

# ---- ch2 (a variation): the coalesced mapping for a one-dimensional block (sgemm/02 with blockDim.y = 1)
CH2_1D = """    const int col = blockIdx.x * BLOCK_X + threadIdx.x % BLOCK_X;
    const int row = blockIdx.y * BLOCK_Y + threadIdx.x / BLOCK_X;
"""
CH2_2D = "    const int col = blockIdx.x * BLOCK_X + threadIdx.x;\n    const int row = blockIdx.y * BLOCK_Y + threadIdx.y;\n"
make("ch2/coalesced_1d", "sgemm/02_coalesced", "the coalesced mapping from a flat thread index",
     [("// Extends 01 by swapping x and y: threadIdx.x now picks the column, so a warp reads one B row\n"
       "// segment and writes one C row segment (coalesced), and all its lanes share one A element.\n",
       "// A variation of 02 (chapter 2's exercise): the block is one-dimensional, BLOCK_X * BLOCK_Y threads\n"
       "// along x, and still computes a BLOCK_Y x BLOCK_X tile of C (siboehm's kernel 2 is launched so).\n"),
      ("// Launch: blockDim (BLOCK_X, BLOCK_Y), gridDim (cdiv(N, BLOCK_X), cdiv(M, BLOCK_Y)).\n",
       "// Launch: blockDim (BLOCK_X * BLOCK_Y, 1), gridDim (cdiv(N, BLOCK_X), cdiv(M, BLOCK_Y)).\n"),
      ("    // x picks the column: consecutive threads of a warp walk ALONG a row of C, so at every k\n"
       "    // they read one A element (a broadcast) and consecutive floats of B and C.\n", ""),
      (CH2_2D, CH2_1D)],
     CH2_1D,
     """
     Which element (row, col) of C does this thread compute? The block is one-dimensional here:
     threadIdx.x runs from 0 to BLOCK_X * BLOCK_Y - 1 and threadIdx.y is always 0; the block still
     covers the BLOCK_Y x BLOCK_X tile of C at (blockIdx.y * BLOCK_Y, blockIdx.x * BLOCK_X). The code
     in the gap is correct and its loads do not coalesce. Change it so that they do, for any BLOCK_X
     and BLOCK_Y (the check uses BLOCK_X = 32, BLOCK_Y = 8).
     The launch (do not change it): blockDim (BLOCK_X * BLOCK_Y, 1), gridDim (cdiv(N, BLOCK_X), cdiv(M, BLOCK_Y)).
     """,
     """
     const int col = blockIdx.x * BLOCK_X + threadIdx.x / BLOCK_Y;
     const int row = blockIdx.y * BLOCK_Y + threadIdx.x % BLOCK_Y;
     """, listing=CH2_2D)

# ---- ch3 (a variation): a rectangular tile, BLOCK_K != BLOCK (sgemm/03 with sA BLOCK x BLOCK_K)
CH3_RECT = """        // Thread (tx, ty) stages the elements of each tile in its row of sA (its column of sB) that are
        // BLOCK apart: none, one or several, as BLOCK_K < BLOCK or > BLOCK; zeros past the edges.
        for (int kk = tx; kk < BLOCK_K; kk += BLOCK) sA[ty][kk] = load_or_zero(A, row, k0 + kk, M, K);
        for (int kk = ty; kk < BLOCK_K; kk += BLOCK) sB[kk][tx] = load_or_zero(B, k0 + kk, col, K, N);
        // Barrier 1, outside any branch: every thread of the block reaches it, loads or not.
        __syncthreads();

        for (int k = 0; k < BLOCK_K; ++k) {
            acc += sA[ty][k] * sB[k][tx];
        }
        // Barrier 2: no thread may overwrite the tiles (next k0) while others still read them.
        __syncthreads();
"""
CH3_OLD = """        // Each thread stages one element of each tile; zeros past the edges add nothing to acc.
        // Threads outside C still load: their elements are needed by the rest of the block.
        sA[ty][tx] = load_or_zero(A, row, k0 + tx, M, K);  // zero outside A (common.cuh)
        sB[ty][tx] = load_or_zero(B, k0 + ty, col, K, N);
        // Barrier 1: no thread may read the tiles before every thread has written its element.
        __syncthreads();

        for (int k = 0; k < BLOCK; ++k) {
            acc += sA[ty][k] * sB[k][tx];  // sA[ty][k]: broadcast; sB[k][tx]: one row, no conflict
        }
        // Barrier 2: no thread may overwrite the tiles (next k0) while others still read them.
        __syncthreads();
"""
make("ch3/rect_tile", "sgemm/03_smem_tiling", "the tile loads and the barriers, BLOCK_K != BLOCK",
     [("// Extends 02 by shared-memory tiling: the block slides a BLOCK-wide window along K, each thread\n"
       "// copies one element of A and one of B into shared memory, and the block then reuses every\n"
       "// staged element BLOCK times. Global loads per output element drop from 2K to 2K / BLOCK.\n",
       "// A variation of 03 (chapter 3's exercise): the window along K is BLOCK_K wide, not BLOCK, so the\n"
       "// tiles are rectangular (sA BLOCK x BLOCK_K, sB BLOCK_K x BLOCK) while the block is still\n"
       "// BLOCK x BLOCK threads, one element of C each.\n"),
      ("//   sA[BLOCK][BLOCK]: rows block_row.., columns k0..; sB[BLOCK][BLOCK]: rows k0.., columns\n",
       "//   sA[BLOCK][BLOCK_K]: rows block_row.., columns k0..; sB[BLOCK_K][BLOCK]: rows k0.., columns\n"),
      ("template <int BLOCK>\n", "template <int BLOCK, int BLOCK_K>\n"),
      ("    __shared__ float sA[BLOCK][BLOCK];  // (BLOCK_M = BLOCK) x (BLOCK_K = BLOCK) tile of A\n"
       "    __shared__ float sB[BLOCK][BLOCK];  // (BLOCK_K = BLOCK) x (BLOCK_N = BLOCK) tile of B\n",
       "    __shared__ float sA[BLOCK][BLOCK_K];  // (BLOCK_M = BLOCK) x BLOCK_K tile of A\n"
       "    __shared__ float sB[BLOCK_K][BLOCK];  // BLOCK_K x (BLOCK_N = BLOCK) tile of B\n"),
      ("for (int k0 = 0; k0 < K; k0 += BLOCK) {", "for (int k0 = 0; k0 < K; k0 += BLOCK_K) {"),
      (CH3_OLD, CH3_RECT)],
     CH3_RECT,
     """
     Stage the tiles of this k0 and place the barriers. sA is BLOCK x BLOCK_K and sB BLOCK_K x BLOCK,
     while the block has BLOCK x BLOCK threads: when BLOCK_K < BLOCK some threads have nothing to
     copy, when BLOCK_K > BLOCK each copies several elements. Copy A[row][k0 + kk] into sA[ty][kk] and
     B[k0 + kk][col] into sB[kk][tx], zero outside A or B (load_or_zero(X, r, c, rows, cols) from
     common.cuh), keep each warp's loads coalesced, and put a __syncthreads() wherever one thread could
     otherwise read or overwrite what another has not yet written or finished reading. The check runs
     BLOCK = 32 with BLOCK_K = 8 and BLOCK_K = 64.
     """,
     """
     for (int k = 0; k < BLOCK_K; ++k) {
         acc += sA[ty][k] * sB[k][tx];
     }
     """, listing=CH3_OLD)

# ---- ch4 (a variation): a 4 x 16 register block whose sB sliver is read as float4s (sgemm/05 at THREAD_M = 4,
# THREAD_N = 16): the chapter's 8 x 8 loop, run at this shape, reads b[] one float at a time
CH4_OLD = """#pragma unroll
            for (int m = 0; m < THREAD_M; ++m) a[m] = sA[thread_row + m][k];
#pragma unroll
            for (int n = 0; n < THREAD_N; ++n) b[n] = sB[k][thread_col + n];
            // Outer product of the slivers: every register is reused THREAD_N (a) or THREAD_M (b) times.
#pragma unroll
            for (int m = 0; m < THREAD_M; ++m) {
#pragma unroll
                for (int n = 0; n < THREAD_N; ++n) {
                    acc[m][n] += a[m] * b[n];
                }
            }
"""
CH4_NEW = """#pragma unroll
            for (int m = 0; m < THREAD_M; ++m) a[m] = sA[thread_row + m][k];  // a column of sA: strided
            // Row k of sB is contiguous and thread_col a multiple of 16 floats: THREAD_N / 4 float4s.
#pragma unroll
            for (int j = 0; j < THREAD_N / 4; ++j) {
                const float4 v = *reinterpret_cast<const float4*>(&sB[k][thread_col + 4 * j]);
                b[4 * j + 0] = v.x, b[4 * j + 1] = v.y, b[4 * j + 2] = v.z, b[4 * j + 3] = v.w;
            }
#pragma unroll
            for (int m = 0; m < THREAD_M; ++m) {
#pragma unroll
                for (int n = 0; n < THREAD_N; ++n) {
                    acc[m][n] += a[m] * b[n];
                }
            }
"""
make("ch4/register_blocking", "sgemm/05_2d_blocktiling", "a 4 x 16 register block, sB read as float4", [
     ("// Extends 04 by 2D register blocking: a thread computes a THREAD_M x THREAD_N tile of C. At each\n"
      "// k it copies a THREAD_M sliver of an sA column and a THREAD_N sliver of an sB row into\n"
      "// registers and accumulates their outer product: THREAD_M * THREAD_N FMAs for\n"
      "// THREAD_M + THREAD_N shared-memory loads (8x8: 64 FMAs for 16 loads, 0.25 loads per FMA).\n",
      "// A variation of 05 (chapter 4's exercise): the register block is 4 x 16, not 8 x 8 (THREAD_M = 4,\n"
      "// THREAD_N = 16; the check runs BLOCK_M = BLOCK_N = 128, BLOCK_K = 8, 256 threads). The same\n"
      "// 64 FMAs per k step; a[] is a strided column of sA, b[] a contiguous 64-byte run of an sB row.\n"),
     ("    __shared__ float sB[BLOCK_K][BLOCK_N];  // BLOCK_K x BLOCK_N tile of B\n",
      "    __shared__ __align__(16) float sB[BLOCK_K][BLOCK_N];  // BLOCK_K x BLOCK_N tile of B (float4 reads)\n"),
     ("    static_assert(BLOCK_N % THREAD_N == 0, \"THREAD_N must divide BLOCK_N (whole thread tiles per tile)\");\n",
      "    static_assert(BLOCK_N % THREAD_N == 0, \"THREAD_N must divide BLOCK_N (whole thread tiles per tile)\");\n"
      "    static_assert(THREAD_N % 4 == 0, \"THREAD_N must be a multiple of 4 (float4 reads of sB)\");\n"),
     (CH4_OLD, CH4_NEW)],
     CH4_NEW,
     """
     One k step of the thread's 4 x 16 tile (THREAD_M = 4 rows, THREAD_N = 16 columns): copy the 4
     values of sA's column k (rows thread_row..) into a[] and the 16 values of sB's row k (columns
     thread_col..) into b[], then add their outer product into acc[][]. Chapter 4's 8 x 8 block pays
     8 + 8 = 16 shared loads per k; here the same loop would pay 4 + 16 = 20 for the same 64 FMAs.
     Read b[] with 128-bit loads (float4: sB is 16-byte aligned and thread_col a multiple of 16) so
     that a k step costs 4 + 16 / 4 = 8 shared loads, and keep every array index a compile-time
     constant after unrolling (#pragma unroll), or the arrays leave the registers for local memory.
     """,
     """
     // your code: load the slivers a[] and b[], then acc[m][n] += a[m] * b[n]
     """, listing=CH4_OLD)

# ---- ch7 (a variation): a swizzle for 96-byte rows (hgemm/03 at BLOCK_K = 48; chapter 7 holds the tensor-core bank
# conflicts since chapter 5 became FP32-only): the chapter's min(chunks, 8)-wide XOR leaves a 6-chunk row
SW_OLD = '''    constexpr int CHUNKS = WIDTH / 8;             // 16-byte chunks per row
    constexpr int XOR = CHUNKS < 8 ? CHUNKS : 8;  // chunk indices the XOR permutes
    constexpr int ROWS = 8 / XOR;                 // rows that share one 128-byte line of banks
    return row * WIDTH + (((col / 8) ^ (row / ROWS % XOR)) * 8) + col % 8;
'''
SW_NEW = '''    constexpr int CHUNKS = WIDTH / 8;             // 16-byte chunks per row: 6 in sA (48 halves), 16 in sB
    constexpr int POW2 = CHUNKS & -CHUNKS;        // the largest power of two dividing CHUNKS: 2 in sA
    constexpr int XOR = POW2 < 8 ? POW2 : 8;      // an XOR below POW2 keeps every chunk inside its row
    constexpr int ROWS = 8 / XOR;                 // rows r and r + ROWS start on the same bank group
    return row * WIDTH + (((col / 8) ^ (row / ROWS % XOR)) * 8) + col % 8;
'''
make("ch7/swizzle", "hgemm/03_swizzled", "the swizzle for 96-byte rows", [
     ("""// Extends 02 by XOR-swizzled shared tiles. In 02 the 8 rows of one 8x8 matrix that an ldmatrix
// reads are BLOCK_K * 2 (sA) or BLOCK_N * 2 (sB) bytes apart: with 64-byte rows, rows r and r+2
// fall on the same 4 banks (4 wavefronts per matrix instead of 1); with rows of 128 bytes or
// more all 8 do (8 wavefronts). Swizzling stores chunk c (16 bytes, 8 halves) of row r at chunk
// c ^ ((r / ROWS) % XOR) of the same row, where XOR = min(chunks per row, 8) and ROWS = 8 / XOR
// rows share one 128-byte line of the 32 banks; the 8 consecutive rows of any 8x8 matrix then
// land on 8 different 16-byte bank groups, one wavefront per matrix. The 16-byte stores of the
// copy stay conflict-free too (8 consecutive chunks still cover 8 different bank groups).
// Stores and ldmatrix row addresses go through the one helper `swizzle<WIDTH>(row, col)`; the
// memory and the copy are those of 02, only where each chunk sits in shared memory changes.
// It is CuTe's Swizzle<log2 XOR, 3, log2(ROWS * WIDTH) - 3> on the element offset
// row * WIDTH + col: Swizzle<3,3,3> on a 64-wide row (chunk ^= row % 8), <2,3,3> on BLOCK_K = 32
// (chunk ^= (row / 2) % 4), <3,3,4> on BLOCK_N = 128; gemmlab/chapters/swizzle.py is the Python twin.
""", """// A variation of 03 (chapter 7's exercise): BLOCK_K = 48, so a row of sA is 96 bytes (6 chunks of
// 16 bytes), a width that is not a power of two; sB keeps BLOCK_N = 128 (256-byte rows).
// 03 extends 02 by XOR-swizzled shared tiles. In 02 the 8 rows of one 8x8 matrix that an ldmatrix
// reads are BLOCK_K * 2 (sA) or BLOCK_N * 2 (sB) bytes apart: with 64-byte rows, rows r and r+2
// fall on the same 4 banks (4 wavefronts per matrix instead of 1); with rows of 128 bytes or
// more all 8 do (8 wavefronts). Stores and ldmatrix row addresses go through the one helper
// `swizzle<WIDTH>(row, col)`; the memory and the copy are those of 02, only where each 16-byte
// chunk sits in shared memory changes.
"""),
     ("""// Element offset of (row, col) in a row-major shared tile WIDTH halves wide whose 16-byte chunks
// are XOR-swizzled: chunk col / 8 of a row is stored at chunk (col / 8) ^ ((row / ROWS) % XOR),
// XOR = min(WIDTH / 8, 8) (the XOR stays inside the row), ROWS = 8 / XOR (rows per 128 bytes).
// The 8 halves of a chunk stay together and in order, so 16-byte accesses keep working.
""", """// Element offset of (row, col) in a row-major shared tile WIDTH halves wide (WIDTH = BLOCK_K = 48
// for sA, BLOCK_N = 128 for sB) whose 16-byte chunks (8 halves) are XOR-swizzled.
"""),
     ("""    constexpr int ROWS = 8 / XOR;                 // rows that share one 128-byte line of banks
    static_assert(WIDTH >= 16 && (WIDTH & (WIDTH - 1)) == 0,
                  "swizzled tile width must be a power of two, at least 16 halves");
""", """    constexpr int ROWS = 8 / XOR;                 // rows that share one 128-byte line of banks
"""),
     ("""__device__ __forceinline__ int swizzle(int row, int col) {
""", """__device__ __forceinline__ int swizzle(int row, int col) {
    static_assert(WIDTH >= 16 && WIDTH % 16 == 0,
                  "swizzled tile width must be a whole, even number of 16-byte chunks");
"""), (SW_OLD, SW_NEW)],
     SW_NEW,
     """
     Return where element (row, col) is stored. The rules: (1) a permutation inside each row: every
     (row, col) of the tile gets its own offset, in the same row; (2) the 8 halves of a 16-byte chunk
     stay together and in order (the copy stores whole chunks, ldmatrix reads whole chunks); (3) the 8
     consecutive rows of any 8x8 matrix that an ldmatrix reads (8 rows, one 16-byte chunk column) fall
     on 8 different 16-byte groups of banks. 32 banks x 4 bytes = 128 bytes: a row of sA (96 bytes,
     BLOCK_K = 48 here) is three quarters of that, a row of sB (256 bytes) two of it. One function
     serves both widths. The gap as shipped does not swizzle.
     """,
     """
     return row * WIDTH + col;  // not swizzled: correct, with bank conflicts
     """, listing=SW_OLD)

# ---- ch7 (a variation): the ldmatrix addresses of the transposed B operand (hgemm/01 with sB stored K-major,
# B^T, and read by ldmatrix.x4 without .trans): the chapter's walk (A's, and B's with .trans) reads the wrong quarters
CH7_LANES = """            const int lane_row = lane_id % 16;
            const int lane_col = (lane_id / 16) * 8;
"""
CH7_BT = """            const int lane_row = (lane_id / 16) * 8 + lane_id % 8;  // n within the 16-wide piece
            const int lane_col = (lane_id / 8) % 2 * 8;             // k: 0 or 8
"""
make("ch7/ldmatrix_address", "hgemm/01_mma_tiling", "the ldmatrix address of each lane, B stored transposed", [
     ("// Extends nothing: the first tensor-core step. Three levels of tiling:\n",
      "// A variation of 01 (chapter 7's exercise): B's tile is stored transposed in shared memory,\n"
      "// sB[BLOCK_N][BLOCK_K] (K-major, as mma wants B), so ldmatrix reads it without .trans.\n"
      "// Three levels of tiling, as in 01:\n"),
     ("//   sB[BLOCK_K][BLOCK_N]: sB[k][n], n contiguous (row-major); mma wants B with k contiguous (\"col\"), so\n"
      "//   ldmatrix.trans transposes each 8x8 matrix on the way into registers.\n",
      "//   sB[BLOCK_N][BLOCK_K]: K-major tile of B (B transposed: row n holds column n of B), the\n"
      "//   layout mma wants for B (\"col\"), so a plain ldmatrix (no .trans) reads it.\n"),
     ("    __shared__ __align__(16) __half sB[BLOCK_K][BLOCK_N];  // BLOCK_K x BLOCK_N, sB[k][n], n contiguous\n",
      "    __shared__ __align__(16) __half sB[BLOCK_N][BLOCK_K];  // BLOCK_N x BLOCK_K, K-major (B^T)\n"),
     ("            sB[r][c] = (gr < K && gc < N) ? B[gr * N + gc] : __float2half(0.0f);\n",
      "            sB[c][r] = (gr < K && gc < N) ? B[gr * N + gc] : __float2half(0.0f);  // transposed\n"),
     ("""            // One ldmatrix.x4 per 16x16 piece. Lane l points at row (l % 16), column
            // 8 * (l / 16) of the piece, so matrices 0..3 are its (top, k 0-7), (bottom, k 0-7),
            // (top, k 8-15), (bottom, k 8-15) 8x8 quarters.
            //   A piece (m16 x k16): registers {0,1} are the mma A fragment for k 0-7, {2,3} for
            //   k 8-15 (together: the m16n8k16 A fragment).
            //   B piece (k16 x n16), transposed: registers {0,1} are the B fragments of the left
            //   8 columns for k 0-7 and k 8-15, {2,3} those of the right 8 columns.
""" + CH7_LANES, """            // One ldmatrix.x4 per 16x16 piece. A piece (m16 x k16): lane l points at row (l % 16),
            // column 8 * (l / 16), so matrices 0..3 are its (top, k 0-7), (bottom, k 0-7), (top, k 8-15),
            // (bottom, k 8-15) quarters: registers {0,1} the mma A fragment for k 0-7, {2,3} for k 8-15.
            const int a_row = lane_id % 16;
            const int a_col = (lane_id / 16) * 8;
            // B piece (n16 x k16 of sB, B transposed): registers {0,1} must be the B fragments of
            // the first 8 columns of C (n 0-7) for k 0-7 and k 8-15, {2,3} those of n 8-15.
""" + CH7_BT),
     ("                            &sA[warp_row + m * MMA_M + lane_row][kk + lane_col]);\n",
      "                            &sA[warp_row + m * MMA_M + a_row][kk + a_col]);\n"),
     ("""                ldmatrix_x4_trans(rB[n][0][0], rB[n][1][0], rB[n + 1][0][0], rB[n + 1][1][0],
                                  &sB[kk + lane_row][warp_col + n * MMA_N + lane_col]);
""", """                ldmatrix_x4(rB[n][0][0], rB[n][1][0], rB[n + 1][0][0], rB[n + 1][1][0],
                            &sB[warp_col + n * MMA_N + lane_row][kk + lane_col]);
""")],
     CH7_BT,
     """
     ldmatrix.x4 takes one row address from each lane: lanes 8i .. 8i + 7 give the addresses of
     rows 0..7 of matrix i (each row: 8 halves, 16 bytes). Here it reads a 16 x 16 piece of sB, rows n
     (columns of C), columns k, and its matrices 0..3 land in rB[n][0], rB[n][1], rB[n + 1][0],
     rB[n + 1][1]: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15). Which row
     (lane_row, 0..15, an n) and column (lane_col, 0 or 8, a k) of the piece must lane lane_id point at?
     (A's walk, a_row and a_col above, takes the quarters in another order.)
     """,
     """
     const int lane_row = 0;  // your expression of lane_id
     const int lane_col = 0;  // your expression of lane_id
     """, listing=CH7_LANES)

# ---- ch6 (a variation): prefetch two tiles ahead (sgemm/08 with two sets of staging registers and two shared
# slots, one barrier per K tile): the chapter's loop keeps one tile ahead, in one set, with two barriers a tile
_FMA = """#pragma unroll
        for (int k = 0; k < BLOCK_K; ++k) {
            // The slivers as float4s, one per sub-tile: sA row k holds column k of the A tile.
#pragma unroll
            for (int i = 0; i < WARP_ITERS_M; ++i) {
                const float4 v = *reinterpret_cast<const float4*>(&sA[k][thread_row + i * WARP_SUB_M]);
                a[4 * i + 0] = v.x, a[4 * i + 1] = v.y, a[4 * i + 2] = v.z, a[4 * i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < WARP_ITERS_N; ++j) {
                const float4 v = *reinterpret_cast<const float4*>(&sB[k][thread_col + j * WARP_SUB_N]);
                b[4 * j + 0] = v.x, b[4 * j + 1] = v.y, b[4 * j + 2] = v.z, b[4 * j + 3] = v.w;
            }
#pragma unroll
            for (int m = 0; m < THREAD_M; ++m) {
#pragma unroll
                for (int n = 0; n < THREAD_N; ++n) {
                    acc[m][n] += a[m] * b[n];
                }
            }
        }
"""
CH6_LOOP = """    for (int t = 0; t < num_tiles; ++t) {
        const bool has_next = t + 1 < num_tiles;
        if (has_next) load_tiles((t + 1) * BLOCK_K);  // in flight during the FMAs below

""" + _FMA + """
        // Barrier 1: no thread may overwrite the tiles with tile t + 1 while others still read them.
        __syncthreads();
        if (has_next) store_tiles();
        // Barrier 2: tile t + 1 complete before anyone reads it.
        __syncthreads();
    }
"""
CH6_TWO_AHEAD = """    // Two k tiles per trip, so that which set of registers and which slot each uses is known at
    // compile time (a set picked at run time, by t % 2, would leave the registers for local memory).
    for (int t = 0; t < num_tiles; t += 2) {
        // Tile t in slot 0, tile t + 1 in r1: load tile t + 2 into r0 (free: tile t left it), compute
        // tile t, then store tile t + 1 into slot 1 (last read a barrier ago) while its loads have had
        // a whole tile's FMAs to land.
        if (t + 2 < num_tiles) load_tiles(r0, (t + 2) * BLOCK_K);
        compute_tile(0);
        if (t + 1 < num_tiles) store_tiles(r1, 1);
        __syncthreads();  // the one barrier of tile t: slot 1 complete, slot 0 free
        if (t + 1 >= num_tiles) break;
        // The same with the roles swapped: tile t + 1 in slot 1, tile t + 2 in r0.
        if (t + 3 < num_tiles) load_tiles(r1, (t + 3) * BLOCK_K);
        compute_tile(1);
        if (t + 2 < num_tiles) store_tiles(r0, 0);
        __syncthreads();
    }
"""
_FMA_SLOT = _FMA.replace("&sA[k][", "&sA[slot][k][").replace("&sB[k][", "&sB[slot][k][")
_LAMBDA = ("    // The FMAs of the tile in shared slot `slot`: acc += its A tile x its B tile.\n"
           "    auto compute_tile = [&](int slot) {\n" + _FMA_SLOT + "    };\n\n")
make("ch6/register_prefetch", "sgemm/08_register_prefetch", "prefetch two tiles ahead", [
     ("""// Extends 07 by loading the next tile while computing this one, to hide the latency of global
// memory: the "makeshift async copy" of seed 001 (kernel 4) applied to the fp32 kernel. In 07 each
""", """// A variation of 08 (chapter 6's exercise): the loads run two tiles ahead, not one. Two sets of
// staging registers (r0, r1) and two shared slots: while tile t is computed from one slot, tile
// t + 1 waits in registers and tile t + 2 is loading, so a load has two tiles' FMAs to land, and
// one barrier per K tile is enough. 08, which it varies, extends 07 by loading the next tile while
// computing this one, to hide the latency of global
// memory: the "makeshift async copy" of seed 001 (kernel 4) applied to the fp32 kernel. In 07 each
"""),
     ("""    static_assert((BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 4 <= 48 * 1024,
                  "the A and B tiles exceed 48 KB of static shared memory");
""", """    static_assert(2 * (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 4 <= 48 * 1024,
                  "two slots of the A and B tiles exceed 48 KB of static shared memory");
"""),
     ("""    __shared__ __align__(16) float sA[BLOCK_K][BLOCK_M];  // BLOCK_M x BLOCK_K tile of A, M-major
    __shared__ __align__(16) float sB[BLOCK_K][BLOCK_N];  // BLOCK_K x BLOCK_N tile of B
""", """    __shared__ __align__(16) float sA[2][BLOCK_K][BLOCK_M];  // two slots: BLOCK_M x BLOCK_K tiles of A, M-major
    __shared__ __align__(16) float sB[2][BLOCK_K][BLOCK_N];  // two slots: BLOCK_K x BLOCK_N tiles of B
"""),
     ("""    float4 staged_a[A_LOADS];            // this thread's float4s of the next A tile, on their way to sA
    float4 staged_b[B_LOADS];            // this thread's float4s of the next B tile, on their way to sB
""", """    struct Staged {                      // this thread's float4s of one A and B tile, on their way to shared
        float4 a[A_LOADS];
        float4 b[B_LOADS];
    };
    Staged r0, r1;                       // two sets: one tile waits in one while the next loads into the other
"""),
     ("    auto load_tiles = [&](int k0) {\n", "    auto load_tiles = [&](Staged& s, int k0) {  // global -> registers s\n"),
     ("                staged_a[i] = a_inside ?", "                s.a[i] = a_inside ?"),
     ("                staged_b[i] = b_inside ?", "                s.b[i] = b_inside ?"),
     ("""                                 : load_float4_guarded(A, row, col, M, K, a_vec);""",
      """                               : load_float4_guarded(A, row, col, M, K, a_vec);"""),
     ("""                                 : load_float4_guarded(B, row, col, K, N, b_vec);""",
      """                               : load_float4_guarded(B, row, col, K, N, b_vec);"""),
     ("    auto store_tiles = [&]() {\n", "    auto store_tiles = [&](const Staged& s, int slot) {  // registers s -> shared slot\n"),
     ("""                sA[c + 0][r] = staged_a[i].x;
                sA[c + 1][r] = staged_a[i].y;
                sA[c + 2][r] = staged_a[i].z;
                sA[c + 3][r] = staged_a[i].w;
""", """                sA[slot][c + 0][r] = s.a[i].x;
                sA[slot][c + 1][r] = s.a[i].y;
                sA[slot][c + 2][r] = s.a[i].z;
                sA[slot][c + 3][r] = s.a[i].w;
"""),
     ("            if (e < B_VECS) *reinterpret_cast<float4*>(&sB[r][c]) = staged_b[i];\n",
      "            if (e < B_VECS) *reinterpret_cast<float4*>(&sB[slot][r][c]) = s.b[i];\n"),
     ("""    const int num_tiles = cdiv(K, BLOCK_K);
    load_tiles(0);
    store_tiles();
    __syncthreads();  // tile 0 is in shared memory for everyone
""", _LAMBDA + """    const int num_tiles = cdiv(K, BLOCK_K);
    load_tiles(r0, 0);
    store_tiles(r0, 0);
    if (num_tiles > 1) load_tiles(r1, BLOCK_K);  // tile 1 waits in r1
    __syncthreads();  // tile 0 is in slot 0 for everyone
"""),
     ("\n" + CH6_LOOP, "\n" + CH6_TWO_AHEAD)],
     CH6_TWO_AHEAD,
     """
     The K loop. Before it, tile 0 is in shared slot 0 and tile 1 in the registers r1. The helpers:
     load_tiles(r, k0) (global -> the registers r), store_tiles(r, slot) (registers -> shared slot 0
     or 1) and compute_tile(slot) (the FMAs of the tile in that slot). Chapter 6's step 08 keeps one
     tile ahead, in one set of registers and one buffer, with two barriers per tile. Here keep two
     tiles ahead: while tile t is computed, tile t + 1 waits in one set of registers and the loads of
     tile t + 2 are in flight into the other; one __syncthreads() per K tile. The registers must stay
     registers: which set a line uses has to be known at compile time. The gap as shipped is 07's
     order: correct, and nothing overlaps the loads.
     """,
     """
     for (int t = 0; t < num_tiles; ++t) {  // 07's order: nothing overlaps the loads
         compute_tile(0);
         __syncthreads();
         if (t + 1 < num_tiles) load_tiles(r0, (t + 1) * BLOCK_K);  // waits for global memory
         if (t + 1 < num_tiles) store_tiles(r0, 0);
         __syncthreads();
     }
     """, listing=CH6_LOOP)

# ---- ch8 (a variation): the fused kernel's second phase with the panel of T stored M-major (fused/02 with
# sT[l][m], as sX holds A's slice): the chapter's phase 2 reads the panel row-major
CH8_A_OLD = "                for (int m = 0; m < THREAD_M; ++m) a[m] = sT[(thread_row + m) * LP + l0 + k];\n"
CH8_A_NEW = """                // Column l0 + k of the panel holds a thread's THREAD_M rows side by side: float2s.
#pragma unroll
                for (int m = 0; m + 1 < THREAD_M; m += 2) {
                    const float2 v = *reinterpret_cast<const float2*>(&sT[(l0 + k) * PANEL_M + thread_row + m]);
                    a[m] = v.x, a[m + 1] = v.y;
                }
                if (THREAD_M % 2) a[THREAD_M - 1] = sT[(l0 + k) * PANEL_M + thread_row + THREAD_M - 1];
"""
CH8_PHASE2 = """    for (int n0 = 0; n0 < N; n0 += BLOCK_N) {
        for (int m = 0; m < THREAD_M; ++m)
            for (int n = 0; n < THREAD_N; ++n) acc[m][n] = 0.0f;
        for (int l0 = 0; l0 < L; l0 += BLOCK_K) {
            stage_Y(C, L, N, l0, n0);
            __syncthreads();
#pragma unroll
            for (int k = 0; k < BLOCK_K; ++k) {
                float a[THREAD_M], b[THREAD_N];
""" + CH8_A_NEW + """#pragma unroll
                for (int n = 0; n < THREAD_N; ++n) b[n] = sY[k][thread_col + n];
#pragma unroll
                for (int m = 0; m < THREAD_M; ++m)
#pragma unroll
                    for (int n = 0; n < THREAD_N; ++n) acc[m][n] += a[m] * b[n];
            }
            __syncthreads();
        }
        for (int m = 0; m < THREAD_M; ++m) {
            const int row = panel_row + thread_row + m;
            for (int n = 0; n < THREAD_N; ++n) {
                const int col = n0 + thread_col + n;
                if (row < M && col < N) E[row * N + col] = acc[m][n];
            }
        }
    }
"""
CH8_LISTING = CH8_PHASE2.replace(CH8_A_NEW, "#pragma unroll\n" + CH8_A_OLD)
make("ch8/fused_phase2", "fused/02_row_panel", "phase 2: E = T C from the M-major panel on chip", [
     ("// Extends 01 by tiling. A block owns PANEL_M rows of E. Phase 1 computes those rows of T = A * B\n",
      "// A variation of 02 (chapter 8's exercise): phase 1 stores the panel of T M-major, sT[l][m] (as sX\n"
      "// holds A's slice), so a thread's THREAD_M values of one column l of T sit side by side.\n"
      "// 02 extends 01 by tiling. A block owns PANEL_M rows of E. Phase 1 computes those rows of T = A * B\n"),
     ("//   sT[PANEL_M][LP] (dynamic shared memory): rows panel_row.. of T; columns L..LP-1 hold zeros.\n",
      "//   sT[LP][PANEL_M] (dynamic shared memory): rows panel_row.. of T, M-major: sT[l * PANEL_M + m] =\n"
      "//   T[panel_row + m][l]; rows L..LP-1 of sT hold zeros.\n"),
     ("    extern __shared__ float sT[];                // PANEL_M x LP: the panel of T = A * B\n",
      "    extern __shared__ float sT[];                // LP x PANEL_M: the panel of T = A * B, M-major\n"),
     ("                if (n0 + thread_col + n < LP) sT[(thread_row + m) * LP + n0 + thread_col + n] = acc[m][n];\n",
      "                if (n0 + thread_col + n < LP) sT[(n0 + thread_col + n) * PANEL_M + thread_row + m] = acc[m][n];\n"),
     ("#pragma unroll\n" + CH8_A_OLD, CH8_A_NEW)],
     CH8_PHASE2,
     """
     Phase 2: rows panel_row .. panel_row + PANEL_M - 1 of E = T * C, where those rows of T are in
     sT, M-major this time: T[panel_row + m][l] is sT[l * PANEL_M + m] (LP x PANEL_M, zeros past row
     L), so a thread's THREAD_M values of one column of T sit side by side: read them in pairs, as
     float2s (thread_row is even when THREAD_M is). Go over E BLOCK_N columns at a time; for
     each, slide along L in BLOCK_K steps: stage C's slice with stage_Y(C, L, N, l0, n0) into sY,
     then give each thread its THREAD_M x THREAD_N register tile as in phase 1 (a[] from sT, b[]
     from sY), and store the tile into E where it lies inside (M x N). C is read from global memory
     once per block; T never leaves the chip. Mind the barriers around sY.
     """,
     """
     // your code: phase 2
     """, listing=CH8_LISTING)
# ---- ch7c (Hopper, a variation): the consumers' ring position as a (stage, phase) pair (hgemm/08)
RING_ADVANCE = """        // Advance to the next tile's stage: the ring wraps after NUM_STAGES tiles, and each wrap
        // starts a new round of every full[s], whose completed phase has the other parity.
        if (++s == NUM_STAGES) {
            s = 0;
            phase ^= 1;
        }
"""
make("ch7c/ring_phase", "hgemm/08_wgmma", "advance the consumer's (stage, phase)",
     [("    for (int t = 0; t < num_tiles; ++t) {\n"
       "        const int s = t % NUM_STAGES;\n"
       "        mbarrier_wait(&full[s], (t / NUM_STAGES) & 1);\n",
       "    int s = 0;           // the stage this consumer reads next\n"
       "    unsigned phase = 0;  // the parity of the phase of full[s] it waits for (its round, mod 2)\n"
       "    for (int t = 0; t < num_tiles; ++t) {\n"
       "        mbarrier_wait(&full[s], phase);\n"),
      ("        if (threadIdx.x % 128 == 0) mbarrier_arrive(&empty[s]);  // stage s may be refilled\n",
       "        if (threadIdx.x % 128 == 0) mbarrier_arrive(&empty[s]);  // stage s may be refilled\n" + RING_ADVANCE),
      ("// Step 08 (Hopper only: compiled for sm_90a) computes the same C = A * B the way Hopper wants it.\n",
       "// Step 08 (Hopper only: compiled for sm_90a) computes the same C = A * B the way Hopper wants it.\n"
       "// A variation of it (chapter 7c's exercise): the consumers keep their place in the ring as a\n"
       "// (stage, phase) pair carried from one k tile to the next, as CUTLASS's PipelineState does,\n"
       "// instead of computing it from t.\n")],
     RING_ADVANCE,
     """
     The consumer keeps its place in the ring in two variables carried across k tiles: s, the stage
     it reads next, and phase, the parity it passes to mbarrier_wait(&full[s], phase). Both start at
     0. Update them for the next tile. No division by NUM_STAGES: the check runs NUM_STAGES = 3 and 5,
     with enough k tiles for several trips round the ring.
     """,
     """
     // your code: advance s and phase
     """, listing="        const int s = t % NUM_STAGES;\n        mbarrier_wait(&full[s], (t / NUM_STAGES) & 1);\n")

print(f"written to {OUT}")
