"""The source documents beside the course (the chapters call them seeds 000 to 003; in code, "seed" means an RNG
seed only): the figures the four documents quote, as data, and the small tables that set
them beside our own records (issue 39).

The course follows four documents, seeds 000 to 003 (README, "Credits"): a Chinese walkthrough of siboehm's SGEMM
worklog (000), a translation of Alex Armbruster's tensor-core HGEMM worklog (001), notes on the LeetGPU
matrix-multiplication ladder (002) and a post on fusing A x B x C (003). Each `SeedFigure` is one number a seed
states in its text: the value in the seed's own unit, what it measured, on which GPU, and where in the seed it
stands (a short description in English, not a quote). `says` keeps the seed's own hedge ("nearly 8x", "more than
6x", "about 50%"), so a table quotes the figure as loosely as the seed gave it.

This module is the one place these figures live: `gemmlab.hardware.REFERENCE_MEASURED["t4"]` (seed 001's T4 rates
and its ladder) is built from it. The tables (`table_000`, `table_001`, `table_002`) take the benchmark records a
chapter already holds (`gemmlab.benchmark(...)`: measured on a GPU, recorded without one) and put each seed figure
beside the record of our closest step; a step without a record shows as such, never as a number.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..measure import results


@dataclass(frozen=True)
class Document:
    number: int
    what: str
    gpu: str


@dataclass(frozen=True)
class DocumentFigure:
    """One figure as a seed states it."""

    document: int
    key: str
    value: float
    unit: str            # "% of cuBLAS", "x" (a speed-up over the previous kernel), "GFLOP/s", "GB/s"
    what: str            # what it measured
    gpu: str
    where: str           # where in the seed (a description, not a quote)
    size: int | None = None   # M = N = K, where the seed names it
    says: str = ""       # the seed's hedge: "nearly", "more than", "about"; "" where it gives the number plainly

    @property
    def approx(self) -> bool:
        return bool(self.says)

    def text(self, spec: str = "g") -> str:
        """The figure as the seed gives it: '0.39%', 'nearly 8x', 'about 50%', '650 GFLOP/s'."""
        number = format(self.value, spec)
        unit = {"% of cuBLAS": "%", "x": "x"}.get(self.unit, " " + self.unit)
        return f"{self.says + ' ' if self.says else ''}{number}{unit}"


DOCUMENTS = {
    0: Document(0, "Chinese walkthrough of siboehm's SGEMM worklog, part 1 (V1 to V3)", "Quadro K620"),
    1: Document(1, "Chinese translation of Alex Armbruster's tensor-core HGEMM worklog (six kernels)", "Tesla T4"),
    2: Document(2, "notes on the LeetGPU matrix-multiplication ladder (seven levels)", "Tesla V100"),
    3: Document(3, "post on fusing E = A x B x C against PyTorch's a @ b @ c", "an Ampere GPU (not named)"),
}

_K620, _T4, _V100 = DOCUMENTS[0].gpu, DOCUMENTS[1].gpu, DOCUMENTS[2].gpu

FIGURES: tuple[DocumentFigure, ...] = (
    # --- seed 000: siboehm's kernels 1 to 3, fp32, 4096 x 4096 x 4096 on a Quadro K620 (sm_50)
    DocumentFigure(0, "v1_pct", 0.39, "% of cuBLAS", "V1, the naive kernel (threadIdx.x walks down a column of C)",
               _K620, "V1 section, its measured results (also the summary's starting point)", 4096),
    DocumentFigure(0, "v2_pct", 2.0, "% of cuBLAS", "V2, global-memory coalescing (x and y swapped)", _K620,
               "V2 section, its measured results", 4096),
    DocumentFigure(0, "v2_gain", 8.0, "x", "V2 over V1", _K620, "V2 section, its measured results", 4096, "nearly"),
    DocumentFigure(0, "v3_pct", 16.0, "% of cuBLAS", "V3, shared-memory cache blocking (32 x 32 tiles)", _K620,
               "V3 section, its measured results (also the summary's end point)", 4096),
    DocumentFigure(0, "v3_gain", 6.0, "x", "V3 over V2", _K620, "V3 section, its measured results", 4096, "more than"),
    DocumentFigure(0, "v3_over_v1", 40.0, "x", "V3 over V1 (0.39% to 16% of cuBLAS)", _K620,
               "title and summary", 4096),
    DocumentFigure(0, "k620_gflops", 870.0, "GFLOP/s", "the K620's fp32 peak, for its roofline-style estimate", _K620,
               "V1's theoretical analysis"),
    DocumentFigure(0, "k620_gbps", 29.0, "GB/s", "the K620's memory bandwidth, for the same estimate", _K620,
               "V1's theoretical analysis"),
    # --- seed 001: Armbruster's HGEMM ladder, fp16 inputs, on a Tesla T4 (sm_75); the ladder at 8192 x 8192
    DocumentFigure(1, "dram_gbps", 220.0, "GB/s", "achievable DRAM bandwidth (68% of the 320 GB/s sheet), from a "
               "benchmarking paper (Jia et al. 2019)", _T4, "roofline section"),
    DocumentFigure(1, "smem_gbps", 3662.0, "GB/s", "best shared-memory bandwidth, from the same paper", _T4,
               "memory-hierarchy section"),
    DocumentFigure(1, "hmma_gflops", 49439.0, "GFLOP/s", "cuBLAS HGEMM throughput (HMMA.1688, tensor cores)", _T4,
               "roofline section, the author's own benchmark"),
    DocumentFigure(1, "ffma_gflops", 7455.0, "GFLOP/s", "cuBLAS SGEMM throughput (FFMA, CUDA cores)", _T4,
               "roofline section, the author's own benchmark"),
    DocumentFigure(1, "kernel1_pct", 8.0, "% of cuBLAS", "kernel 1, hierarchical tiling (block, warp, mma tiles)", _T4,
               "introduction and the end of kernel 1's section", 8192),
    DocumentFigure(1, "kernel2_gain", 3.0, "x", "kernel 2 (vectorized, unrolled global-to-shared copy) over kernel 1",
               _T4, "end of kernel 2's section", 8192, "about"),
    DocumentFigure(1, "kernel3_gain", 2.0, "x", "kernel 3 (XOR swizzle in place of bank conflicts) over kernel 2", _T4,
               "end of kernel 3's section", 8192, "about"),
    DocumentFigure(1, "kernel3_pct", 50.0, "% of cuBLAS", "kernel 3, XOR-swizzled shared tiles", _T4,
               "end of kernel 3's section", 8192, "about"),
    DocumentFigure(1, "kernel4_pct", 70.0, "% of cuBLAS", "kernel 4, the next block tile prefetched into registers", _T4,
               "end of kernel 4's section", 8192, "about"),
    DocumentFigure(1, "kernel5_gain", 1.2, "x", "kernel 5 (tuned tiles, cheaper swizzle index arithmetic) over kernel 4",
               _T4, "end of kernel 5's section", 8192),
    DocumentFigure(1, "kernel5_pct", 86.7, "% of cuBLAS", "kernel 5", _T4, "end of kernel 5's section", 8192),
    DocumentFigure(1, "kernel6_pct", 96.0, "% of cuBLAS", "kernel 6, shared-memory double buffering", _T4,
               "introduction and the list of kernels", 8192),
    # --- seed 002: the LeetGPU ladder's chart, GFLOP/s per level on a V100 (fp32; no size or method given)
    DocumentFigure(2, "level1_gflops", 5.0, "GFLOP/s", "level 1, a global-memory kernel (one thread per element)", _V100,
               "the ladder chart at the top"),
    DocumentFigure(2, "level2_gflops", 50.0, "GFLOP/s", "level 2, shared-memory tiling", _V100, "the ladder chart"),
    DocumentFigure(2, "level3_gflops", 300.0, "GFLOP/s", "level 3, bank conflicts removed by padding", _V100,
               "the ladder chart"),
    DocumentFigure(2, "level4_gflops", 500.0, "GFLOP/s", "level 4, float4 (128-bit) loads", _V100, "the ladder chart"),
    DocumentFigure(2, "level5_gflops", 650.0, "GFLOP/s", "level 5, register and occupancy tuning", _V100,
               "the ladder chart"),
    DocumentFigure(2, "level6_gflops", 1000.0, "GFLOP/s", "level 6, asynchronous copies and tensor-core (wmma) "
               "instructions", _V100, "the ladder chart"),
    DocumentFigure(2, "level7_gflops", 7000.0, "GFLOP/s", "level 7, cuBLAS / CUTLASS (tensor cores, hand-tuned "
               "assembly)", _V100, "the ladder chart"),
    DocumentFigure(2, "tile", 16.0, "threads", "edge of the tiled kernel's square block and tile (its bank-conflict "
               "example)", _V100, "shared-memory tiling and bank-conflict sections"),
    # --- seed 003: the fused three-matrix product
    DocumentFigure(3, "fused_speedup", 3.0, "x", "a fused E = A B C over PyTorch's a @ b @ c (two sgemm launches), "
               "fp32", DOCUMENTS[3].gpu, "title", 512),
)

_BY_KEY = {(f.document, f.key): f for f in FIGURES}


def figures(document: int | None = None) -> list[DocumentFigure]:
    """Every figure, or one seed's, in the seed's order."""
    return [f for f in FIGURES if document is None or f.document == document]


def figure(document: int, key: str) -> DocumentFigure:
    try:
        return _BY_KEY[(document, key)]
    except KeyError:
        raise KeyError(f"seed {document:03d} has no figure {key!r}; it has {[f.key for f in figures(document)]}") from None


def value(document: int, key: str) -> float:
    return figure(document, key).value


def t4_reference() -> dict[str, Any]:
    """Seed 001's achievable T4 rates and its HGEMM ladder, in the units gemmlab.hardware uses (TFLOP/s, GB/s):
    hardware.REFERENCE_MEASURED["t4"] is this dict."""
    return {
        "dram_gbps": value(1, "dram_gbps"),
        "smem_gbps": value(1, "smem_gbps"),
        "fp16_tensor_tflops": value(1, "hmma_gflops") / 1000,
        "fp32_tflops": value(1, "ffma_gflops") / 1000,
        "source": "Armbruster's cuBLAS runs; bandwidth from Jia et al. 2019",
        # kernel 1 at 8% of cuBLAS, about 3x from the 16-byte copies (kernel 2), about 2x more from removing the
        # ldmatrix bank conflicts (kernel 3: about 50%)
        "hgemm_ladder": {"kernel1_pct": value(1, "kernel1_pct"), "copy_speedup": value(1, "kernel2_gain"),
                         "swizzle_speedup": value(1, "kernel3_gain"), "kernel3_pct": value(1, "kernel3_pct")},
    }


# ------------------------------------------------------------------------------------------------ tables
@dataclass
class DocumentTable:
    """A seed's figures beside ours. `rows[i]["ours"]` is the benchmark record the row quotes (None where there is
    none); the shown cells are `rows[i]["cells"]`. Displays as Markdown in a notebook, as text in print()."""

    title: str
    columns: list[str]
    rows: list[dict]
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        def esc(s: str) -> str:
            return str(s).replace("|", "\\|")
        lines = [f"**{esc(self.title)}**", "", "| " + " | ".join(map(esc, self.columns)) + " |",
                 "|" + "|".join(" --- " for _ in self.columns) + "|"]
        lines += ["| " + " | ".join(esc(c) for c in r["cells"]) + " |" for r in self.rows]
        if self.notes:
            lines += [""] + [" ".join(self.notes)]
        return "\n".join(lines)

    def text(self) -> str:
        table = [self.columns] + [[str(c) for c in r["cells"]] for r in self.rows]
        widths = [max(len(row[i]) for row in table) for i in range(len(self.columns))]
        lines = [self.title] + ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
        return "\n".join(lines + [f"Note: {n}" for n in self.notes])

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        return self.text()

    __str__ = text


def _where(records: list[dict]) -> str:
    if not records:
        return "no record"
    r = records[0]
    return f"{r['gpu']}, {r.get('source', 'live')} {r['date']}"


def _pct(rec: dict | None) -> str:
    return f"{rec['pct_of_baseline']:.1f}%" if rec else "no record"


def _gain(rec: dict | None, prev: dict | None) -> str:
    if not (rec and prev):
        return "-"
    gain = rec["tflops"] / prev["tflops"]
    return f"{gain:.2f}x" if gain < 10 else f"{gain:.1f}x"


def _document_cell(document: int, key: str | None) -> str:
    return figure(document, key).text() if key and (document, key) in _BY_KEY else "not stated"


def _share(fraction: float) -> str:
    """0.000714 -> '0.071%', 0.0929 -> '9.3%', 1.0 -> '100%': two significant digits below 10%."""
    pct = 100 * fraction
    return f"{pct:.2g}%" if pct < 10 else f"{pct:.0f}%"


def table_000(records: list[dict], through: int = 3, size: int = 4096) -> DocumentTable:
    """Seed 000's V1 to V`through` as % of cuBLAS on its Quadro K620 beside our steps 01 to 0`through` on the GPU of
    `records` (chapters 2 and 3), each with its gain over the one before (the seed's gains as it states them)."""
    kernels = [("V1, naive", "v1_pct", None, "sgemm/01_naive"),
               ("V2, coalesced", "v2_pct", "v2_gain", "sgemm/02_coalesced"),
               ("V3, shared-memory tiles", "v3_pct", "v3_gain", "sgemm/03_smem_tiling")][:through]
    ours = [results.default_record(records, step, size) for *_, step in kernels]
    rows = []
    for i, ((label, pct, gain, step), rec) in enumerate(zip(kernels, ours)):
        prev = ours[i - 1] if i else None
        rows.append({"seed": {k: figure(0, k) for k in (pct, gain) if k}, "step": step, "ours": rec,
                     "cells": [label, figure(0, pct).text(), figure(0, gain).text() if gain else "-",
                               step, _pct(rec), _gain(rec, prev) if i else "-"]})
    found = [r for r in ours if r]
    notes = []
    if through >= 3:
        v1, v2, v3 = (figure(0, k) for k in ("v1_pct", "v2_pct", "v3_pct"))
        g2, g3 = figure(0, "v2_gain"), figure(0, "v3_gain")
        notes.append(f"The seed's percentages and its stated gains do not multiply out ({v1.text()} x {g2.value:g} "
                     f"is {v1.value * g2.value:.1f}%, not {v2.text()}; {v3.text()} / {v2.text()} is "
                     f"{v3.value / v2.value:g}x, where it says {g3.text()}): each is quoted as it is given.")
    return DocumentTable(f"Seed 000 on the {DOCUMENTS[0].gpu} beside ours on the {_where(found)}, {size}^3, fp32",
                     ["seed 000", "% of cuBLAS", "gain", "our step", "% of cuBLAS", "gain"], rows, notes)


def table_001(records: list[dict], through: int = 3, size: int = 8192) -> DocumentTable:
    """Seed 001's kernels 1 to `through` on its T4 beside our hgemm steps 01 to 0`through` (chapter 7; 7b goes on
    to kernels 4 to 6): % of cuBLAS fp16 and the gain over the previous kernel, at 8192."""
    kernels = [("1, hierarchical tiling", "kernel1_pct", None, "hgemm/01_mma_tiling"),
               ("2, 16-byte copies", None, "kernel2_gain", "hgemm/02_vectorized_copy"),
               ("3, XOR swizzle", "kernel3_pct", "kernel3_gain", "hgemm/03_swizzled"),
               ("4, register prefetch", "kernel4_pct", None, "hgemm/04_register_prefetch"),
               ("5, tuned tiles", "kernel5_pct", "kernel5_gain", "hgemm/05_tuned_tiles"),
               ("6, double buffering", "kernel6_pct", None, "hgemm/06_double_buffer")][:through]
    ours = [results.default_record(records, step, size) for *_, step in kernels]
    rows = []
    for i, ((label, pct, gain, step), rec) in enumerate(zip(kernels, ours)):
        prev = ours[i - 1] if i else None
        rows.append({"seed": {k: figure(1, k) for k in (pct, gain) if k}, "step": step, "ours": rec,
                     "cells": [f"kernel {label}", _document_cell(1, pct), _document_cell(1, gain) if i else "-",
                               step, _pct(rec), _gain(rec, prev) if i else "-"]})
    found = [r for r in ours if r]
    notes = ["'not stated': the seed gives that figure only in a table image, not in its text."]
    return DocumentTable(f"Seed 001 on the {DOCUMENTS[1].gpu} beside ours on the {_where(found)}, {size}^3, fp16 inputs",
                     ["seed 001", "% of cuBLAS", "gain", "our step", "% of cuBLAS", "gain"], rows, notes)


# Seed 002's levels and our closest step (None: no step of ours does that level's change alone)
LEVELS_002 = [
    ("1, global-memory kernel", "sgemm/02_coalesced"),  # its kernel lets threadIdx.x walk a row: our step 02's mapping
    ("2, shared-memory tiling", "sgemm/03_smem_tiling"),
    ("3, padding against bank conflicts", None),         # step 03's reads have no conflict to pad (chapter 5)
    ("4, float4 loads", "sgemm/06_vectorized"),
    ("5, registers and occupancy", "sgemm/07_warptiling"),
    ("6, async copies and tensor cores", "sgemm/12_tf32x3"),
    ("7, cuBLAS / CUTLASS", "cuBLAS"),
]


def table_002(records: list[dict], size: int = 4096) -> DocumentTable:
    """Seed 002's ladder as it charts it (GFLOP/s per level on a V100, and each as a share of its top bar) beside
    our closest fp32 step on the GPU of `records`: TFLOP/s and % of cuBLAS at `size` (chapter 4). The last row's
    record is the one whose cuBLAS (`baseline_tflops`, measured in the same run) it shows."""
    top = value(2, "level7_gflops")
    steps = [s for _, s in LEVELS_002 if s and s != "cuBLAS"]
    present = [r for r in (results.default_record(records, s, size) for s in steps) if r]
    rows = []
    for i, (label, step) in enumerate(LEVELS_002, start=1):
        document = figure(2, f"level{i}_gflops")
        if step == "cuBLAS":
            rec = present[-1] if present else None
            ours = [f"cuBLAS (in {rec['step']}'s run)" if rec else "cuBLAS",
                    f"{rec['baseline_tflops']:.1f}" if rec else "no record",
                    "100%" if rec else "-"]
        elif step is None:
            rec = None
            ours = ["no step of its own (chapter 5)", "-", "-"]
        else:
            rec = results.default_record(records, step, size)
            ours = [step, f"{rec['tflops']:.2f}" if rec else "no record", _pct(rec)]
        rows.append({"seed": {document.key: document}, "step": step, "ours": rec, "baseline": step == "cuBLAS",
                     "cells": [label, f"{document.value:g}", _share(document.value / top), *ours]})
    notes = ["The seed gives no size, precision setting or method for its chart; its bars are read as drawn.",
             "Our register tiling (steps 04 and 05) has no level of its own there; level 6 is chapter 6's step 12."]
    return DocumentTable(f"Seed 002's ladder on a {DOCUMENTS[2].gpu} beside ours on the {_where(present)}, {size}^3, fp32",
                     ["seed 002 level", "GFLOP/s", "of its top bar", "our step", "TFLOP/s", "% of cuBLAS"], rows,
                     notes)
