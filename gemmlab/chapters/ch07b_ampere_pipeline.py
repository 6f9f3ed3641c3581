"""Chapter 7b, the tensor-core pipeline on Ampere: hgemm/04 to 07 and 3xTF32 (sgemm/12), and why mma.sync stops.

The chapter's record wrangling, glue() calls, figures and tables, one function per figure; the notebook
(book/07b_tensor_core_ladder.ipynb) calls each once. Every number comes from results/ (live on a GPU).
"""
from __future__ import annotations

import collections
import csv
import gzip
import re

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
import numpy as np

import gemmlab
from gemmlab import hardware, nvrtc, profile
from gemmlab.chapters import pipeline, plots
from gemmlab.chapters.glue import glue
from gemmlab.measure.check import compare, make_inputs
from gemmlab.measure.results import INTERLEAVED_SINCE
from gemmlab.runtime.source import REPO

NAMES = ["hgemm/01_mma_tiling", "hgemm/02_vectorized_copy", "hgemm/03_swizzled", "hgemm/04_register_prefetch",
         "hgemm/05_tuned_tiles", "hgemm/06_double_buffer", "hgemm/07_cp_async"]
STEPS = NAMES[2:]  # this chapter's ladder: step 03 (chapter 7's last) to 07
INTEGER_OPS = ["IMAD", "IADD3", "LOP3", "SHF", "LEA", "ISETP", "IMNMX", "SEL", "MOV"]


STEP07_LINE_OFFSET = {"commit": 0.0, "wait_group": -0.07, "barrier": 0.07}  # step 07's picture: lines apart


def records() -> tuple[list, dict]:
    """The chapter's records (live on a GPU): hgemm/01 to 07 against cuBLAS fp16; glues each step's % at 8192."""
    sizes = gemmlab.bench.live_sizes([1024, 2048, 4096, 8192, 16384], steps=NAMES, dtype="float16")
    recs = gemmlab.benchmark(NAMES, sizes=sizes, verbose=False)
    at = {(r["step"], r["m"]): r for r in recs}
    for name in STEPS:
        if (name, 8192) in at:
            v = int(name.split("/")[1][:2])
            glue(f"ch7b_v{v}_pct", at[(name, 8192)]["pct_of_baseline"])
            glue(f"ch7b_v{v}_tflops", at[(name, 8192)]["tflops"])
            glue(f"ch7b_v{v}_cublas", at[(name, 8192)]["baseline_tflops"])
    glue("ch7b_gpu", recs[0]["gpu"] if recs else hardware.NO_DATA)
    return recs, at


def ceilings(at: dict, size: int = 8192) -> tuple[dict, dict]:
    """The instruction ceilings (kernels/probe/peak.cu): FFMA, mma.m16n8k8 and m16n8k16, beside cuBLAS fp16.

    cuBLAS is the ladder's own run at `size` (the median of the rates timed beside steps 03 to 07, `at` from
    records(): the same calls as the ladder figure's band and dashed line), so the text and the figure quote one
    cuBLAS figure.
    """
    peaks = hardware.measure_peaks()
    base = [r["baseline_tflops"] for (name, m), r in at.items() if m == size and name in STEPS]  # the figure's calls
    cublas = {"fp16": {"tflops": float(np.median(base)), "size": size}} if base else {}
    if peaks.get("ffma") and cublas:
        where = f"{peaks['gpu']} ({peaks['source']}, {peaks['date']})"
        glue("ch7b_peak_where", where)
        for key in ("ffma", "mma_m16n8k8", "mma_m16n8k16"):
            glue(f"ch7b_peak_{key}", peaks[key]["tflops"] if peaks.get(key) else float("nan"))
        fp16 = cublas["fp16"]["tflops"]
        glue("ch7b_cublas_fp16", fp16)
        for key in ("mma_m16n8k8", "mma_m16n8k16"):
            if peaks.get(key):
                glue(f"ch7b_{key}_of_cublas", 100 * peaks[key]["tflops"] / fp16)
        print(f"instruction ceilings on the {where}:")
        for key in ("ffma", "mma_m16n8k8", "mma_m16n8k16"):
            print(f"  {key:14s} {peaks[key]['tflops']:7.1f} TFLOP/s" if peaks.get(key) else f"  {key:14s} not available")
        print(f"  cuBLAS fp16    {fp16:7.1f} TFLOP/s (at {size}: the median of the cuBLAS calls timed beside steps"
              f" 03 to 07 of the ladder's run, {min(base):.0f} to {max(base):.0f}: the ladder figure's dashed line and band)")
        glue("ch7b_cublas_lo", min(base)); glue("ch7b_cublas_hi", max(base))
    else:
        for key in ("peak_where", "peak_ffma", "peak_mma_m16n8k8", "peak_mma_m16n8k16", "cublas_fp16",
                    "mma_m16n8k8_of_cublas", "mma_m16n8k16_of_cublas"):
            glue(f"ch7b_{key}", hardware.NO_DATA if key == "peak_where" else float("nan"))
        print(hardware.NO_DATA)
    return peaks, cublas


def top_stall(name: str, key: str) -> None:
    """The profiler's leading stalls of one step (recorded, one launch at 8192); glues the top one under `key`."""
    m = profile.load().get(name)
    if not m:
        print(f"{name}: no recorded profiler data")
        return
    reasons = profile.stall_reasons(m, top=4)
    tensor = m.get("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", float("nan"))
    print(f"{name}: tensor pipe busy {tensor:4.1f}% | stalls per issued instruction: "
          + ", ".join(f"{r} {v:.2f}" for r, v in reasons))
    glue(f"ch7b_{key}_stall", reasons[0][0]); glue(f"ch7b_{key}_stall_v", reasons[0][1])
    glue(f"ch7b_{key}_stall2", reasons[1][0]); glue(f"ch7b_{key}_tensor", tensor)


PROFILE_GPU = "NVIDIA H200"  # the GPU whose profiler record holds steps 04 to 07 (one run, 2026-11-29)
PROFILED = {"04": "hgemm/04_register_prefetch", "05": "hgemm/05_tuned_tiles", "06": "hgemm/06_double_buffer",
            "07": "hgemm/07_cp_async"}
STALL_COLUMNS = ["short_scoreboard", "wait", "barrier", "mio_throttle", "math_pipe_throttle"]
MMA_MACS = {"hgemm/07_cp_async": 16 * 8 * 16}  # multiply-adds per HMMA: m16n8k16 in step 07, m16n8k8 before


def hmma_executed(name: str, size: int) -> float:
    """Warp-level HMMA instructions a step executes on a size^3 product: every multiply-add once, MMA_M x MMA_N x
    MMA_K of them per instruction (the mma shapes of the steps, not a counter)."""
    return size ** 3 / MMA_MACS.get(name, 16 * 8 * 8)


