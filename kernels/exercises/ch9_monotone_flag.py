"""Chapter 9's exercise: the wait condition of a tile counter that nothing resets and only its writers change.

Step 08 (fused/08_tile_flags) gives each tile of T a counter: the block that stored the tile adds, with release
semantics, the number of phase-2 reads to come; phase 2's producer waits until the counter is nonzero
(acquire), then takes its reads back, so the counter is 0 again when the launch ends. Change two things: each tile
of T is stored by `parts` consumer groups, and each group, after its own stores, adds 1 with release semantics;
and phase 2 only reads the counter (an acquire load, no atomic), so nobody subtracts and nothing resets it: the
counters keep growing, launch after launch, as 32-bit unsigned integers. The launch knows its number, `launch`
(0 for the first). Write ready(value, launch, parts): may phase 2 of this launch copy the tile whose counter it
just read as `value`? The check plays every release of a tile in launches 0, 1, 2, 7 and near the counter's wrap
at 2^32, with 1 to 4 groups, and polls a bounded number of times: a condition that never comes true is reported
as a deadlock, not waited for.
"""

# ---- EXERCISE: ready(value, launch, parts) ----
def ready(value, launch, parts):
    return False
# ---- END ----
