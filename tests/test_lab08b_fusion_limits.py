"""Lab note 8b's module: every figure from its recorded runs, the 3x line within one run
(gemmlab/chapters/lab08b_fusion_limits.py)."""
from __future__ import annotations

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from gemmlab.chapters import glue  # noqa: E402
from gemmlab.chapters import lab08b_fusion_limits as lab  # noqa: E402


def test_what_3x_needs_comes_from_the_limits_run_alone():
    needed, step08, log = lab.limits_need()
    calls = lab.runs()["limits"][lab.GPU]["us"]["512"]
    assert step08 == pytest.approx(np.median(calls["08"]))
    assert needed == pytest.approx(np.median(calls[lab.BASELINE]) / 3 - step08) and needed < 0
    assert log.startswith("limits-")


def test_the_figure_draws_a_bar_per_change_and_the_line_of_that_run():
    rows = lab.changes()
    fig = lab.changes_figure()
    ax = fig.axes[0]
    assert len(ax.patches) == len(rows) + 2  # the bars and the legend's two swatches
    label = next(line.get_label() for line in ax.lines if line.get_label().startswith("what 3x needs"))
    assert f"{lab.limits_need()[0]:.1f} µs" in label and "limits run" in label
    matplotlib.pyplot.close("all")


def test_glue_all_glues_what_the_prose_quotes_and_prints_nothing(capsys):
    glue.VALUES.clear()
    lab.glue_all()
    assert capsys.readouterr().out == ""
    v = glue.VALUES
    assert float(v["ch8_lim_only_body"]) > float(v["ch8_lim_room"])  # the body does not fit: the prose says so
    assert v["ch8b_where"].startswith(lab.GPU) and "ch8_pf_ratio_512" in v and "ch8_ring_split_after" in v
