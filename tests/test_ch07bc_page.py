"""Chapters 7b and 7c (issues 51/52): the pictures added before step 08, the descriptor, TMA and 3xTF32, and the
models and figures the prose quotes (step 08's own prediction, the loop's overlap share, the predictions of 7b)."""
import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gemmlab.chapters import ch07b_ampere_pipeline as ch7b  # noqa: E402
from gemmlab.chapters import ch07c_hopper_wgmma as ch7c  # noqa: E402
from gemmlab.chapters import ch07d_hopper_schedule as ch7d  # noqa: E402


@pytest.fixture(autouse=True)
def _no_show(monkeypatch):
    monkeypatch.setattr(plt, "show", lambda: None)
    yield
    plt.close("all")


def _texts(ax):
    return [t.get_text() for t in ax.texts] + [ax.get_title()]


def test_step08_roles_and_register_budget_come_from_the_kernel():
    w = ch7c.ws_roles()
    assert (w["threads"], w["groups"], w["producer_regs"], w["consumer_regs"]) == (384, 3, 40, 232)
    assert w["budget_used"] == 128 * 40 + 256 * 232 <= w["regfile"] == 65536 and w["cap_regs"] == 168
    roles = w["roles"]
    assert [r["role"] for r in roles] == ["producer", "consumer", "consumer"]
    assert [r["rows"] for r in roles] == [None, (0, 63), (64, 127)]  # the consumers split the 128-row tile
    assert roles[0]["threads"] == (0, 127) and roles[2]["threads"] == (256, 383)


def test_warp_specialization_picture_says_who_does_what():
    ax, bx = ch7c.draw_warp_specialization()
    text = " ".join(_texts(ax))
    assert "warp group 0: producer" in text and text.count(": consumer") == 2
    assert "rows 0-63" in text and "rows 64-127" in text and "full[s]" in text and "empty[s]" in text
    assert "both multiply" in ax.get_title()  # the roles differ from hopper/01-03's picture
    assert "64,512 <= 65,536" in bx.get_title()
    assert len(bx.patches) == 2  # producer's and consumers' share of the register file


def test_descriptor_strides_are_the_kernels():
    d = ch7c.descriptor_strides()
    assert d == {"a_lbo": 16, "a_sbo": 1024, "b_lbo": 8192, "b_sbo": 1024, "atom_bytes": 1024}
    atom, boxes = ch7c.draw_descriptor()
    labels = [t.get_text() for t in atom.texts]
    assert len(labels) == 64 and labels[:8] == [str(c) for c in range(8)]  # row 0 unswizzled
    assert any("SBO = 1024" in t for t in _texts(boxes)) and any("LBO = 8,192" in t for t in _texts(boxes))


def test_tma_boxes_fill_one_stage():
    boxes = ch7c.tma_boxes(256)
    assert [b["name"] for b in boxes] == ["A", "B0", "B1", "B2", "B3"]
    assert [b["offset"] for b in boxes] == [0, 16384, 24576, 32768, 40960]
    assert sum(b["bytes"] for b in boxes) == (128 + 256) * 64 * 2
    ax = ch7c.draw_tma(256)
    assert "5 TMA boxes" in ax.get_title()


def test_step08_prediction_is_its_own_and_uses_step03s_idle_share():
    p = ch7c.step08_prediction()
    assert p["from_tflops"] < p["tflops"] <= p["peak_at_clock"]
    assert abs(p["tflops"] - p["from_tflops"] / (p["busy_pct"] / 100)) < 1e-6 or p["tflops"] == p["peak_at_clock"]
    ring = ch7c.ring_prediction(4096)
    assert abs(p["tflops"] - ring["tflops_03"]) > 1  # not step 03's prediction repeated


def test_cublas_range_is_the_ladders_band():
    lo, hi = ch7c.cublas_range(8192)
    rates = [r["baseline_tflops"] for r in ch7c.records() if r["m"] == 8192]
    assert (lo, hi) == (min(rates), max(rates))
    ax = ch7c.ladder(8192)
    assert not [ln for ln in ax.lines if ln.get_linestyle() == "--"]  # no single cuBLAS line
    assert len(ax.collections) == 1 and len(ax.collections[0].get_segments()) == len(ch7c.STEPS)


def test_loop_halves_overlap_share():
    h = ch7b.loop_halves()
    us = h["us"]
    total, slower = us["s07_copyonly"] + us["s07_nocopy"], max(us["s07_copyonly"], us["s07_nocopy"])
    assert slower < us["s07_pipe"] < total  # some overlap, far from full
    assert abs(h["overlap_pct"] - 100 * (total - us["s07_pipe"]) / (total - slower)) < 1e-9
    assert 0 < h["overlap_pct"] < 50 and h["full_overlap_of_sum_pct"] < h["whole_of_sum_pct"] < 100


