"""Chapter 9's module: every time and speed-up from one run (selected by date and kind), the predictions from
chapter 8's model, and the pictures drawn from twins of the kernels' index arithmetic
(gemmlab/chapters/ch09_fusion_hopper.py)."""
from __future__ import annotations

import re

import matplotlib
import pytest

matplotlib.use("Agg")

from gemmlab.chapters import ch09_fusion_hopper as ch9  # noqa: E402
from gemmlab.chapters import glue  # noqa: E402
from gemmlab.measure import fusion  # noqa: E402
from gemmlab.runtime.source import kernel_path  # noqa: E402


@pytest.fixture(scope="module")
def run():
    return ch9.one_run()


def test_one_run_selects_one_date_and_kind(run):
    assert run and {(r["gpu"], r["date"], r["kind"]) for r in run} == {(ch9.GPU, ch9.RUN_DATE, "benchmark")}
    every = fusion.load(ch9.GPU)
    assert any(r["date"] != ch9.RUN_DATE or r["kind"] != "benchmark" for r in every)  # there was a mix to refuse
    fake = [dict(r, date="2026-11-25") for r in run[:3]] + [dict(r, kind="sweep") for r in run[:3]]
    with pytest.raises(LookupError):
        ch9.one_run(fake)
    assert len(ch9.one_run(fake + run[:2])) == 2


def test_every_step_and_both_baselines_are_in_the_run(run):
    for n in (512, 4096):
        for step in ("fused/05_tf32x3",) + ch9.STEPS + ("torch a@b@c", "torch graph a@b@c"):
            assert fusion.lookup(run, step, n), (step, n)


def test_a_row_is_times_from_the_run_and_its_ratios(run):
    for step in ch9.STEPS:
        for n in (512, 4096):
            m = ch9.row(run, step, n)
            r, eager = fusion.lookup(run, step, n), fusion.lookup(run, "torch a@b@c", n)
            assert m["us"] == pytest.approx(r["median_s"] * 1e6)
            assert m["eager_us"] <= eager["median_s"] * 1e6 + 1e-9  # the faster eager library of the same run
            assert m["x"] == pytest.approx(m["eager_us"] / m["us"]) and m["xg"] == pytest.approx(m["base_graph_us"] / m["us"])
            assert m["cublas_tflops"] > 0 and m["date"] == ch9.RUN_DATE


def test_a_speed_up_never_mixes_runs(run, monkeypatch):
    """Glue the measured figures from a run whose times are all doubled: the ratios do not move."""
    seen = {}
    monkeypatch.setattr(ch9, "glue", lambda k, v: seen.__setitem__(k, v))
    ch9.glue_measured(run, "fused/07_tma_tf32x3")
    slow = [dict(r, median_s=2 * r["median_s"], graph_median_s=2 * r.get("graph_median_s", 0)) for r in run]
    before = dict(seen)
    ch9.glue_measured(slow, "fused/07_tma_tf32x3")
    for k in ("ch9_m07_512_x", "ch9_m07_512_xg", "ch9_m07_4096_x"):
        assert seen[k] == pytest.approx(before[k])
    assert seen["ch9_m07_512_us"] == pytest.approx(2 * before["ch9_m07_512_us"])


def test_the_prediction_is_the_model():
    p = ch9.prediction("fused/06_wgmma_tf32x3", 512)
    assert p["arith_us"] == pytest.approx(3 * fusion.flops(512) / (ch9.TF32_TFLOPS * 1e12) * 1e6)
    assert p["dram_us"] == pytest.approx(fusion.traffic_bytes(512) / (ch9.SPEC.dram_gbps * 1e9) * 1e6)
    assert p["best_us"] == pytest.approx(max(p["arith_us"], p["dram_us"]) + p["floor_us"])
    assert ch9.prediction("fused/06_wgmma_tf32x3", 4096)["bound"] == "tensor pipe"
    assert ch9.prediction("fused/08_tile_flags", 512)["predicted_us"] == p["best_us"]  # no run: the model


def test_step_08_is_predicted_from_step_07_as_measured(run, capsys):
    """Step 08's prediction is step 07's time in the run less the grid barrier's wait (which the model's bound never
    held); the table and the prose quote the same number."""
    p = ch9.prediction("fused/08_tile_flags", 512, run)
    assert p["from_07_us"] == pytest.approx(ch9.row(run, "fused/07_tma_tf32x3", 512)["us"], abs=0.05)
    assert p["saved_us"] == pytest.approx(ch9.barrier_wait_07(), abs=0.05) and p["saved_us"] > 0
    assert p["predicted_us"] == pytest.approx(p["from_07_us"] - p["saved_us"])
    assert ch9.prediction("fused/08_tile_flags", 4096, run)["saved_us"] == 0
    ch9.step_table(run, "fused/08_tile_flags")
    assert f"{p['predicted_us']:7.1f} µs" in capsys.readouterr().out
    glue.VALUES.clear()
    ch9.glue_prediction("fused/08_tile_flags", recs=run)
    assert glue.VALUES["ch9_p08_512_predicted_us"] == p["predicted_us"]


