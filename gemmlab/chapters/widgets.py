"""Sliders for the chapters (ipywidgets 7 and 8): each redraws a picture and, on a GPU, re-times.

The logic behind every widget is a plain function (tested without a notebook); the widget only
wires sliders to it. An impossible configuration gets the registry's sentence, not a traceback.
"""
from __future__ import annotations

import html
from typing import Sequence

from . import coalescing
from ..runtime import registry
from ..errors import GemmlabError
import gemmlab
from ..runtime import optional
widgets = optional.lazy("ipywidgets")  # the live controls only: the command line runs without it
import matplotlib.pyplot as plt


from .glue import ipy_display as display  # IPython's, imported when first called


CH2_STEPS = ("sgemm/01_naive", "sgemm/02_coalesced")


def block_choices(step: str = CH2_STEPS[0]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The BLOCK_X and BLOCK_Y values the registry offers for `step`."""
    params = registry.lookup(step).params
    return params["BLOCK_X"].choices, params["BLOCK_Y"].choices


def config_problem(bx: int, by: int, steps: Sequence[str] = CH2_STEPS) -> str | None:
    """Why (BLOCK_X, BLOCK_Y) cannot run, in the registry's words; None when it can."""
    for name in steps:
        try:
            registry.lookup(name).resolve({"BLOCK_X": bx, "BLOCK_Y": by})
        except GemmlabError as exc:
            return str(exc)
    return None


def time_block_shape(bx: int, by: int, size: int = 2048, steps: Sequence[str] = CH2_STEPS) -> str:
    """On a GPU: both steps at this block shape, timed against cuBLAS (one line each)."""
    if gemmlab.backend() != "gpu":
        return "No GPU here: the timings above are the recorded ones; sector counts are exact."
    lines = []
    for name in steps:
        try:
            kern = gemmlab.step(name, BLOCK_X=bx, BLOCK_Y=by)
            lines.append(gemmlab.bench.timing_line(kern, size))
        except GemmlabError as exc:
            lines.append(f"{name}: {exc}")
    return "\n".join(lines)


def block_shape_report(bx: int, by: int, *, time: bool = False, size: int = 2048) -> str:
    """The text under the chapter 2 slider: sector counts, or why the shape cannot run."""
    problem = config_problem(bx, by)
    if problem:
        return problem
    text = coalescing.describe((bx, by))
    if time:
        text += "\n" + time_block_shape(bx, by, size)
    return text


def block_shape_explorer(bx: int = 32, by: int = 8, *, size: int = 2048):
    """Chapter 2's widget: sliders over BLOCK_X and BLOCK_Y redraw both mappings' access picture
    and the sectors per request; on a GPU they also re-time both kernels against cuBLAS."""

    xs, ys = block_choices()
    sx = widgets.SelectionSlider(options=list(xs), value=bx, description="BLOCK_X",
                                 continuous_update=False)
    sy = widgets.SelectionSlider(options=list(ys), value=by, description="BLOCK_Y",
                                 continuous_update=False)
    picture = widgets.Output()
    report = widgets.HTML()
    live = gemmlab.backend() == "gpu"

    def redraw(_change=None) -> None:
        x, y = sx.value, sy.value
        text = block_shape_report(x, y, time=live, size=size)
        report.value = f"<pre>{html.escape(text)}</pre>"
        with picture:
            picture.clear_output(wait=True)
            if config_problem(x, y) is None:
                fig = coalescing.draw_comparison((x, y))
                display(fig)
                plt.close(fig)

    sx.observe(redraw, names="value")
    sy.observe(redraw, names="value")
    redraw()
    return widgets.VBox([widgets.HBox([sx, sy]), report, picture])
