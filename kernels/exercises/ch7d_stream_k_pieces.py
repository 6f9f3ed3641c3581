"""Chapter 7d's exercise: stream-K's pieces when a block's range spans several tiles.

Step 12 (hgemm/12_stream_k) lays the last wave's k tiles end to end, k tile kt of tile i numbered
i * k_tiles + kt, and gives block b of `blocks` the range tiles * k_tiles * b // blocks .. tiles * k_tiles *
(b + 1) // blocks - 1. Its unit() cuts a range into two pieces at most, because MAX_SPLIT keeps a range at most one
tile long. Here all tiles are shared out this way, by any number of blocks, fewer than the tiles too, so a range
can span several tiles. Write pieces(block, blocks, tiles, k_tiles): the block's work as a list of (tile, k_begin,
k_end), k tiles k_begin .. k_end - 1 of that tile, in the order the block does them. As in step 12, the block
holding a tile's last k tile finishes it: after its piece it waits for every other block's part of the tile to
be handed over; a piece short of the tile's end hands its part over and waits for nothing. The check deals out 1 to
9 tiles of 1, 3, 4 or 8 k tiles to 1 to 12 blocks, checks each k tile is done once by the block whose range holds
it, and times the blocks (one unit per k tile): no block may end later than the waits need.
"""

# ---- EXERCISE: pieces(block, blocks, tiles, k_tiles) ----
def pieces(block, blocks, tiles, k_tiles):
    return []
# ---- END ----
