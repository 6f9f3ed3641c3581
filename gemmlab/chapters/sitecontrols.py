"""Static twins of the chapters' sliders: Vega-Lite charts whose controls work on the static site.

The ipywidgets sliders (widgets.py, explore.py, swizzle.bank_explorer, ...) need a live kernel, so on the
rendered book they are dead. Each chapter's *twin* is a Vega-Lite chart whose controls (Vega-Lite params
bound to a range slider or a select) filter data computed here, when the notebook runs: the recorded
sweeps in results/, the Python models (hardware, coalescing, tiling, swizzle, ...), compile-only NVRTC
resources. Moving a control changes the picture and the text under it; no kernel, no network.

Every twin returns a :class:`Chart`. Displayed in a notebook it gives three representations:

- ``application/vnd.vegalite.v5+json``: the spec, for front ends with a Vega-Lite renderer;
- ``text/html``: a div and a few lines that call ``vegaEmbed`` (SVG renderer). The site loads the
  vendored vega, vega-lite and vega-embed on every page (site_static/vega/, _config.yml's
  html_js_files), so ``window.vegaEmbed`` is there. Elsewhere (JupyterLab, Colab) nothing is loaded: no request
  leaves the machine, and the div keeps its text, which says that this is the site's version of the control and
  that the chapter's live explorer is the control there (ELSEWHERE), then the chart's summary and first text;
- ``text/plain``: what the control shows, and the same ELSEWHERE line.

The text under each chart is precomputed here, one entry per setting of the controls (lists of lines),
and ``Chart.label_for(settings)`` recomputes the entry of one setting from the same records and models,
which is what tests/site/test_site_controls.py compares the page with.
"""
from __future__ import annotations

import hashlib
import html
import itertools
import json
import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence
from ..measure import fusion, hardware, results
from . import coalescing, explore, swizzle, tensorcores, tiling, widgets
from ..runtime import registry
from ..errors import GemmlabError
from ..runtime.kernel import instance

# The vendored copies (site_static/vega/README.txt), which only the site loads.
VEGA_VERSIONS = {"vega": "5.33.1", "vega-lite": "5.23.0", "vega-embed": "6.29.0"}
# What a twin says where it is not drawn (JupyterLab, Colab: no vegaEmbed there, and none is fetched).
ELSEWHERE = ("This is the book site's version of the control (it draws on the site only); here, run the chapter's "
             "live explorer instead.")
SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"

WIDTH = 520        # plot width in pixels (a chapter page's column is 750 or more at a 1280-pixel window)
LINE_CHARS = 84    # text lines are wrapped here (10 px monospace: about 510 pixels)
LINE_HEIGHT = 14
TITLE_CHARS = 84   # a title line longer than this is wider than the chart (Vega clips it)
MAX_BYTES = 100_000  # what one output (all three representations) may weigh
# What a Chart's output holds: HTML that embeds the spec, which the site, JupyterLab and Colab all render, and a
# line of text. No Vega-Lite mime bundle: myst-nb warns it cannot render one (an error under -W), and JupyterLab
# ranks text/html before its Vega renderer anyway.
MIMETYPES = ("text/html", "text/plain")

CONFIG = {"view": {"stroke": None}, "axis": {"labelFontSize": 10, "titleFontSize": 11},
          "legend": {"labelFontSize": 10, "titleFontSize": 10, "orient": "bottom"},
          "title": {"fontSize": 12, "anchor": "start"}, "range": {"ordinal": {"scheme": "tableau10"}}}
SELECTED = "#d62728"   # the selected bar / point
CANNOT_RUN = "cannot run"   # every twin's text for a setting that cannot run says so in these words, then why
OTHERS = "#9ecae1"


# ------------------------------------------------------------------------------------------------
# The display object
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Control:
    """One control: a Vega-Lite param (a JavaScript identifier, not one of Vega's own signals: width, height,
    padding, autosize, background, cursor) bound to a range slider or a select."""

    name: str
    label: str
    options: tuple
    default: Any
    input: str = "select"           # "select" or "range" (evenly spaced numbers only)
    labels: tuple | None = None     # what a select shows for each option (default: the option)

    def __post_init__(self):
        if self.default not in self.options:
            raise ValueError(f"control {self.name}: default {self.default!r} is not one of {self.options}")
        if self.input == "range" and len(_steps(self.options)) != 1:
            raise ValueError(f"control {self.name}: a range needs evenly spaced options, not {self.options}")

    def param(self) -> dict:
        if self.input == "range":
            lo, hi = min(self.options), max(self.options)
            step = _steps(self.options).pop() if len(self.options) > 1 else 1
            bind = {"input": "range", "min": lo, "max": hi, "step": step, "name": self.label + "\u00a0"}
        else:
            bind = {"input": "select", "options": list(self.options), "name": self.label + "\u00a0"}
            if self.labels:
                bind["labels"] = list(self.labels)
        return {"name": self.name, "value": self.default, "bind": bind}


def _steps(options: Sequence) -> set:
    values = sorted(options)
    return {b - a for a, b in zip(values, values[1:])} if len(values) > 1 else {1}


_ids: dict[str, int] = {}


def new_page() -> None:
    """Number the twins' divs from 1 again, as a fresh kernel does for each notebook (tests/refresh_twins.py)."""
    _ids.clear()