def test_steps_06_and_07_are_predicted_from_the_step_before_as_measured(run, capsys):
    """06: step 05's time less the ALU pipe's share of its kernel time; 07: step 06's time less what taking its copies
    out saved (24.7 - 5.2 = 19.5 µs at 512 in the run of 2026-11-29); at 4096 nothing is taken off."""
    p6 = ch9.prediction("fused/06_wgmma_tf32x3", 512, run)
    m5 = ch9.row(run, "fused/05_tf32x3", 512)["us"]
    assert p6["from_prev_us"] == pytest.approx(m5, abs=0.05)
    assert p6["saved_us"] == pytest.approx(ch9.alu_share_05() * (p6["from_prev_us"] - p6["floor_us"]), abs=0.05)
    p7 = ch9.prediction("fused/07_tma_tf32x3", 512, run)
    assert p7["from_prev_us"] == pytest.approx(ch9.row(run, "fused/06_wgmma_tf32x3", 512)["us"], abs=0.05)
    assert p7["saved_us"] == pytest.approx(ch9.copies_saving_06(), abs=0.05)
    assert p7["predicted_us"] == pytest.approx(p7["from_prev_us"] - p7["saved_us"])
    if ch9.RUN_DATE == "2026-11-29":
        assert round(p7["predicted_us"], 1) == 19.5
    for step in ("fused/06_wgmma_tf32x3", "fused/07_tma_tf32x3"):
        p = ch9.prediction(step, 4096, run)
        assert p["saved_us"] == 0 and p["predicted_us"] == pytest.approx(p["from_prev_us"])
        ch9.step_table(run, step)
    out = capsys.readouterr().out
    assert f"{p6['predicted_us']:7.1f} µs" in out and f"{p7['predicted_us']:7.1f} µs" in out
    assert out.count("predicted (at 512 from the step before") == 2


def test_tiles_and_the_stage_spread_come_from_the_records(run):
    from gemmlab.measure import fusion as fu

    p5 = fu.lookup(run, "fused/05_tf32x3", 4096)["params"]
    p6 = fu.lookup(run, "fused/06_wgmma_tf32x3", 4096)["params"]
    assert ch9.tile_shape(run, "fused/05_tf32x3", 4096) == f"{p5['BLOCK_M']} x {p5['BLOCK_N']}"
    assert ch9.tile_shape(run, "fused/06_wgmma_tf32x3", 4096) == f"64 x {p6['BLOCK_N']}"
    sp = ch9.stages_spread(run)
    assert sp["configs"] >= 2 and sp["spread_us"] > 0 and sp["fast_stages"] != sp["slow_stages"]


def test_fastest_at_names_the_sizes_where_step_07_leads(run):
    for n in ch9.fastest_at(run):
        assert all(ch9.row(run, "fused/07_tma_tf32x3", n)["us"] <= ch9.row(run, s, n)["us"]
                   for s in ("fused/05_tf32x3",) + ch9.STEPS)


def test_small_helpers():
    a, b, c = fusion.make_inputs("random", 8, 8, 8, 8, seed=0)
    e = (a.astype("float64") @ b @ c).astype("float32")
    assert ch9.matches_float64(e, a, b, c) and not ch9.matches_float64(e + 1, a, b, c)

    class R:
        def __str__(self):
            return "sm_90a: 168 registers"
    assert ch9.compiled_for(R()) == "sm_90a"


def test_the_verdict_at_256_names_the_steps_that_reach_3x(run):
    text = ch9.small_verdict(run)
    best = max(("fused/05_tf32x3",) + ch9.STEPS, key=lambda s: ch9.row(run, s, 256)["x"])
    m = ch9.row(run, best, 256)
    assert text.startswith("at 256") and f"{m['us']:.1f} against {m['eager_us']:.1f} µs, {m['x']:.2f}x" in text


def test_long_scoreboard_stalls_sit_after_an_mbarrier_wait():
    share = ch9.stall_after_trywait("long_sb")
    assert 0.5 < share <= 1  # step 08's long-scoreboard samples: the branch after SYNCS.PHASECHK, not a load


