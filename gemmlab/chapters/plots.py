"""Figures every chapter shares: the roofline, and kernels placed on it."""
from __future__ import annotations

from typing import Iterable, Sequence

from ..measure import hardware
from ..measure.hardware import GpuSpec
import numpy as np
import matplotlib.pyplot as plt

# One colour per ceiling, the same in every chapter.
COLOURS = {"fp32": "tab:blue", "fp16_tensor": "tab:orange", "dram": "0.3", "point": "tab:red"}


def _resolve(gpu: str | GpuSpec | None) -> GpuSpec:
    """The spec for `gpu`; None means the reader's GPU if it is in the table, else the T4."""
    if gpu is None:
        info = hardware.device_info()
        gpu = info["name"] if info else "t4"
    spec = hardware.spec_for(gpu)
    if spec is None:
        known = ", ".join(s.name for s in hardware.SPECS.values())
        raise ValueError(f"no spec sheet for GPU {gpu!r}; pass one of: {known} (or a GpuSpec)")
    return spec


def roofline(ax, gpu: str | GpuSpec | None = None,
             points: Iterable[Sequence] = (), *, measured: bool = True,
             xlim: tuple[float, float] = (0.0625, 4096.0)):
    """Draw the roofline of `gpu` on `ax` and place `points` on it; returns `ax`.

    `points` holds (label, intensity in FLOP/byte, throughput in TFLOP/s) tuples, e.g. one per
    kernel step. Solid lines are spec-sheet peaks; dashed lines (when `measured`) are measured
    ceilings, recorded by this course or published (see :func:`gemmlab.hardware.achievable`).
    The measured compute ceilings are cuBLAS's rates (the fastest GEMM call anyone measured on that GPU,
    not the hardware's), the measured bandwidth a device-to-device copy's; the legend says so.
    Log-log axes, so a kernel twice as fast sits the same distance higher anywhere on the plot.
    """
    spec = _resolve(gpu)
    points = _finite(points)
    x = np.geomspace(*xlim, 400)

    def ceiling(tflops: float, gbps: float, colour: str, label: str, style: str) -> None:
        ridge = hardware.balance_point(tflops, gbps)
        ax.plot(x, np.minimum(tflops, gbps * 1e9 * x / 1e12), style, color=colour, lw=2,
                label=f"{label}: {tflops:g} TFLOP/s, balance {ridge:.0f} FLOP/B")
        ax.plot([ridge], [tflops], "o", color=colour, ms=4)

    ceiling(spec.fp16_tensor_tflops, spec.dram_gbps, COLOURS["fp16_tensor"],
            "fp16 tensor (spec)", "-")
    ceiling(spec.fp32_tflops, spec.dram_gbps, COLOURS["fp32"], "fp32 FFMA (spec)", "-")
    meas = hardware.achievable(spec) if measured else None
    if meas:
        ceiling(round(meas["fp16_tensor_tflops"], 1), meas["dram_gbps"], COLOURS["fp16_tensor"],
                "cuBLAS fp16 (measured)", "--")
        ceiling(round(meas["fp32_tflops"], 1), meas["dram_gbps"], COLOURS["fp32"],
                "cuBLAS fp32 (measured)", "--")

    for label, intensity, tflops in points:
        ax.plot([intensity], [tflops], "D", color=COLOURS["point"], ms=6, zorder=5)
        ax.annotate(str(label), (intensity, tflops), textcoords="offset points", xytext=(6, -10),
                    fontsize=8, color=COLOURS["point"])

    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=10)
    ax.set_xlim(*xlim)
    ax.set_ylim(bottom=min([0.01] + [p[2] / 2 for p in points]),
                top=spec.fp16_tensor_tflops * 2)
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
    ax.set_ylabel("throughput (TFLOP/s)")
    bw = f"DRAM {spec.dram_gbps:g} GB/s spec"
    if meas:
        bw += f", {meas['dram_gbps']:.0f} GB/s measured"
    ax.set_title(f"Roofline of the {spec.name} ({bw})", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    if meas:
        ax.text(0.01, 0.99, f"dashed: cuBLAS and a copy, {meas['label']}", transform=ax.transAxes, fontsize=6,
                va="top", color="0.35")
    return ax


def _finite(points: Iterable[Sequence]) -> list[Sequence]:
    """The points with a positive throughput (a missing measurement is skipped, not plotted)."""
    return [p for p in points if p[2] and p[2] > 0]


def ladder(records: Sequence[dict], steps: Sequence[str], ax=None, *, size: int | None = None,
           title: str | None = None):
    """A ladder: TFLOP/s of each step in `steps` (in that order) at one size, with cuBLAS's band; returns `ax`.

    `records` come from one benchmark run (gemmlab.benchmark): each holds the cuBLAS rate measured beside the
    step, so the band (lowest to highest cuBLAS rate over the run's records at that size) is cuBLAS's run-to-run
    range, and each bar is labelled with its % of cuBLAS. `size` defaults to the largest size in the records.
    The title names the GPU, the size and cuBLAS's own median rate.
    """
    recs = [r for r in records if r.get("step") in steps]
    if not recs:
        raise ValueError(f"no records of {', '.join(steps)}; benchmark them first (gemmlab.benchmark)")
    size = size or max(r["m"] for r in recs)
    at = {r["step"]: r for r in recs if r["m"] == size}
    shown = [s for s in steps if s in at]
    if ax is None:
        _, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(shown) + 2), 3.6))
    base = [at[s]["baseline_tflops"] for s in shown]
    lo, hi, mid = min(base), max(base), float(np.median(base))
    ax.axhspan(lo, hi if hi > lo else lo * 1.002, color="0.85", zorder=0,
               label=f"cuBLAS ({at[shown[0]]['baseline']}), run-to-run: {lo:.1f}-{hi:.1f} TFLOP/s")
    ax.axhline(mid, color="0.4", lw=1, ls="--", zorder=1)
    tflops = [at[s]["tflops"] for s in shown]
    bars = ax.bar(range(len(shown)), tflops, color="tab:blue", zorder=2)
    for bar, s in zip(bars, shown):
        ax.annotate(f"{at[s]['pct_of_baseline']:.0f}%", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    textcoords="offset points", xytext=(0, 2), ha="center", fontsize=8)
    ax.set_xticks(range(len(shown)), [s.split("/", 1)[-1] for s in shown], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s")
    ax.set_ylim(0, max(tflops + [hi]) * 1.15)
    r0 = at[shown[0]]
    ax.set_title(title or f"{r0['gpu']}, M = N = K = {size} ({r0.get('date', '')}): cuBLAS {mid:.1f} TFLOP/s",
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, axis="y", alpha=0.3)
    return ax


def pct_by_size(ax, records: Sequence[dict], steps: Sequence[str], ylabel: str = "% of cuBLAS", top: float = 100):
    """Each step's % of cuBLAS against the size (log2 axis), one line per step, from one run's records; returns `ax`."""
    for name in steps:
        rows = sorted((r for r in records if r["step"] == name), key=lambda r: r["m"])
        ax.plot([r["m"] for r in rows], [r["pct_of_baseline"] for r in rows], "o-", label=name.split("/")[-1])
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M = N = K")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, top)
    return ax