class Chart:
    """A Vega-Lite chart with controls, displayable in Jupyter, on the static site and on Colab.

    `spec` is the Vega-Lite spec (a dict); `controls` its params; `label_for(settings)` the text lines the
    chart shows for a dict {control name: value}, recomputed from the records and models; `call` the
    twin function and keyword arguments that build it again (the test rebuilds charts from the page)."""

    def __init__(self, spec: dict, summary: str, controls: Sequence[Control],
                 label_for: Callable[[dict], list[str]], call: dict):
        self.spec = spec
        self.summary = summary
        self.controls = list(controls)
        self._label_for = label_for
        self.call = call
        self._html: str | None = None
        self.spec_json = json.dumps(spec, separators=(",", ":"), sort_keys=True)
        self.digest = hashlib.sha1(self.spec_json.encode()).hexdigest()[:12]   # what the div's id names
        _ids[self.digest] = _ids.get(self.digest, 0) + 1   # the same chart twice on one page gets two divs
        self.div_id = f"gemmlab-twin-{self.digest}" + (f"-{_ids[self.digest]}" if _ids[self.digest] > 1 else "")

    @property
    def defaults(self) -> dict:
        return {c.name: c.default for c in self.controls}

    def label_for(self, settings: dict | None = None) -> list[str]:
        """The text lines shown for `settings` (missing controls at their defaults)."""
        return self._label_for({**self.defaults, **(settings or {})})

    def to_html(self) -> str:
        """A div and the few lines that call vegaEmbed where the page has it (the site); its text elsewhere."""
        if self._html is None:
            self._html = self._make_html()
        return self._html

    def _make_html(self) -> str:
        spec = self.spec_json.replace("</", "<\\/")   # never close the script element early
        fallback = html.escape("\n".join([ELSEWHERE, self.summary, *self.label_for()]))
        call = html.escape(json.dumps(self.call, sort_keys=True), quote=True)
        return (f'<div id="{self.div_id}" class="gemmlab-twin" data-gemmlab-twin="{call}">'
                f'<pre>{fallback}</pre></div>\n'
                '<script type="text/javascript">\n'
                "(function () {\n"
                f'  var el = document.getElementById("{self.div_id}"), spec = {spec};\n'
                "  function show() {\n"
                '    vegaEmbed(el, spec, {renderer: "svg", actions: false})'
                ".catch(function (e) { console.error(e); el.textContent = String(e); });\n"
                "  }\n"
                "  if (window.vegaEmbed) show();\n"
                "})();\n"
                "</script>")

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        every = {"application/vnd.vegalite.v5+json": self.spec, "text/html": self.to_html(),
                 "text/plain": f"{self.summary} {ELSEWHERE}"}
        return {m: every[m] for m in MIMETYPES}

    def nbytes(self) -> int:
        """Bytes of the three representations together (what the stored notebook output weighs, at most)."""
        return len(self.spec_json) + len(self.to_html()) + len(self.summary) + len(ELSEWHERE) + 1

    def __repr__(self) -> str:
        return self.summary


def _spec(title: str | list[str], controls: Sequence[Control], datasets: dict, views: list[dict]) -> dict:
    return {"$schema": SCHEMA, "title": title, "params": [c.param() for c in controls],
            "datasets": datasets, "vconcat": views, "spacing": 12, "config": CONFIG}


def _text_view(dataset: str, test: str, lines: int) -> dict:
    """The chart's text: the label `L` (a list of lines) of the one row of `dataset` that `test` selects.
    Its mark is named label_marks (SVG class), which is where the browser test reads it."""
    return {"name": "label", "width": WIDTH, "height": lines * LINE_HEIGHT, "data": {"name": dataset},
            "transform": [{"filter": test}],
            "mark": {"type": "text", "align": "left", "baseline": "top", "font": "monospace", "fontSize": 10,
                     "lineHeight": LINE_HEIGHT},
            "encoding": {"x": {"value": 0}, "y": {"value": 0}, "text": {"field": "L"}}}


def _lines(rows: list[dict]) -> int:
    """The most lines any row's label has (the text view's height)."""
    return max(len(r["L"]) for r in rows)


def _wrap(*paragraphs: str) -> list[str]:
    """Lines of at most LINE_CHARS characters, without leading or trailing blanks (Vega trims each line of a
    text mark, so the lines are stored as the page shows them)."""
    out = []
    for p in paragraphs:
        for raw in str(p).splitlines():
            out += textwrap.wrap(raw.strip(), LINE_CHARS, break_on_hyphens=False)
    return out


def _test(controls: Sequence[Control], fields: dict[str, str] | None = None) -> str:
    """A Vega expression that is true for the row whose fields equal every control's value."""
    fields = fields or {}
    return " && ".join(f"datum.{fields.get(c.name, c.name)} == {c.name}" for c in controls)


def _finish(chart: Chart) -> Chart:
    if chart.nbytes() > MAX_BYTES:
        raise ValueError(f"{chart.call}: the output weighs {chart.nbytes()} bytes, over {MAX_BYTES}")
    return chart


def _recorded_when(records: list[dict]) -> str:
    """'NVIDIA H100 80GB HBM3, recorded 2026-11-22, 2026-11-24' for the records of one GPU."""
    if not records:
        return "no records"
    gpus = sorted({r["gpu"] for r in records})
    return f"{', '.join(gpus)}, recorded {', '.join(sorted({r['date'] for r in records}))}"


def _timing_note(records: list[dict]) -> list[str]:
    """Title lines that say when records predate the interleaved protocol (results.timing_note), else none."""
    return _wrap(results.timing_note(records))


# ------------------------------------------------------------------------------------------------
# Chapter 1: where a GEMM of size N lands on a GPU's roofline
# ------------------------------------------------------------------------------------------------
PRECISIONS = {"fp32": ("fp32 FFMA (CUDA cores)", 4), "fp16": ("fp16 tensor cores, fp32 accumulation", 2)}


def roofline_label(gpu: str, precision: str, log2n: int) -> list[str]:
    """The text of chapter 1's twin: intensity of an N^3 GEMM, the balance point, the attainable rate."""
    spec = hardware.SPECS[gpu]
    what, nbytes = PRECISIONS[precision]
    n = 2 ** log2n
    intensity = hardware.gemm_intensity(n, n, n, nbytes)
    peak = spec.fp32_tflops if precision == "fp32" else spec.fp16_tensor_tflops
    balance = hardware.balance_point(peak, spec.dram_gbps)
    attainable = min(peak, spec.dram_gbps * 1e9 * intensity / 1e12)
    bound = "memory-bound" if intensity < balance else "compute-bound"
    lines = [f"{spec.name}, {what}, M = N = K = {n}:",
             f"{intensity:.1f} FLOP per byte (A and B read once, C written once); the balance point is "
             f"{balance:.1f}: {bound}",
             f"attainable {attainable:.1f} of {peak:g} TFLOP/s (spec sheet, {spec.dram_gbps:g} GB/s DRAM)"]
    meas = hardware.achievable(spec)
    if meas:
        mpeak = meas["fp32_tflops" if precision == "fp32" else "fp16_tensor_tflops"]
        matt = min(mpeak, meas["dram_gbps"] * 1e9 * intensity / 1e12)
        lines.append(f"measured ceilings ({meas['label']}): attainable {matt:.1f} TFLOP/s "
                     f"(cuBLAS {mpeak:.1f} TFLOP/s, copy {meas['dram_gbps']:.0f} GB/s)")
    else:
        lines.append(f"no measured ceilings for the {spec.name} (results/ holds none)")
    return _wrap(*lines)