def test_phases_07_are_contiguous_and_hold_the_barrier_wait():
    segs, marks, log = ch9.timeline_07()
    labels = [s[0] for s in segs]
    assert labels[1] == "phase 1: K loop" and "grid barrier wait" in labels and labels[-1] == "phase 2: store E"
    assert all(a[2] == b[1] for a, b in zip(segs, segs[1:])) and all(s[2] > s[1] for s in segs)
    wait = sum(e - s for label, s, e in segs if label in ("grid barrier wait", "phase 2: first data of T"))
    assert wait == pytest.approx(ch9.barrier_wait_07()) and log.startswith("timeline-")
    assert all(lo <= med <= hi for lo, med, hi in marks.values())


def test_phases_07_and_barrier_and_panel_draw_what_they_say(monkeypatch):
    import matplotlib.pyplot as plt

    shown = []
    monkeypatch.setattr(plt, "show", lambda: shown.append(plt.gcf()))
    ch9.phases_07()
    ax = shown[-1].axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert all(label in texts for label, *_ in ch9.timeline_07()[0])
    assert len(ax.collections) >= len(ch9.PHASES_07)  # a bar per phase
    ch9.barrier_and_panel()
    ax = shown[-1].axes[0]
    w = ch9.row_panel_wait()
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "all 128 blocks" in texts and "its row panel" in texts and f"{w['no_wait']:+.2f}" in texts
    assert [t.get_text().split(" (")[0] for t in ax.get_yticklabels()] == ["step 07", "step 08"]
    plt.close("all")


def test_top_stalls_are_shares_largest_first():
    for step in ("fused/05_tf32x3", "fused/08_tile_flags"):
        s = ch9.top_stalls(step, 5)
        assert len(s) == 5 and all(a[1] >= b[1] for a, b in zip(s, s[1:])) and 0 < sum(v for _, v in s) <= 1
        assert all(name not in ("selected", "not_selected") for name, _ in s)


def test_ring_slot_and_consumer_ktiles_follow_the_kernels():
    for name in ("07_tma_tf32x3", "08_tile_flags"):
        src = kernel_path(f"kernels/fused/{name}.cu").read_text()
        assert src.count("const u32 ring_pos = ring_pos0 + kt, stage = ring_pos % NUM_STAGES;") == 2, name
        assert "mbarrier_wait(&full[stage], (ring_pos / NUM_STAGES) & 1);" in src, name
        assert "mbarrier_wait(&empty[stage], ((ring_pos / NUM_STAGES) & 1) ^ 1);" in src, name
        assert "for (int kt = group; kt < ktiles; kt += SPLIT_K)" in src, name
    src6 = kernel_path("kernels/fused/06_wgmma_tf32x3.cu").read_text()  # 06 counts rounds: K tile r * SPLIT_K + group
    assert "auto k_of = [&](int r) { return (r * SPLIT_K + group) * TILE_K; };" in src6
    assert [ch9.ring_slot(t, 3) for t in range(7)] == [(0, 0, 1), (1, 0, 1), (2, 0, 1), (0, 1, 0), (1, 1, 0),
                                                       (2, 1, 0), (0, 0, 1)]
    mine = [ch9.consumer_ktiles(g, 10, 3) for g in range(3)]
    assert sorted(sum(mine, [])) == list(range(10)) and mine[1] == [1, 4, 7]


def test_ring_keeps_a_waiter_within_one_fill():
    """With NUM_STAGES >= SPLIT_K a group's next step t + SPLIT_K is at most one fill after t (one parity)."""
    for stages in (2, 4, 8, 12):
        for split in range(1, stages + 1):
            for t in range(40):
                assert (t + split) // stages - t // stages <= 1


def test_reads_owed_follow_the_kernel():
    src = kernel_path("kernels/fused/08_tile_flags.cu").read_text()
    assert "const u32 reads = cdiv(N, BLOCK_N) * k_tiles_in(cols - col);" in src
    assert re.search(r"return \(u32\)cdiv\(width < BLOCK_N \? width : BLOCK_N, TILE_K\)", src)
    assert ch9.reads_owed(512, 32, 512) == 16 and ch9.reads_owed(512, 64, 512) == 8 * 2
    assert ch9.reads_owed(100, 64, 36) == 2 * 2  # the last tile of T, 36 columns wide: two K tiles of 32