def test_predictions_before_steps_04_06_07():
    recs, at = ch7b.records()
    peaks, _ = ch7b.ceilings(at)
    p4, p6, p7 = (ch7b.predict(s, at, peaks) for s in ch7b.PREDICTED)
    assert p4["from_tflops"] < p4["tflops"] < peaks["mma_m16n8k8"]["tflops"]
    assert abs(p6["tflops"] / p6["from_tflops"] - 1) < 0.02  # barriers are free in the model: 06 predicts 05's rate
    assert p6["tflops"] < p7["tflops"] < peaks["mma_m16n8k16"]["tflops"]


def test_tf32x3_picture_issues_three_mmas_and_drops_one():
    terms = ch7b.tf32x3_terms()
    assert [t["issued"] for t in terms] == [True, True, True, False]
    assert terms[-1]["relative"] < 2.0 ** -20 and terms[2]["relative"] > 0.99
    ax = ch7b.draw_tf32x3()
    text = " ".join(_texts(ax))
    assert text.count("mma ") == 3 and "dropped: small_a x small_b" in text


def test_step07_picture_keeps_wait_group_apart_from_the_barrier():
    assert ch7b.STEP07_LINE_OFFSET["wait_group"] != ch7b.STEP07_LINE_OFFSET["barrier"]


def test_tile_dram_bounds_are_flop_per_byte_times_bandwidth():
    b = ch7b.tile_bounds("NVIDIA H100 80GB HBM3")
    spec = b.pop("spec")
    assert b[(128, 128)]["flop_per_byte"] == 64 and abs(b[(256, 128)]["flop_per_byte"] - 256 / 3) < 1e-9
    assert abs(b[(128, 128)]["dram_tflops"] - 64 * spec.dram_gbps / 1000) < 1e-9
    assert 210 < b[(128, 128)]["dram_tflops"] < 220 and 280 < b[(256, 128)]["dram_tflops"] < 290
    recs, at = ch7b.records()
    peaks, _ = ch7b.ceilings(at)
    t = ch7b.tile_intensity(peaks, at)
    assert t["pred_05"] == min(t["bound_05"], peaks["mma_m16n8k8"]["tflops"]) and t["tflops_04"] > t["bound_04"]


def test_tf32_gap_is_measured_against_the_ffma_probe_and_counts_sass_per_mma():
    g = ch7b.tf32_gap(ch7b.tf32_records())
    assert g["measured"] < 1 < g["predicted"] < 2  # slower than the FFMA probe, against a predicted 1.7x
    for arch in ("sm_80", "sm_90"):
        assert g[arch]["HMMA"] % 3 == 0 and g[arch]["feed_per_hmma"] > 1  # three mma per product, >1 feed op each


def test_ceilings_quote_the_ladder_figures_cublas_band_and_stage_predictions_rise():
    recs, at = ch7b.records()
    peaks, cublas = ch7b.ceilings(at)
    ch7b.ladder(recs, at, peaks, cublas)
    bars = plt.gcf().axes[0]
    mid = [ln.get_ydata()[0] for ln in bars.lines if ln.get_linestyle() == "--" and ln.get_color() == "0.4"]
    assert len(mid) == 1 and abs(mid[0] - cublas["fp16"]["tflops"]) < 1e-9  # text and figure: one centre line
    s = ch7b.stage_predictions(at, peaks)
    assert s[2] < s[3] < s[4] and abs(s[3] - ch7b.predict("hgemm/07_cp_async", at, peaks)["tflops"]) < 1e-9


def test_7c_cublas_drift_and_stall_tables_show_what_the_prose_quotes():
    d = ch7c.cublas_drift(8192)
    rates = [r["baseline_tflops"] for r in ch7c.records() if r["m"] == 8192]
    assert min(rates) <= d["median"] <= max(rates) and 5 < d["fall_pct"] < 20  # cuBLAS fell over the run
    r08 = ch7c.at("hgemm/08_wgmma", 8192)
    assert abs(d["pct_of_median"]["hgemm/08_wgmma"] - 100 * r08["tflops"] / d["median"]) < 1e-9
    t = ch7c.stall_table(steps=("hopper/03_tma_ring",))
    assert "barrier" in t and "long_scoreboard" in t  # the top stall and the one the prose quotes beside it
    assert "(from 03)" in ch7c.gap_table() and "profiled" in ch7c.gap_table()
    p = ch7c.serial_prediction()
    assert p["sms"] == 132 and p["dram_gbps"] > 0 and p["peak_tflops"] > 900