def profile_steps(size: int = 8192) -> dict:
    """Steps 04 to 07 as one profiler run saw them (results/nvidia-h200.ncu.json, one launch each at `size`): kernel
    time, warp instructions executed (HMMA among them, from the mma shape), issue-active share, warps and blocks
    per SM, tensor-pipe share and the stalls per issued instruction the prose discusses; glues each figure."""
    data = profile.load(PROFILE_GPU)
    rows = {}
    for v, name in PROFILED.items():
        m = data.get(f"{name}@{size}")
        if not m:
            continue
        stalls = dict(profile.stall_reasons(m, top=40))
        rows[v] = {"ms": m["gpu__time_duration.sum"] / 1e6, "inst": m["smsp__inst_executed.sum"] / 1e6,
                   "hmma": hmma_executed(name, size) / 1e6, "ldsm": m["smsp__inst_executed_op_ldsm.sum"] / 1e6,
                   "issue": m["smsp__issue_active.avg.pct_of_peak_sustained_active"],
                   "warps": m["sm__warps_active.avg.per_cycle_active"],
                   "blocks": min(m[f"launch__occupancy_limit_{w}"] for w in ("blocks", "registers", "shared_mem", "warps")),
                   "threads": m["launch__block_size"],
                   "tensor": m["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"],
                   "dram_mb": m["dram__bytes_read.sum"] / 1e6,
                   **{s: stalls.get(s, 0.0) for s in STALL_COLUMNS}}
    if not rows:
        print(f"no recorded profile of steps 04 to 07 at {size} on the {PROFILE_GPU}")
        return rows
    print(f"Nsight Compute, one launch each at {size} on the {PROFILE_GPU} (results/nvidia-h200.ncu.json, one run):")
    head = ["ms", "inst M", "HMMA M", "LDSM M", "issue%", "warps", "blocks", "tensor%", "DRAM MB"] + [
        {"short_scoreboard": "short_sb", "math_pipe_throttle": "math_thr", "mio_throttle": "mio_thr"}.get(s, s)
        for s in STALL_COLUMNS]
    print("step " + "".join(f"{h:>9s}" for h in head) + "   (stalls: per issued instruction)")
    for v, r in rows.items():
        cells = [f"{r['ms']:.3f}", f"{r['inst']:.0f}", f"{r['hmma']:.0f}", f"{r['ldsm']:.0f}", f"{r['issue']:.1f}",
                 f"{r['warps']:.1f}", f"{r['blocks']:.0f}x{r['threads'] // 32:.0f}", f"{r['tensor']:.1f}",
                 f"{r['dram_mb']:.0f}"] + [f"{r[s]:.2f}" for s in STALL_COLUMNS]
        print(f"{v:5s}" + "".join(f"{c:>9s}" for c in cells))
    glue("ch7b_prof_gpu", PROFILE_GPU)
    for v, r in rows.items():
        for k in ("ms", "inst", "hmma", "issue", "tensor", "dram_mb", *STALL_COLUMNS):
            glue(f"ch7b_p{v}_{k}", r[k])
        glue(f"ch7b_p{v}_other", r["inst"] - r["hmma"])
    if {"04", "05", "06", "07"} <= rows.keys():
        r4, r5, r6, r7 = rows["04"], rows["05"], rows["06"], rows["07"]
        glue("ch7b_p05_inst_cut_pct", 100 * (1 - r5["inst"] / r4["inst"]))
        # step 04's DRAM read rate: the bytes it read over its kernel time, against the spec's bandwidth
        dram_tbs = r4["dram_mb"] / r4["ms"] / 1e3
        glue("ch7b_p04_dram_tbs", dram_tbs)
        glue("ch7b_p04_dram_pct", 100 * dram_tbs * 1e3 / hardware.spec_for(PROFILE_GPU).dram_gbps)
        glue("ch7b_prof_dram_gbps", hardware.spec_for(PROFILE_GPU).dram_gbps)
        glue("ch7b_p07_gain_pct", 100 * (r6["ms"] / r7["ms"] - 1))
        glue("ch7b_p07_other_more", r7["inst"] - r7["hmma"] - (r6["inst"] - r6["hmma"]))
        # tensor-pipe time: the share of the kernel's cycles the pipe is busy, times the kernel's time
        glue("ch7b_p06_tensor_ms", r6["tensor"] / 100 * r6["ms"]); glue("ch7b_p07_tensor_ms", r7["tensor"] / 100 * r7["ms"])
    return rows


def sass_order(names=("hgemm/03_swizzled", "hgemm/04_register_prefetch")) -> None:
    """The order of global loads, shared stores, barriers, ldmatrix and HMMA in each step's sm_75 SASS."""
    for name in names:
        order = nvrtc.memory_order(gemmlab.instance(name).sass("sm_75"), ("LDG", "STS", "BAR", "LDSM", "HMMA"))
        print(f"{name:27s} {order[:110]} ...")


TILES = [(64, 64), (128, 64), (128, 128), (256, 128), (256, 256)]


def tile_bounds(gpu: str | None = None) -> dict:
    """Each block tile's FLOP per byte loaded (BM·BN/(BM+BN)) and its DRAM-only bound on `gpu` (the records' GPU,
    H100 by default): FLOP/B x the spec's DRAM bandwidth, in TFLOP/s (every byte from DRAM, none from L2)."""
    spec = hardware.spec_for(gpu or "H100")
    return {(bm, bn): {"flop_per_byte": bm * bn / (bm + bn),
                       "dram_tflops": bm * bn / (bm + bn) * spec.dram_gbps * 1e9 / 1e12}
            for bm, bn in TILES} | {"spec": spec}


def tile_intensity(peaks: dict, at: dict | None = None, size: int = 8192) -> dict:
    """The prediction for step 05: FLOP per byte loaded of each block tile and its DRAM-only bound (FLOP/B x the
    GPU's DRAM bandwidth), against the balance points; step 04's measured rate beside its tile's bound, and step
    05's prediction (its tile's DRAM-only bound, below the mma.m16n8k8 ceiling). Glues what the prose quotes."""
    for gpu in ("T4", peaks.get("gpu") or "H100"):
        spec = hardware.spec_for(gpu)
        if spec:
            print(f"{spec.name}: tensor-core balance point "
                  f"{hardware.balance_point(spec.fp16_tensor_tflops, spec.dram_gbps):.0f} FLOP/B (DRAM, spec)")
    b = tile_bounds(peaks.get("gpu"))
    spec = b.pop("spec")
    print(f"DRAM-only bound on the {spec.name} = FLOP/B x {spec.dram_gbps:.0f} GB/s (spec; every byte from DRAM):")
    for (bm, bn), v in b.items():
        print(f"block tile {bm:3d} x {bn:3d}: {v['flop_per_byte']:6.1f} FLOP per byte loaded, "
              f"DRAM-only bound {v['dram_tflops']:4.0f} TFLOP/s")
    b04, b05 = b[(128, 128)]["dram_tflops"], b[(256, 128)]["dram_tflops"]
    glue("ch7b_bound_128", b04); glue("ch7b_bound_256", b05); glue("ch7b_dram_gbps", spec.dram_gbps)
    out = {"bound_04": b04, "bound_05": b05}
    r4 = (at or {}).get(("hgemm/04_register_prefetch", size))
    ceiling = peaks.get("mma_m16n8k8", {}).get("tflops") if peaks.get("mma_m16n8k8") else None
    if r4:
        pred = min(b05, ceiling) if ceiling else b05
        print(f"step 04 (128 x 128) measured {r4['tflops']:.0f} TFLOP/s at {size}, "
              f"{r4['tflops'] / b04:.2f}x its tile's DRAM-only bound: part of its data come from L2")
        print(f"prediction for step 05 (256 x 128): the DRAM-only model allows {pred:.0f} TFLOP/s"
              + (f" (below the mma_m16n8k8 ceiling, {ceiling:.0f})" if ceiling else ""))
        glue("ch7b_v4_over_bound", r4["tflops"] / b04); glue("ch7b_pred_05", pred)
        out |= {"tflops_04": r4["tflops"], "pred_05": pred}
    return out


