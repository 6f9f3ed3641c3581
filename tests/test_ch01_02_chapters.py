"""Chapters 1 and 2's modules: the ownership pictures before steps 01 and 02, the sector model's prediction, the
profiler's counters that explain the measured gain, and chapter 1's roofline bounds, all drawn from the records."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

from gemmlab import coalescing, hardware
from gemmlab.chapters import ch01_gpu_hardware as ch1
from gemmlab.chapters import ch02_coalescing as ch2
from gemmlab.chapters.glue import VALUES

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("step, block", [("sgemm/01_naive", (32, 8)), ("sgemm/02_coalesced", (32, 8)),
                                         ("sgemm/02_coalesced", (16, 16))])
def test_owners_follow_the_twin_and_cover_c_once(step, block):
    own = ch2.owners(step, block, size=32)
    assert (own >= 0).all() and len(np.unique(own)) == own.size  # every element by one thread
    mapping = ch2.MAPPING_OF[step]
    for row, col in [(0, 0), (5, 3), (31, 17)]:
        t = own[row, col]
        b, tid = divmod(int(t), block[0] * block[1])
        gx_max = coalescing.grid_dim(mapping, block, 32, 32)[0]
        assert coalescing.thread_element(mapping, block, (b % gx_max, b // gx_max),
                                         (tid % block[0], tid // block[0])) == (row, col)


def test_warp_zero_is_a_column_in_step_01_and_a_row_in_step_02():
    r1, c1 = np.nonzero(ch2.owners("sgemm/01_naive") // 32 == 0)
    r2, c2 = np.nonzero(ch2.owners("sgemm/02_coalesced") // 32 == 0)
    assert set(c1) == {0} and sorted(r1) == list(range(32))
    assert set(r2) == {0} and sorted(c2) == list(range(32))


@pytest.mark.parametrize("step", ch2.STEPS)
def test_ownership_picture_shows_the_map(step):
    """The image colours each element by its warp, the red warp's 32 lane numbers are written on it, and the outline
    is block (0, 0): 32 x 8 elements, transposed between the two steps."""
    own = ch2.owners(step)
    ax = ch2.ownership(step)
    assert np.array_equal(np.asarray(ax.images[0].get_array()), own // 32)
    assert sorted(int(t.get_text()) for t in ax.texts) == list(range(32))
    for t in ax.texts:
        x, y = t.get_position()
        assert own[int(y), int(x)] == int(t.get_text())  # lane l's number sits on the element thread l computes
    box = ax.patches[0]
    assert (box.get_width(), box.get_height()) == ((8, 32) if step == "sgemm/01_naive" else (32, 8))
    plt.close("all")


def test_prediction_is_the_ratio_of_sectors():
    assert ch2.predicted_gain() == pytest.approx(33 / 5)
    assert ch2.lines_per_k_step("naive") == 33 and ch2.lines_per_k_step("coalesced") == 2
    ch2.predict()
    assert VALUES["ch2_predicted"] == pytest.approx(6.6) and VALUES["ch2_naive_kstep"] == "33"


def test_counters_come_from_the_record_and_match_the_model():
    """The H200's record: measured sectors per request equal the model's, step 01 hits L1 for nearly every sector
    and stalls on the full load queue; the profiled durations give the measured gain."""
    rec = {"sgemm/01_naive": {"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 100.0,
                              "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 1650.0,
                              "l1tex__t_sector_hit_rate.pct": 99.0, "lts__t_sector_hit_rate.pct": 60.0,
                              "lts__t_sectors_srcunit_tex_op_read.sum": 5.0, "dram__bytes_read.sum": 2e9,
                              "gpu__time_duration.sum": 2e6,
                              "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": 2.0,
                              "smsp__average_warp_latency_issue_stalled_lg_throttle_per_warp_active.ratio": 9.0,
                              "smsp__average_warp_latency_issue_stalled_wait_per_warp_active.ratio": 1.0}}
    row = ch2.counter_rows(rec)["sgemm/01_naive"]
    assert row["sectors"] == row["model_sectors"] == 16.5
    assert row["stall"] == ("lg_throttle", 9.0) and row["dram_gb"] == 2.0 and row["lines"] == 33
    spec = hardware.spec_for(ch2.COUNTERS_GPU)
    assert ch2.lines_per_cycle(row) == pytest.approx(50 * 33 / (2e-3 * spec.boost_mhz * 1e6 * spec.sms))
    real = ch2.counter_rows()  # results/nvidia-h200.ncu.json
    r1, r2 = real["sgemm/01_naive"], real["sgemm/02_coalesced"]
    assert r1["sectors"] == pytest.approx(r1["model_sectors"]) and r2["sectors"] == pytest.approx(r2["model_sectors"])
    assert r1["l1_hit"] > r2["l1_hit"] > 90 and r1["stall"][0] == "lg_throttle"
    assert ch2.predicted_gain() < r1["time_s"] / r2["time_s"] < r1["lines"] / r2["lines"]


def test_where_we_are_and_measure_draw_from_the_records():
    recs = [{"step": s, "m": 4096, "n": 4096, "k": 4096, "tflops": t, "pct_of_baseline": 100 * t / 50,
             "baseline_tflops": 50.0, "baseline": "cupy", "gpu": "NVIDIA H100 80GB HBM3", "source": "recorded",
             "date": "2026-01-01", "params": {}, "dtype": "float32", "median_s": 1.0}
            for s, t in zip(ch2.STEPS, (0.5, 6.0))]
    ch2.timings(recs)
    assert VALUES["ch2_speedup"] == "12.0x" and VALUES["ch2_v2_pct"] == "12.0%" and VALUES["ch2_cublas_tflops"] == "50.00"
    ch2.measure(recs)   # the bars alone, cuBLAS in the title from step 02's run (no roofline panel)
    (ax_bars,) = plt.gcf().axes
    assert [round(b.get_height(), 3) for b in ax_bars.containers[0]] == [0.5, 6.0]
    assert "cuBLAS 50.00 TFLOP/s (step 02's run)" in ax_bars.get_title()
    plt.close("all")


def test_chapter1_bounds_and_roofline_points():
    b = ch1.bounds("H100 SXM5")
    assert b == {"copy_gbps": 3350.0, "fp32": 67.0, "fp16": pytest.approx(989.4)}
    small = ch1.bounds("t4", n=64)  # a 64^3 GEMM is memory-bound on a T4: bandwidth x intensity
    assert small["fp32"] == pytest.approx(320 * hardware.gemm_intensity(64, 64, 64) / 1e3) and small["fp32"] < 8.1
    with pytest.raises(ValueError):
        ch1.bounds("a GPU nobody makes")
    copy = {"gbps": 2000.0, "gpu": "NVIDIA H100 80GB HBM3"}
    blas = {"fp32": {"tflops": 40.0}, "fp16": {"tflops": 500.0}}
    assert [p[2] for p in ch1.roofline_points(copy, blas, "NVIDIA H100 80GB HBM3")] == [40.0, 500.0]
    assert ch1.roofline_points(copy, blas, "t4") == []  # measured on another GPU: not placed on the T4's roofline
    axes = ch1.draw_roofline(None, copy, blas)
    assert "H100" in axes[0].get_title() and "T4" in axes[1].get_title()
    assert {t.get_text() for t in axes[0].texts} >= {"cuBLAS fp32 4096", "cuBLAS fp16 4096"}
    plt.close("all")


def test_chapter1_names_the_records_gpu_and_its_prediction():
    assert ch1.chapter_gpu({"name": "Tesla T4"}) == "Tesla T4"
    assert ch1.chapter_gpu(None) == hardware.load_hardware()["gpu"]
    ch1.predict("NVIDIA H100 80GB HBM3")
    assert VALUES["ch1_bound_fp32"] == "67.0" and VALUES["ch1_spec_name"] == "H100 SXM5"


def test_only_warp_zero_is_red():
    ax = ch2.ownership("sgemm/01_naive")
    rgba = ax.images[0].cmap(ax.images[0].norm(np.asarray(ax.images[0].get_array())))
    red = np.all(np.isclose(rgba[..., :3], (0.85, 0.15, 0.15)), axis=-1)
    assert np.array_equal(red, ch2.owners("sgemm/01_naive") // 32 == 0)
    plt.close("all")


def test_waves_round_up(capsys):
    """65536 blocks, 1056 resident at once on an H100/H200: 62.06 -> 63 waves (a partial wave is a wave)."""
    ch1.waves()
    out = capsys.readouterr().out
    assert "1056 at once, 63 waves" in out and "160 at once, 410 waves" in out


def test_waves_name_the_last_wave_and_the_occupancy(capsys):
    """The last wave holds what the full ones leave (65536 - 62 x 1056 = 64 blocks); 8 blocks of 8 warps fill an
    H100's 64 warp slots (occupancy 100%); the prose's glue names the GPUs that deal the grid out alike."""
    from gemmlab.chapters.glue import VALUES
    ch1.waves()
    out = capsys.readouterr().out
    assert "8 blocks per SM (64 warps, occupancy 100%), 1056 at once, 63 waves, the last 64 of 1056" in out
    assert "the last 96 of 160" in out   # T4: 65536 - 409 x 160
    assert VALUES["ch1_wave_gpu"] == "H100 SXM5 and H200 SXM" and VALUES["ch1_wave_last"] == "64"


def test_the_fp32_peak_follows_from_the_sm(capsys):
    """4 sub-partitions x 32 FP32 lanes: an H100 SM completes 4 warp FFMAs a cycle, and SMs x lanes x 2 x clock is
    its spec sheet's peak (a T4: 16 lanes per sub-partition)."""
    assert ch1.warp_ffma_per_cycle("sm_90") == 4 and ch1.warp_ffma_per_cycle("sm_75") == 2
    for spec in hardware.SPECS.values():
        assert ch1.fp32_peak(spec) == pytest.approx(spec.fp32_tflops, rel=0.01)
    ch1.sm_peak()
    assert "132 SMs x 128 x 2 FLOP x 1980 MHz = 66.9 TFLOP/s" in capsys.readouterr().out