def roofline_twin(log2n: int = 12, log2n_range: tuple[int, int] = (6, 14), gpu: str = "h100-sxm",
                  precision: str = "fp32") -> Chart:
    """Chapter 1: pick a GPU (hardware.SPECS), a precision and N; see where an N^3 GEMM lands on the
    roofline (spec sheet solid, measured ceilings dashed where recorded or published)."""
    exps = tuple(range(log2n_range[0], log2n_range[1] + 1))
    controls = [Control("gpu", "GPU", tuple(hardware.SPECS), gpu, labels=tuple(s.name for s in hardware.SPECS.values())),
                Control("precision", "precision", tuple(PRECISIONS), precision,
                        labels=tuple(v[0] for v in PRECISIONS.values())),
                Control("log2N", "log2 N", exps, log2n, input="range")]
    xmin, xmax = 1.0, 2.0 ** 13
    rows, lines = [], []
    for key, spec in hardware.SPECS.items():
        meas = hardware.achievable(spec)
        for prec, (_, nbytes) in PRECISIONS.items():
            peak = spec.fp32_tflops if prec == "fp32" else spec.fp16_tensor_tflops
            ceilings = [("spec sheet", peak, spec.dram_gbps)]
            if meas:
                ceilings.append(("measured", meas["fp32_tflops" if prec == "fp32" else "fp16_tensor_tflops"],
                                 meas["dram_gbps"]))
            for kind, tflops, gbps in ceilings:
                ridge = hardware.balance_point(tflops, gbps)
                for x in (xmin, ridge, xmax):
                    lines.append({"gpu": key, "precision": prec, "ceiling": kind, "x": x,
                                  "y": min(tflops, gbps * 1e9 * x / 1e12)})
            for e in exps:
                n = 2 ** e
                intensity = hardware.gemm_intensity(n, n, n, nbytes)
                row = {"gpu": key, "precision": prec, "log2N": e, "x": intensity,
                       "y": min(peak, spec.dram_gbps * 1e9 * intensity / 1e12), "L": roofline_label(key, prec, e)}
                if meas:
                    _, mpeak, mgbps = ceilings[1]
                    row["ym"] = min(mpeak, mgbps * 1e9 * intensity / 1e12)
                rows.append(row)
    pick = "datum.gpu == gpu && datum.precision == precision"
    scale_x = {"type": "log", "base": 2, "domain": [xmin, xmax]}
    plot = {"width": WIDTH, "height": 260, "layer": [
        {"data": {"name": "ceilings"}, "transform": [{"filter": pick}],
         "mark": {"type": "line", "strokeWidth": 2},
         "encoding": {"x": {"field": "x", "type": "quantitative", "scale": scale_x,
                            "title": "arithmetic intensity (FLOP per DRAM byte)"},
                      "y": {"field": "y", "type": "quantitative", "scale": {"type": "log"}, "title": "TFLOP/s"},
                      "strokeDash": {"field": "ceiling", "type": "nominal", "title": "ceiling",
                                     "scale": {"domain": ["spec sheet", "measured"], "range": [[1, 0], [6, 4]]}},
                      "color": {"value": "#1f77b4"}}},
        {"data": {"name": "points"}, "transform": [{"filter": pick + " && datum.log2N == log2N"}],
         "mark": {"type": "point", "filled": True, "size": 120, "color": SELECTED},
         "encoding": {"x": {"field": "x", "type": "quantitative", "scale": scale_x},
                      "y": {"field": "y", "type": "quantitative"}}},
        {"data": {"name": "points"}, "transform": [{"filter": pick + " && datum.log2N == log2N && isValid(datum.ym)"}],
         "mark": {"type": "point", "filled": False, "size": 120, "strokeWidth": 2, "color": SELECTED},
         "encoding": {"x": {"field": "x", "type": "quantitative", "scale": scale_x},
                      "y": {"field": "ym", "type": "quantitative"}}}]}
    spec = _spec(["Chapter 1: an N^3 GEMM on the roofline (hardware.SPECS, hardware.achievable)",
                  "red dot: attainable on the spec sheet; ring: with the measured ceilings (dashed)"], controls,
                 {"points": rows, "ceilings": lines},
                 [plot, _text_view("points", _test(controls), _lines(rows))])
    return _finish(Chart(spec, "Static control: pick a GPU, a precision and N; the chart places an N^3 GEMM on "
                               "that GPU's roofline (intensity, balance point, attainable TFLOP/s).",
                         controls, lambda s: roofline_label(s["gpu"], s["precision"], s["log2N"]),
                         {"fn": "roofline_twin", "kwargs": {"log2n": log2n, "log2n_range": list(log2n_range),
                                                            "gpu": gpu, "precision": precision}}))


# ------------------------------------------------------------------------------------------------
# Chapter 2: block shape -> sectors per warp request, both mappings
# ------------------------------------------------------------------------------------------------
def coalescing_label(bx: int, by: int) -> list[str]:
    """The text of chapter 2's twin: the registry's sentence, or sectors per request and bytes per FMA."""
    problem = widgets.config_problem(bx, by)
    if problem:
        return _wrap(f"block ({bx}, {by}): cannot run: {problem}")
    return _wrap(coalescing.describe((bx, by)),
                 f"  bytes moved per FFMA (A + B loads): naive {coalescing.bytes_per_fma('naive', (bx, by)):.3g}"
                 f" -> coalesced {coalescing.bytes_per_fma('coalesced', (bx, by)):.3g}")


