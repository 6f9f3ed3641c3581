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

from ..measure import results
from ..measure.document_figures import (DOCUMENTS, FIGURES, Document, DocumentFigure,  # noqa: F401 (documents.X)
                                        figure, figures, t4_reference, value)


_BY_KEY = {(f.document, f.key): f for f in FIGURES}


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
        notes.append("The seed's figures are quoted as it gives them.")
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
