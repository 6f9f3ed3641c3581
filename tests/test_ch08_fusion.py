"""Chapter 8's module: the ownership twins agree with the kernels, the pictures draw, and every measured figure
comes from one run (gemmlab/chapters/ch08_fusion.py)."""
from __future__ import annotations

import math
import re

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from gemmlab.chapters import ch08_fusion as ch8  # noqa: E402
from gemmlab.chapters import glue  # noqa: E402
from gemmlab.measure import fusion  # noqa: E402
from gemmlab.runtime.source import kernel_path  # noqa: E402


@pytest.mark.parametrize("rows, cols, bm, bn, grid",
                         [(256, 256, 64, 32, 12), (100, 70, 32, 32, 5), (64, 64, 16, 16, 64)])
def test_tile_owner_gives_every_tile_to_one_block_in_turn(rows, cols, bm, bn, grid):
    owner = ch8.tile_owner(rows, cols, bm, bn, grid)
    assert owner.shape == (math.ceil(rows / bm), math.ceil(cols / bn))
    flat = owner.ravel()  # row-major tile numbers, as the kernel counts them
    assert (flat >= 0).all() and list(flat) == [t % grid for t in range(flat.size)]


@pytest.mark.parametrize("inner, bk, split", [(512, 16, 4), (100, 8, 3), (32, 32, 2), (64, 16, 1)])
def test_k_tiles_of_partitions_the_k_tiles_among_the_groups(inner, bk, split):
    mine = [ch8.k_tiles_of(g, inner, bk, split) for g in range(split)]
    assert sorted(t for m in mine for t in m) == list(range(math.ceil(inner / bk)))
    assert all(m == list(range(g, math.ceil(inner / bk), split)) for g, m in enumerate(mine))