def integer_ops() -> None:
    """Integer instructions per HMMA: step 04 with step 05's tiles against step 05 (sm_75 SASS of this NVRTC)."""
    same_tiles = gemmlab.instance("hgemm/05_tuned_tiles").params
    for label, inst in [("04 with 05's tiles", gemmlab.instance("hgemm/04_register_prefetch", **same_tiles)),
                        ("05", gemmlab.instance("hgemm/05_tuned_tiles"))]:
        counts = nvrtc.count_instructions(inst.sass("sm_75"), INTEGER_OPS + ["HMMA", "LDSM"])
        integer = sum(counts[op] for op in INTEGER_OPS)
        print(f"{label:19s} HMMA {counts['HMMA']:4d}  LDSM {counts['LDSM']:3d}  integer {integer:4d} "
              f"({integer / counts['HMMA']:.2f} per HMMA), registers {inst.resources('sm_75').registers}")


def instruction_counts() -> None:
    """HMMA, LDSM, LDGSTS (cp.async), LDG and BAR in steps 06 and 07's SASS: static counts over the whole kernel
    (instructions in the code, not executed); step 07's LDG all sit in its fallback copy for unaligned shapes."""
    for name, arch in [("hgemm/06_double_buffer", "sm_75"), ("hgemm/07_cp_async", "sm_80")]:
        sass = gemmlab.instance(name).sass(arch)
        c = nvrtc.count_instructions(sass, ["HMMA", "LDSM", "LDGSTS", "LDG", "BAR"])
        print(f"{name:24s} {arch}: " + ", ".join(f"{op} {n}" for op, n in c.items()))
        v = name.split("/")[1][:2]
        glue(f"ch7b_ldg{v}", c["LDG"])
        glue(f"ch7b_ldg{v}_u16", sum(" LDG.E.U16" in line for line in sass.splitlines()))
        glue(f"ch7b_ldg{v}_128", sum(" LDG.E.128" in line for line in sass.splitlines()))


def ladder(recs: list, at: dict, peaks: dict, cublas: dict) -> None:
    """The ladder in TFLOP/s at 8192 (cuBLAS's band) with the mma.sync ceilings in TFLOP/s, and % of cuBLAS by size."""
    fig, (bars, ax) = plt.subplots(1, 2, figsize=(13, 4))
    plots.ladder(recs, STEPS, ax=bars, size=8192)
    for key, style in (("mma_m16n8k8", ":"), ("mma_m16n8k16", "--")):
        if peaks.get(key):  # m16n8k16 needs sm_80: a T4 has no such ceiling
            y = peaks[key]["tflops"]
            bars.axhline(y, ls=style, color="tab:red", lw=1)
            bars.annotate(f"{key} peak {y:.0f} TFLOP/s", (0, y), fontsize=7, xytext=(0, 3), textcoords="offset points",
                          xycoords=("axes fraction", "data"))
    if peaks.get("mma_m16n8k16"):
        bars.set_ylim(0, 1.08 * max(bars.get_ylim()[1], peaks["mma_m16n8k16"]["tflops"]))
    plots.pct_by_size(ax, recs, NAMES, "% of cuBLAS fp16 (same run, each size)", top=110)
    ax.legend(fontsize=7)
    plt.tight_layout(); plt.show()


def sweeps() -> None:
    """The recorded sweeps of steps 06 and 07 at 8192 (every point verified first): the best five of each."""
    for name in ("hgemm/06_double_buffer", "hgemm/07_cp_async"):
        sweep = sorted(gemmlab.results.one_gpu([r for r in gemmlab.results.load()
                                                if r["step"] == name and r["m"] == 8192]),
                       key=lambda r: -r["pct_of_baseline"])
        print(f"{name}: {len(sweep)} configurations recorded at 8192, best five:")
        for r in sweep[:5]:
            p = r["params"]
            print(f"  {r['pct_of_baseline']:5.1f}%  BLOCK {p['BLOCK_M']}x{p['BLOCK_N']}x{p['BLOCK_K']}  "
                  f"WARP {p['WARP_M']}x{p['WARP_N']}" + (f"  NUM_STAGES {p['NUM_STAGES']}" if "NUM_STAGES" in p else "")
                  + f"  ({r['date']})")
        print("  " + gemmlab.results.timing_note(sweep))


DECOMPOSITION = "decomposition 3"  # the lab's run that timed the whole loop and both halves together (two repeats each)


def loop_halves() -> dict:
    """Step 07's loop taken apart (results/experiments/hgemm-diagnosis, one run: DECOMPOSITION): µs per block tile
    on one SM for its copies alone (s07_copyonly), its ldmatrix + mma alone (s07_nocopy) and the whole loop
    (s07_pipe), from each variant's median TFLOP/s at 8192; the whole loop as a share of the sum of its halves, what
    full overlap (the slower half alone) would give, and the share of the possible overlap that happens."""
    diag = gemmlab.results.experiment("hgemm-diagnosis")
    sms = hardware.spec_for(diag["gpu"]).sms
    p = gemmlab.instance("hgemm/07_cp_async").params
    tile_flops = 2 * p["BLOCK_M"] * p["BLOCK_N"] * p["BLOCK_K"]
    g = gemmlab.results.group(diag, DECOMPOSITION)
    tf = {k: gemmlab.results.tflops(g, k, 8192) for k in ("s07_copyonly", "s07_nocopy", "s07_pipe")}
    us = {k: tile_flops / (v * 1e12 / sms) * 1e6 for k, v in tf.items()}
    copy, math, whole = us["s07_copyonly"], us["s07_nocopy"], us["s07_pipe"]
    total, slower = copy + math, max(copy, math)
    watts = {r["variant"]: r for r in diag["power"]["rows"]}
    return {"gpu": diag["gpu"], "date": diag["date"], "params": p, "tflops": tf, "us": us,
            "whole_of_sum_pct": 100 * whole / total, "full_overlap_of_sum_pct": 100 * slower / total,
            "overlap_pct": 100 * (total - whole) / (total - slower), "whole_over_slower": whole / slower,
            "power": watts, "limit_w": diag["power"]["limit_w"]}