def coalescing_twin(bx: int = 32, by: int = 8) -> Chart:
    """Chapter 2: BLOCK_X and BLOCK_Y (the registry's choices) -> sectors per warp request of the A and B
    loads and the C store for both mappings, and bytes per FMA (gemmlab.coalescing's model)."""
    xs, ys = widgets.block_choices()
    controls = [Control("BLOCK_X", "BLOCK_X", tuple(xs), bx), Control("BLOCK_Y", "BLOCK_Y", tuple(ys), by)]
    keys = [f"{mp} {op}" for mp in coalescing.MAPPINGS for op in coalescing.OPERANDS]
    rows = []
    for x, y in itertools.product(xs, ys):
        row = {"BLOCK_X": x, "BLOCK_Y": y, "L": coalescing_label(x, y)}
        if widgets.config_problem(x, y) is None:
            table = coalescing.sector_table((x, y))
            row.update({mp: coalescing.bytes_per_fma(mp, (x, y)) for mp in coalescing.MAPPINGS})
            row.update({f"{mp} {op}": table[mp][op] for mp in coalescing.MAPPINGS for op in coalescing.OPERANDS})
        rows.append(row)
    pick = _test(controls)
    names = {mp: coalescing.STEP_OF[mp] for mp in coalescing.MAPPINGS}
    bar_view = {"width": WIDTH - 150, "height": 150, "data": {"name": "shapes"},
                "transform": [{"filter": f"{pick} && isValid(datum.naive)"}, {"fold": keys, "as": ["key", "sectors"]},
                              {"calculate": f"{json.dumps(names)}[split(datum.key, ' ')[0]]", "as": "mapping"},
                              {"calculate": "split(datum.key, ' ')[1]", "as": "operand"}],
                "mark": "bar",
                # Fixed domains: a block shape that cannot run has no bars, and its text says why
                "encoding": {"x": {"field": "operand", "type": "nominal", "title": None,
                                   "scale": {"domain": list(coalescing.OPERANDS)}, "axis": {"labelExpr": "{'A': 'A load', 'B': 'B load', 'C': 'C store'}[datum.value]",
                                            "labelAngle": 0}},
                             "xOffset": {"field": "mapping", "type": "nominal",
                                         "scale": {"domain": [names[mp] for mp in coalescing.MAPPINGS]}},
                             "y": {"field": "sectors", "type": "quantitative", "scale": {"domain": [0, 32]},
                                   "title": "sectors per warp request"},
                             "color": {"field": "mapping", "type": "nominal", "title": None,
                                       "scale": {"domain": [names[mp] for mp in coalescing.MAPPINGS]}}}}

    def heat(mapping: str) -> dict:
        return {"width": 190, "height": 190, "data": {"name": "shapes"},
                "transform": [{"filter": f"isValid(datum.{mapping})"}],
                "title": {"text": f"{coalescing.STEP_OF[mapping]}: bytes per FFMA", "fontSize": 11},
                "mark": {"type": "rect", "strokeWidth": 3},
                "encoding": {"x": {"field": "BLOCK_X", "type": "ordinal", "sort": list(xs)},
                             "y": {"field": "BLOCK_Y", "type": "ordinal", "sort": list(reversed(ys))},
                             "color": {"field": mapping, "type": "quantitative", "title": "bytes per FFMA",
                                       "scale": {"type": "log", "domain": [4, 64], "scheme": "viridis",
                                                 "reverse": True},
                                       "legend": {"values": [4, 8, 16, 32, 64], "orient": "right"}},
                             "stroke": {"condition": {"test": pick, "value": SELECTED}, "value": None}}}

    spec = _spec("Chapter 2: which block shape coalesces (gemmlab.coalescing, warps of block (0, 0))", controls,
                 {"shapes": rows},
                 [bar_view, {"hconcat": [heat("naive"), heat("coalesced")]}, _text_view("shapes", pick, _lines(rows))])
    return _finish(Chart(spec, "Static control: BLOCK_X and BLOCK_Y of sgemm/01 and 02; the chart shows the sectors "
                               "per warp request of each access and the bytes moved per FFMA (coalescing model).",
                         controls, lambda s: coalescing_label(s["BLOCK_X"], s["BLOCK_Y"]),
                         {"fn": "coalescing_twin", "kwargs": {"bx": bx, "by": by}}))


# ------------------------------------------------------------------------------------------------
# Chapter 3: the tile edge BLOCK -> model, compile-only resources, recorded sweep
# ------------------------------------------------------------------------------------------------
SMEM_STEP = "sgemm/03_smem_tiling"


def _gemm_records(step: str, size: int, gpu: str | None = None) -> list[dict]:
    """The recorded records of `step` at size^3, of one GPU (results.one_gpu unless `gpu` names one)."""
    recs = [r for r in results.load(gpu) if r["step"] == step and r["m"] == size]
    return recs if gpu else results.one_gpu(recs)


def _steps_records(steps, size: int, gpu: str | None = None) -> dict[str, list[dict]]:
    """{step: its records at size^3} for several steps shown side by side, all of ONE GPU (results.one_gpu over
    the steps together unless `gpu` names one): a row of steps never mixes two GPUs' runs."""
    recs = [r for r in results.load(gpu) if r["step"] in steps and r["m"] == size]
    recs = recs if gpu else results.one_gpu(recs)
    return {step: [r for r in recs if r["step"] == step] for step in steps}


def _record_line(rec: dict) -> str:
    return (f"{rec['pct_of_baseline']:.1f}% of cuBLAS ({rec['baseline']} {rec['baseline_tflops']:.1f} TFLOP/s), "
            f"{rec['tflops']:.2f} TFLOP/s; {rec['gpu']}, recorded {rec['date']}")


def smem_tiling_label(block: int, size: int = 4096, gpu: str | None = None) -> list[str]:
    """The text of chapter 3's twin for one BLOCK: rule, model, sm_90 resources (NVRTC), the record."""
    head = f"BLOCK = {block}: {block * block} threads per block"
    try:
        inst = instance(SMEM_STEP, BLOCK=block)
    except GemmlabError as e:
        return _wrap(f"{head}: cannot run: {e}")
    launch = registry.get(SMEM_STEP).launch(size, size, size, inst.params)
    res = inst.resources("sm_90")
    blocks, limiter = explore.blocks_per_sm(res.registers, launch.threads, res.shared_bytes + launch.shared_bytes, 90)
    lines = [f"{head}, {tiling.shared_bytes(block)} B of shared memory (two {block} x {block} float tiles), "
             f"{tiling.barriers(size, block)} barriers at K = {size}",
             f"model at {size}^3: {tiling.intensity(size, size, size, block):g} FLOP per byte requested from "
             f"global memory, {2 / block:g} global loads per FMA",
             f"sm_90 (NVRTC): {res.registers} registers, {blocks} block(s) per SM "
             f"({blocks * -(-launch.threads // 32)} warps, limited by {limiter})"]
    rec = [r for r in _gemm_records(SMEM_STEP, size, gpu) if r["params"]["BLOCK"] == block]
    lines.append(f"recorded at {size}^3: " + (_record_line(rec[0]) if rec else "not in the recorded sweep"))
    return _wrap(*lines)


def smem_tiling_twin(block: int = 32, choices: Sequence[int] = (4, 8, 16, 32, 64), size: int = 4096,
                     gpu: str | None = None) -> Chart:
    """Chapter 3: the tile edge BLOCK -> threads, shared memory, FLOP per global byte, global loads per FMA
    (gemmlab.tiling), registers and occupancy on sm_90 (NVRTC), and the recorded sweep at size^3."""
    controls = [Control("BLOCK", "BLOCK", tuple(choices), block)]
    recs = _gemm_records(SMEM_STEP, size, gpu)
    rows = []
    for b in choices:
        row = {"BLOCK": b, "L": smem_tiling_label(b, size, gpu)}
        try:
            instance(SMEM_STEP, BLOCK=b)
            row["intensity"] = tiling.intensity(size, size, size, b)
        except GemmlabError:
            pass
        rec = [r for r in recs if r["params"]["BLOCK"] == b]
        if rec:
            row["pct"] = rec[0]["pct_of_baseline"]
        rows.append(row)

    def bars(field_: str, title: str) -> dict:
        return {"width": WIDTH // 2 - 40, "height": 150, "data": {"name": "blocks"},
                "transform": [{"filter": f"isValid(datum.{field_})"}], "mark": "bar",
                "encoding": {"x": {"field": "BLOCK", "type": "ordinal", "sort": list(choices),
                                   "scale": {"domain": list(choices)}, "axis": {"labelAngle": 0}},
                             "y": {"field": field_, "type": "quantitative", "title": title},
                             "color": {"condition": {"test": "datum.BLOCK == BLOCK", "value": SELECTED},
                                       "value": OTHERS}}}

    spec = _spec(["Chapter 3: the tile edge BLOCK of sgemm/03 (gemmlab.tiling, NVRTC sm_90)",
                  f"timings: {_recorded_when(recs)}", *_timing_note(recs)], controls, {"blocks": rows},
                 [{"hconcat": [bars("intensity", f"FLOP per global byte (model, {size}^3)"),
                               bars("pct", f"% of cuBLAS at {size}^3 (recorded)")]},
                  _text_view("blocks", "datum.BLOCK == BLOCK", _lines(rows))])
    return _finish(Chart(spec, f"Static control: the tile edge BLOCK of sgemm/03; the chart shows its model numbers, "
                               f"sm_90 resources and the recorded % of cuBLAS at {size}^3.",
                         controls, lambda s: smem_tiling_label(s["BLOCK"], size, gpu),
                         {"fn": "smem_tiling_twin", "kwargs": {"block": block, "choices": list(choices),
                                                               "size": size, "gpu": gpu}}))


