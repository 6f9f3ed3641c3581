"""Chapters 4 to 6's modules: the ownership pictures before steps 05 and 07, the shared-memory ceiling, and the
latency-hiding model of chapter 6 (the picture and the issue rate)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

from gemmlab import tiling
from gemmlab.chapters import ch04_register_tiling as ch4

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("step", ["sgemm/04_1d_blocktiling", "sgemm/05_2d_blocktiling", "sgemm/07_warptiling"])
def test_ownership_picture_shows_the_twins_map(step):
    """The block panel colours each cell by its warp and blacks out thread 0's cells; the warp panel covers exactly
    warp 0's region and writes one lane number per piece a lane owns."""
    import gemmlab

    p = gemmlab.instance(step).params
    own = tiling.owners(step, p)
    ax_block, ax_warp = ch4.ownership(step)
    warps, thread = (im.get_array() for im in ax_block.images)
    assert np.array_equal(np.asarray(warps), own // 32)
    assert (~np.ma.getmaskarray(thread)).sum() == (own == 0).sum() == p.get("THREAD_M", 1) * p.get("THREAD_N", 1)
    rows, cols = np.nonzero(own // 32 == 0)
    lanes = ax_warp.images[0].get_array()
    assert lanes.shape == (rows.max() - rows.min() + 1, cols.max() - cols.min() + 1)
    assert set(np.asarray(lanes.compressed()).tolist()) == set(range(32))
    pieces = {"sgemm/04_1d_blocktiling": 32, "sgemm/05_2d_blocktiling": 32, "sgemm/07_warptiling": 128}[step]
    assert len(ax_warp.texts) == pieces and {t.get_text() for t in ax_warp.texts} == {str(i) for i in range(32)}
    plt.close("all")


def test_warp_tiling_picture_puts_thread_zero_in_four_pieces():
    ax_block, _ = ch4.ownership("sgemm/07_warptiling")
    thread = ax_block.images[1].get_array()
    r, c = np.nonzero(~np.ma.getmaskarray(thread))
    assert sorted({(int(i) // 32, int(j) // 16) for i, j in zip(r, c)}) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    plt.close("all")


def test_shared_memory_ceiling():
    assert ch4.shared_bound(1, 1) == pytest.approx(1 / 8)        # step 03: two loads per multiply-add
    assert ch4.shared_bound(8, 1) == pytest.approx(8 / 36)       # step 04: 9 loads for 8 multiply-adds
    assert ch4.shared_bound(4, 4) == pytest.approx(0.5)
    assert ch4.shared_bound(8, 8) == 1.0                         # the ceiling lifts at 8 x 8
    assert ch4.min_registers(8, 8) == 80


def test_chapter5_swizzle_of_sa_is_a_permutation_that_fixes_the_store():
    from gemmlab import swizzle as sw
    from gemmlab.chapters import ch05_bank_conflicts as ch5

    tile = [k * 128 + m for k in range(8) for m in range(128)]  # step 07's sA: BLOCK_K x BLOCK_M floats
    moved = [ch5.SA_SWIZZLE(o) for o in tile]
    assert sorted(moved) == tile and all(o // 128 == n // 128 for o, n in zip(tile, moved))  # rows permuted in place
    assert all(ch5.SA_SWIZZLE(o) % 4 == o % 4 for o in tile)  # a float4 stays whole
    assert [ch5.SA_SWIZZLE(k * 128) for k in (3, 4)] == [3 * 128, 4 * 128 + 16]  # m ^ ((k & 4) << 2)
    for layout, store in (("plain", 2), ("padded", 1), ("swizzled", 1)):
        reqs, size = ch5.model_requests("sA store", layout)
        assert sw.per_request(reqs, size) == store
        assert sw.per_request(*ch5.model_requests("sA load", layout)) == 4
    text = ch5.variant("swizzled")
    assert text.count("((c + ") == 4 and "^ ((k & 4) << 2)]" in text
    with pytest.raises(ValueError):
        ch5.variant("diagonal")


def test_latency_hiding_schedule_matches_the_model():
    from gemmlab.chapters import ch06_async_prefetch as ch6

    for warps in range(1, 7):
        slots = ch6.warp_schedule(warps, work=4, latency=12, cycles=1600)
        assert (slots >= 0).mean() == pytest.approx(ch6.busy_fraction(warps, 4, 12), abs=0.01)
        assert set(slots[slots >= 0].tolist()) == set(range(warps))  # every warp issues
    one = ch6.warp_schedule(1, 3, 5, 16)
    assert one.tolist() == [0, 0, 0] + [-1] * 5 + [0, 0, 0] + [-1] * 5  # issue 3, wait 5, again
    assert ch6.warps_needed(4, 12) == 4 and ch6.warps_needed(64, 400) == 8
    with pytest.raises(ValueError):
        ch6.warp_schedule(0, 4, 12, 10)


def test_latency_picture_draws_one_panel_per_warp_count():
    from gemmlab.chapters import ch06_async_prefetch as ch6

    axes = ch6.draw_latency_hiding(work=4, latency=12, warps=(1, 2, 4), cycles=48)
    assert len(axes) == 3 and "100% of the cycles" in axes[2].get_title() and "(model 25%)" in axes[0].get_title()
    plt.close("all")


def test_hiding_a_stall_bounds_the_issue_rate():
    from gemmlab.chapters import ch06_async_prefetch as ch6

    rec = {"warps": 2.0, "cpi": 4.0}
    assert ch6.issue_rate(rec) == 0.5
    assert ch6.hide_bound(rec, 1.0) == pytest.approx((2 / 3) / 0.5)      # same warps: cpi 4 -> 3
    assert ch6.hide_bound(rec, 1.0, warps=4.0) == pytest.approx(2.0)     # capped at one instruction per cycle
    assert ch6.hide_bound(rec, 0.0) == 1.0
    r7 = ch6.record("sgemm/07_warptiling")  # the recorded profile the chapter's first prediction reads
    assert r7["warps"] == pytest.approx(2.0) and r7["cpi"] == pytest.approx(sum(r7["stalls"].values()))
    assert ch6.record("sgemm/11_fragment_prefetch")["warps"] == 2.0


def test_merged_model_counts_broadcast_float4s_as_one_wavefront():
    """Steps 03 and 04 read sA as broadcasts, four k per LDS.128 (1 wavefront each); from step 05 on, a warp's
    LDS.128 of distinct float4s takes 4 wavefronts, as the four scalar loads it replaces."""
    m3, m4, m5 = (ch4.merged_model(s) for s in ("sgemm/03_smem_tiling", "sgemm/04_1d_blocktiling",
                                                  "sgemm/05_2d_blocktiling"))
    assert (m3["lds"], m3["wavefronts"], m3["bound"]) == pytest.approx((1.25, 1.25, 0.2))
    assert (m4["lds"], m4["wavefronts"], m4["bound"]) == pytest.approx((0.375, 0.375, 2 / 3))
    assert (m5["lds"], m5["wavefronts"], m5["bound"]) == pytest.approx((1 / 16, 0.25, 1.0))
    assert m5["wavefronts"] == ch4.loads_per_fma(8, 8)  # distinct float4s: the first model's count holds


def test_cp_async_groups_keep_stages_minus_one_in_flight():
    from gemmlab.chapters import ch06_async_prefetch as ch6

    for stages in (2, 3, 4):
        state = ch6.cp_async_groups(stages, tiles=7)
        assert (state[0] == 1).sum() == stages - 1                     # the prologue
        for t in range(7):
            row = state[t + 1]
            assert row[t] == 2 and (row[:t] == 3).all()                 # tile t computed, older groups done
            flying = np.nonzero(row == 1)[0]
            assert flying.tolist() == list(range(t + 1, t + stages))    # wait_group<stages - 2> + one commit
            assert len({g % stages for g in [t, *flying]}) == stages    # no stage is filled while it is read
    with pytest.raises(ValueError):
        ch6.cp_async_groups(1, 4)


def test_cp_async_groups_picture_shows_the_states():
    from gemmlab.chapters import ch06_async_prefetch as ch6

    ax = ch6.draw_cp_async_groups(stages=3, tiles=6)
    state = ch6.cp_async_groups(3, 6)
    assert np.array_equal(np.asarray(ax.images[0].get_array()), state)
    labels = [t.get_text() for t in ax.texts]
    assert len(labels) == ((state == 1) | (state == 2)).sum() and labels.count("empty") == 3  # groups 6, 7 past the end
    assert "wait_group<1>" in ax.get_yticklabels()[1].get_text()
    plt.close("all")


def test_parts_of_steps_08_and_11_come_from_one_run():
    from gemmlab.chapters import ch06_async_prefetch as ch6

    for step, logs in ch6.ONE_RUN_LOGS.items():
        rows = ch6.one_run_rows(step)
        assert set(rows) == {label for _, names in logs for label in names.values()}, step
        assert all(len(r["pct"]) == 3 and len(r["tflops"]) == 3 for r in rows.values()), step


def test_cublas_runs_reads_the_recorded_logs():
    from pathlib import Path

    from gemmlab.chapters import ch05_bank_conflicts as c5
    rows = c5.cublas_runs(Path("results/experiments/ch5-variants/bench.log").read_text())
    assert rows[("padded", 4096)]["pct"] == [51.7, 50.2, 50.8]
    assert rows[("step", 8192)]["tflops"] == [25.59, 25.57, 25.54]
    assert len(rows[("swizzled", 4096)]["cublas_tflops"]) == 3
    table = c5.cublas_runs_table(rows)
    assert "| padded | 4096 | 50.9 (±0.8) |" in table
    rows8 = c5.cublas_runs(Path("results/experiments/ch6-parts/step08.log").read_text())
    assert rows8[("no_cap:BLOCK_K=8", 4096)]["pct"] == [55.7, 55.2, 55.6]


def test_ch6_one_run_takes_steps_08_and_11_apart(capsys):
    from gemmlab.chapters import ch06_async_prefetch as c6
    rows = c6.one_run_rows("sgemm/08_register_prefetch")
    assert rows["step 08, BLOCK_K=8"]["pct"] == [73.8, 73.6, 73.3]
    assert rows["step 07, BLOCK_K=16"]["pct"] == [55.5, 55.5, 55.6]
    rows11 = c6.one_run_rows("sgemm/11_fragment_prefetch")
    assert rows11["step 11 with 09's tiles"]["pct"] == [84.5, 84.9, 84.4]
    c6.one_run("sgemm/11_fragment_prefetch")
    out = capsys.readouterr().out
    assert out.startswith("NVIDIA H200, 2026-11-29") and "| step 11 | 4096 | 88.8 (±0.0) |" in out