def why_it_stops() -> None:
    """The lab's measured reason step 07 stops: its two halves, timed alone in one run, overlap only in part when
    they run together; the board's power draw and clocks beside them (a minor factor: counted in cycles at each run's
    clock, the whole loop's share of the sum of its halves moves by a point or so). Glues what the prose quotes."""
    h = loop_halves()
    pw = h["power"]
    clock = {"s07_copyonly": pw["s07_copyonly"]["sm_mhz"], "s07_nocopy": pw["s07_nocopy"]["sm_mhz"],
             "s07_pipe": pw["s07_base"]["sm_mhz"]}
    print(f"{h['gpu']}, the lab kernel s07_pipe at 8192 (step 07 with fragments pipelined, {_config(h['params'])}; "
          f"not step 07 itself), one run of {h['date']}:")
    print(f"  {'':28s} {'µs per block tile':>17s}  TFLOP/s  clock (power run)")
    for k, label in (("s07_copyonly", "copies, waits, barrier only"), ("s07_nocopy", "ldmatrix + mma only"),
                     ("s07_pipe", "the whole loop")):
        print(f"  {label:28s} {h['us'][k]:17.3f}  {h['tflops'][k]:7.0f}  {clock[k]:5.0f} MHz"
              + (" (step 07's; s07_pipe has no power row)" if k == "s07_pipe" else ""))
    print(f"  whole loop: {h['whole_of_sum_pct']:.0f}% of the sum of the halves; full overlap would give "
          f"{h['full_overlap_of_sum_pct']:.0f}%: {h['overlap_pct']:.0f}% of the possible overlap happens")
    print(f"back to back for 4 s each (nvidia-smi), power limit {h['limit_w']} W:")
    for v, label in (("s07_copyonly", "copies only"), ("s07_nocopy", "ldmatrix + mma only"),
                     ("s07_noldsm", "mma only (no ldmatrix)"), ("s07_copymma", "copies + mma"),
                     ("s07_base", "step 07")):
        print(f"  {label:28s} {pw[v]['watts']:4.0f} W at {pw[v]['sm_mhz']:5.0f} MHz")
    cyc = {k: h["us"][k] * clock[k] for k in clock}
    cyc_share = 100 * cyc["s07_pipe"] / (cyc["s07_copyonly"] + cyc["s07_nocopy"])
    print(f"  in cycles at each run's clock: the whole loop is {cyc_share:.0f}% of the sum of the halves")
    spread = 100 * (max(clock.values()) / min(clock.values()) - 1)
    glue("ch7b_sum_ratio_cycles", cyc_share)
    glue("ch7b_sum_ratio", h["whole_of_sum_pct"]); glue("ch7b_full_overlap_pct", h["full_overlap_of_sum_pct"])
    glue("ch7b_overlap_pct", h["overlap_pct"]); glue("ch7b_whole_over_slower", h["whole_over_slower"])
    glue("ch7b_clock_spread_pct", spread)
    glue("ch7b_limit_w", h["limit_w"]); glue("ch7b_copyonly_w", pw["s07_copyonly"]["watts"])
    glue("ch7b_nocopy_w", pw["s07_nocopy"]["watts"]); glue("ch7b_base_w", pw["s07_base"]["watts"])
    glue("ch7b_copyonly_mhz", pw["s07_copyonly"]["sm_mhz"]); glue("ch7b_nocopy_mhz", pw["s07_nocopy"]["sm_mhz"])
    glue("ch7b_base_mhz", pw["s07_base"]["sm_mhz"])


def _config(p: dict) -> str:
    return (f"BLOCK {p['BLOCK_M']}x{p['BLOCK_N']}x{p['BLOCK_K']} WARP {p['WARP_M']}x{p['WARP_N']}"
            + (f" NUM_STAGES {p['NUM_STAGES']}" if "NUM_STAGES" in p else ""))


def step07_runs(at: dict) -> None:
    """Step 07's three figures at 8192 side by side: the ladder's run, the sweep's best, the lab's pipelined loop."""
    lad = at.get(("hgemm/07_cp_async", 8192))
    sweep = [r for r in gemmlab.results.one_gpu(gemmlab.results.load())
             if r["step"] == "hgemm/07_cp_async" and r["m"] == 8192]
    best = max(sweep, key=lambda r: r["pct_of_baseline"]) if sweep else None
    diag = gemmlab.results.experiment("hgemm-diagnosis")
    pipe = gemmlab.results.tflops(gemmlab.results.group(diag, DECOMPOSITION), "s07_pipe", 8192)
    print("step 07 at 8192, three figures (no clock is recorded with the benchmark runs):")
    if lad:
        print(f"  {lad['tflops']:6.1f} TFLOP/s  the ladder above: {_config(lad['params'])} (default), "
              f"{lad['gpu']}, {lad['date']}, " + ("interleaved timing" if lad["date"] >= INTERLEAVED_SINCE
                                                    else "cuBLAS timed first (older protocol)"))
    if best:
        print(f"  {best['tflops']:6.1f} TFLOP/s  the sweep's best: {_config(best['params'])}, {best['gpu']}, "
              f"{best['date']}, " + ("interleaved timing" if best["date"] >= INTERLEAVED_SINCE
                                          else "the older protocol (its launches back to back, cuBLAS timed first: "
                                               "not the ladder's conditions, so read it as a rough figure)"))
    print(f"  {pipe:6.1f} TFLOP/s  the lab's s07_pipe (default tiles, fragments pipelined), {diag['gpu']}, {diag['date']}")


TF32 = ["sgemm/11_fragment_prefetch", "sgemm/12_tf32x3"]


def tf32_records() -> dict:
    """Chapter 6's last FP32 step (11) and 3xTF32 (sgemm/12) against cuBLAS fp32 (TF32 off); glues their % at 4096."""
    recs = gemmlab.benchmark(TF32, sizes=[1024, 2048, 4096, 8192], verbose=False)
    at = {(r["step"], r["m"]): r for r in recs}
    for name, key in zip(TF32, ("sg11", "sg12")):
        if (name, 4096) in at:
            glue(f"ch7b_{key}_pct", at[(name, 4096)]["pct_of_baseline"])
            glue(f"ch7b_{key}_cublas", at[(name, 4096)]["baseline_tflops"])
    glue("ch7b_tf32_gpu", recs[0]["gpu"] if recs else hardware.NO_DATA)
    return at