def test_profiles_of_steps_04_to_07_come_from_one_h200_run_and_hold_the_regression():
    rows = ch7b.profile_steps()
    assert list(rows) == ["04", "05", "06", "07"]
    r4, r5, r6, r7 = (rows[v] for v in ("04", "05", "06", "07"))
    assert r5["ms"] > r4["ms"] and r7["ms"] < r6["ms"] < r5["ms"]  # the regression 04 -> 05 reproduces
    assert r5["inst"] < r4["inst"] and r5["short_scoreboard"] > 1.9 * r4["short_scoreboard"]
    assert (r4["blocks"], r4["threads"], r5["blocks"], r5["threads"]) == (2, 128, 1, 256)  # 8 warps per SM in both
    assert r4["ldsm"] == r5["ldsm"]  # the same 64 x 64 warp tile: as many ldmatrix per mma
    assert r7["hmma"] * 2 == r6["hmma"] == 8192 ** 3 / (16 * 8 * 8) / 1e6 and r6["hmma"] == 8 * r6["ldsm"]
    assert abs(r7["inst"] - r6["inst"]) < 0.02 * r6["inst"]  # half the HMMA, not fewer instructions


def test_source_page_reader_sums_step12s_executed_mix():
    assert ch7b.sass_opcode("@!P0 LDS.U.128 R4, [R2]") == "LDS" and ch7b.sass_opcode("  HMMA.1688.F32.TF32 R1") == "HMMA"
    mix = ch7b.executed_mix()
    total = sum(mix.values())
    assert mix["HMMA"] == 3 * 4096 ** 3 / (16 * 8 * 8)  # three TF32 mma per product, every multiply-add once
    assert [op for op, _ in mix.most_common(3)] == ["HMMA", "FADD", "LDS"] and 0.19 < mix["HMMA"] / total < 0.21
    x = ch7b.tf32_executed({"feed_per_hmma": 2.17})
    assert 1.9 < x["feed_per_hmma"] < 2.1 and 45 < x["tensor"] < 55


_PAGE = '''"Kernel Name","k",
"Address","Source","Warp Stall Sampling (All Samples)","stall_barrier","stall_wait"
"0x0","      BAR.SYNC.DEFER_BLOCKING 0x0","1","0","1"
"0x10","      LDC R1, c[0x0][0x28]","3","2","1"
"0x20","      HGMMA.64x256x16.F32 R24, gdesc[UR8].tnspB, R24, gsb0","4","0","4"
"0x30","      WARPGROUP.DEPBAR.LE gsb0, 0x0","10","8","2"
"0x40","      WARPGROUP.DEPBAR.LE gsb0, 0x0","2","0","2"
'''


def test_barrier_places_files_barrier_samples_under_the_wait_they_belong_to():
    rows = ch7c.source_page(_PAGE)
    assert [ch7c.wait_before(rows, i) for i in range(3)] == ["BAR.SYNC", "BAR.SYNC", "BAR.SYNC"]
    assert ch7c.wait_before(rows, 3) == "WARPGROUP.DEPBAR"
    p = ch7c.barrier_places("hopper/03_tma_ring", text=_PAGE)
    assert p["samples"] == 20 and p["barrier_pct"] == pytest.approx(50)  # 10 of 20 samples are barrier
    assert p["depbar_pct"] == pytest.approx(80) and p["barsync_pct"] == pytest.approx(20)
    assert p["depbar_sites"] == 1 and p["depbar_sass"] == "WARPGROUP.DEPBAR.LE gsb0, 0x0"


def test_recorded_source_pages_put_the_barrier_stall_on_the_wgmma_wait():
    p03, p08 = ch7c.barrier_places("hopper/03_tma_ring"), ch7c.barrier_places("hgemm/08_wgmma")
    assert p03["depbar_pct"] > 99 and p03["depbar_sites"] == 1 and 42 < p03["depbar_of_all_pct"] < 44
    assert p08["depbar_pct"] > 99 and p08["depbar_sites"] == 2 and 58 < p08["barrier_pct"] < 60  # two consumers
    for p in (p03, p08):  # the repeat profile's overall stall is the one run's
        assert p["barsync_pct"] < 1 and p["barrier_repeat"] == pytest.approx(p["barrier_one_run"], rel=0.01)
    table = ch7c.barrier_places_table(("hopper/03_tma_ring", "hgemm/08_wgmma"))
    assert "99.6%" in table and "(2 sites)" in table and "WARPGROUP.DEPBAR.LE gsb0, 0x0" in table