# ------------------------------------------------------------------------------------------------
# Chapter 5: padding / swizzle -> wavefronts per request (gemmlab.swizzle's model)
# ------------------------------------------------------------------------------------------------
BANK_WIDTHS = (32, 64, 128)
BANK_ELEMS = (2, 4)
BANK_PADS = tuple(range(0, 9))
BANK_BITS = (0, 1, 2, 3)


def bank_label(access: str, width: int, elem_bytes: int, pad: int, bits: int) -> list[str]:
    """The text of chapter 5's twin: swizzle.bank_explorer's text (its sentence, or the model's count)."""
    problem = swizzle.config_problem(width, elem_bytes, pad, bits, access)
    if problem:
        return _wrap(f"cannot run: {problem}")
    return _wrap(str(swizzle.count_access(access, width, elem_bytes, pad, bits)))


def _bank_histogram(count) -> list[int]:
    """Distinct 4-byte words per bank in the request's costliest phase (its maximum is that phase's passes)."""
    sw = count.swizzle
    if count.access == "ldmatrix 8x8":
        cells = [(r, 0) for r in range(8)]
        access = 16
    else:
        cells = list(count.touched)
        access = count.elem_bytes
    addrs = [swizzle.tile_offset(r, c, count.width, count.pad, sw) * count.elem_bytes for r, c in cells]
    per_phase = {1: 32, 2: 32, 4: 32, 8: 16, 16: 8}[access]
    best: list[int] = [0] * swizzle.BANKS
    for start in range(0, len(addrs), per_phase):
        banks: dict[int, set[int]] = {}
        for a in addrs[start:start + per_phase]:
            for word in range(a // swizzle.WORD, (a + access - 1) // swizzle.WORD + 1):
                banks.setdefault(word % swizzle.BANKS, set()).add(word)
        hist = [len(banks.get(b, ())) for b in range(swizzle.BANKS)]
        if max(hist) > max(best):
            best = hist
    return best


def bank_conflicts_twin(access: str = "ldmatrix 8x8", width: int = 64, elem_bytes: int = 2, pad: int = 0,
                        bits: int = 3) -> Chart:
    """Chapter 5: access, tile width, element size, padding and swizzle bits (as swizzle.bank_explorer) ->
    the words each bank serves in one warp request, and wavefronts against the ideal (the model)."""
    accesses = swizzle.ACCESSES
    controls = [Control("access", "access", tuple(range(len(accesses))), accesses.index(access), labels=accesses),
                Control("tile_width", "tile width (elements)", BANK_WIDTHS, width),
                Control("elem", "element bytes", BANK_ELEMS, elem_bytes),
                Control("pad", "padding (elements)", BANK_PADS, pad, input="range"),
                Control("bits", "swizzle bits", BANK_BITS, bits, input="range")]
    rows = []
    both = None   # padding and swizzling together: one sentence, whatever the tile
    for (i, acc), w, e, p, b in itertools.product(enumerate(accesses), BANK_WIDTHS, BANK_ELEMS, BANK_PADS, BANK_BITS):
        if p and b:
            both = both or {"p": -1, "L": bank_label(acc, w, e, p, b)}
            continue
        row = {"a": i, "w": w, "e": e, "p": p, "b": b, "L": bank_label(acc, w, e, p, b)}
        if swizzle.config_problem(w, e, p, b, acc) is None:
            row["h"] = "".join(_BASE36[v] for v in _bank_histogram(swizzle.count_access(acc, w, e, p, b)))
        rows.append(row)
    rows.append(both)
    pick = ("pad > 0 && bits > 0 ? datum.p == -1 : "
            + _test(controls, {"access": "a", "tile_width": "w", "elem": "e", "pad": "p", "bits": "b"}))
    hist = {"width": WIDTH, "height": 150, "data": {"name": "requests"},
            "transform": [{"filter": f"({pick}) && isValid(datum.h)"},
                          {"calculate": "split(datum.h, '')", "as": "c"}, {"flatten": ["c"]},
                          {"window": [{"op": "row_number", "as": "bank"}]},
                          {"calculate": "datum.bank - 1", "as": "bank"},
                          {"calculate": "parseInt(datum.c, 36)", "as": "words"}],
            "mark": "bar",
            "encoding": {"x": {"field": "bank", "type": "ordinal", "title": "bank", "axis": {"labelAngle": 0}},
                         "y": {"field": "words", "type": "quantitative", "scale": {"domainMin": 0},
                               "title": "distinct words (passes)"},
                         "color": {"condition": {"test": "datum.words > 1", "value": SELECTED}, "value": OTHERS}}}
    spec = _spec(["Chapter 5: banks and wavefronts of one warp request (gemmlab.swizzle's model)",
                  "bars: distinct 4-byte words per bank, costliest phase (2 or more: a conflict)"], controls, {"requests": rows},
                 [hist, _text_view("requests", pick, _lines(rows))])

    def label_for(s: dict) -> list[str]:
        return bank_label(accesses[s["access"]], s["tile_width"], s["elem"], s["pad"], s["bits"])

    return _finish(Chart(spec, "Static control: access, tile width, element size, padding and swizzle bits; the chart "
                               "shows the words per bank of one warp request and its wavefronts (swizzle model).",
                         controls, label_for,
                         {"fn": "bank_conflicts_twin", "kwargs": {"access": access, "width": width,
                                                                  "elem_bytes": elem_bytes, "pad": pad, "bits": bits}}))


_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


# ------------------------------------------------------------------------------------------------
# Chapter 7: block and warp tiles of hgemm/01-03 -> warps, accumulators, ldmatrix wavefronts
# ------------------------------------------------------------------------------------------------
MMA_STEPS = ("hgemm/01_mma_tiling", "hgemm/02_vectorized_copy", "hgemm/03_swizzled")
# A subset of the registry's choices (tensorcores.tiling_explorer offers them all): the shapes the chapter
# discusses and their neighbours, so that every setting is precomputed within the output's size.
MMA_CHOICES = {"BLOCK_M": (64, 128, 256), "BLOCK_N": (64, 128, 256), "BLOCK_K": (32, 64),
               "WARP_M": (32, 64), "WARP_N": (32, 64)}
WAVEFRONT_KEYS = ("ldmatrix A", "ldmatrix B", "store A", "store B")


def _mma_problem(params: dict) -> str | None:
    try:
        registry.get(MMA_STEPS[-1]).resolve(params)
    except GemmlabError as e:
        return str(e)
    return None


def _mma_wavefronts(params: dict) -> dict:
    """{'ldmatrix A plain': ..., 'store B swizzled': ...}: ldmatrix.x4 and 16-byte store wavefronts per request on
    the plain (steps 01, 02) and the swizzled (03) tiles, over every request of one K tile (swizzle's twins)."""
    out = {}
    for layout in ("plain", "swizzled"):
        for op in ("A", "B"):
            out[f"ldmatrix {op} {layout}"] = swizzle.per_request(
                swizzle.hgemm_ldmatrix_requests(op, layout=layout, **params), ldmatrix=True)
            out[f"store {op} {layout}"] = swizzle.per_request(swizzle.hgemm_store_requests(op, layout=layout, **params), 16)
    return out


def tensor_core_tiling_label(params: dict, size: int = 8192, gpu: str | None = None) -> list[str]:
    """The text of chapter 7's twin for one set of tiles of hgemm/01-03."""
    p = {k: int(params[k]) for k in MMA_CHOICES}
    head = f"BLOCK {p['BLOCK_M']}x{p['BLOCK_N']}x{p['BLOCK_K']}, WARP {p['WARP_M']}x{p['WARP_N']}:"
    problem = _mma_problem(p)
    if problem:
        return _wrap(f"{head} cannot run: {problem}")
    t = tensorcores.block_warp_mma_tiles(p)
    launch = registry.get(MMA_STEPS[-1]).launch(size, size, size, p)
    wf = _mma_wavefronts(p)
    lines = [f"{head} {len(t['warps'])} warps ({t['threads']} threads), {len(t['mma'])} m16n8 tiles per warp, "
             f"{4 * len(t['mma'])} accumulators per lane",
             f"block tile: {p['BLOCK_M'] * p['BLOCK_N'] / (p['BLOCK_M'] + p['BLOCK_N']):.1f} FLOP per byte loaded, "
             f"{2 * (p['BLOCK_M'] + p['BLOCK_N']) * p['BLOCK_K']} B of shared memory, "
             f"{launch.grid[0] * launch.grid[1]} blocks at {size}^3",
             "wavefronts per request, plain (01, 02) -> swizzled (03): "
             + ", ".join(f"{k} {wf[k + ' plain']:.3g} -> {wf[k + ' swizzled']:.3g}" for k in WAVEFRONT_KEYS)]
    recorded, when = [], set()
    by_step = _steps_records(MMA_STEPS, size, gpu)
    for step in MMA_STEPS:
        rec = [r for r in by_step[step] if r["params"] == {**registry.get(step).resolve({}), **p}]
        if rec:
            recorded.append(f"{step.split('/')[1][:2]} {rec[0]['pct_of_baseline']:.1f}%")
            when.add(rec[0]["date"])
    lines.append(f"recorded at {size}^3, % of cuBLAS: {', '.join(recorded)} ({', '.join(sorted(when))})" if recorded
                 else f"recorded at {size}^3: not these tiles (only each step's default tiles)")
    return _wrap(*lines)


def tensor_core_tiling_twin(block_m: int = 128, block_n: int = 128, block_k: int = 32, warp_m: int = 64,
                            warp_n: int = 64, size: int = 8192, gpu: str | None = None) -> Chart:
    """Chapter 7: the block and warp tiles of hgemm/01-03 (tensorcores.tiling_explorer's dropdowns) ->
    warps, mma tiles and accumulators per lane, shared memory, ldmatrix and store wavefronts on the plain and
    the swizzled tiles (swizzle's model), and the recorded timings where the tiles are the recorded ones."""
    values = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "WARP_M": warp_m, "WARP_N": warp_n}
    controls = [Control(k, k, MMA_CHOICES[k], values[k]) for k in MMA_CHOICES]
    rows = []
    for combo in itertools.product(*MMA_CHOICES.values()):
        p = dict(zip(MMA_CHOICES, combo))
        row = {**p, "L": tensor_core_tiling_label(p, size, gpu)}
        if _mma_problem(p) is None:   # short keys: what (index into WAVEFRONT_KEYS), layout (0 plain, 1 swizzled)
            wf = _mma_wavefronts(p)
            row.update({f"w{i}{j}": round(wf[f"{k} {layout}"], 3) for i, k in enumerate(WAVEFRONT_KEYS)
                        for j, layout in enumerate(("plain", "swizzled"))})
        rows.append(row)
    pick = _test(controls)
    folded = [f"w{i}{j}" for i in range(len(WAVEFRONT_KEYS)) for j in range(2)]
    bar_view = {"width": WIDTH - 120, "height": 140, "data": {"name": "tiles"},
                "transform": [{"filter": f"{pick} && isValid(datum.w00)"},
                              {"fold": folded, "as": ["key", "wf"]},
                              {"calculate": f"{json.dumps(list(WAVEFRONT_KEYS))}[parseInt(substring(datum.key, 1, 2))]",
                               "as": "what"},
                              {"calculate": "['plain', 'swizzled'][parseInt(substring(datum.key, 2, 3))]", "as": "layout"}],
                "mark": "bar",
                "encoding": {"x": {"field": "what", "type": "nominal", "title": None, "axis": {"labelAngle": 0},
                                   "sort": list(WAVEFRONT_KEYS)},
                             "xOffset": {"field": "layout", "type": "nominal", "sort": ["plain", "swizzled"]},
                             "y": {"field": "wf", "type": "quantitative", "title": "wavefronts per request"},
                             "color": {"field": "layout", "type": "nominal", "title": "shared tile",
                                       "sort": ["plain", "swizzled"]}}}
    recs = [r for step_recs in _steps_records(MMA_STEPS, size, gpu).values() for r in step_recs]
    spec = _spec(["Chapter 7: block and warp tiles of hgemm/01-03 (registry, tensorcores, swizzle)",
                  f"timings: {_recorded_when(recs)}", *_timing_note(recs)], controls, {"tiles": rows},
                 [bar_view, _text_view("tiles", pick, _lines(rows))])
    return _finish(Chart(spec, "Static control: the block and warp tiles of hgemm/01-03; the chart shows warps, "
                               "accumulators, shared memory and the ldmatrix / store wavefronts, plain and swizzled.",
                         controls, lambda s: tensor_core_tiling_label(s, size, gpu),
                         {"fn": "tensor_core_tiling_twin",
                          "kwargs": {"block_m": block_m, "block_n": block_n, "block_k": block_k, "warp_m": warp_m,
                                     "warp_n": warp_n, "size": size, "gpu": gpu}}))