def tf32_prediction() -> None:
    """The prediction: the TF32 mma.sync probe's rate over FFMA's, with and without the three-way split."""
    peaks = gemmlab.results.experiment("fusion-tf32x3")["peaks"]  # one probe run: FFMA and the TF32 mma.sync
    ratio = peaks["mma_m16n8k8_tf32"]["tflops"] / peaks["ffma"]["tflops"]
    date = gemmlab.results.experiment("fusion-tf32x3").get("date", "")
    print(f"{peaks['gpu']} (the fusion-tf32x3 experiment's probe run{', ' + date if date else ''}; the FFMA "
          "ceiling above is another probe run, so the two FFMA figures differ a little):")
    print(f"  FFMA {peaks['ffma']['tflops']:.1f} TFLOP/s, TF32 mma.m16n8k8 "
          f"{peaks['mma_m16n8k8_tf32']['tflops']:.1f} TFLOP/s: {ratio:.1f}x; three mma per product: {ratio / 3:.1f}x")
    glue("ch7b_tf32_over_ffma", ratio); glue("ch7b_split_over_ffma", ratio / 3); glue("ch7b_peaks_gpu", peaks["gpu"])


def tf32(x: np.ndarray) -> np.ndarray:
    """x rounded to TF32 the way the tensor cores read it: the low 13 mantissa bits cleared."""
    bits = np.frombuffer(np.ascontiguousarray(x, dtype=np.float32).tobytes(), np.uint32) & 0xFFFFE000
    return bits.view(np.float32).reshape(np.shape(x))


def tf32_accuracy(k: int = 2048) -> None:
    """Worst error against float64 as a fraction of fp32's bound (below 1 passes): steps 11, 12, and plain TF32."""
    a, b = make_inputs("random", 64, 64, k, np.float32, seed=3)
    for name in TF32:
        got = gemmlab.step(name, backend="cpu")(a, b)
        print(f"{name:27s} worst error / fp32 bound = {compare(got, a, b, 'float32')[1].max():.1e}")
    plain = (tf32(a).astype(np.float64) @ tf32(b).astype(np.float64)).astype(np.float32)
    print(f"{'one TF32 product (no split)':27s} worst error / fp32 bound = {compare(plain, a, b, 'float32')[1].max():.1e}")


def tf32_measure(at: dict | None = None) -> dict:
    """Steps 11 and 12 by size (tf32_records(): live on a GPU, recorded without one, unless `at` is given), step 12's
    recorded sweep at 4096, and its registers (this machine's NVRTC). Returns the records by (step, size)."""
    at = tf32_records() if at is None else at
    for name in TF32:
        print(f"{name:27s} " + "   ".join(f"{n}: {at[(name, n)]['pct_of_baseline']:5.1f}% ({at[(name, n)]['tflops']:4.1f} TFLOP/s)"
                                           for n in (1024, 2048, 4096, 8192) if (name, n) in at))
    sweep = sorted(gemmlab.results.one_gpu([r for r in gemmlab.results.load()
                                            if r["step"] == "sgemm/12_tf32x3" and r["m"] == 4096]),
                   key=lambda r: -r["pct_of_baseline"])
    print(f"\nstep 12 at 4096, {len(sweep)} configurations recorded, the best five:")
    for r in sweep[:5]:
        p = r["params"]
        print(f"{r['pct_of_baseline']:5.1f}%  BLOCK {p['BLOCK_M']}x{p['BLOCK_N']}x{p['BLOCK_K']}  "
              f"WARP {p['WARP_M']}x{p['WARP_N']}  NUM_STAGES {p['NUM_STAGES']}  ({r['date']})")
    print(gemmlab.results.timing_note(sweep))
    glue("ch7b_v12_registers", gemmlab.instance("sgemm/12_tf32x3").resources("sm_90").registers)
    return at


TF32_OPS = ["HMMA", "LDS", "LOP3", "FADD"]  # the mma, its 32-bit fragment loads, the split (mask, subtract) and sums


def tf32_gap(at: dict, size: int = 4096) -> dict:
    """Step 12's measured rate over the FFMA probe's (the fusion-tf32x3 probe run) against the predicted ratio, and
    the static SASS of step 12 at its default tiles (compile-only, sm_80 and sm_90): how many instructions the
    kernel holds per HMMA. Whole-kernel counts (loop, prologue, epilogue); then the executed mix of one profiled
    launch (tf32_executed, the H200's source page) beside them. Glues what the prose quotes."""
    peaks = gemmlab.results.experiment("fusion-tf32x3")["peaks"]
    ffma, tf32_mma = peaks["ffma"]["tflops"], peaks["mma_m16n8k8_tf32"]["tflops"]
    out = {"predicted": tf32_mma / ffma / 3}
    r = at.get(("sgemm/12_tf32x3", size))
    if r:
        out["measured"] = r["tflops"] / ffma
        print(f"step 12 at {size}: {r['tflops']:.1f} TFLOP/s = {out['measured']:.2f}x the FFMA probe ({ffma:.1f}); "
              f"predicted up to {out['predicted']:.1f}x")
        glue("ch7b_sg12_over_ffma", out["measured"]); glue("ch7b_sg12_tflops", r["tflops"])
    inst = gemmlab.instance("sgemm/12_tf32x3")
    print(f"static SASS of step 12 ({', '.join(f'{k} {v}' for k, v in inst.params.items())}; compile-only, "
          "whole kernel, instructions in the code, not executed counts):")
    for arch in ("sm_80", "sm_90"):
        sass = inst.sass(arch)
        c = nvrtc.count_instructions(sass, TF32_OPS)
        feed = (c["LDS"] + c["LOP3"] + c["FADD"]) / c["HMMA"]
        print(f"  {arch}: " + ", ".join(f"{op} {n}" for op, n in c.items())
              + f": {feed:.2f} LDS + LOP3 + FADD per HMMA")
        out[arch] = c | {"feed_per_hmma": feed}
        if arch == "sm_90":
            glue("ch7b_sg12_feed_per_hmma", feed)
    out["executed"] = tf32_executed(out["sm_90"])
    # the prediction scaled by the share of cycles the profiled kernel keeps the tensor pipe busy
    glue("ch7b_x12_pred_at_tensor", out["predicted"] * out["executed"]["tensor"] / 100)
    return out


SOURCE_PAGE_S12 = "results/experiments/gaps-places/src-s12-4096.csv.gz"  # sgemm/12 at 4096, one H200 run


def source_rows(path) -> list[dict]:
    """The per-instruction rows (Address, Source, Instructions Executed, stall columns, ...) of one Nsight Compute
    source page (`ncu --page source --print-source sass --csv`, gzipped): quoted lines from the 'Address' header on."""
    with gzip.open(REPO / path, "rt") as f:
        table = list(csv.reader(line for line in f if line.startswith('"')))
    start = next(i for i, r in enumerate(table) if r and r[0] == "Address")
    header = table[start]
    return [dict(zip(header, r)) for r in table[start + 1:] if len(r) == len(header)]


def sass_opcode(source: str) -> str:
    """The opcode family of one SASS line, without predicate or modifiers: '@!P0 LDS.U.128 R4, [R2]' -> 'LDS'."""
    words = re.sub(r"^\s*@!?U?P\w+\s+", "", source).split()
    return words[0].split(".")[0] if words else "?"