def test_first_launches_clock_against_the_sustained_clock():
    first = ch7c.first_launches()
    assert [f["step"] for f in first] == list(ch7c.FIRST_STEPS)
    assert [round(f["mhz"]) for f in first] == [1752, 1748, 1691, 1683, 1655, 1633, 1623, 1629]
    assert [round(f["us"], 1) for f in first] == [743.2, 408.5, 212.6, 198.1, 193.8, 173.9, 174.9, 175.6]
    for f in first:  # the repeat times the profiled launches within 2%, at a clock above the sustained one
        assert abs(f["us"] / f["profiled_us"] - 1) < 0.02 and f["bench_us"] > f["us"]
        assert f["over_board_pct"] == pytest.approx(100 * (f["mhz"] / ch7c.board_clock()["mhz"] - 1))
    assert "its MHz" in ch7c.gap_table() and " 1683 " in ch7c.gap_table()


def test_more_source_pages_place_step02s_waits_and_step11s_wait1():
    """hopper/02: long_scoreboard on the branches of the mbarrier's try-wait loop, barrier on the two wgmma_wait<0>;
    hgemm/11: the barrier samples on wgmma_wait<1> (gsb0, 0x1), mio_throttle on the HGMMAs; hgemm/09 like 08."""
    one = ch7c.TENSOR_BUSY
    assert one.endswith("pct_of_peak_sustained_elapsed") and ch7c.profiled("hgemm/08_wgmma")["tensor_pct"] == \
        ch7d.stalls("hgemm/08_wgmma")["tensor"]  # one busy measure in both chapters
    lsb = ch7c.stall_places("hopper/02_tma", "long_sb")
    assert 48 < lsb["pct_of_all"] < 50 and len(lsb["sites"]) == 2
    assert all(s["sass"].startswith("@!P0") and "BRA" in s["sass"] and "TRYWAIT" in s["after"] for s in lsb["sites"])
    p02 = ch7c.barrier_places("hopper/02_tma")
    assert 35 < p02["barrier_pct"] < 36 and 91 < p02["depbar_pct"] < 92 and p02["depbar_sites"] == 2
    assert 8 < p02["barsync_pct"] < 9 and list(p02["depbar_kinds"]) == ["gsb0, 0x0"]
    p09, p11 = ch7c.barrier_places("hgemm/09_persistent"), ch7c.barrier_places("hgemm/11_mma_in_flight")
    assert p09["depbar_pct"] > 99 and p09["depbar_sites"] == 2
    assert 46 < p11["barrier_pct"] < 47 and 95 < p11["depbar_kinds"]["gsb0, 0x1"] < 96
    assert p11["depbar_sass"] == "WARPGROUP.DEPBAR.LE gsb0, 0x1"
    mio = ch7c.stall_places("hgemm/11_mma_in_flight", "mio")
    assert 10 < mio["pct_of_all"] < 11 and mio["by_opcode"]["HGMMA"] > 99
    assert "hgemm/11_mma_in_flight" in ch7c.barrier_places_table(("hgemm/11_mma_in_flight",))


def test_diff_from_a_line_leaves_the_header_comment_out():
    from gemmlab.chapters import show
    whole = show.diff("hgemm/11_mma_in_flight", "hgemm/10_tma_store").text
    cut = show.diff("hgemm/11_mma_in_flight", "hgemm/10_tma_store", start_at='#include "common.cuh"').text
    assert whole.startswith("@@ -1,") and not cut.startswith("@@ -1,")
    assert "wgmma_wait<1>" in cut and len(cut.splitlines()) < len(whole.splitlines())
    assert cut.splitlines()[-1] == whole.splitlines()[-1]  # the same hunks after the header, the files' line numbers
    with pytest.raises(ValueError):
        show.diff("hgemm/11_mma_in_flight", "hgemm/10_tma_store", start_at="no such line")


def test_predictions_print_the_model_in_rates_a_reader_can_redo(capsys):
    """predict() prints L (the rate the loads alone allow) and C (the math alone), and the model's min(k L, C), which
    the pipeline's fill over the K tiles lowers only a little: 07's prediction is about twice step 06's rate."""
    recs, at = ch7b.starting_point()
    peaks, _ = ch7b.ceilings(at)
    capsys.readouterr()
    p7 = ch7b.predict("hgemm/07_cp_async", at, peaks)
    out = capsys.readouterr().out
    assert "L: the loads alone allow" in out and "min(2 x L, C)" in out
    rate = min(2 * p7["from_tflops"], peaks["mma_m16n8k16"]["tflops"])
    assert 0.98 * rate < p7["tflops"] <= rate
    assert ch7b.tf32_measure().keys() == ch7b.tf32_records().keys()