def test_chapter2_starts_from_cublas_only(capsys):
    ch2.where_we_are()
    out = capsys.readouterr().out
    assert "no kernel of ours yet" in out and not any(s in out for s in ch2.STEPS)


def test_line_model_bounds_step_01_and_the_speedup(capsys):
    from gemmlab.chapters import ch02_coalescing as ch2
    assert ch2.lines_per_k_step("naive") == 33 and ch2.lines_per_k_step("coalesced") == 2
    assert ch2.line_bound("naive", "NVIDIA H100 80GB HBM3") == pytest.approx(64 / 33 * 132 * 1980e6 / 1e12)
    ch2.predict_lines(gpu="NVIDIA H100 80GB HBM3")
    out = capsys.readouterr().out
    assert "step 01 <= 0.51 TFLOP/s" in out and "up to 16.5x faster" in out
    assert "step 02 <= 8.36 TFLOP/s" in out                      # 64 FLOP / 2 lines x 132 SMs x 1980 MHz


def test_step_02_is_placed_against_its_line_ceiling_and_the_seed_note_multiplies_out():
    """Step 02's TFLOP/s over the line model's ceiling on its records' GPU (6.0 of 8.36 on an H100: 72%); the seed's
    0.39% and 2% give 5.1x, and 0.39% x its stated 8 is 3.1% (glued for the note under the table)."""
    recs = [{"step": s, "m": 4096, "n": 4096, "k": 4096, "tflops": t, "pct_of_baseline": 100 * t / 50,
             "baseline_tflops": 50.0, "baseline": "cupy", "gpu": "NVIDIA H100 80GB HBM3", "source": "recorded",
             "date": "2026-01-01", "params": {}, "dtype": "float32", "median_s": 1.0}
            for s, t in zip(ch2.STEPS, (0.5, 6.0))]
    ch2.timings(recs)
    assert VALUES["ch2_v2_of_line_bound"] == "72%"
    ch2.seed_table(recs)
    assert (VALUES["ch2_seed_v2_over_v1"], VALUES["ch2_seed_v1_times_gain"]) == ("5.1x", "3.1%")



def test_waves_picture_deals_ten_blocks_to_four_sms_in_three_waves():
    assert ch1.wave_of(10, 4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    ax = ch1.draw_waves(10, 4)
    texts = [t.get_text() for t in ax.texts]
    assert texts == [f"block {b}" for b in range(10)]
    dashed = [p for p in ax.patches if not p.get_fill()]
    assert len(dashed) == 2                        # the last wave's two empty SM slots
    assert [t.get_text() for t in ax.get_yticklabels()] == ["wave 1", "wave 2", "wave 3"]
    assert "3 waves, the last 2 of 4" in ax.get_title()
    plt.close("all")


def test_the_spec_table_names_its_sources(capsys):
    """Each reference GPU's spec-sheet figures come with the document they were taken from."""
    ch1.your_gpu()
    out = capsys.readouterr().out
    assert all(f"{spec.name}: {spec.source}" in out for spec in hardware.SPECS.values())
