"""Chapter 7d's exercise, the course's solution (see ../ch7d_stream_k_pieces.py)."""

# ---- EXERCISE: pieces(block, blocks, tiles, k_tiles) ----
def pieces(block, blocks, tiles, k_tiles):
    begin, end = tiles * k_tiles * block // blocks, tiles * k_tiles * (block + 1) // blocks
    if begin == end:
        return []
    first, last = begin // k_tiles, (end - 1) // k_tiles
    # hand over first (the beginning of the last tile), then the whole tiles, then finish the first tile:
    # a block waits only at its end, for blocks of lower index, which handed over at their start
    out = [(last, max(begin - last * k_tiles, 0), end - last * k_tiles)]
    out += [(tile, 0, k_tiles) for tile in range(last - 1, first, -1)]
    if first != last:
        out.append((first, begin - first * k_tiles, k_tiles))
    return out
# ---- END ----