def test_warp_origin_covers_the_tile_once_and_panel_rows_cover_the_rows():
    cover = np.zeros((64, 64), dtype=int)
    for w in range((64 // 32) * (64 // 16)):
        r, c = ch8.warp_origin(w, 64, 32, 16)
        cover[r:r + 32, c:c + 16] += 1
    assert (cover == 1).all()
    assert [list(ch8.panel_rows(b, 10, 4)) for b in range(3)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_the_twins_follow_the_kernels_text():
    """The loops and index expressions the twins copy are the kernels' own (a renamed or reordered loop fails)."""
    for name in ("03_two_phase", "04_split_k", "05_tf32x3"):
        src = kernel_path(f"kernels/fused/{name}.cu").read_text()
        assert src.count("for (int tile = blockIdx.x; tile < t_tiles; tile += gridDim.x)") == 1, name
        assert "tile / t_cols * BLOCK_M, tile % t_cols * BLOCK_N" in src, name
        assert "tile / e_cols * BLOCK_M, tile % e_cols * BLOCK_N" in src, name
        if name != "03_two_phase":
            assert "auto k_of = [&](int r) { return (r * SPLIT_K + group) * BLOCK_K; };" in src, name
            assert "const int rounds = cdiv(cdiv(inner, BLOCK_K), SPLIT_K);" in src, name
    src = kernel_path("kernels/fused/05_tf32x3.cu").read_text()
    assert "const int warp_row = warp_id / WARPS_N * WARP_M, warp_col = warp_id % WARPS_N * WARP_N;" in src
    assert "const int panel_row = blockIdx.x * PANEL_M;" in kernel_path("kernels/fused/02_row_panel.cu").read_text()


@pytest.mark.parametrize("name, params", [("fused/03_two_phase", {"BLOCK_M": 16, "BLOCK_N": 16}),
                                          ("fused/04_split_k", {"BLOCK_M": 16, "BLOCK_N": 32, "SPLIT_K": 2})])
def test_tile_owner_is_who_writes_each_tile_in_the_emulator(name, params):
    """Run the kernel with phase 2 writing its block's number at each tile's corner: the twin's map, exactly."""
    src = kernel_path(fusion.get(name).file).read_text()
    call = re.search(r"(for \(int tile = blockIdx\.x; tile < e_tiles; tile \+= gridDim\.x\)\n)(.*?;\n)", src, re.S)
    marked = src.replace(call.group(0), call.group(1) + "        if (threadIdx.x == 0) E[tile / e_cols * BLOCK_M * N"
                         " + tile % e_cols * BLOCK_N] = blockIdx.x;\n")
    k = fusion.step(name, backend="cpu", source=marked, **params)
    m = 64
    a, b, c = (np.ones((m, m), np.float32) for _ in range(3))
    e = np.full((m, m), -1.0, np.float32)
    grid = min(5, fusion.resident_blocks(k)[0])  # the emulator runs as many blocks at once as it has workers
    assert grid >= 2 or fusion.cpu_workers() == 1
    k.run(a, b, c, e, grid=grid)
    bm, bn = params["BLOCK_M"], params["BLOCK_N"]
    assert (e[::bm, ::bn].astype(int) == ch8.tile_owner(m, m, bm, bn, grid)).all()


@pytest.mark.parametrize("step", ch8.STEPS)
def test_ownership_draws_each_step_of_the_chapter(step, monkeypatch):
    import matplotlib.pyplot as plt

    shown = []
    monkeypatch.setattr(plt, "show", lambda: shown.append(plt.gcf()))
    ch8.ownership(step)
    assert shown and shown[0].axes
    plt.close("all")
    with pytest.raises(ValueError, match="chapter 9"):
        ch8.ownership("fused/07_tma_tf32x3")


def test_lane_run_is_one_run_and_refuses_a_mix(monkeypatch):
    recs = ch8.lane_run()
    assert recs and len({(r["gpu"], r["date"]) for r in recs}) == 1 and {r["kind"] for r in recs} == {"benchmark"}
    assert {s for s in ch8.STEPS} <= {r["step"] for r in recs}
    mixed = recs[:2] + [dict(recs[2], date="1999-01-01")]
    monkeypatch.setattr(fusion, "benchmark", lambda **kw: mixed)
    with pytest.raises(ValueError, match="mix runs"):
        ch8.lane_run()


def test_measured_figures_come_from_the_run():
    """Each speed-up the Measure section glues is the run's baseline over the run's step, nothing from a sweep."""
    recs = ch8.lane_run()
    ch8.glue_measure(recs)
    r5 = fusion.lookup(recs, "fused/05_tf32x3", 512)
    base = min(fusion.lookup(recs, s, 512)["median_s"] for s in ch8.EAGER)
    assert glue.VALUES["ch8_m05_512_us"] == pytest.approx(r5["median_s"] * 1e6)
    assert glue.VALUES["ch8_m05_512_x"] == pytest.approx(base / r5["median_s"])
    graph = fusion.lookup(recs, "torch graph a@b@c", 512)["median_s"]
    assert glue.VALUES["ch8_m05_512_xg"] == pytest.approx(graph / r5["median_s"])


def test_the_chapters_figures_and_tables_draw_from_the_records(monkeypatch, capsys):
    import matplotlib.pyplot as plt

    shown = []
    monkeypatch.setattr(plt, "show", lambda: shown.append(plt.gcf()))
    recs = ch8.lane_run()
    ch8.roofline(recs); ch8.plot_run(recs)
    assert len(shown) == 2
    plt.close("all")
    ch8.baseline_table(recs); ch8.speedup_table(recs); ch8.sweep_table("fused/05_tf32x3", (512,))
    out = capsys.readouterr().out
    assert out.count(ch8.run_label(recs)) == 2 and "(default tiles)" in out and "its a @ b @ c" in out
    assert "NVIDIA H200, sweep of" in out and "(own run)" in out  # the sweep names its GPU and its run


def test_the_roofline_draws_the_tf32_ceiling_this_chapter_uses(monkeypatch):
    import matplotlib.pyplot as plt
    monkeypatch.setattr(plt, "show", lambda: None)
    ch8.roofline(ch8.lane_run())
    labels = [t.get_text() for t in plt.gca().get_legend().get_texts()]
    assert any(t.startswith(f"TF32 tensor (spec): {ch8.SPEC.fp16_tensor_tflops / 2:g}") for t in labels)
    assert any("fp16 tensor (spec; not used here)" in t for t in labels)
    plt.close("all")


def test_the_4096_figures_put_microseconds_first_and_the_headroom_is_the_ffma_peaks():
    recs = ch8.lane_run()
    ch8.glue_measure(recs); ch8.glue_prediction(recs)
    r3 = fusion.lookup(recs, "fused/03_two_phase", 4096)
    assert f"step 03 {r3['median_s'] * 1e6:.1f} µs, " in glue.VALUES["ch8_m_big_list"]
    eager = ch8.fastest_record(recs, ch8.EAGER, 4096)
    assert glue.VALUES["ch8_p_big_headroom"] == pytest.approx(ch8.SPEC.fp32_tflops / eager["tflops"])


def test_step_02s_grid_is_one_block_per_panel_not_a_persistent_grid():
    """Steps 01 and 02 launch their own grids (one block per row panel): at 512, 512 and 64 blocks."""
    o1, o2 = ch8.occupancy_of("fused/01_naive_row"), ch8.occupancy_of("fused/02_row_panel")
    assert (o1["blocks"], o2["blocks"]) == (512, 512 // fusion.get("fused/02_row_panel").resolve({})["PANEL_M"])
    assert o2["idle_sms"] == ch8.SPEC.sms - o2["blocks"] and o1["idle_sms"] == 0
    assert o2["serial_fmas"] == 2 * 512 ** 3 / (o2["blocks"] * o2["threads"])


def test_the_error_helpers_print_what_the_claim_cells_printed():
    from gemmlab import errors
    e = errors.ShapeError("fused/02_row_panel cannot run M=2: a panel of PANEL_M=32 rows needs 9 bytes of "
                                  "shared memory, over 227 KB")
    assert ch8.error_head(e, before=" of shared memory") == str(e).split(": ", 1)[1].split(" of shared memory")[0]
    assert ch8.error_subject(e) == str(e).split(":")[0]


def test_refuse_prints_the_refusal_in_one_line(capsys):
    from gemmlab import errors

    def shape(*_):
        raise errors.ShapeError("fused/02_row_panel cannot run M=2: a panel needs 9 bytes of shared memory, over 227 KB")

    def config(*_):
        raise errors.ConfigError("fused/04_split_k{'SPLIT_K': 8}: a block of 8192 threads exceeds 1024")
    ch8.refuse(shape, cut=" of shared memory")
    ch8.refuse(config)
    ch8.refuse(lambda: None)
    assert capsys.readouterr().out.splitlines() == [
        "ShapeError: a panel needs 9 bytes of shared memory ...",
        "ConfigError: a block of 8192 threads exceeds 1024", "no refusal"]


def test_split_errors_gives_the_worst_error_of_each_form(capsys):
    """3xTF32 passes under the fp32 bound; one TF32 mma per product fails by far more than the bound (emulator)."""
    ch8.split_errors()
    three, one = capsys.readouterr().out.splitlines()
    worst = [float(re.search(r"worst \|error\| ([\d.]+) x", line).group(1)) for line in (three, one)]
    assert three.startswith("3xTF32 (step 05): PASS") and worst[0] < 1
    assert one.startswith("one TF32 mma: FAIL") and worst[1] > 100


def test_glue_gap_names_the_timelines_tiles():
    glue.VALUES.clear()
    ch8.glue_gap()
    assert re.fullmatch(r"\d+ x \d+, SPLIT_K \d+", glue.VALUES["ch8_g_tiles_short"])


def test_step_02s_picture_outlines_block_0s_thread_tiles(monkeypatch):
    import matplotlib.pyplot as plt

    shown = []
    monkeypatch.setattr(plt, "show", lambda: shown.append(plt.gcf()))
    ch8.ownership("fused/01_naive_row")
    plain = len(shown[0].axes[0].patches)
    ch8.ownership("fused/02_row_panel")
    fig, p = shown[1], fusion.get("fused/02_row_panel").resolve({})
    n, panel = 32, p["PANEL_M"]
    tiles = (panel // p["THREAD_M"]) * (min(p["BLOCK_N"], n) // p["THREAD_N"])
    blocks = n // panel
    # the same boxes as step 01 (3 matrices of block rows, B and C, the frame) plus block 0's thread tiles in T and E
    assert len(fig.axes[0].patches) - 3 * blocks == plain - 3 * 8 + 2 * tiles
    assert f"{p['THREAD_M']} x {p['THREAD_N']} tile" in fig._suptitle.get_text()
    assert plain < len(fig.axes[0].patches)
    plt.close("all")


def test_the_warm_launches_split_step_05s_call_at_512():
    """The warm launches (lab/gaps, L2 unflushed) read back in base units, and the sentences' relations hold: warm
    time within a few % of Nsight's flushed one, the call less the kernel under the launch floor, the sum over."""
    w = ch8.warm_launches()
    assert len(w) == 10 and all(21 < r["us"] < 22.5 and 1700 < r["mhz"] < 2000 and r["l2"] > 95 for r in w)
    recs = ch8.lane_run()
    ch8.glue_warm(recs); ch8.glue_counters("fused/05_tf32x3")
    v = glue.VALUES
    call = fusion.lookup(recs, "fused/05_tf32x3", 512)["median_s"] * 1e6
    assert v["ch8_w_rest"] == pytest.approx(call - v["ch8_w_us"])
    assert v["ch8_w_lo"] <= v["ch8_w_us"] <= v["ch8_w_hi"]
    assert abs(v["ch8_w_us"] / v["ch8_c05_kernel"] - 1) < 0.03  # "flushed or warm, the same"
    assert 0 < v["ch8_w_rest"] < ch8.launch_floor_us() and v["ch8_w_over"] > 0  # "under the floor ... still overshoots"
