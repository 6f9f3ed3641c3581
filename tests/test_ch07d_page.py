"""Chapter 7d's page: the picture of stream-K's k ranges before step 12 (drawn from the kernel's own range
formula), and the figures the page reconciles (the profiler's lone launch in TFLOP/s, one cuBLAS range)."""
import inspect

import numpy as np
import pytest

from gemmlab.chapters import ch07d_hopper_schedule as ch7d


def kernel_owners(tiles: int, k_tiles: int, blocks: int, max_split: int) -> np.ndarray:
    """hgemm/12's range_start in Python, written out again: block j holds k tiles start(j) .. start(j + 1) - 1."""
    split_blocks = min(blocks, tiles * max_split)
    out = np.full(tiles * k_tiles, -1)
    for j in range(split_blocks):
        out[tiles * k_tiles * j // split_blocks:tiles * k_tiles * (j + 1) // split_blocks] = j
    return out.reshape(tiles, k_tiles)


@pytest.mark.parametrize("tiles,k_tiles,blocks,max_split", [(4, 8, 6, 4), (68, 128, 132, 4), (116, 64, 132, 4),
                                                            (2, 8, 132, 4), (3, 5, 7, 2), (1, 1, 1, 4)])
def test_owners_follow_the_kernels_formula_and_a_range_spans_at_most_two_tiles(tiles, k_tiles, blocks, max_split):
    owners = ch7d.stream_k_owners(tiles, k_tiles, blocks, max_split)
    assert owners.shape == (tiles, k_tiles) and (owners == kernel_owners(tiles, k_tiles, blocks, max_split)).all()
    for b in np.unique(owners):
        rows = np.nonzero((owners == b).any(axis=1))[0]
        assert len(rows) <= 2 and (len(rows) == 1 or rows[1] == rows[0] + 1)  # at most two tiles, adjacent
    for fin, handers in ch7d.stream_k_sharing(owners):
        assert fin not in handers and len(handers) + 1 <= max_split
        assert all(h < fin for h in handers)  # the finisher holds the tile's end: the highest block of the tile


def test_the_example_picture_shows_owners_finishers_and_hand_overs(monkeypatch, capsys):
    import matplotlib
    matplotlib.use("Agg")
    ax = ch7d.stream_k_ranges(tiles=4, k_tiles=8, blocks=6)
    cells = [t.get_text() for t in ax.texts if t.get_text().startswith("b")]
    assert len(cells) == 32 and cells[:8] == ["b0"] * 5 + ["b1"] * 3  # one labelled cell per k tile, by its block
    outlined = [p for p in ax.patches if not p.get_fill()]
    assert len(outlined) == 4  # one finishing block per tile
    rows = [t.get_text() for t in ax.texts if t.get_text().startswith("tile ")]
    assert rows == ["tile 0: b1 finishes; b0 hands over", "tile 1: b2 finishes; b1 hands over",
                    "tile 2: b4 finishes; b3 hands over", "tile 3: b5 finishes; b4 hands over"]
    assert len([a for a in ax.texts if type(a).__name__ == "Annotation"]) == 4  # one arrow per hand-over
    out = capsys.readouterr().out
    assert "68 tiles of 128 k tiles" in out and "at most 2 tiles" in out


def test_the_module_does_not_hand_over_the_exercise():
    """ch7d/stream_k_pieces asks for each block's pieces in an order that never waits before handing over: the
    chapter's module draws who owns what, and names no function that returns pieces."""
    assert not [n for n, _ in inspect.getmembers(ch7d, inspect.isfunction) if "piece" in n]


def test_one_cublas_range_the_prose_and_the_ladders_band():
    import matplotlib
    matplotlib.use("Agg")
    from gemmlab.chapters import plots
    at = ch7d.records()
    for n in ch7d.SIZES:
        lo, hi = ch7d.cublas_band(at, n)
        ax = plots.ladder(list(at.values()), ch7d.STEPS, size=n)
        assert f"{lo:.1f}-{hi:.1f} TFLOP/s" in ax.get_legend().get_texts()[0].get_text()


def test_the_profilers_lone_launch_is_converted_to_tflops():
    st = ch7d.stalls("hgemm/10_tma_store")
    assert st is not None and st["tflops"] == pytest.approx(2 * 4096 ** 3 / (st["us"] * 1e-6) / 1e12)


def test_both_panels_of_the_persistent_picture_use_the_banded_order(monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    monkeypatch.setattr(plt, "show", lambda: None)
    one_each, walk = ch7d.persistent_owners(6, 8, 10, group_m=2)
    assert sorted(one_each.ravel()) == list(range(48))       # step 08: one tile per block
    assert (walk == one_each % 10).all()                      # step 09's block b walks 08's tiles b, b + 10, ...
    assert list(one_each[:, 0]) == [0, 1, 16, 17, 32, 33]     # banded: down a band of 2 rows, then across
    assert one_each[0, 1] == 2
    axes = ch7d.persistent_picture(6, 8, 10, group_m=2)
    assert axes[0].get_title().startswith("step 08: one tile per block, banded order")
    texts = {t.get_text() for t in axes[0].texts}
    assert "b2" in texts and "b16" in texts
    plt.close("all")


def test_the_inflight_picture_draws_both_consumers_and_the_other_fills_the_gap():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    alone = ch7d.inflight_two(4, 0, consumers=1)
    assert ch7d.pipe_idle(alone) > 10                          # one consumer, wait<0>: a gap before each group
    for pending in (0, 1):
        groups = ch7d.inflight_two(4, pending)
        assert [len(g) for g in groups] == [4, 4]
        spans = sorted(x for g in groups for x in g)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # one pipe: groups never overlap
        assert ch7d.pipe_idle(groups) < ch7d.pipe_idle(alone)      # the other consumer fills the gap
    ax = ch7d.draw_inflight_two(4)
    labels = {t.get_text() for t in ax.texts}
    assert {"step 10, consumer 1", "step 10, consumer 2", "step 11, consumer 1", "step 11, consumer 2"} <= labels
    assert len(ax.patches) == 16
    plt.close("all")


def test_the_ladders_legend_and_title_quote_the_same_band(monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    monkeypatch.setattr(plt, "show", lambda: None)
    at = ch7d.records()
    for ax, n in zip(ch7d.ladder(at), ch7d.SIZES):
        lo, hi = ch7d.cublas_band(at, n)
        legend = ax.get_legend().get_texts()[0].get_text()
        assert "the calls of this run" in legend and "run-to-run" not in legend
        assert f"{lo:.0f}-{hi:.0f} TFLOP/s" in ax.get_title()
    plt.close("all")


def test_profiled_clock_is_the_repeats_first_launch_clock_above_the_sustained_clock():
    pc = ch7d.profiled_clock()
    assert list(pc["steps"]) == ch7d.STEPS
    assert (round(pc["mhz_lo"]), round(pc["mhz_hi"])) == (1623, 1683)
    assert pc["spread_pct"] == pytest.approx(100 * (pc["mhz_hi"] / pc["mhz_lo"] - 1))
    v8 = pc["steps"]["hgemm/08_wgmma"]
    assert round(v8["mhz"]) == 1683 and round(v8["us"], 1) == 198.1 and 13 < v8["over_board_pct"] < 14
    assert abs(v8["us"] / v8["profiled_us"] - 1) < 0.01  # the repeat times the profile's launch within 1%


def test_profile_table_prints_each_launchs_repeat_clock(capsys):
    ch7d.profile_table(["hgemm/08_wgmma", "hgemm/11_mma_in_flight"])
    out = capsys.readouterr().out
    assert "its MHz" in out and " 1683 " in out and " 1623 " in out
