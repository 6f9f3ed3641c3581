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
