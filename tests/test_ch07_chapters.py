"""Chapter 7b and 7d's modules: the persistent grid's tile owners (the picture before step 09) and the TF32 rounding."""
import numpy as np
import pytest

from gemmlab.chapters import ch07b_ampere_pipeline as ch7b
from gemmlab.chapters import ch07d_hopper_schedule as ch7d


def test_tile_owners_walk_the_tiles_block_by_block():
    owners = ch7d.tile_owners(2, 3, 4)  # row-major: tiles 0..5 go to blocks 0, 1, 2, 3, 0, 1
    assert owners.tolist() == [[0, 1, 2], [3, 0, 1]]
    banded = ch7d.tile_owners(4, 2, 3, group_m=2)  # two rows of tiles at a time, down the band's columns
    assert banded.tolist() == [[0, 2], [1, 0], [1, 0], [2, 1]]
    counts = np.bincount(ch7d.tile_owners(6, 8, 10, group_m=2).ravel())
    assert counts.max() - counts.min() <= 1 and counts.sum() == 48  # every tile once, blocks within one tile
    with pytest.raises(ValueError):
        ch7d.tile_owners(0, 2, 3)


def test_persistent_picture_draws(monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    monkeypatch.setattr(plt, "show", lambda: None)
    ch7d.persistent_picture(tiles_m=3, tiles_n=4, blocks=5, group_m=0)
    assert len(plt.gcf().axes) == 2


def test_tf32_rounding_clears_thirteen_bits():
    x = np.array([1 + 2.0 ** -10, 1 + 2.0 ** -11, -3.0], np.float32)
    assert ch7b.tf32(x).tolist() == [1 + 2.0 ** -10, 1.0, -3.0]


def test_prefetch_timeline_overlaps_loads_with_mma():
    ev = ch7b.prefetch_timeline(tiles=3)
    mma = {k: (a, b) for r, k, a, b in ev if r == "ldmatrix + mma"}
    ldg = {k: (a, b) for r, k, a, b in ev if r == "LDG"}
    sts = {k: (a, b) for r, k, a, b in ev if r == "STS"}
    assert ldg[1][0] == mma[0][0]  # tile 1's loads start with tile 0's compute
    assert sts[1][0] >= max(ldg[1][1], mma[0][1]) and mma[1][0] >= sts[1][1]


def test_warp_tiles_cover_the_block_tile():
    tiles = ch7b.warp_tiles(256, 128, 64, 64)
    assert len(tiles) == 8 and tiles[1] == (1, 0, 64) and tiles[7] == (7, 192, 64)


def test_double_buffers_alternate():
    sched = ch7b.buffer_schedule(4, 2)
    assert [s[1] for s in sched] == [0, 1, 0, 1]
    assert all(w != r for _, r, w, _ in sched if w is not None) and sched[-1][2] is None


def test_ring_waits_before_each_mma_and_never_overwrites_a_live_slot():
    ev = ch7b.ring_schedule(tiles=7, stages=3)
    copied, done = set(), set()
    for i, (e, k, slot) in enumerate(ev):
        if e == "cp.async":
            assert all(j in done for j in copied if j % 3 == slot)  # the slot's previous tile is consumed
            copied.add(k)
        if e == "mma":
            assert k in copied and ev[i - 1][0] in ("commit", "barrier")
            done.add(k)
    assert [k for e, k, _ in ev if e == "mma"] == list(range(7))


@pytest.mark.parametrize("step", ["04", "05", "06", "07"])
def test_step_pictures_draw(monkeypatch, step):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    monkeypatch.setattr(plt, "show", lambda: None)
    ch7b.step_picture(step)
    assert plt.gcf().axes
    plt.close("all")
