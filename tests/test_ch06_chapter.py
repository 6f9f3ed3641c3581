"""Chapter 6's pictures and tables added for issue 52: the timelines, the tile hierarchy of steps 09 and 11, step
10's sA banks, the starting point, and the sweep row the text quotes (tests/test_ch04_06_chapters.py has the rest)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gemmlab.chapters import ch06_async_prefetch as ch6  # noqa: E402
from gemmlab.chapters import pipeline  # noqa: E402


def test_timelines_show_both_cases_without_overlapping_loads():
    axes = ch6.draw_timelines()
    assert len(axes) == 2
    assert "load 2, compute 3:\none tile ahead hides" in axes[0].get_title()
    assert "not enough, two are" in axes[1].get_title()
    for ax, (load, compute) in zip(axes, ch6.TIMELINE_CASES):
        bars = [p for p in ax.patches]
        assert len(bars) == 2 * 5 * len(pipeline.STRATEGIES)
        widths = sorted({round(b.get_width(), 6) for b in bars})
        assert widths == sorted({float(load), float(compute)})  # every load the same length
        boxes = [(b.get_x(), b.get_x() + b.get_width(), b.get_y(), b.get_y() + b.get_height()) for b in bars]
        for i, a in enumerate(boxes):  # no two bars overlap, so no two tile labels do
            for b in boxes[i + 1:]:
                assert a[1] <= b[0] + 1e-9 or b[1] <= a[0] + 1e-9 or a[3] <= b[2] + 1e-9 or b[3] <= a[2] + 1e-9
        ticks = [t.get_text() for t in ax.get_yticklabels()]
        assert "async copy: load (2 in flight)" in ticks and "serial: load" in ticks
    plt.close("all")


def test_load_rows_put_loads_in_flight_together_on_separate_lines():
    ivs = pipeline.timeline("cp_async", tiles=5, load=3, compute=2, stages=3)
    rows = ch6.load_rows(ivs)
    assert rows[0] != rows[1] and max(rows.values()) == 1
    assert set(ch6.load_rows(pipeline.timeline("serial", tiles=5, load=3, compute=2)).values()) == {0}


def test_tile_hierarchy_draws_steps_09_and_11():
    axes = ch6.tile_hierarchy()
    assert axes.shape == (2, 2)
    assert "block tile 128 x 128" in axes[0, 0].get_title() and "block tile 128 x 256" in axes[1, 0].get_title()
    own9 = np.asarray(axes[0, 0].images[0].get_array())
    own11 = np.asarray(axes[1, 0].images[0].get_array())
    assert own9.shape == (128, 128) and own11.shape == (128, 256)
    black9 = ~np.ma.getmaskarray(axes[0, 0].images[1].get_array())   # thread 0's outputs
    black11 = ~np.ma.getmaskarray(axes[1, 0].images[1].get_array())
    assert black9.sum() == 64 and black11.sum() == 128                   # 8x8 and 8x16 thread tiles
    assert "columns 0-31" in axes[0, 1].get_title() and "columns 0-63" in axes[1, 1].get_title()  # warp 64x32, 64x64
    plt.close("all")


def test_sa_banks_show_the_padding_that_separates_a_warps_rows():
    reads = ch6.sa_reads()
    assert len(reads) == 32 and len(set(reads)) == 8                     # 4 lanes share each row's float4
    assert reads[4] - reads[0] == 20 * 4                                  # the next row, a pitch of BLOCK_K + 4 floats
    assert ch6.words_per_bank(reads) == 1 and ch6.words_per_bank(ch6.sa_reads(pitch=16)) == 4
    axes = ch6.draw_sa_banks()
    assert np.asarray(axes[0].images[0].get_array()).shape == (8, 20)
    assert np.asarray(axes[0].images[0].get_array())[1, 0] == 20 and np.asarray(axes[1].images[0].get_array())[2, 0] == 0
    assert "1 word in a bank" in axes[0].get_title() and "4 words" in axes[1].get_title()
    assert len([t for t in axes[0].texts]) == 8 * 20
    plt.close("all")


def test_where_we_are_prints_only_the_starting_point(capsys):
    import gemmlab
    records = gemmlab.benchmark(ch6.STEPS, sizes=ch6.SIZES, verbose=False)
    ch6.where_we_are(records)
    out = capsys.readouterr().out
    assert "sgemm/07_warptiling" in out and "08_register_prefetch" not in out and "11_fragment" not in out
    from gemmlab.chapters.glue import VALUES
    assert "ch6_v11_pct" in VALUES  # still glued for the prose after the measurement


def test_sweep_shows_the_row_the_text_quotes(capsys):
    ch6.sweep("sgemm/10_cp_async", mark={"BLOCK_K": 32, "NUM_STAGES": 4})
    out = capsys.readouterr().out
    assert "and rank 15 of 20:" in out
    line = next(ln for ln in out.splitlines() if "KiB" in ln)
    assert "BLOCK 128x128x32" in line and "NUM_STAGES 4" in line and "1 block(s) per SM" in line
    from gemmlab.chapters.glue import VALUES
    assert VALUES["ch6_mark10_pct"] == pytest.approx(65.2, abs=0.05) and VALUES["ch6_mark10_blocks"] == 1


def test_stalls_prints_only_the_steps_asked_for(capsys):
    ch6.stalls(ch6.STEPS[:1])
    out = capsys.readouterr().out
    assert "sgemm/07_warptiling" in out and "08_register_prefetch" not in out and "lab note" not in out
    ch6.stalls(ch6.STEPS[4:])
    out = capsys.readouterr().out
    assert "11_fragment_prefetch" in out and "07_warptiling" not in out and "lab note" in out


def test_step_11_bound_with_its_own_warps_predicts_no_gain(capsys):
    from gemmlab.chapters.glue import VALUES
    ch6.predict("sgemm/11_fragment_prefetch")
    assert "with 2" in capsys.readouterr().out
    assert VALUES["ch6_pred11_more"] < 1 < VALUES["ch6_pred11"]


def test_step_10_interleaves_a_lanes_rows_where_09_keeps_4x4_pieces():
    o9, o10 = ch6.warp_owners("sgemm/09_double_buffer"), ch6.warp_owners("sgemm/10_cp_async")
    for own in (o9, o10):  # every element of the warp tile has one lane, each lane the same share
        assert (own >= 0).all() and set(np.bincount(own.ravel())) == {own.size // 32}
    assert sorted(set(np.nonzero(o9 == 0)[0])) == [0, 1, 2, 3, 32, 33, 34, 35]
    assert sorted(set(np.nonzero(o10 == 0)[0])) == list(range(0, 64, 8))  # thread_row + i * LANES_M
    assert list(o10[0, :4]) == [0] * 4 and o10[1, 0] == 4  # a 1 x 4 piece; the next row is lane 4's
    axes = ch6.draw_row_ownership()
    assert "rows 0, 8, 16" in axes[1].get_title() and "rows 0, 1, 2, 3, 32" in axes[0].get_title()
    assert len(axes[0].texts) == 32 * 4 and not axes[1].texts  # 09's pieces numbered; 10's one-row pieces not
    plt.close("all")


def test_stalls_also_print_the_stalls_the_prose_quotes(capsys):
    ch6.stalls(ch6.STEPS[1:2])  # step 08: short_scoreboard and long_scoreboard are not in its top four
    line = capsys.readouterr().out.splitlines()[0]
    assert "short_scoreboard 0.38" in line and "long_scoreboard 0.13" in line


def test_step_10s_extra_shared_loads_are_the_null_loads_before_each_cp_async():
    from gemmlab.chapters.glue import VALUES
    out = ch6.null_loads_per_copy()
    assert out["per_copy"] == 3 and out["copies_per_tile"] == 4
    ch6.stalls(ch6.STEPS[2:4])
    assert VALUES["ch6_lds10_extra_per_tile"] == out["per_tile"] == 12  # the profiler's difference, per warp and K tile


def test_step_08s_prediction_from_the_h200s_own_profile_holds_at_block_k_8(capsys):
    from gemmlab.chapters.glue import VALUES
    ch6.parts("sgemm/08_register_prefetch")
    assert VALUES["ch6_pred8_h200"] < VALUES["ch6_one8_s8k8_x"] < VALUES["ch6_pred8_more_h200"]
    assert VALUES["ch6_one8_nocapk8_x"] < VALUES["ch6_pred8_h200"]  # the prefetch alone: the gap the prose states


def test_diff_can_keep_to_the_k_loop():
    from gemmlab.chapters import show
    whole = repr(show.diff("sgemm/09_double_buffer", "sgemm/08_register_prefetch"))
    loop = repr(show.diff("sgemm/09_double_buffer", "sgemm/08_register_prefetch", start_at="const int num_tiles",
                          end_before="// float4 stores of C"))
    assert "store_tiles(1 - buf)" in loop and "Extends 08" in whole and "Extends 08" not in loop
    assert len(loop.splitlines()) < len(whole.splitlines())
    assert "@@ -135," in loop  # line numbers of the files, not of the excerpt