def executed_mix(path: str = SOURCE_PAGE_S12) -> collections.Counter:
    """Warp instructions executed per opcode family, summed over a source page's 'Instructions Executed' column."""
    mix: collections.Counter = collections.Counter()
    for r in source_rows(path):
        text = r["Instructions Executed"].replace(",", "")
        mix[sass_opcode(r["Source"])] += float(text) if text not in ("", "-") else 0.0
    return mix


def tf32_executed(static: dict | None = None, path: str = SOURCE_PAGE_S12) -> dict:
    """Step 12's executed instruction mix (the H200's source page at 4096, one launch) beside the static counts of
    tf32_gap (`static`: its sm_90 entry): the share of each opcode, LDS + LOP3 + FADD per HMMA executed against
    static, and the tensor-pipe share of the same profile. Glues what the prose quotes."""
    mix = executed_mix(path)
    total = sum(mix.values())
    feed = sum(mix[op] for op in TF32_OPS[1:]) / mix["HMMA"]
    m = profile.load(PROFILE_GPU).get("sgemm/12_tf32x3", {})
    out = {"total": total, "mix": mix, "feed_per_hmma": feed,
           "tensor": m.get("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", float("nan"))}
    print(f"executed by step 12 at 4096 on the {PROFILE_GPU} (Nsight Compute's source page, one launch): "
          f"{total / 1e6:.0f}M warp instructions")
    print("  " + ", ".join(f"{op} {n / total:.1%}" for op, n in mix.most_common(8)))
    line = f"  LDS + LOP3 + FADD per HMMA: {feed:.2f} executed"
    if static:
        line += f", {static['feed_per_hmma']:.2f} in the static sm_90 SASS"
    print(line + f"; tensor pipe busy {out['tensor']:.1f}% of the kernel's cycles")
    glue("ch7b_x12_hmma_pct", 100 * mix["HMMA"] / total); glue("ch7b_x12_feed_exec", feed)
    glue("ch7b_x12_feed_pct", 100 * sum(mix[op] for op in TF32_OPS[1:]) / total)
    glue("ch7b_x12_tensor", out["tensor"]); glue("ch7b_prof_gpu", PROFILE_GPU)
    for op in ("FADD", "LDS", "LOP3", "VIADD", "IMAD"):
        glue(f"ch7b_x12_{op.lower()}_pct", 100 * mix[op] / total)
    return out


# ---------------------------------------------------------------------------------------------
# The pictures before each step's listing: schematic models (units of one tile's ldmatrix + mma),
# not measurements.


def prefetch_timeline(tiles: int = 3, load: float = 1.5, store: float = 0.3, barrier: float = 0.1) -> list:
    """Step 04's loop: [(row, k tile, start, end)] with rows "LDG", "ldmatrix + mma", "STS", "barrier".

    The next tile's global loads (LDG) start with this tile's ldmatrix/mma; the store to shared (STS)
    waits for both, and a barrier separates it from the next tile's ldmatrix.
    """
    events, t = [], 0.0
    for k in range(tiles):
        events.append(("ldmatrix + mma", k, t, t + 1.0))
        if k + 1 < tiles:
            events.append(("LDG", k + 1, t, t + load))
            s = t + max(1.0, load)
            events.append(("barrier", k, s, s + barrier))
            events.append(("STS", k + 1, s + barrier, s + barrier + store))
            events.append(("barrier", k + 1, s + barrier + store, s + 2 * barrier + store))
            t = s + 2 * barrier + store
    return events


