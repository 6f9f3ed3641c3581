"""The figures the four source documents quote, as data (the chapters call the documents seeds 000 to 003; in code,
"seed" means an RNG seed only): each `DocumentFigure` is one number a document states in its text, with its unit,
what it measured, on which GPU and where in the document it stands. This module is the one place they live:
`gemmlab.hardware.REFERENCE_MEASURED["t4"]` (seed 001's T4 rates and its ladder) is built from it, and
gemmlab.chapters.documents sets them beside our records in tables."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
