"""The shared ladder figure: TFLOP/s per step, cuBLAS's run-to-run range as a band, % of cuBLAS on each bar."""
import matplotlib

matplotlib.use("Agg")
import pytest

from gemmlab.chapters import plots

pytestmark = pytest.mark.unit


def _rec(step, tflops, base, m=4096):
    return {"step": step, "m": m, "tflops": tflops, "baseline_tflops": base, "baseline": "cupy.matmul",
            "pct_of_baseline": 100 * tflops / base, "gpu": "Test GPU", "date": "2026-11-28"}


def test_ladder_draws_bars_band_and_percentages():
    recs = [_rec("s/01", 5.0, 50.0), _rec("s/02", 25.0, 52.0), _rec("s/01", 1.0, 40.0, m=1024)]
    ax = plots.ladder(recs, ["s/01", "s/02"])
    assert [round(b.get_height(), 3) for b in ax.patches if b.get_width() < 1] == [5.0, 25.0]
    assert [t.get_text() for t in ax.texts] == ["10%", "48%"]
    band = [p for p in ax.patches if p.get_width() >= 1][0]  # axhspan spans the axes' width
    assert band.get_y() == pytest.approx(50.0) and band.get_height() == pytest.approx(2.0)
    assert "Test GPU" in ax.get_title() and "4096" in ax.get_title() and "cuBLAS 51.0" in ax.get_title()


def test_ladder_without_records_says_what_to_do():
    with pytest.raises(ValueError, match="benchmark them first"):
        plots.ladder([], ["s/01"])


def test_pct_by_size_draws_one_line_per_step_in_size_order():
    import matplotlib.pyplot as plt

    recs = [_rec("s/01", 5.0, 50.0, m=4096), _rec("s/01", 1.0, 40.0, m=1024), _rec("s/02", 20.0, 40.0, m=1024)]
    _, ax = plt.subplots()
    plots.pct_by_size(ax, recs, ["s/01", "s/02"], "% of cuBLAS fp16")
    (one, two) = ax.get_lines()
    assert list(one.get_xdata()) == [1024, 4096] and list(one.get_ydata()) == [2.5, 10.0]
    assert two.get_label() == "02" and ax.get_ylabel() == "% of cuBLAS fp16"
