"""Chapter 7b's exercise, the course's solution (see ../ch7b_ring_wait.py)."""

# ---- EXERCISE: wait_count(t, num_tiles, num_stages) ----
def wait_count(t, num_tiles, num_stages):
    # the groups committed after tile t's own are those of tiles t + 1 .. t + num_stages - 2 that exist
    return min(num_stages - 2, num_tiles - 1 - t)
# ---- END ----