# ------------------------------------------------------------------------------------------------
# Recorded tile sweeps (chapters 4, 6, 7b and 8): a tile select, one parameter on its own control
# ------------------------------------------------------------------------------------------------
_GROUPS = (("BLOCK", ("BLOCK_M", "BLOCK_N", "BLOCK_K")), ("WARP", ("WARP_M", "WARP_N")),
           ("THREAD", ("THREAD_M", "THREAD_N")))


def config_text(params: dict) -> str:
    """'BLOCK 128x128x16, WARP 64x32, THREAD 8x8, NUM_STAGES 3' (the order of `params` otherwise)."""
    parts, done = [], set()
    for word, names in _GROUPS:
        have = [n for n in names if n in params]
        if len(have) > 1:
            parts.append(f"{word} " + "x".join(str(params[n]) for n in have))
            done.update(have)
    parts += [f"{k} {v}" for k, v in params.items() if k not in done]
    return ", ".join(parts)


@dataclass
class _Sweep:
    """One recorded sweep: its cells (tile, axis value[, size]) -> record or None."""

    step: str
    axis: str
    sizes: tuple
    kind: str                                  # "gemm" or "fusion"
    records: list = field(default_factory=list)
    tiles: dict = field(default_factory=dict)  # tile text -> params without the axis
    values: tuple = ()

    def params(self, tile: str, value: int) -> dict:
        base = self.tiles[tile]
        out = {k: v for k, v in base.items()}
        out[self.axis] = int(value)
        order = list(self.records[0]["params"])
        return {k: out[k] for k in order}

    def record(self, tile: str, value: int, size: int) -> dict | None:
        want = self.params(tile, value)
        for r in self.records:
            if r["m"] == size and r["params"] == want:
                return r
        return None