def test_warpgroups_names_where_each_operand_comes_from(monkeypatch):
    import matplotlib.pyplot as plt

    shown = []
    monkeypatch.setattr(plt, "show", lambda: shown.append(plt.gcf()))
    ch9.warpgroups(split_k=4, block_n=32)
    texts = [t.get_text() for t in shown[0].axes[0].texts]
    assert any("A from registers" in t and "B (big or small) from shared memory through a descriptor" in t
               for t in texts)
    assert sum(t.startswith("group ") for t in texts) == 4 and any("64 x 32 tile" in t for t in texts)
    plt.close("all")


@pytest.mark.parametrize("draw", [lambda: ch9.warpgroups(), lambda: ch9.ring(), lambda: ch9.tile_flags(),
                                  lambda: ch9.plot_run(ch9.one_run())])
def test_the_pictures_and_the_figure_draw(draw, monkeypatch):
    import matplotlib.pyplot as plt

    shown = []
    monkeypatch.setattr(plt, "show", lambda: shown.append(plt.gcf()))
    draw()
    assert len(shown) == 1 and shown[0].axes
    plt.close("all")


def test_tables_and_sentences_come_from_the_run(run, capsys):
    for step in ch9.STEPS:
        ch9.step_table(run, step)
    ch9.speedup_table(run)
    out = capsys.readouterr().out
    assert out.count(f"one run of {ch9.RUN_DATE}") == 3 and f"lane run of {ch9.RUN_DATE}" in out
    glue.VALUES.clear()
    for f in (ch9.glue_evidence06, ch9.glue_evidence07, ch9.glue_evidence08, lambda: ch9.glue_verdict(run),
              lambda: ch9.glue_run(run)):
        f()
    v = glue.VALUES
    assert v["ch9_date"] == ch9.RUN_DATE and v["ch9_v_step"] in ch9.STEPS
    best = min(ch9.STEPS, key=lambda s: ch9.row(run, s, 512)["us"])
    assert v["ch9_v_us"] == pytest.approx(ch9.row(run, best, 512)["us"])
    assert 0 < v["ch9_e06_mma_pct"] < 100 and v["ch9_e07_copies"] > 0 and v["ch9_e08_barrier"] > 0


def test_listing_folds_the_whole_kernel():
    html = ch9.listing("fused/07_tma_tf32x3", "fused/06_wgmma_tf32x3")._repr_html_()
    assert html.startswith("<details><summary>") and '<div class="gemmlab-listing"><p' in html


def test_the_source_page_reader_sums_the_mix_and_the_samples(tmp_path):
    """opcode_mix drops predicates and modifiers; stall_shares are shares of all samples; barrier_share_at finds the
    barrier samples on one opcode (a synthetic page in the source page's format)."""
    import gzip

    head = ['"Address"', '"Source"', '"Warp Stall Sampling (All Samples)"', '"Instructions Executed"',
            '"stall_barrier"', '"stall_wait"', '"stall_barrier (Not Issued)"']
    rows = [["0x0", "  @!P0 LDS.U.128 R4, [R2]", "4", "10", "0", "4", "0"],
            ["0x10", "HGMMA.64x32x8.F32.TF32 R24, gdesc[UR8], R24", "2", "5", "0", "2", "0"],
            ["0x20", "@P0   EXIT", "6", "1,000", "6", "0", "6"]]
    text = '"Kernel Name","k"\n' + ",".join(head) + "\n" + "\n".join(",".join(f'"{v}"' for v in r) for r in rows)
    path = tmp_path / "src.csv.gz"
    path.write_bytes(gzip.compress(text.encode()))
    got = ch9.source_rows(path)
    assert [r["Address"] for r in got] == ["0x0", "0x10", "0x20"]
    assert ch9.opcode_mix(got) == {"LDS": 10, "HGMMA": 5, "EXIT": 1000}
    assert ch9.stall_shares(got) == pytest.approx({"barrier": 0.5, "wait": 0.5})
    assert ch9.barrier_share_at(got, "EXIT") == 1.0 and ch9.barrier_share_at(got, "LDS") == 0.0


def test_the_split_per_k_tile_follows_the_kernel_and_the_profile():
    """split_per_ktile's counts are the kernel's loops (three wgmmas per k slice, the split of A's 16 and B's 8 values
    per warp); the recorded profile at 4096 executes FADD, LOP3 and STS per HGMMA within 10% of them (FADD and STS within 3%)."""
    text = kernel_path("fused/06_wgmma_tf32x3.cu").read_text()
    assert text.count("WgmmaTf32<BLOCK_N>::mma(") == 3 and "for (int i = 0; i < BLOCK_N / 4; ++i)" in text
    assert "(__float_as_uint(x) + 0x1000u) & 0xffffe000u" in kernel_path("common.cuh").read_text()  # add, mask
    pred = ch9.split_per_ktile(32)
    assert pred["HGMMA"] == 12 and pred["splits"] == 24 and pred["FADD"] == 40 and pred["STS"] == 16
    mix = ch9.opcode_mix(ch9.source_rows(ch9.PLACES / "src-f06-4096.csv.gz"))
    for op in ("FADD", "LOP3", "STS"):
        assert mix[op] / mix["HGMMA"] == pytest.approx(pred[op] / pred["HGMMA"], rel=0.03 if op != "LOP3" else 0.1)


