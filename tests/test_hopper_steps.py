"""Chapter 7c's Hopper track (hopper/01 .. 03, then hgemm/08) on the CPU: each step against float64 on odd
shapes, the refusals of shapes it cannot take, the roadmap and the chain of `previous`, and the pictures."""
import numpy as np
import pytest

import gemmlab
from gemmlab import registry
from gemmlab.errors import ShapeError
from gemmlab.measure.check import run_on_inputs

TRACK = ["hopper/01_wgmma", "hopper/02_tma", "hopper/03_tma_ring"]


@pytest.mark.parametrize("name,params", [("hopper/01_wgmma", dict(BLOCK_N=128, GROUP_M=1)),
                                         ("hopper/01_wgmma", dict(BLOCK_N=256, GROUP_M=3)),
                                         ("hopper/02_tma", dict(BLOCK_N=128, GROUP_M=2)),
                                         ("hopper/03_tma_ring", dict(BLOCK_N=128, NUM_STAGES=2, GROUP_M=1)),
                                         ("hopper/03_tma_ring", dict(BLOCK_N=256, NUM_STAGES=3, GROUP_M=16))])
def test_each_step_matches_float64_on_odd_shapes(name, params):
    """M ends mid-tile (the copies' guards, TMA's zero fill), N mid-box, K over more k tiles than stages (the
    ring wraps and the parities alternate)."""
    kern = gemmlab.step(name, backend="cpu", **params)
    got, a, b = run_on_inputs(kern, 300, 264, 328)
    assert not gemmlab.check.compare(got, a, b, "float32")[0].any()


@pytest.mark.parametrize("name", TRACK)
def test_structured_inputs_show_the_layout(name):
    """Identity times small integers is exact: a chunk swizzled to the wrong place shows as a wrong entry."""
    kern = gemmlab.step(name, backend="cpu", BLOCK_N=128)
    b = np.arange(192 * 136).reshape(192, 136) % 17 - 8
    got = kern(np.eye(130, 192, dtype=np.float16), b.astype(np.float16))
    assert np.array_equal(got.astype(np.int64), b[:130])


@pytest.mark.parametrize("name,why", [("hopper/01_wgmma", "16 bytes"), ("hopper/02_tma", "TMA"),
                                      ("hopper/03_tma_ring", "TMA")])
def test_shapes_off_the_16_byte_grid_are_rejected_before_launch(name, why):
    kern = gemmlab.step(name, backend="cpu")
    with pytest.raises(ShapeError, match=rf"K=12 and N=64 must be multiples of 8.*{why}"):
        kern(np.zeros((64, 12), np.float16), np.zeros((12, 64), np.float16))
    assert kern(np.ones((3, 8), np.float16), np.ones((8, 8), np.float16)).tolist() == [[8.0] * 8] * 3


def test_the_track_chains_into_step_08():
    chain = [registry.get(n) for n in TRACK + ["hgemm/08_wgmma"]]
    assert [s.previous for s in chain] == ["hgemm/07_cp_async"] + TRACK
    assert {s.chapter for s in chain} == {"7c"}
    assert all(s.arch_specific and s.min_arch == 90 for s in chain)


def test_the_chapter_pictures_show_who_owns_what():
    """Chapter 7c's drawings: the block tile's owners (warp w of warp group g holds rows 64 g + 16 w ..), the
    parities of one mbarrier and of a ring, and each drawing renders."""
    import matplotlib

    matplotlib.use("Agg")
    from gemmlab.chapters import ch07c_hopper_wgmma as ch

    owner = ch.warpgroup_owner(128)
    assert owner.shape == (128, 128) and owner[0, 5] == 0 and owner[16, 0] == 1 and owner[64, 127] == 4
    assert owner[127, 0] == 7 and len(np.unique(owner)) == 8
    assert [s["full_parity"] for s in ch.parity_schedule(4)] == [0, 1, 0, 1]
    ring = ch.parity_schedule(10, stages=4)
    assert [s["stage"] for s in ring] == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    assert [s["empty_parity"] for s in ring][:5] == [1, 1, 1, 1, 0]  # round 0 passes at once on a fresh barrier
    assert len(ch.draw_warpgroups(256).patches) == 8 + 2 + 1
    assert len(ch.draw_ring(stages=4, k_tiles=10).patches) == 10
    assert len(ch.draw_phases(k_tiles=3).texts) >= 6
    assert ch.copy_instructions(256) == {"chunks": 3072, "per_thread_01": 24, "per_block_01": 6144,
                                         "tma_per_block_02": 5}


def test_the_ring_prediction_comes_from_the_model_and_the_records():
    from gemmlab.chapters import ch07c_hopper_wgmma as ch

    p = ch.ring_prediction(4096)
    if p is None:
        pytest.skip("no record of hopper/02_tma on the H200")
    assert p["tile_03_us"] < p["tile_02_us"] and p["tflops_03"] <= p["peak"]
    assert abs(p["load_us"] + p["compute_us"] - p["tile_02_us"]) < 1e-9