def warp_tiles(block_m: int = 256, block_n: int = 128, warp_m: int = 64, warp_n: int = 64) -> list:
    """[(warp, row, col)] of the warp tiles in one block tile, as the kernels number them (row-major)."""
    warps_n = block_n // warp_n
    return [(w, (w // warps_n) * warp_m, (w % warps_n) * warp_n) for w in range((block_m // warp_m) * warps_n)]


def buffer_schedule(tiles: int = 4, buffers: int = 2) -> list:
    """Step 06: [(k tile computed, buffer read, buffer written or None, tile written or None)]."""
    return [(k, k % buffers, (k + 1) % buffers if k + 1 < tiles else None, k + 1 if k + 1 < tiles else None)
            for k in range(tiles)]


def ring_schedule(tiles: int = 6, stages: int = 3) -> list:
    """Step 07's cp.async ring: [(event, k tile, slot)] in program order.

    The prologue copies tiles 0..stages-2, one commit group each; then per tile k: wait_group(stages-2)
    (tile k has landed), barrier, copy tile k+stages-1 into the slot freed by tile k-1, commit, compute k.
    """
    ev = []
    for k in range(min(stages - 1, tiles)):
        ev += [("cp.async", k, k % stages), ("commit", k, k % stages)]
    for k in range(tiles):
        ev += [("wait_group", k, k % stages), ("barrier", k, k % stages)]
        nxt = k + stages - 1
        if nxt < tiles:
            ev += [("cp.async", nxt, nxt % stages), ("commit", nxt, nxt % stages)]
        ev.append(("mma", k, k % stages))
    return ev


def step_picture(step: str) -> None:
    """The picture before step `step`'s listing: "04", "05", "06" or "07"."""
    fig, ax = plt.subplots(figsize=(9, 2.6) if step != "05" else (4.5, 4))
    if step == "04":
        rows = ["LDG", "ldmatrix + mma", "STS", "barrier"]
        colours = {"LDG": "tab:blue", "ldmatrix + mma": "tab:orange", "STS": "tab:green", "barrier": "0.3"}
        for row, k, a, b in prefetch_timeline():
            y = rows.index(row)
            ax.add_patch(Rectangle((a, y - 0.35), b - a, 0.7, fc=colours[row], alpha=0.8))
            if row != "barrier":
                ax.text((a + b) / 2, y, f"k{k}", ha="center", va="center", fontsize=7)
        ax.set_yticks(range(len(rows)), rows); ax.set_ylim(len(rows) - 0.5, -0.5); ax.set_xlim(0, 6)
        ax.set_xlabel("time (schematic: one tile's ldmatrix + mma = 1)")
        ax.set_title("step 04: tile k+1's global loads (LDG) overlap tile k's ldmatrix/mma; then STS between barriers",
                     fontsize=9)
    elif step == "05":
        for w, r, c in warp_tiles():
            ax.add_patch(Rectangle((c, r), 64, 64, fc=plt.get_cmap("tab10")(w), ec="k", alpha=0.7))
            ax.text(c + 32, r + 32, f"warp {w}\n64 x 64", ha="center", va="center", fontsize=8)
        ax.set_xlim(0, 128); ax.set_ylim(256, 0); ax.set_aspect("equal")
        ax.set_xlabel("columns (N)"); ax.set_ylabel("rows (M)")
        ax.set_title("step 05: block tile 256 x 128, eight warp tiles", fontsize=9)
    elif step == "06":
        for k, rd, wr, wk in buffer_schedule():
            ax.add_patch(Rectangle((k, rd - 0.35), 0.95, 0.7, fc="tab:orange", alpha=0.8))
            ax.text(k + 0.47, rd, f"read k{k}", ha="center", va="center", fontsize=8)
            if wr is not None:
                ax.add_patch(Rectangle((k, wr - 0.35), 0.95, 0.7, fc="tab:blue", alpha=0.6))
                ax.text(k + 0.47, wr, f"write k{wk}", ha="center", va="center", fontsize=8)
            ax.axvline(k + 0.975, color="0.3", lw=1)
        ax.set_yticks([0, 1], ["buffer 0", "buffer 1"]); ax.set_ylim(1.6, -0.6); ax.set_xlim(0, 4)
        ax.set_xlabel("K step (one barrier, the grey line, per step)")
        ax.set_title("step 06: ldmatrix reads one buffer while the next tile is stored into the other", fontsize=9)
    elif step == "07":
        stages, x = 3, 0
        colours = {"cp.async": "tab:blue", "mma": "tab:orange"}
        for event, k, slot in ring_schedule(stages=stages):
            if event in colours:
                ax.add_patch(Rectangle((x, slot - 0.35), 1, 0.7, fc=colours[event], alpha=0.75))
                ax.text(x + 0.5, slot, f"{'copy' if event == 'cp.async' else 'mma'} k{k}", ha="center",
                        va="center", fontsize=6)
                x += 1
            else:
                # wait_group and the barrier fall at the same point of the program: drawn side by side
                ax.axvline(x + STEP07_LINE_OFFSET[event],
                           color={"commit": "tab:blue", "wait_group": "tab:red", "barrier": "0.3"}[event],
                           lw=1.5 if event == "wait_group" else 1, ls="-" if event != "commit" else ":")
        ax.set_yticks(range(stages), [f"slot {s}" for s in range(stages)]); ax.set_ylim(stages - 0.4, -0.6)
        ax.set_xlim(0, x); ax.set_xlabel("program order (dotted: commit_group; red: wait_group<NUM_STAGES-2>; grey: barrier)")
        ax.set_title(f"step 07: a ring of NUM_STAGES = {stages} shared slots; copies run ahead of mma", fontsize=9)
    else:
        raise ValueError(f"no picture for step {step!r}: 04, 05, 06 or 07")
    plt.tight_layout(); plt.show()


# ---------------------------------------------------------------------------------------------
# The page's checks, one call each (the emulator and the compile-only resource checks: no GPU needed).


def table(recs: list) -> None:
    """The records of this chapter's steps as a table (TFLOP/s and % of cuBLAS by size)."""
    print(gemmlab.bench.table([r for r in recs if r["step"] in STEPS]))


def check_step05() -> None:
    """Step 05 against float64 (emulator), and its ldmatrix wavefronts per request with the XOR addresses."""
    k = gemmlab.step("hgemm/05_tuned_tiles", backend="cpu")
    print(gemmlab.verify(k), "(emulator)")
    counts = k.counters(256, 256, 256, max_blocks=1)
    print(f"ldmatrix: {counts.shared_wavefronts_per_request(kind='ldmatrix'):.2f} wavefronts per request "
          "(4 matrices: one wavefront each, the swizzle survives the XOR arithmetic)")


def barrier_counts(size: int = 256) -> None:
    """Steps 05 and 06 against float64 (emulator), and the barriers each executes per block."""
    for name in ("hgemm/05_tuned_tiles", "hgemm/06_double_buffer"):
        k = gemmlab.step(name, backend="cpu")
        counts = k.counters(size, size, size, max_blocks=1)
        print(f"{name}: {gemmlab.verify(k)}")
        print(f"  {counts.totals['barriers']} barriers for {size // k.params['BLOCK_K']} K tiles of {k.params['BLOCK_K']}")


def needs_sm80(name: str, named: str | None = "cp.async") -> None:
    """Step `name` refused for sm_75 (a T4) with an ArchError that names the reason, then checked in the emulator."""
    try:
        gemmlab.instance(name).resources("sm_75")
        print(f"{name}: compiled for sm_75 (no ArchError)")
    except gemmlab.errors.ArchError as e:
        message = str(e).splitlines()[0]
        print("ArchError for sm_75:", "it needs sm_80" in message,
              *((f"| {named} named:", named in message) if named else ()))
    print(gemmlab.verify(gemmlab.step(name, backend="cpu")), "(emulator)")


def claim() -> None:
    """The chapter's claim: steps 04-07 and sgemm/12 pass in the emulator; 04-06 fit a T4's limits (compile-only)."""
    for name in STEPS[1:] + ["sgemm/12_tf32x3"]:
        print(f"{name}: {gemmlab.verify(gemmlab.step(name, backend='cpu'))} (emulator)")
    for name in STEPS[1:4]:
        fit = gemmlab.instance(name).fit("sm_75")  # counts step 06's dynamic shared memory and registers x threads
        print(f"{name}: fits a T4 (sm_75): {'yes' if fit.ok else f'NO: {fit}'}")


# --- Issue 52: the starting point alone, a prediction before each step, and the picture of 3xTF32 ----------------

def starting_point() -> tuple[list, dict]:
    """"Where we are": step 03 (chapter 7's last step) and cuBLAS at each size, nothing of this chapter's own steps.
    Returns the chapter's records (records(): live on a GPU, recorded without one) for the cells after it."""
    recs, at = records()
    print(gemmlab.bench.table([r for r in recs if r["step"] == "hgemm/03_swizzled"]))
    return recs, at


PREDICTED = {  # step: (the step whose record it starts from, the schedule of chapter 6's timeline model, its ceiling)
    "hgemm/04_register_prefetch": ("hgemm/03_swizzled", "register_prefetch", "mma_m16n8k8"),
    "hgemm/06_double_buffer": ("hgemm/05_tuned_tiles", "register_prefetch", "mma_m16n8k8"),
    "hgemm/07_cp_async": ("hgemm/06_double_buffer", "cp_async", "mma_m16n8k16"),
}


def predict(step: str, at: dict, peaks: dict, size: int = 8192, stages: int | None = None) -> dict | None:
    """A step's predicted TFLOP/s from the step before it (chapter 6's timeline model, pipeline.timeline): the
    previous step's record at `size` gives its time per unit of work; the math at the instruction's ceiling
    (kernels/probe/peak.cu) takes C of it and the wait for the tile L the rest (serial: T = L + C; one tile of
    look-ahead: T = max(L, C)). The new schedule then runs the same L and C: register_prefetch (one tile ahead) or
    cp_async with NUM_STAGES - 1 tiles ahead, at the new instruction's ceiling. Barriers cost nothing in the model,
    so double buffering (06) is predicted no faster than 05. Glues ch7b_pred_<NN>; with `stages` (cp_async only) it
    predicts that NUM_STAGES instead of the step's default, quietly (no glue, no print)."""
    prev, schedule, ceiling = PREDICTED[step]
    r = at.get((prev, size))
    if r is None or not peaks.get(ceiling) or not peaks.get("mma_m16n8k8"):
        print(f"{step}: no prediction (a record of {prev} at {size} or the probe's ceilings are missing)")
        return None
    prev_schedule = "serial" if prev == "hgemm/03_swizzled" else "register_prefetch"
    t, c_prev = 1 / r["tflops"], 1 / peaks["mma_m16n8k8"]["tflops"]  # per TFLOP: the unit of work is arbitrary
    load = t - c_prev if prev_schedule == "serial" else t  # one tile ahead: T = max(L, C), and T > C here
    c = 1 / peaks[ceiling]["tflops"]
    n = size // gemmlab.instance(step).params["BLOCK_K"]
    quiet = stages is not None
    stages = stages or gemmlab.instance(step).params.get("NUM_STAGES", 2)
    per_tile = pipeline.total_time(schedule, tiles=n, load=load, compute=c, stages=stages) / n
    out = {"from": prev, "from_tflops": r["tflops"], "schedule": schedule, "ceiling": ceiling,
           "ceiling_tflops": peaks[ceiling]["tflops"], "tflops": 1 / per_tile, "stages": stages}
    if quiet:
        return out
    v = step.split("/")[1][:2]
    glue(f"ch7b_pred_{v}", out["tflops"]); glue(f"ch7b_pred_{v}_from", r["tflops"])
    ahead = {"register_prefetch": "one tile ahead", "cp_async": f"{stages - 1} tiles ahead (NUM_STAGES = {stages})"}
    print(f"prediction for {step} at {size}: from {prev}'s {r['tflops']:.0f} TFLOP/s, the loads run {ahead[schedule]}"
          f", the math at the {ceiling} ceiling ({peaks[ceiling]['tflops']:.0f}): {out['tflops']:.0f} TFLOP/s")
    # the model written out in rates (TFLOP/s a tile's loads alone, L, or its math alone, C, would allow)
    rate_l, rate_c, k = 1 / load, 1 / c, {"register_prefetch": 1, "cp_async": stages - 1}[schedule]
    glue(f"ch7b_pred_{v}_load", rate_l)
    how = (f"1 / (1/{r['tflops']:.0f} - 1/{peaks['mma_m16n8k8']['tflops']:.0f}) (step 03 waits, then computes)"
           if prev_schedule == "serial" else f"{r['tflops']:.0f} ({prev} runs at its loads' rate: L < C)")
    print(f"  L: the loads alone allow {rate_l:.0f} TFLOP/s = {how}; C: the math alone {rate_c:.0f}")
    print(f"  {k} tile(s) ahead: min({k} x L, C) = {min(k * rate_l, rate_c):.0f} TFLOP/s; with the pipeline's fill "
          f"over {n} K tiles: {out['tflops']:.0f}")
    return out


def stage_predictions(at: dict, peaks: dict, size: int = 8192, stages=(2, 3, 4)) -> dict:
    """Step 07 at NUM_STAGES = 2, 3, 4 in chapter 6's timeline model (from step 06's record, as predict()), before
    the recorded sweep; glues ch7b_pred_07_s<N>."""
    out = {}
    for n in stages:
        p = predict("hgemm/07_cp_async", at, peaks, size, stages=n)
        if p is None:
            return out
        out[n] = p["tflops"]
        glue(f"ch7b_pred_07_s{n}", p["tflops"])
    print(f"timeline model, step 07 at {size} (from step 06's record, math at the mma_m16n8k16 ceiling): "
          + ", ".join(f"NUM_STAGES {n}: {v:.0f} TFLOP/s" for n, v in out.items()))
    return out


def tf32x3_terms(x: float = 1 / 3, y: float = 2 / 3) -> list[dict]:
    """3xTF32's products for one pair: big = tf32(x), small = x - big, and each of the four products with its
    size relative to x * y and whether the kernel issues it (three mmas, small * small dropped), in issue order."""
    xb, yb = (float(tf32(np.float32(v))) for v in (x, y))
    xs, ys = float(np.float32(x) - np.float32(xb)), float(np.float32(y) - np.float32(yb))
    terms = [("small_a x big_b", xs * yb, True), ("big_a x small_b", xb * ys, True), ("big_a x big_b", xb * yb, True),
             ("small_a x small_b", xs * ys, False)]
    return [{"term": t, "relative": abs(v) / (x * y), "issued": used} for t, v, used in terms]


def draw_tf32x3(ax=None):
    """3xTF32: a float's 23 mantissa bits split into big (TF32: the top 10) and small (the rest, as its own TF32),
    and the three mmas the kernel issues per fragment pair, small terms first; small x small (about 2^-22) dropped."""
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 3.4))
    # the split of one fp32 number: sign, 8 exponent bits, 23 mantissa bits
    for i, (w, label, colour) in enumerate(((1, "s", "0.6"), (8, "exponent (8)", "0.8"),
                                            (10, "big: mantissa bits 1-10", "tab:blue"),
                                            (13, "small: bits 11-23", "tab:orange"))):
        x0 = sum(v for v, _, _ in ((1, 0, 0), (8, 0, 0), (10, 0, 0))[:i])
        ax.add_patch(Rectangle((x0 * 0.3, 3), w * 0.3, 0.8, fc=colour, alpha=0.6, ec="white"))
        ax.text(x0 * 0.3 + w * 0.15, 3.4, label, ha="center", va="center", fontsize=7)
    ax.text(0, 4.1, "x (fp32) = big + small; big = tf32(x), small = x - big (exact, |small| <= 2^-11 |x|)", fontsize=8)
    for j, t in enumerate(tf32x3_terms()):
        x0 = 0.2 + 2.6 * j
        ax.add_patch(Rectangle((x0, 0.6), 2.3, 1.4, fc="tab:green" if t["issued"] else "white", alpha=0.35,
                               ec="k", ls="-" if t["issued"] else "--"))
        ax.text(x0 + 1.15, 1.5, (f"mma {j + 1}: " if t["issued"] else "dropped: ") + t["term"], ha="center",
                fontsize=7.5)
        ax.text(x0 + 1.15, 1.0, f"size ~ {t['relative']:.0e} of x*y", ha="center", fontsize=7)
        if not t["issued"]:
            ax.plot([x0, x0 + 2.3], [0.6, 2.0], color="tab:red", lw=1)
    ax.annotate("", (10.3, 0.3), (0.2, 0.3), arrowprops=dict(arrowstyle="->"))
    ax.text(5.2, 0.0, "issue order: the small terms first, into a fresh accumulator per K tile", ha="center",
            fontsize=7.5)
    ax.set_xlim(0, 10.8); ax.set_ylim(-0.3, 4.4); ax.axis("off")
    ax.set_title("3xTF32: three TF32 mma.sync per fragment pair instead of one", fontsize=9)
    plt.tight_layout(); plt.show()
    return ax
