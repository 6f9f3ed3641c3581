"""Chapter 3's module: the roles picture before step 03's listing, the bank picture of its inner loop and the
emulator's count that checks it, the prediction from the tiling model, and the profiler figures the chapter quotes."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

import gemmlab
from gemmlab.chapters import ch03_smem_tiling as ch3
from gemmlab.chapters.glue import VALUES

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("block", [8, 32])
def test_roles_are_the_kernels_indexing(block):
    """Thread (ty, tx) stores sA[ty][tx] and sB[ty][tx] and computes C[ty][tx] of the tile; a warp is 32 consecutive
    tids, so with BLOCK = 32 it holds one tile row."""
    own = ch3.roles(block)
    assert own.shape == (block, block) and sorted(own.ravel().tolist()) == list(range(block * block))
    assert own[2, 5] == 2 * block + 5
    if block == 32:
        assert all(len(set((own[r] // 32).tolist())) == 1 for r in range(block))


def test_roles_picture_shows_one_thread_and_what_it_reads():
    axes = ch3.draw_roles(32, thread=(2, 5))
    assert len(axes) == 3
    for ax in axes:
        warps, me = (im.get_array() for im in ax.images)
        assert np.array_equal(np.asarray(warps), ch3.roles(32) // 32)
        r, c = np.nonzero(~np.ma.getmaskarray(me))
        assert (r.tolist(), c.tolist()) == ([2], [5])       # one element per thread in each tile
    row, col = axes[0].patches[0], axes[1].patches[0]    # the row of sA and the column of sB it reads
    assert (row.get_width(), row.get_height(), row.get_y()) == (32, 1, 1.5)
    assert (col.get_width(), col.get_height(), col.get_x()) == (1, 32, 4.5)
    assert not axes[2].patches
    plt.close("all")


def test_roles_picture_at_31_shows_a_warp_over_two_tile_rows(capsys):
    ch3.show_roles(31, thread=(2, 5))
    fig = plt.gcf()
    warps = np.asarray(fig.axes[0].images[0].get_array())
    title = fig._suptitle.get_text()
    plt.close("all")
    assert "31 warps" in title and "across rows" in title   # 961 threads: 30 full warps and one of 1 thread
    assert np.array_equal(warps, ch3.roles(31) // 32)
    assert sorted(set(warps[2].tolist())) == [1, 2] and sorted(set(warps[3].tolist())) == [2, 3]
    assert capsys.readouterr().out.rstrip().endswith("its warp 2 holds tile row(s) [2, 3]")


def test_bank_rule():
    assert [ch3.bank(a) for a in (0, 4, 124, 128, 132, 4096 + 8)] == [0, 1, 31, 0, 1, 2]


@pytest.mark.parametrize("block,expected", [(32, (1, 1, 32)), (16, (1, 1, 8))])
def test_inner_loop_reads_broadcast_and_row_and_column(block, expected):
    """sA[ty][k] is one word per tile row of the warp (a broadcast), sB[k][tx] a row (one bank per lane), the column
    read the kernel avoids is block-way conflicted up to 32."""
    reqs = ch3.inner_loop_requests(block, k=5)
    a, b, col = reqs.values()
    assert len({x // 4 for x in a}) == 32 // block if block < 32 else len(set(a)) == 1
    assert len({ch3.bank(x) for x in b}) == min(32, block)
    assert tuple(ch3.draw_counts(block).values()) == expected


def test_bank_picture_counts_and_colours():
    axes, counts = ch3.draw_banks(32, k=5)
    assert list(counts.values()) == [1, 1, 32]
    assert "broadcast" in axes[0].get_title() and "conflict-free" in axes[1].get_title()
    assert "32-way conflict" in axes[2].get_title()
    banks = axes[2].collections[1].get_facecolors()
    red = [i for i, c in enumerate(banks) if c[0] > 0.8 and c[1] < 0.5]
    assert red == [5]                                    # the column's 32 words all sit in bank k = 5
    assert [t.get_text() for t in axes[0].texts] == ["32 lanes, 1 word"]
    assert [t.get_text() for t in axes[2].texts] == ["32 lanes, 32 words"]
    plt.close("all")


def test_emulator_agrees_with_the_bank_picture(capsys):
    ch3.bank_counts(32, size=32)
    out = capsys.readouterr().out
    assert "sA read: emulator 1 wavefront per request" in out and "sB read: emulator 1 wavefront per request" in out
    assert out.count("the picture predicts 1") == 2


def test_prediction_is_the_traffic_ratio_capped_by_the_peak(capsys):
    rec = {"step": "sgemm/02_coalesced", "m": 4096, "gpu": "NVIDIA H100 80GB HBM3", "tflops": 6.7}
    ch3.predict([rec])
    assert VALUES["ch3_ratio"] == 32 and VALUES["ch3_peak"] == 67.0
    assert VALUES["ch3_bound"] == pytest.approx(10.0)
    assert "caps it at 10.0x" in capsys.readouterr().out


def test_counters_read_the_h200_record():
    """The figures the chapter quotes, from results/nvidia-h200.ncu.json: L1 caught step 02's re-reads, step 03 sends
    as many bytes to L2 with 0% L1 hits, and its top stall is the shared-memory queue."""
    out = ch3.counters()
    if set(out) != set(ch3.STEPS):
        pytest.skip("no H200 profiler record of steps 02 and 03")
    v2, v3 = out.values()
    assert v2["l1"] > 90 and v3["l1"] < 1
    assert 0.8 < v3["to_l2"] / v2["to_l2"] < 1.25             # the same traffic leaves the SMs
    assert v3["dram"] > v2["dram"] and v3["l2"] < v2["l2"]
    assert VALUES["ch3_ncu03_stall0"] == "mio throttle" and VALUES["ch3_ncu03_conflict_pct"] < 1
    assert VALUES["ch3_ncu03_requested"] == pytest.approx(16 * 2**30 / 1e9)   # the model's 16 GiB, in sectors
    assert "not selected" not in {VALUES[f"ch3_ncu0{s}_stall{i}"] for s in (2, 3) for i in range(3)}
    assert 1.3 < VALUES["ch3_ncu_gain"] < 1.6


def test_chapter_module_reexports_the_twin():
    from gemmlab.chapters import sitecontrols

    assert ch3.smem_tiling_twin is sitecontrols.smem_tiling_twin
    assert gemmlab.instance(ch3.STEP).params["BLOCK"] == ch3.BLOCK


def test_where_we_are_shows_only_the_starting_point(capsys):
    """Step 02 and its cuBLAS, never step 03's measured figures before their prediction."""
    start = ch3.where_we_are()
    out = capsys.readouterr().out
    assert ch3.STEP not in out and {r["step"] for r in start} <= {ch3.STEPS[0]}
    if start:
        assert "ch3_v2_tflops" in VALUES