def _sweep(step: str, axis: str | None, sizes: Sequence[int], gpu: str | None) -> _Sweep:
    if step.startswith("fused/"):
        recs = [r for r in fusion.load(gpu) if r["kind"] == "sweep" and r["step"] == step and r["m"] in sizes]
        kind = "fusion"
    else:
        recs = [r for n in sizes for r in _gemm_records(step, n, gpu)]
        kind = "gemm"
    if not recs:
        raise ValueError(f"no recorded sweep of {step} at {list(sizes)}" + (f" on the {gpu}" if gpu else ""))
    gpus = {r["gpu"] for r in recs}
    if len(gpus) > 1:
        raise ValueError(f"the records of {step} come from several GPUs ({sorted(gpus)}): pass gpu=")
    varying = [k for k in recs[0]["params"] if len({r["params"][k] for r in recs}) > 1]

    def cells(name: str) -> int:   # tiles x values if `name` is the axis: the fewest = the densest sweep
        return (len({tuple(v for k, v in r["params"].items() if k != name) for r in recs})
                * len({r["params"][name] for r in recs}))

    axis = axis or ("NUM_STAGES" if "NUM_STAGES" in varying else min(varying, key=cells))
    best = {}
    for r in recs:
        tile = config_text({k: v for k, v in r["params"].items() if k != axis})
        best[tile] = max(best.get(tile, float("-inf")), _shown(r, float("-inf")))
    order = sorted(best, key=lambda t: -best[t])
    tiles = {}
    for r in recs:
        tiles.setdefault(config_text({k: v for k, v in r["params"].items() if k != axis}),
                         {k: v for k, v in r["params"].items() if k != axis})
    return _Sweep(step, axis, tuple(sizes), kind, recs, {t: tiles[t] for t in order},
                  tuple(sorted({r["params"][axis] for r in recs})))


def _shown(rec: dict, missing: float = 0) -> float:
    """What a sweep twin plots of a record: the speed-up over a @ b @ c for a fused step's (fusion.speedup), the % of
    cuBLAS for a GEMM step's; `missing` for a record with no baseline."""
    if "pct_of_baseline" not in rec:
        return missing
    return registry.lookup(rec["step"]).against_baseline(rec)


def _problem(step: str, params: dict) -> str | None:
    """Why `params` cannot run on step `step` (the rule's sentence; a fused step's judged by the active backend's
    limits), or None."""
    try:
        registry.get(step).resolve(params)
    except GemmlabError as e:
        return str(e)
    return None


def sweep_label(sw: _Sweep, tile: str, value: int, size: int) -> list[str]:
    """The text of a sweep twin for one cell: the record (its date; the GPU is in the title), or why there
    is none; the model's numbers."""
    p = sw.params(tile, value)
    where = f"N = {size}" if sw.kind == "fusion" else f"{size}^3"
    lines = [f"{config_text(p)}, at {where}:"]
    problem = _problem(sw.step, p)
    rec = sw.record(tile, value, size)
    if rec and sw.kind == "fusion":
        lines.append(f"{rec['median_s'] * 1e6:.1f} us, {fusion.speedup(rec):.2f}x {rec['baseline']} "
                     f"({rec['baseline_median_s'] * 1e6:.1f} us, same run); grid {rec['grid']} blocks of "
                     f"{rec['threads']} threads; recorded {rec['date']}")
    elif rec:
        lines.append(f"{rec['pct_of_baseline']:.1f}% of cuBLAS ({rec['baseline']} {rec['baseline_tflops']:.1f} "
                     f"TFLOP/s), {rec['tflops']:.2f} TFLOP/s; recorded {rec['date']}")
    elif problem:
        runs = [v for v in sw.values if _problem(sw.step, sw.params(tile, v)) is None]
        where = (f"these tiles run at {sw.axis} = {', '.join(str(v) for v in runs)}: move {sw.axis} there" if runs
                 else f"these tiles run at no {sw.axis} of the sweep")
        return _wrap(*lines, problem if CANNOT_RUN in problem else f"{CANNOT_RUN}: {problem}", where)
    else:
        lines.append("not in the recorded sweep (the rules allow it)")
    if sw.kind == "gemm":
        launch = registry.get(sw.step).launch(size, size, size, p)
        model = f"{launch.threads} threads per block"
        if launch.shared_bytes:
            model += f", {launch.shared_bytes} B of dynamic shared memory"
        if "THREAD_M" in p and "THREAD_N" in p:
            model += (f"; a {p['THREAD_M']}x{p['THREAD_N']} thread tile: "
                      f"{tiling.shared_loads_per_fma(p['THREAD_M'], p['THREAD_N']):.3f} shared loads per FMA")
        lines.append(model)
    elif not rec:
        st = fusion.get(sw.step)
        lines.append(f"{st.threads(st.resolve(p))} threads per block")
    return _wrap(*lines)