def test_step_06_at_4096_is_not_bound_by_its_tensor_cores(run):
    """The sentences of the 4096 gap: the tensor pipe busy about its floor's share, far below the issue share; the
    instructions besides HGMMA several times the predicted split; cuBLAS's baseline on the FMA pipe."""
    ch9.glue_profile06(run)
    v = glue.VALUES
    assert abs(v["ch9_f06_tensor"] - v["ch9_f06_tensor_pct"]) < 3 and v["ch9_f06_tensor"] < 0.6 * v["ch9_f06_issue"]
    assert abs(v["ch9_f06_issue"] - v["ch9_f06_issue_pct"]) < 3
    assert v["ch9_f06_meas_per_mma"] > 2 * v["ch9_f06_pred_per_mma"] and v["ch9_f06_mix_hgmma"] < 5
    assert v["ch9_f06_warps"] == pytest.approx(16, abs=0.1)  # four warps per scheduler
    assert v["ch9_f06_s_wait"] > v["ch9_f06_s_short_sb"] > v["ch9_f06_s_selected"] > v["ch9_f06_s_barrier"]
    assert v["ch9_f06_cublas_ms"] < v["ch9_f06_run_ms"] and 50 < v["ch9_f06_cublas_pct"] < 100
    assert v["ch9_f06s_barrier"] > v["ch9_f06s_wait"] > v["ch9_f06s_long_sb"] and v["ch9_f06s_exit"] > 30


def test_the_predicted_wgmma_count_is_the_profiles():
    """pred_hgmma_06 (tiles x K tiles x four warps x 12) is the HGMMA count the source page executed at 4096, and the
    predicted issue time of the split stays under the tensor floor (the sentence 'the tensor cores would set the time')."""
    mix = ch9.opcode_mix(ch9.source_rows(ch9.PLACES / "src-f06-4096.csv.gz"))
    assert ch9.pred_hgmma_06(4096) == mix["HGMMA"]
    ch9.glue_profile06(ch9.one_run())
    assert glue.VALUES["ch9_f06_pred_issue_ms"] < glue.VALUES["ch9_f06_tensor_ms"]
    assert glue.VALUES["ch9_f06_wps"] == pytest.approx(4, abs=0.05)


def test_step_table_shows_the_prediction_first_and_the_measurement_after(run, capsys):
    """Before the kernel only the prediction (at 4096 none beyond the model's bound); after the check the run's time."""
    ch9.step_table(run, "fused/07_tma_tf32x3")
    before = capsys.readouterr().out
    assert "measured" not in before.splitlines()[1] and "a@b@c" not in before
    assert before.splitlines()[3].split()[-1] == "-"  # 4096: no prediction
    ch9.step_table(run, "fused/07_tma_tf32x3", part="measured")
    after = capsys.readouterr().out
    m = ch9.row(run, "fused/07_tma_tf32x3", 4096)
    assert f"{m['us']:6.1f} µs" in after and "x eager" in after


def test_one_line_helpers_and_the_mix_table(capsys):
    class R:
        def __init__(self, regs):
            self.registers, self.spill_stores, self.spill_loads = regs, 0, 4

        def __str__(self):
            return "sm_90a: registers"
    ch9.spills(R(90))
    ch9.fewer_registers(R(90), R(128))
    ch9.mix_table()
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "compiled for sm_90a: spills 0/4 B (stores/loads)"
    assert out[1] == "at sm_90a, registers per thread: step 07 90, step 06 128 (fewer: True); 07 spills 0/4 B"
    shares = [float(line.split()[-2].rstrip("%")) for line in out[3:]]
    assert out[3].split()[0] == "HGMMA" and out[-1].split()[:2] == ["the", "rest"]
    assert sum(shares) == pytest.approx(100, abs=0.5)


def test_chapter_8s_bound_is_quoted_with_its_probe_rate():
    glue.VALUES.clear()
    ch9.glue_ch8_bound()
    assert 300 < glue.VALUES["ch9_c8_rate"] < 340 and glue.VALUES["ch9_c8_best_us"] > ch9.prediction(
        "fused/06_wgmma_tf32x3", 512)["best_us"]
