"""Chapter 3's tiling model against counts made by hand and by the emulator."""
import matplotlib

matplotlib.use("Agg")

import gemmlab  # noqa: E402
from gemmlab import tiling  # noqa: E402


def test_untiled_traffic_is_two_loads_per_fma():
    assert tiling.global_bytes(64, 64, 64, None) == 2 * 64**3 * 4
    assert tiling.intensity(64, 64, 64, None) == 0.25


def test_tiling_divides_traffic_by_the_tile_edge():
    for block in (4, 8, 16, 32):
        assert tiling.global_bytes(256, 256, 256, block) * block == tiling.global_bytes(256, 256, 256, None)
        assert tiling.intensity(256, 256, 256, block) == block / 4


def test_partial_tiles_are_loaded_whole():
    # 33 rows need two 32-row tiles: the zero-filled part is still requested
    assert tiling.global_bytes(33, 32, 32, 32) == 2 * tiling.global_bytes(32, 32, 32, 32)


def test_shared_memory_and_barriers():
    assert tiling.shared_bytes(32) == 8192
    assert tiling.barriers(100, 32) == 8


def test_model_matches_the_emulators_count_of_the_real_kernel():
    block, size = 8, 32
    k = gemmlab.step("sgemm/03_smem_tiling", backend="cpu", BLOCK=block)
    counts = k.counters(size, size, size, max_blocks=None)
    loaded = sum(s.bytes for s in counts.select(space="global", kind="load"))
    assert loaded == tiling.global_bytes(size, size, size, block)
    assert counts.totals["barriers"] == tiling.barriers(size, block) * (size // block) ** 2


def test_picture_draws():
    axes = tiling.draw_sliding_window(block=4, step=2, size=16)
    assert len(axes) == 3 and len(axes[0].patches) == 1 + 2 + 1


def test_slider_report_explains_an_impossible_tile_instead_of_raising():
    text = tiling.block_report(64)
    assert "cannot run" in text and "1024" in text
    assert "PASS" in tiling.block_report(8)


def test_register_tiling_loads_per_fma():
    assert tiling.shared_loads_per_fma(1, 1) == 2
    assert tiling.shared_loads_per_fma(8, 8) == 0.25


def test_ownership_maps_are_partitions_with_the_right_counts():
    import numpy as np

    own = tiling.owners("sgemm/04_1d_blocktiling", dict(BLOCK_M=64, BLOCK_N=64, THREAD_M=8))
    assert (own >= 0).all() and (np.bincount(own.ravel()) == 8).all()  # 512 threads, 8 rows of one column each
    assert own[:8, 0].tolist() == [0] * 8 and own[0, 1] == 1 and own[8, 0] == 64  # a warp spans a row of columns
    for step, p in [("sgemm/05_2d_blocktiling", dict(BLOCK_M=128, BLOCK_N=128, THREAD_M=8, THREAD_N=8)),
                    ("sgemm/07_warptiling", dict(BLOCK_M=128, BLOCK_N=128, WARP_M=64, WARP_N=32,
                                                 THREAD_M=8, THREAD_N=8))]:
        own = tiling.owners(step, p)
        assert (own >= 0).all()
        counts = np.bincount(own.ravel())
        assert len(counts) == 256 and (counts == 64).all()


def test_warp_tiling_puts_a_warps_lanes_side_by_side():
    p = dict(BLOCK_M=128, BLOCK_N=128, WARP_M=64, WARP_N=32, THREAD_M=8, THREAD_N=8)
    own = tiling.owners("sgemm/07_warptiling", p)
    # first row of the first sub-tile: lanes 0..3 of warp 0, four columns each
    assert own[0, :16].tolist() == [t for t in range(4) for _ in range(4)]
    # thread 0's second 4x4 piece sits one sub-tile (WARP_N / 2 = 16 columns) to the right
    assert own[0, 16] == 0 and own[32, 0] == 0
