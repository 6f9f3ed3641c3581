"""gemmlab.coalescing (the Python twins of chapter 2's mappings) and the chapter 2 widget logic."""
import html
import re
from pathlib import Path

import matplotlib
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

matplotlib.use("Agg")

from gemmlab import coalescing as co  # noqa: E402
from gemmlab import registry, widgets  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
POW2 = st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128, 256])


def test_thread_element_matches_the_formulas():
    # naive: x picks the row; coalesced: x picks the column
    assert co.thread_element("naive", (32, 8), (2, 3), (5, 7)) == (2 * 32 + 5, 3 * 8 + 7)
    assert co.thread_element("coalesced", (32, 8), (2, 3), (5, 7)) == (3 * 8 + 7, 2 * 32 + 5)


@pytest.mark.parametrize("mapping,step", [("naive", "sgemm/01_naive"), ("coalesced", "sgemm/02_coalesced")])
@pytest.mark.parametrize("m,n", [(1, 1), (100, 37), (4096, 64)])
def test_grid_matches_the_registry(mapping, step, m, n):
    params = {"BLOCK_X": 32, "BLOCK_Y": 8}
    launch = registry.get(step).launch(m, n, 16, params)
    assert co.grid_dim(mapping, (32, 8), m, n) == launch.grid[:2]
    assert launch.block[:2] == (32, 8)


@pytest.mark.parametrize("mapping,step", [("naive", "sgemm/01_naive"), ("coalesced", "sgemm/02_coalesced")])
def test_twin_matches_the_kernel_source(mapping, step):
    """The index lines of the .cu file are the ones this module mirrors."""
    text = (ROOT / registry.get(step).file).read_text()
    row_axis, col_axis = ("x", "y") if mapping == "naive" else ("y", "x")
    block = {"x": "BLOCK_X", "y": "BLOCK_Y"}
    for var, axis in (("row", row_axis), ("col", col_axis)):
        pattern = rf"{var}\s*=\s*blockIdx\.{axis}\s*\*\s*{block[axis]}\s*\+\s*threadIdx\.{axis}"
        assert re.search(pattern, text), f"{step}: expected `{var} = blockIdx.{axis} * ...`"