def sweep_twin(step: str, size: int | Sequence[int] = 4096, axis: str | None = None, gpu: str | None = None,
               title: str = "") -> Chart:
    """A recorded tile sweep: a select over the recorded tiles (every parameter but `axis`), a control over
    `axis` (NUM_STAGES where swept; a range where its values are evenly spaced) and, for several sizes, a
    select over N. The picture: every recorded configuration (% of cuBLAS, or speed-up over a @ b @ c for the
    fused steps), the selected one ringed; the text: its record or why there is none, and model numbers."""
    sizes = (size,) if isinstance(size, int) else tuple(size)
    sw = _sweep(step, axis, sizes, gpu)
    tiles = tuple(sw.tiles)
    first = max(sw.records, key=_shown)
    first_tile = config_text({k: v for k, v in first["params"].items() if k != sw.axis})
    controls = [Control("tile", "tiles", tuple(range(len(tiles))), tiles.index(first_tile), labels=tiles),
                Control(sw.axis, sw.axis, sw.values, first["params"][sw.axis],
                        input="range" if len(_steps(sw.values)) == 1 and len(sw.values) > 2 else "select")]
    if len(sizes) > 1:
        controls.append(Control("N", "N", sizes, first["m"]))
    rows = []
    for n in sizes:
        for i, t in enumerate(tiles):
            for v in sw.values:
                rec = sw.record(t, v, n)
                row = {"t": i, "a": v, "n": n, "L": sweep_label(sw, t, v, n)}
                if rec:
                    row["y"] = round(_shown(rec), 3)
                rows.append(row)
    at_n = "datum.n == N" if len(sizes) > 1 else "true"
    pick = f"datum.t == tile && datum.a == {sw.axis} && {at_n}"
    metric = ("speed-up over a @ b @ c (the faster of torch and cupy, same run)" if sw.kind == "fusion"
              else f"% of cuBLAS at {sizes[0]}^3")
    dots = {"width": WIDTH - 260, "height": {"step": 13}, "data": {"name": "cells"},
            "transform": [{"filter": f"isValid(datum.y) && {at_n}"}],
            "mark": {"type": "point", "filled": True, "stroke": "black"},
            "encoding": {"y": {"field": "t", "type": "ordinal", "title": None,
                               "sort": {"field": "y", "op": "max", "order": "descending"},
                               "axis": {"labelFontSize": 9, "labelLimit": 260, "labelExpr": "TILES[datum.value]",
                                        "orient": "right"}},   # the text below starts where the plot does
                         "x": {"field": "y", "type": "quantitative", "title": metric, "scale": {"zero": False}},
                         "color": {"field": "a", "type": "ordinal", "title": sw.axis,
                                   "scale": {"domain": list(sw.values)}},
                         "size": {"condition": {"test": pick, "value": 260}, "value": 60},
                         "strokeWidth": {"condition": {"test": pick, "value": 2}, "value": 0},
                         "opacity": {"condition": {"test": "datum.t == tile", "value": 1}, "value": 0.45}}}
    name = f"{step}: recorded tile sweep at " + ", ".join(f"{n}" for n in sizes) + ("" if sw.kind == "fusion" else "^3")
    spec = _spec([title or name, _recorded_when(sw.records), *_timing_note(sw.records)], controls, {"cells": rows},
                 [dots, _text_view("cells", pick, _lines(rows))])
    spec["params"].append({"name": "TILES", "value": list(tiles)})   # the tiles' names, for the axis labels

    def label_for(s: dict) -> list[str]:
        return sweep_label(sw, tiles[s["tile"]], s[sw.axis], s.get("N", sizes[0]))

    return _finish(Chart(spec, f"Static control: the recorded tile sweep of {step} ({len(sw.records)} configurations, "
                               f"{_recorded_when(sw.records)}); pick tiles and {sw.axis}"
                               + (" and N" if len(sizes) > 1 else "") + "; the chart rings the configuration and "
                               "shows its record.", controls, label_for,
                         {"fn": "sweep_twin", "kwargs": {"step": step, "size": list(sizes) if len(sizes) > 1 else sizes[0],
                                                         "axis": axis, "gpu": gpu, "title": title}}))


def register_tiling_twin(step: str = "sgemm/07_warptiling", size: int = 4096, axis: str = "BLOCK_K",
                         gpu: str | None = None) -> Chart:
    """Chapter 4: the recorded tuning sweep of sgemm/07 (block, warp and thread tiles) at size^3, with the
    register tile's shared loads per FMA (gemmlab.tiling) beside each record."""
    return sweep_twin(step, size, axis, gpu, title=f"Chapter 4: the tiles of {step}, recorded sweep at {size}^3")


def async_prefetch_twin(step: str = "sgemm/10_cp_async", size: int = 4096, axis: str | None = None,
                        gpu: str | None = None) -> Chart:
    """Chapter 6: the recorded sweep of a pipelined step (default: sgemm/10's NUM_STAGES and tiles)."""
    return sweep_twin(step, size, axis, gpu, title=f"Chapter 6: the stages and tiles of {step}, recorded at {size}^3")


def tensor_core_ladder_twin(step: str = "hgemm/07_cp_async", size: int = 8192, axis: str | None = None,
                            gpu: str | None = None) -> Chart:
    """Chapter 7b: the recorded tile sweeps of hgemm/06 and 07 at 8192 (default: 07's NUM_STAGES and tiles)."""
    return sweep_twin(step, size, axis, gpu, title=f"Chapter 7b: the tiles of {step}, recorded at {size}^3")


FUSION_GPU = "NVIDIA H200"   # the GPU whose recorded lane chapters 8 and 9 read


def fusion_twin(step: str = "fused/08_tile_flags", sizes: Sequence[int] = (512, 1024), axis: str | None = None,
                gpu: str | None = FUSION_GPU) -> Chart:
    """Chapters 8 and 9: a fused step's recorded tile sweep at 512 and 1024 (results/<gpu>.fusion.json through
    gemmlab.fusion): time, speed-up over a @ b @ c in the same run, grid. Steps 06 to 08 (Hopper) are chapter 9's."""
    chapter = 9 if int(step.split("/")[1][:2]) >= 6 else 8
    return sweep_twin(step, tuple(sizes), axis, gpu,
                      title=f"Chapter {chapter}: the tiles of {step}, recorded lane sweep at N = "
                            + ", ".join(str(n) for n in sizes))