def test_shared_bound_per_tile_edge_follows_the_sass_and_the_banks():
    """BLOCK = 31: 62 LDS of one wavefront per 31 FFMAs, 2 per FFMA, peak / 8; BLOCK = 32 reads sA with LDS.128."""
    m31 = ch3.block_model(31, 67.0, per_wide=2.0)
    assert (m31["lds"], m31["lds128"], m31["ffma"], m31["lds_waves"]) == (62, 0, 31, 1)
    assert m31["per_ffma"] == 2 and m31["div"] == 8 and m31["bound"] == pytest.approx(67.0 / 8)
    m32 = ch3.block_model(32, 67.0, per_wide=2.0)
    assert (m32["lds"], m32["lds128"], m32["ffma"]) == (32, 8, 32)
    assert m32["per_ffma"] == 1.5 and m32["bound"] == pytest.approx(67.0 / 6)
    assert m32["global_gb"] * 4 == pytest.approx(ch3.block_model(8, 67.0, per_wide=2.0)["global_gb"])
    assert ch3.FFMA_PER_CYCLE == 4      # chapter 1's 4 sub-partitions x 32 lanes / 32 threads per warp
    assert ch3.loop_wavefronts(16) == 1


def test_block_sweep_draws_the_records_against_the_model():
    sweep = [{"params": {"BLOCK": b}, "tflops": t, "gpu": "NVIDIA H100 80GB HBM3", "date": "2026-11-24"}
             for b, t in ((8, 5.0), (32, 9.0))]
    model = [{"block": 8, "bound": 11.0}, {"block": 32, "bound": 11.0}]
    ax = ch3.draw_block_sweep(sweep, model)
    assert [b.get_height() for b in ax.containers[0]] == [5.0, 9.0]
    assert [tuple(o) for o in ax.collections[0].get_offsets()] == [(0, 11.0), (1, 11.0)]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "32"]
    plt.close("all")


def test_sweep_profile_reads_the_h200_records_per_tile_edge():
    prof = ch3.sweep_profile()
    if 8 not in prof or 32 not in prof:
        pytest.skip("no profiler record of step 03 per tile edge")
    assert prof[8]["long_scoreboard"] > prof[32]["long_scoreboard"]   # the small tile waits on global loads
    assert prof[8]["dram_gb"] > prof[32]["dram_gb"]
    plt.close("all")


def test_predict_compiled_counts_the_loop_and_assumes_two_wavefronts_per_lds128(capsys):
    ch3.predict_compiled([{"step": ch3.STEPS[0], "m": ch3.SIZE, "gpu": "NVIDIA H100 80GB HBM3", "tflops": 6.0}])
    out = capsys.readouterr().out
    assert "32 LDS (sB) + 8 LDS.128 (sA) for 32 FFMA" in out
    assert "(32 x 1 + 8 x 2) / 32 = 1.5 wavefronts per FFMA" in out and "peak / 6 = 11.2" in out


def test_twin_counts_warps_of_a_part_filled_block():
    from gemmlab.chapters import sitecontrols
    text = " ".join(sitecontrols.smem_tiling_label(4))
    blocks = int(text.split(" block(s) per SM")[0].split()[-1])
    assert f"({blocks} warps," in text   # 16 threads per block: one (part-filled) warp each
