"""Chapter 5's exercise: the transposed store of sA, conflict-free at a deeper tile (BLOCK_K = 16 and 32).

Step 07 (sgemm/07_warptiling: BLOCK_M = 128, 256 threads) stores each float4 of A transposed, one float into
each of 4 rows of sA[BLOCK_K][128]; the chapter counted 2 wavefronts per store request at BLOCK_K = 8 and removed
the conflict with Swizzle<1,4,5>: column m of row k stored at m ^ ((k & 4) << 2). Make the same tile
conflict-free at any BLOCK_K of 8, 16 and 32: write sa_offset(k, m, block_k), the offset in floats at which
sA[k][m] is stored (k < block_k, m < 128). The compute loop reads sA[k][m .. m + 3] as one float4, so keep each
aligned float4 of a row whole and 16-byte aligned, and use at most twice the tile's floats. The check counts the
wavefronts per request of the stores and of those reads with the chapter's model (gemmlab.swizzle).
"""

# ---- EXERCISE: sa_offset(k, m, block_k) ----
def sa_offset(k, m, block_k):
    return k * 128 + m
# ---- END ----
