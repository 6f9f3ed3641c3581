"""gemmlab.sitecontrols without a browser: every chapter's twin builds, fits its size, and the text it carries for
every setting of its controls is what `label_for` recomputes from the records and models (the browser test,
test_site_controls.py, then checks that the page shows and filters that data)."""
from __future__ import annotations

import itertools
import json
import re

import pytest

from gemmlab import sitecontrols

TWINS = {
    "1": (sitecontrols.roofline_twin, {}),
    "2": (sitecontrols.coalescing_twin, {}),
    "3": (sitecontrols.smem_tiling_twin, {}),
    "4": (sitecontrols.register_tiling_twin, {}),
    "5": (sitecontrols.bank_conflicts_twin, {}),
    "6": (sitecontrols.async_prefetch_twin, {}),
    "7": (sitecontrols.tensor_core_tiling_twin, {}),
    "7b": (sitecontrols.tensor_core_ladder_twin, {}),
    "8": (sitecontrols.fusion_twin, {}),
}


@pytest.fixture(scope="module", params=list(TWINS))
def twin(request):
    fn, kwargs = TWINS[request.param]
    return fn(**kwargs)


def _label_rows(chart) -> list[list[str]]:
    """The labels the chart's text view can show: its dataset's `L` fields."""
    view = next(v for v in chart.spec["vconcat"] if v.get("name") == "label")
    return [row["L"] for row in chart.spec["datasets"][view["data"]["name"]]]


def test_output_is_small_and_complete(twin):
    bundle = twin._repr_mimebundle_()
    assert set(bundle) == set(sitecontrols.MIMETYPES)
    assert twin.nbytes() <= sitecontrols.MAX_BYTES
    assert "\n" not in bundle["text/plain"] and bundle["text/plain"].startswith("Static control")
    assert bundle["text/plain"].endswith(sitecontrols.ELSEWHERE)   # in JupyterLab and Colab: the site's version
    html = bundle["text/html"]
    assert f'id="{twin.div_id}"' in html and "vegaEmbed(el, spec" in html and "window.vegaEmbed" in html
    spec_text = re.search(r"spec = (\{.*\});\n", html).group(1)
    assert "</" not in spec_text and json.loads(spec_text.replace("<\\/", "</")) == twin.spec
    call = json.loads(re.search(r'data-gemmlab-twin="([^"]*)"', html).group(1).replace("&quot;", '"'))
    assert call == twin.call and getattr(sitecontrols, call["fn"])(**call["kwargs"]).digest == twin.digest


def test_every_setting_has_its_text(twin):
    """The text stored for the controls' settings is exactly what label_for computes for each of them."""
    names = [c.name for c in twin.controls]
    expected = {json.dumps(twin.label_for(dict(zip(names, values))))
                for values in itertools.product(*(c.options for c in twin.controls))}
    stored = {json.dumps(label) for label in _label_rows(twin)}
    assert stored == expected
    assert all(len(line) <= sitecontrols.LINE_CHARS for label in _label_rows(twin) for line in label)
    title = twin.spec["title"]
    assert all(len(line) <= sitecontrols.TITLE_CHARS for line in ([title] if isinstance(title, str) else title))


def test_controls_start_where_the_call_says():
    chart = sitecontrols.coalescing_twin(16, 4)
    assert chart.defaults == {"BLOCK_X": 16, "BLOCK_Y": 4}
    assert chart.label_for()[0].startswith("block (16, 4)")
    with pytest.raises(ValueError, match="not one of"):
        sitecontrols.Control("x", "x", (1, 2), 3)
    with pytest.raises(ValueError, match="evenly spaced"):
        sitecontrols.Control("x", "x", (1, 2, 4), 1, input="range")


def test_records_name_their_gpu_and_date():
    for chart in (sitecontrols.register_tiling_twin(), sitecontrols.fusion_twin(), sitecontrols.smem_tiling_twin()):
        title = " ".join(chart.spec["title"])
        assert re.search(r"(NVIDIA \S+).*recorded \d{4}-\d{2}-\d{2}", title), title
    shown = sitecontrols.fusion_twin().label_for()
    assert "NVIDIA H200" in sitecontrols.fusion_twin().summary and re.search(r"recorded \d{4}-\d{2}-\d{2}", " ".join(shown))


def test_a_row_of_steps_reads_one_gpus_records():
    """Chapter 7's twin shows hgemm/01-03 side by side: their records come from one GPU even where another GPU has
    a newer record of one of them (the H200's hgemm/01 of 2026-11-29 beside the H100's ladder)."""
    by_step = sitecontrols._steps_records(sitecontrols.MMA_STEPS, 8192)
    gpus = {r["gpu"] for recs in by_step.values() for r in recs}
    assert len(gpus) == 1 and all(by_step.values())
    line = sitecontrols.tensor_core_tiling_label({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "WARP_M": 64,
                                                  "WARP_N": 64}, 8192)
    recorded = [x for x in (line if isinstance(line, list) else str(line).split("\n")) if "recorded at" in x]
    assert recorded and recorded[0].count("2026-") == 1
