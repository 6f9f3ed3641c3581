"""Chapter 7b's exercise: the wait_group count of a cp.async ring that commits no empty group.

Step 07 (hgemm/07_cp_async) loads tiles 0 .. NUM_STAGES - 2 before its loop, then at k tile t waits with
cp.async.wait_group NUM_STAGES - 2, passes a barrier, loads tile t + NUM_STAGES - 1 into the stage tile t - 1 left,
commits a group and multiplies tile t. It commits a group in every iteration, an empty one past the last tile.
Here the loop commits a group only when it loads a tile:

    for t in range(min(num_stages - 1, num_tiles)): load tile t into stage t; commit
    for t in range(num_tiles):
        cp.async.wait_group(wait_count(t, num_tiles, num_stages)); __syncthreads()
        if t + num_stages - 1 < num_tiles: load tile t + num_stages - 1; commit
        mma on stage t % num_stages

Write wait_count(t, num_tiles, num_stages): the largest N for which wait_group N guarantees that tile t's copies
have landed (wait_group N returns once at most N of this thread's committed groups are pending). Too large, the
mma reads a stage before its copies land; too small, it waits for newer tiles too and their copies stop
overlapping the mma. The check runs the ring for NUM_STAGES 2 to 6 and every number of k tiles up to 3 x
NUM_STAGES + 1.
"""

# ---- EXERCISE: wait_count(t, num_tiles, num_stages) ----
def wait_count(t, num_tiles, num_stages):
    return num_stages - 1
# ---- END ----
