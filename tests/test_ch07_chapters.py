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


# --- Chapters 7c and 7d: one run, the tile order, the models and the pictures before steps 10 and 11 ---------------

def test_hopper_one_run_takes_one_gpu_and_one_date():
    from gemmlab.chapters import ch07c_hopper_wgmma as ch7c
    rec = {"step": "hgemm/08_wgmma", "m": 4096, "gpu": "NVIDIA H200", "date": "2026-11-29", "tflops": 1.0}
    recs = [rec, dict(rec, tflops=2.0), dict(rec, gpu="NVIDIA H100 80GB HBM3", tflops=3.0),
            dict(rec, date="2026-11-28", tflops=4.0), dict(rec, m=8192, tflops=5.0), dict(rec, step="x", tflops=6.0)]
    got = ch7c.one_run(["hgemm/08_wgmma"], recs=recs)
    assert [r["tflops"] for r in got] == [2.0, 5.0]  # the last of the day per size, by size; no H100, no other day
    assert ch7c.one_run(["hgemm/08_wgmma"], date="2026-11-30", recs=recs) == []
    at = ch7d.records()  # the committed run: every record of chapter 7d from one GPU and one date
    assert at and {(r["gpu"], r["date"]) for r in at.values()} == {(ch7c.GPU, ch7c.RUN_DATE)}


def test_hopper_tile_order_is_the_kernels_banded_order():
    from gemmlab.chapters import ch07c_hopper_wgmma as ch7c
    assert ch7c.tile_order(4, 3, 2).tolist() == [[0, 2, 4], [1, 3, 5], [6, 8, 10], [7, 9, 11]]
    assert ch7c.tile_order(2, 3, 1).tolist() == [[0, 1, 2], [3, 4, 5]]  # GROUP_M = 1: row-major
    assert ch7c.tile_order(5, 2, 2)[4].tolist() == [8, 9]  # a short last band walks its one row
    row, band = (ch7c.wave_footprint(64, 32, g, 132) for g in (1, 16))
    assert (row["rows"], row["cols"], band["rows"], band["cols"]) == (5, 32, 16, 9)
    assert band["kb_per_k_tile"] < 0.5 * row["kb_per_k_tile"]
    with pytest.raises(ValueError):
        ch7c.tile_order(2, 2, 0)


def test_hopper_models_and_the_gap_they_leave():
    from gemmlab.chapters import ch07c_hopper_wgmma as ch7c
    ser = ch7c.serial_prediction()
    assert ser["bytes"] == (128 + 256) * 64 * 2 and 0 < ser["tflops"] < 989.4
    clk = ch7c.board_clock()
    assert round(clk["spec_mhz"]) == 1830 and clk["mhz_lo"] <= clk["mhz"] <= clk["mhz_hi"] < clk["spec_mhz"]
    g = ch7c.explain_gap("hopper/03_tma_ring", 957.0)
    assert g["at_clock"] < g["model"] and abs(g["busy_bound"] - g["peak_at_clock"] * g["busy_pct"] / 100) < 1e-9
    assert abs(g["busy_bound"] / g["measured"] - 1) < 0.15  # clock and idle pipe close the gap to a tenth or so
    m4, m8 = ch7d.tile_model(4096), ch7d.tile_model(8192)
    assert (m4["tiles"], m8["tiles"]) == (512, 2048) and m8["epilogue_pct"] < m4["epilogue_pct"]


def test_hopper_pictures_of_steps_10_and_11(monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    boxes = ch7d.epilogue_boxes()
    assert boxes.shape == (2, 4, 3)  # eight 64 x 64 boxes of a 128 x 256 tile
    assert boxes[:, :, 0].tolist() == [[0] * 4, [1] * 4] and boxes[0, :, 1].tolist() == [0, 1, 0, 1]
    wait0, wait1 = ch7d.inflight_timeline(5, 0), ch7d.inflight_timeline(5, 1)
    assert all(b[0] > a[1] for a, b in zip(wait0, wait0[1:]))  # wait<0>: a gap before each group
    assert all(b[0] == a[1] for a, b in zip(wait1, wait1[1:])) and wait1[-1][1] < wait0[-1][1]
    assert len(ch7d.draw_epilogue().patches) == 8 and len(ch7d.draw_inflight(3).patches) == 6


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
