"""Chapters 4 and 5's pages: the pictures of step 07's transposed sA store and step 06's sB quarter warp
(chapter 5), the merged model with chapter 3's measured broadcast cost, and the predictions of chapter 4."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from gemmlab.chapters import ch05_bank_conflicts as ch5

pytestmark = pytest.mark.unit


def test_store_picture_outlines_one_store_of_warp_0_in_three_layouts():
    cells = ch5.store_cells()
    assert len(cells) == 32 and {k for k, _ in cells} == {0, 4} and {m for _, m in cells} == set(range(16))
    counts = ch5.store_picture()
    fig = plt.gcf()
    titles = [ax.get_title() for ax in fig.axes]
    plt.close(fig)
    assert counts == {"plain": (2, 2), "padded": (1, 1), "swizzled": (1, 1)}
    assert len(titles) == 3 and titles[0].startswith("plain") and "Swizzle<1,4,5>" in titles[2]
    assert ["2 wavefront(s)" in titles[0], "1 wavefront(s)" in titles[1], "1 wavefront(s)" in titles[2]] == [True] * 3
    for layout in ("padded", "swizzled"):  # the picture's counts are the model's request counts
        assert counts[layout][0] == ch5.sw.per_request(*ch5.model_requests("sA store", layout))


def test_sb_picture_shows_step_06_quarter_warp_over_two_sweeps():
    offs = ch5.quarter_warp_sb("sgemm/06_vectorized")
    assert offs == [32 * i for i in range(8)]  # float4s 32 bytes apart, within 256 bytes
    out = ch5.sb_picture()
    fig = plt.gcf()
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    plt.close(fig)
    assert out["sgemm/06_vectorized"] == (2, 2, 8)   # 2 wavefronts for one quarter warp: two sweeps, 2-way
    assert out["sgemm/07_warptiling"] == (1, 1, 4)   # 4 float4s side by side, each read by 2 lanes
    assert "lane 0" in texts and "lanes 0,4" in texts
    reqs, size = ch5.model_requests("sB load", "plain", "sgemm/06_vectorized")
    assert ch5.sw.wavefronts(reqs[0], size) == 4 * out["sgemm/06_vectorized"][0]  # four quarter warps


def test_print_counts_names_each_layout(capsys):
    counts = ch5.three_layouts()
    plt.close("all")
    ch5.print_counts(counts)
    assert capsys.readouterr().out.splitlines()[1] == "column read  : plain 32 | padded 1 | swizzled 4  wavefronts"


def test_merged_model_takes_chapter_3s_measured_broadcast_cost():
    from gemmlab.chapters import ch04_register_tiling as ch4
    b = ch4.broadcast_wavefronts()
    assert b == pytest.approx(2, abs=0.01)   # chapter 3's measurement (H200 profile of step 03)
    m3, m4 = (ch4.merged_model(s, round(b)) for s in ("sgemm/03_smem_tiling", "sgemm/04_1d_blocktiling"))
    assert (m3["wavefronts"], m3["bound"]) == pytest.approx((1.5, 1 / 6))   # chapter 3's peak / 6
    assert (m4["wavefronts"], m4["bound"]) == pytest.approx((0.625, 0.4))
    assert ch4.merged_model("sgemm/07_warptiling", 2)["bound"] == 1.0        # no broadcast: unchanged


def test_where_we_are_shows_only_the_starting_point(capsys):
    from gemmlab.chapters import ch04_register_tiling as ch4
    import gemmlab
    records = gemmlab.results.one_gpu([r for r in gemmlab.results.load() if r["step"] in ch4.STEPS
                                       and r["m"] == 4096 and r["params"] == gemmlab.registry.get(r["step"]).resolve({})])
    ch4.where_we_are(records)
    out = capsys.readouterr().out
    assert "sgemm/03_smem_tiling" in out and not any(s in out for s in ch4.NEW)


def test_step06_prediction_splits_the_two_changes(capsys):
    from gemmlab.chapters import ch04_register_tiling as ch4
    ch4.step06_predict()
    out = capsys.readouterr().out.splitlines()
    assert "8 -> 2  (x 0.25" in out[0] and "(x 1.00)" in out[1]
    assert "32 / 512 -> 32 / 512" in out[1]   # LDS counted once: its LDS.128 are among the LDS (the profiler's 1/16)
    assert out[2].endswith("step 06 6, step 07 4")


def test_sb_lanes_draws_step_06_two_sweeps_and_step_07_one():
    from gemmlab.chapters import ch04_register_tiling as ch4
    out = ch4.sb_lanes()
    fig = plt.gcf()
    titles = [ax.get_title() for ax in fig.axes]
    plt.close(fig)
    assert out["sgemm/06_vectorized"] == (2, 2, 8) and out["sgemm/07_warptiling"] == (1, 1, 4)
    assert titles[0].startswith("sgemm/06_vectorized") and titles[1].startswith("sgemm/07_warptiling")


def test_sass_counts_count_an_lds128_once_as_chapter_3_does():
    from gemmlab.chapters import ch04_register_tiling as ch4
    counts = ch4.sass_counts()
    assert (counts["sgemm/03_smem_tiling"]["LDS"], counts["sgemm/03_smem_tiling"]["LDS.128"]) == (32, 8)
    assert (counts["sgemm/07_warptiling"]["LDS"], counts["sgemm/07_warptiling"]["LDS.128"]) == (0, 32)


def test_transposed_store_picture_puts_a_threads_float4_in_four_rows():
    from gemmlab.chapters import ch04_register_tiling as ch4
    owner = ch4.transposed_store("sgemm/06_vectorized")
    assert len(owner) == 256 and all(len(v) == 4 for v in owner.values())   # 128 x 8 tile: one float4 per thread
    assert owner[0] == [(0, k, k, 0) for k in range(4)] and owner[1] == [(0, k, k, 0) for k in range(4, 8)]
    shown = ch4.transposed_store_picture()
    fig = plt.gcf()
    numbers = {t.get_text() for ax in fig.axes for t in ax.texts}
    plt.close(fig)
    assert sorted(shown) == list(range(32)) and numbers == {str(t) for t in range(32)}


def test_step06_store_predictions_from_the_index_formulas():
    from gemmlab.chapters import ch04_register_tiling as ch4
    s5, s6 = "sgemm/05_2d_blocktiling", "sgemm/06_vectorized"
    assert (ch4.c_store_touches(s5), ch4.c_store_touches(s6)) == (8, 2)   # scalar: 8 floats per sector; float4: 2
    assert ch4.c_store_sectors(s6) / ch4.c_store_sectors(s5) == 0.25
    assert (ch4.shared_store_wavefronts(s5), ch4.shared_store_wavefronts(s6)) == pytest.approx((8, 12))


def test_bank_model_counts_conflicts_and_unmerged_broadcasts():
    from gemmlab.chapters import ch04_register_tiling as ch4
    assert ch4.bank_model("sgemm/06_vectorized") == pytest.approx(0.375)   # 6 wavefronts per LDS.128, 4 per 64 FFMA
    assert ch4.bank_model("sgemm/07_warptiling") == pytest.approx(0.25)
    assert ch4.bank_model("sgemm/03_smem_tiling") > ch4.merged_model("sgemm/03_smem_tiling", 2)["wavefronts"]


def test_variant_profiles_set_the_model_beside_the_h200_record(capsys):
    rows = ch5.variant_profiles()
    assert set(rows) == {"plain", "padded", "swizzled"}
    assert rows["plain"]["model"] == pytest.approx(2.4) and rows["padded"]["model"] == pytest.approx(1.6)
    assert rows["padded"]["model_conflicts"] == rows["swizzled"]["model_conflicts"] == 0
    assert all(rows[v]["conflicts"] < rows["plain"]["conflicts"] / 10 for v in ("padded", "swizzled"))
    assert "| swizzled | 1.60 |" in capsys.readouterr().out


def test_tile_against_idea_reads_one_h200_run_and_its_profiles(capsys):
    from gemmlab.chapters import ch04_register_tiling as ch4
    from gemmlab.chapters.glue import VALUES
    assert ch4.tile_against_idea() is None          # the table; the figures come from tile_rows
    out = capsys.readouterr().out
    rows = ch4.tile_rows()
    assert list(rows) == ["03", "04s", "04", "05s", "05"]
    tflops = {k: round(r["tflops"], 2) for k, r in rows.items()}
    assert tflops == {"03": 8.82, "04s": 6.05, "04": 16.38, "05s": 26.30, "05": 21.25}  # records.json, one process
    assert rows["04s"]["params"] == {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "THREAD_M": 8}  # step 03's tile
    assert rows["05s"]["params"]["BLOCK_M"] == rows["04"]["params"]["BLOCK_M"] == 64                # step 04's tile
    # gains within the run: the idea alone at the small tile loses to step 03; step 05 gains more at 04's tile
    assert rows["04s"]["x"] == pytest.approx(6.05 / 8.82, abs=0.01) and rows["04s"]["x"] < 1
    assert rows["05s"]["x"] > rows["05"]["x"] > 1
    # blocks per SM from the GPU's registers agree with the warps the profiler found active
    assert [(r["threads"], r["registers"], r["blocks"]) for r in rows.values()] == \
        [(1024, 32, 2), (128, 81, 5), (512, 54, 2), (64, 168, 6), (256, 166, 1)]
    assert all(abs(r["warps"] - r["warps_measured"]) < 1 for r in rows.values())
    # the profiles: global loads not hidden at the small tile; shared loads more conflicted at 05's smaller tile
    assert rows["04s"]["stall"] == "long_scoreboard" and rows["04s"]["long_scoreboard"] > 2 * rows["04"]["long_scoreboard"]
    assert rows["04s"]["gld"] == pytest.approx(rows["03"]["gld"]) == pytest.approx(2 * rows["04"]["gld"])
    assert rows["04s"]["lds_waves"] == pytest.approx(rows["04"]["lds_waves"], rel=1e-3)   # same thread tile, same loads
    assert rows["05s"]["stall"] == "not_selected" and rows["05s"]["per_lds"] == pytest.approx(6.0, abs=0.01)
    assert rows["05"]["per_lds"] == pytest.approx(5.0)
    assert VALUES["ch4_ti_05s_tflops"] == rows["05s"]["tflops"] and VALUES["ch4_ti_gpu"] == "NVIDIA H200"
    assert out.startswith("NVIDIA H200, 2026-11-29, one process at 4096") and "step 05 at 04's tile" in out


def test_launch_spread_reads_eight_launches_of_each_layout(capsys):
    rows = ch5.spread_rows()
    assert set(rows) == {"plain", "padded", "swizzled"}
    assert all(len(r["us"]) == len(r["l2"]) == len(r["mhz"]) == 8 for r in rows.values())
    assert [round(rows[v]["median"], 1) for v in ("plain", "padded", "swizzled")] == [5441.9, 5433.6, 5395.1]
    assert all(1970 < f < 1980 for r in rows.values() for f in r["mhz"])  # the same SM clock in every launch
    out = ch5.launch_spread()
    # the swizzle's gain is larger than any kernel's launch-to-launch spread, the padding's is not
    assert out["swizzled"]["gain"] > max(r["spread"] for r in out.values()) > out["padded"]["gain"]
    assert min(out["plain"]["l2"]) < min(out["swizzled"]["l2"]) < max(out["plain"]["l2"])  # L2 hit: noise
    assert "| swizzled | 8 | 5,395.1 | 0.2 | 0.87 | 68.0-71.6 |" in capsys.readouterr().out