def test_every_element_computed_exactly_once():
    for mapping in co.MAPPINGS:
        for bx, by in [(32, 8), (16, 16), (3, 5), (1, 32)]:
            m, n = 45, 38
            gx, gy = co.grid_dim(mapping, (bx, by), m, n)
            seen = []
            for bidx in [(x, y) for x in range(gx) for y in range(gy)]:
                for tid in range(bx * by):
                    r, c = co.thread_element(mapping, (bx, by), bidx, (tid % bx, tid // bx))
                    if r < m and c < n:
                        seen.append((r, c))
            assert sorted(seen) == [(r, c) for r in range(m) for c in range(n)]


def test_warp_threads():
    assert co.warp_threads((32, 8), 0) == [(x, 0) for x in range(32)]
    assert co.warp_threads((16, 16), 1) == [(x, y) for y in (2, 3) for x in range(16)]
    assert co.warp_threads((3, 5), 0) == [(t % 3, t // 3) for t in range(15)]  # one partial warp
    assert co.warps_per_block((3, 5)) == 1 and co.warps_per_block((32, 32)) == 32


def test_count_sectors():
    assert co.count_sectors([0, 4, 8, 28]) == 1
    assert co.count_sectors([0, 32, 64, 96]) == 4
    assert co.count_sectors([i * 4 for i in range(32)]) == 4
    assert co.count_sectors([i * 4 for i in range(32)], co.LINE_BYTES) == 1
    assert co.count_sectors([None, None]) == 0
    assert co.count_sectors([30]) == 2            # a misaligned 4-byte word straddles two sectors


@pytest.mark.parametrize("block,expected", [
    # (A, B, C) sectors per request: naive, then coalesced
    ((32, 8), ((32, 1, 32), (1, 4, 4))),
    ((32, 32), ((32, 1, 32), (1, 4, 4))),
    ((16, 16), ((16, 1, 16), (2, 2, 4))),
    ((8, 32), ((8, 1, 8), (4, 1, 4))),
    ((1, 32), ((1, 4, 4), (32, 1, 32))),           # a 1-wide naive block is coalesced by accident
])
def test_sector_table(block, expected):
    table = co.sector_table(block)
    for mapping, want in zip(co.MAPPINGS, expected):
        assert tuple(table[mapping][op] for op in co.OPERANDS) == want


def test_request_details_for_the_chapter_claim():
    a = co.request("naive", "A", (32, 8))
    assert (a.sectors, a.lines, a.words, a.lanes, a.bytes_moved) == (32, 32, 32, 32, 1024)
    b = co.request("coalesced", "B", (32, 8))
    assert (b.sectors, b.lines, b.words, b.lanes) == (4, 1, 32, 32)
    bcast = co.request("coalesced", "A", (32, 8))
    assert (bcast.sectors, bcast.words) == (1, 1)
    assert co.sectors_per_k_step("naive", (32, 8)) == 33
    assert co.sectors_per_k_step("coalesced", (32, 8)) == 5
    assert co.bytes_per_fma("naive", (32, 8)) == 33 and co.bytes_per_fma("coalesced", (32, 8)) == 5
    assert co.bytes_per_fma("naive", (1, 1)) == 64


def test_edge_lanes_are_masked():
    # a 40 x 40 C: block (1, 0) of the coalesced mapping covers columns 32..63, half outside
    addrs = co.warp_addresses("coalesced", "B", (32, 8), block_idx=(1, 0), shape=(40, 40, 40))
    assert addrs[:8] == [(32 + i) * 4 for i in range(8)] and addrs[8:] == [None] * 24
    assert co.request("coalesced", "B", (32, 8), block_idx=(1, 0), shape=(40, 40, 40)).lanes == 8


@pytest.mark.parametrize("bad", [dict(mapping="diagonal"), dict(operand="D"), dict(k=4096),
                                 dict(block_dim=(64, 32)), dict(block_dim=(0, 4))])
def test_bad_input_says_what(bad):
    args = dict(mapping="naive", operand="A", block_dim=(32, 8))
    args.update(bad)
    mapping, operand, block_dim = args.pop("mapping"), args.pop("operand"), args.pop("block_dim")
    with pytest.raises(ValueError):
        co.warp_addresses(mapping, operand, block_dim, **args)


@settings(max_examples=60, deadline=None)
@given(bx=POW2, by=POW2, mapping=st.sampled_from(co.MAPPINGS), operand=st.sampled_from(co.OPERANDS))
def test_request_invariants(bx, by, mapping, operand):
    if bx * by > 1024:
        return
    for w in range(co.warps_per_block((bx, by))):
        r = co.request(mapping, operand, (bx, by), warp=w)
        assert 1 <= r.lanes <= 32
        assert r.lines <= r.sectors <= r.words <= r.lanes
        assert r.sectors >= -(-r.words * 4 // co.SECTOR_BYTES)   # at least the bytes asked for


def test_pictures_draw():
    import matplotlib.pyplot as plt

    fig = co.draw_mapping("naive", (16, 16))
    titles = [ax.get_title() for ax in fig.axes]
    assert any("16 sectors" in t for t in titles) and any("1 sector," in t for t in titles)
    plt.close(fig)
    fig = co.draw_comparison((32, 8))
    assert len(fig.axes) == 6
    titles = [ax.get_title() for ax in fig.axes]
    assert any("32 sectors" in t for t in titles) and any("4 sectors" in t for t in titles)
    plt.close(fig)
    fig = co.draw_sector_sweep((1, 32, 64))
    assert len(fig.axes) == 3   # two panels and the colour bar
    plt.close(fig)


def test_widget_report_and_bad_config():
    text = widgets.block_shape_report(32, 8)
    assert "A load: naive 32 -> coalesced 1" in text and "per k step (A + B): naive 33 -> coalesced 5" in text
    bad = widgets.block_shape_report(64, 32)
    assert "2048 threads" in bad and "1024" in bad
    assert widgets.config_problem(32, 32) is None


def test_widget_builds_and_redraws():
    pytest.importorskip("ipywidgets")
    box = widgets.block_shape_explorer(32, 8)
    sliders, report, _picture = box.children
    sx, sy = sliders.children
    shown = lambda: html.unescape(report.value)  # noqa: E731  (the widget shows escaped HTML)
    assert "naive 32 -> coalesced 1" in shown()
    sx.value = 16
    sy.value = 16
    assert "A load: naive 16 -> coalesced 2" in shown()
    sx.value, sy.value = 256, 8
    assert "2048 threads" in shown()
