"""Chapter 5's exercise, the course's solution (see ../ch5_deep_tile_swizzle.py)."""

# ---- EXERCISE: sa_offset(k, m, block_k) ----
def sa_offset(k, m, block_k):
    # a warp's store touches rows k, k + 4, ..., k + block_k - 4 (the block_k / 4 lanes of one row of A),
    # 128 / block_k columns each: XOR k / 4 into the column bits just above those columns.
    # (No pad of a multiple of 4 floats does it at BLOCK_K = 16: 4 rows apart, it shifts the banks by 0 or 16.)
    return k * 128 + (m ^ ((k // 4) * (128 // block_k)))
# ---- END ----
