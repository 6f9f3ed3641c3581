"""Chapter 7c (Hopper I: wgmma, TMA and mbarriers): the chapter's records, pictures, models and glue.

The steps: hopper/01_wgmma (wgmma from tiles the threads copy), hopper/02_tma (TMA and one mbarrier),
hopper/03_tma_ring (a ring of full/empty mbarriers), then hgemm/08_wgmma (a producer warp group and setmaxnreg).
Every timing the chapter quotes comes from one run (results/nvidia-h200.json, RUN_DATE, selected by one_run); the
profiler's counters from results/nvidia-h200.ncu.json; the board's clock and power from a lab run on the same GPU
model (POWER_RUN); where the barrier stall sits and the profiled launches' SM clock from a repeat of the profiles'
protocol (PLACES: source pages, first launches); the L2 counters of the tile order from an H100 experiment (l2_evidence says so). The notebook
calls one function per figure or table.
"""
from __future__ import annotations

import csv
import gzip
import io
import re

import numpy as np

from ..measure import bench, hardware, profile, results
from . import pipeline, plots
from .glue import glue
import gemmlab
from ..runtime import nvrtc, registry
from ..runtime.source import REPO
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

STEPS = ("hgemm/07_cp_async", "hopper/01_wgmma", "hopper/02_tma", "hopper/03_tma_ring", "hgemm/08_wgmma")
NEW = STEPS[1:4]
GPU = "NVIDIA H200"  # the GPU the chapter's steps were recorded on (lab/hopper-steps/gpu.sh)
SIZES = (4096, 8192)
KEYS = {"hgemm/07_cp_async": "v07", "hopper/01_wgmma": "h01", "hopper/02_tma": "h02",
        "hopper/03_tma_ring": "h03", "hgemm/08_wgmma": "v08"}
BLOCK_M, BLOCK_K = 128, 64


RUN_DATE = "2026-11-29"  # the one H200 run (lab/one-run/gpu.sh) every timing of chapters 7c and 7d comes from
TENSOR_FLOPS_PER_CLOCK = 4096  # dense fp16 flops per SM per clock on Hopper: 4 tensor cores x 512 FMA x 2 (NVIDIA's
# H100 architecture whitepaper: an SM's tensor cores do twice A100's 1,024 dense fp16 FMA per clock)
# The tensor pipe's busy share, one metric in chapters 7c and 7d: cycles the pipe is active as a share of its peak
# over the kernel's elapsed cycles (idle SMs and the tail count as idle), so peak x clock x busy bounds the launch
TENSOR_BUSY = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"
CH7B_RUN = ("NVIDIA H100 80GB HBM3", "2026-11-24")  # chapter 7b's run (its records of hgemm/07 at 8192)
POWER_RUN = "hgemm-past-cublas"  # the lab run on the same GPU model that logged SM clock and board power (nvidia-smi)


def one_run(steps, sizes=SIZES, gpu: str = GPU, date: str = RUN_DATE, recs: list[dict] | None = None) -> list[dict]:
    """The records of `steps` at `sizes` from one run: `gpu`'s records dated `date` (the last per step and size),
    by size then in the order of `steps`; [] when that run is not recorded. Records of another GPU or another
    day never enter, so no comparison mixes two runs or two GPUs."""
    steps = list(steps)
    last = {}
    for r in results.load(gpu) if recs is None else recs:
        if r.get("gpu") == gpu and str(r.get("date", "")).startswith(date) and r["step"] in steps \
                and r["m"] in sizes:
            last[(r["step"], r["m"])] = r
    return [last[k] for k in sorted(last, key=lambda k: (k[1], steps.index(k[0])))]


def records(gpu: str = GPU) -> list[dict]:
    """The chapter's steps' records on `gpu` from the one run of RUN_DATE (the steps and cuBLAS timed in turn)."""
    return one_run(STEPS, gpu=gpu)


def at(step: str, size: int) -> dict | None:
    return next((r for r in records() if r["step"] == step and r["m"] == size), None)


def ladder(size: int = 8192, upto: str = STEPS[-1]):
    """The ladder of TFLOP/s at `size` from step 07 to `upto` (the three new steps, then step 08), with cuBLAS's
    band; says so when nothing is recorded."""
    if not records():
        print(f"recorded data missing: no records of {', '.join(NEW)} on {GPU}")
        return None
    steps = STEPS[:STEPS.index(upto) + 1]
    recs = [r for r in records() if r["step"] in steps and r["m"] == size]
    ax = plots.ladder(recs, steps, size=size, title=f"{GPU}, M = N = K = {size} ({RUN_DATE}):\neach step beside "
                      "the cuBLAS call timed with it")
    for line in list(ax.lines):  # the one median line would stand for cuBLAS calls of different speeds
        if line.get_linestyle() == "--":
            line.remove()
    shown = [s for s in steps if any(r["step"] == s for r in recs)]
    own = [next(r["baseline_tflops"] for r in recs if r["step"] == s) for s in shown]
    ax.hlines(own, [i - 0.45 for i in range(len(shown))], [i + 0.45 for i in range(len(shown))], color="k", lw=1.5,
              zorder=3, label="cuBLAS timed beside each step")
    ax.set_ylim(0, 1.4 * max(own + [r["tflops"] for r in recs]))  # room for the legend above the band
    ax.legend(fontsize=7, loc="upper left")
    return ax


def table() -> str:
    """The records as bench.table shows them: TFLOP/s, % of cuBLAS and cuBLAS's own TFLOP/s beside each."""
    recs = records()
    return bench.table(recs) if recs else "recorded data missing: no records of these steps on " + GPU


# --- Pictures ---------------------------------------------------------------------------------------------------

def warpgroup_owner(block_n: int = 256) -> np.ndarray:
    """Who computes each element of the 128 x block_n block tile: 4 * warpgroup + warp (warp w of a warp group
    holds rows 16w .. 16w + 15 of its 64, for every column: wgmma's accumulator layout)."""
    rows = np.arange(BLOCK_M)[:, None]
    return np.broadcast_to(4 * (rows // 64) + rows % 64 // 16, (BLOCK_M, block_n)).copy()


def draw_warpgroups(block_n: int = 256, ax=None):
    """The block tile of C owned by two warp groups of four warps, and the A and B tiles they read from shared
    memory (one wgmma per warp group per 16-wide k slice)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 4.2))
    owner = warpgroup_owner(block_n)
    colours = plt.get_cmap("tab20").colors
    x0 = BLOCK_K + 24  # C to the right of A, B above C
    for r0 in range(0, BLOCK_M, 16):
        o = int(owner[r0, 0])
        ax.add_patch(Rectangle((x0, r0), block_n, 16, color=colours[2 * (o // 4) + (o % 2)], ec="white"))
        ax.text(x0 + block_n / 2, r0 + 8, f"warp group {o // 4}, warp {o % 4}: rows {r0 % 64}-{r0 % 64 + 15}"
                f" of its 64, all {block_n} columns", ha="center", va="center", fontsize=7)
    for r0 in (0, 64):
        ax.add_patch(Rectangle((0, r0), BLOCK_K, 64, fill=False, lw=1.5))
        ax.text(BLOCK_K / 2, r0 + 32, f"A rows\n{r0}-{r0 + 63}\n(shared)", ha="center", va="center", fontsize=7)
    ax.add_patch(Rectangle((x0, -BLOCK_K - 12), block_n, BLOCK_K, fill=False, lw=1.5))
    for kk in range(1, 4):
        ax.plot([x0, x0 + block_n], [-BLOCK_K - 12 + 16 * kk] * 2, lw=0.5, color="0.5")
    ax.text(x0 + block_n / 2, -BLOCK_K - 4, f"B tile: 64 (k) x {block_n} (shared), four k16 slices",
            ha="center", va="center", fontsize=7, backgroundcolor="white")
    ax.set_xlim(-4, x0 + block_n + 4)
    ax.set_ylim(BLOCK_M + 4, -BLOCK_K - 16)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"One block: a {BLOCK_M} x {block_n} tile of C, 64 rows per warp group; each wgmma m64n{block_n}k16 "
                 "reads A and B from shared memory", fontsize=8)
    return ax


def tile_order(tiles_m: int, tiles_n: int, group_m: int) -> np.ndarray:
    """The Python twin of the steps' tile order: entry (i, j) is the launch index of the block that computes block
    row i, block column j. Block `id` goes `id % band_rows` rows down a band of GROUP_M block rows, then to the
    band's next column (GROUP_M = 1 is row-major order)."""
    if min(tiles_m, tiles_n, group_m) < 1:
        raise ValueError("tiles_m, tiles_n and group_m must be at least 1")
    order = np.empty((tiles_m, tiles_n), dtype=int)
    for i in range(tiles_m * tiles_n):
        band, in_band = divmod(i, group_m * tiles_n)
        rows = min(group_m, tiles_m - band * group_m)
        order[band * group_m + in_band % rows, in_band // rows] = i
    return order


def wave_footprint(tiles_m: int, tiles_n: int, group_m: int, wave: int) -> dict:
    """The block rows of A and block columns of B that the first `wave` blocks read, and the bytes per k tile of
    those panels (128-row A panels, 256-column B panels, fp16): what one wave asks of L2 and DRAM."""
    first = tile_order(tiles_m, tiles_n, group_m) < wave
    rows, cols = int(first.any(axis=1).sum()), int(first.any(axis=0).sum())
    return {"rows": rows, "cols": cols, "kb_per_k_tile": (rows * BLOCK_M + cols * 256) * BLOCK_K * 2 / 1024}


def draw_tile_order(tiles_m: int = 8, tiles_n: int = 8, group_m: int = 4, wave: int = 16):
    """Row-major order beside banded order (GROUP_M rows at a time): each tile's launch index, the first wave of
    `wave` blocks shaded, and the A rows and B columns that wave reads."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, g in zip(axes, (1, group_m)):
        order = tile_order(tiles_m, tiles_n, g)
        ax.imshow(order < wave, cmap="Blues", vmin=0, vmax=1.6)
        for (i, j), v in np.ndenumerate(order):
            ax.text(j, i, str(v), ha="center", va="center", fontsize=7)
        fp = wave_footprint(tiles_m, tiles_n, g, wave)
        ax.set_title(f"GROUP_M = {g}: the first {wave} blocks read\n{fp['rows']} block rows of A and "
                     f"{fp['cols']} block columns of B", fontsize=9)
        ax.set_xticks([]); ax.set_yticks([])
    fig.suptitle("Launch order of the tiles of C (blockIdx order); shaded: the blocks running together", fontsize=9)
    plt.tight_layout()
    return axes


def parity_schedule(k_tiles: int, stages: int = 1) -> list[dict]:
    """Which stage, round and parities each k tile t uses: stage t % stages in round t // stages; the consumers
    wait for parity round & 1 on full[stage], the loader for (round & 1) ^ 1 on empty[stage] (a fresh barrier's
    'phase before the first' counts as done, so round 0 passes at once)."""
    return [{"tile": t, "stage": t % stages, "round": t // stages, "full_parity": (t // stages) & 1,
             "empty_parity": ((t // stages) & 1) ^ 1} for t in range(k_tiles)]


def draw_phases(k_tiles: int = 4, ax=None):
    """hopper/02's one mbarrier over k_tiles tiles: thread 0 arrives with expect_tx, the bytes land, the phase
    completes and its bit flips; the threads wait for parity t & 1."""
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 2.6))
    bit = 0
    for s in parity_schedule(k_tiles):
        t0 = 3 * s["tile"]
        ax.barh(1, 1.2, left=t0, color="tab:blue", height=0.5)
        ax.text(t0 + 0.6, 1, f"TMA {s['tile']}", ha="center", va="center", fontsize=7, color="white")
        ax.barh(0, 1.6, left=t0 + 1.3, color="tab:orange", height=0.5)
        ax.text(t0 + 2.1, 0, f"wgmma {s['tile']}", ha="center", va="center", fontsize=7, color="white")
        ax.annotate(f"wait(parity {s['full_parity']})", (t0 + 1.2, 0.5), fontsize=7, ha="center")
        ax.plot([t0, t0 + 1.2, t0 + 1.2, t0 + 3], [1.7 + 0.4 * bit] * 2 + [1.7 + 0.4 * (1 - bit)] * 2, color="k")
        bit ^= 1
    ax.text(-0.3, 1.9, "phase bit", ha="right", va="center", fontsize=7)
    ax.set_yticks([0, 1], ["warp groups", "TMA"], fontsize=7)
    ax.set_xticks([])
    ax.set_ylim(-0.5, 2.4)
    ax.set_title("One mbarrier, one phase per k tile: it completes when thread 0 has arrived and every byte has "
                 "landed, and its phase bit flips", fontsize=8)
    return ax


def draw_ring(stages: int = 4, k_tiles: int = 10, ax=None):
    """hopper/03's ring: a row per stage, a box per k tile; in each, the parity the warp groups wait for on
    full[s] and the parity thread 0 waits for on empty[s] before it loads that tile."""
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.7 * stages + 1.2))
    for s in parity_schedule(k_tiles, stages):
        x, y = s["round"], s["stage"]
        ax.add_patch(Rectangle((x + 0.05, y + 0.08), 0.9, 0.84, color=("tab:green", "tab:purple")[s["full_parity"]],
                               alpha=0.35))
        ax.text(x + 0.5, y + 0.5, f"tile {s['tile']}\nloader: empty[{y}] parity {s['empty_parity']}\n"
                f"warp groups: full[{y}] parity {s['full_parity']}", ha="center", va="center", fontsize=6.5)
    rounds = (k_tiles - 1) // stages + 1
    ax.set_xlim(0, rounds)
    ax.set_ylim(stages, 0)
    ax.set_xticks([r + 0.5 for r in range(rounds)], [f"round {r}" for r in range(rounds)], fontsize=7)
    ax.set_yticks([s + 0.5 for s in range(stages)], [f"stage {s}" for s in range(stages)], fontsize=7)
    ax.set_title(f"A ring of {stages} stages: tile t uses stage t % {stages} in round t // {stages}; each barrier's "
                 "parity alternates round by round", fontsize=8)
    return ax


# --- Models -----------------------------------------------------------------------------------------------------

def copy_instructions(block_n: int = 256, threads: int = 256) -> dict:
    """Copy instructions per k tile of one block: hopper/01's threads each load and store 16-byte chunks; in
    hopper/02 one thread issues a TMA per box (A's 128 x 64, and B's 64 x 64 boxes)."""
    chunks = (BLOCK_M * BLOCK_K + BLOCK_K * block_n) // 8  # 16-byte chunks of the A and B tiles
    return {"chunks": chunks, "per_thread_01": 2 * chunks // threads, "per_block_01": 2 * chunks,
            "tma_per_block_02": 1 + block_n // 64}


def wgmma_per_tile(block_n: int = 256) -> dict:
    """Tensor-core instructions per k tile of one 128 x block_n block: wgmma m64n{block_n}k16 per warp group and
    k16 slice, against hgemm/07's mma.m16n8k16 (one per warp per 16 x 8 x 16)."""
    return {"wgmma": 2 * BLOCK_K // 16, "mma_sync_same_work": BLOCK_M * block_n * BLOCK_K // (16 * 8 * 16)}


def k_tile_compute_us(gpu: str = GPU, block_n: int = 256) -> float:
    """One block's k tile (2 x 128 x block_n x 64 flops) on one SM at the spec sheet's dense fp16 peak."""
    spec = hardware.spec_for(gpu)
    return 2 * BLOCK_M * block_n * BLOCK_K / (spec.fp16_tensor_tflops * 1e12 / spec.sms) * 1e6


def ring_prediction(size: int = 4096, stages: int = 4, gpu: str = GPU, clock_scale: float = 1.0) -> dict | None:
    """What a ring should give, from hopper/02's record: with one block per SM, its time per k tile is the wait
    for the tile (L) plus the wgmmas (C, at the peak); with `stages` stages the loads overlap the math, and the
    timeline model of chapter 6 (pipeline.timeline, cp_async) gives the time per tile. clock_scale (the SM clock
    over the spec's) slows the math alone: the wait is memory's, which the SM clock does not speed up."""
    r = at("hopper/02_tma", size)
    spec = hardware.spec_for(gpu)
    if r is None or spec is None:
        return None
    tiles_per_sm = (size // BLOCK_M) * (size // 256) * (size // BLOCK_K) / spec.sms
    per_tile = r["median_s"] * 1e6 / tiles_per_sm
    c = k_tile_compute_us(gpu) / clock_scale
    load = max(per_tile - c, 0.0)
    n = size // BLOCK_K
    ring = pipeline.total_time("cp_async", tiles=n, load=load, compute=c, stages=stages) / n
    flops = 2.0 * size ** 3
    return {"tile_02_us": per_tile, "compute_us": c, "load_us": load, "tile_03_us": ring,
            "tflops_02": r["tflops"], "tflops_03": flops / (ring * tiles_per_sm * 1e-6) / 1e12,
            "peak": spec.fp16_tensor_tflops}


def serial_prediction(gpu: str = GPU, block_n: int = 256, clock_scale: float = 1.0) -> dict:
    """hopper/01 and 02's model: one stage, so a k tile costs its copy plus its math. The copy of the A and B tiles
    at the SM's share of DRAM bandwidth (every byte from DRAM, no L2 reuse: an upper bound on the copy), the math at
    the spec sheet's peak (slowed by clock_scale, the SM clock over the spec's); both times and the TFLOP/s."""
    spec = hardware.spec_for(gpu)
    tile_bytes = (BLOCK_M + block_n) * BLOCK_K * 2
    copy = tile_bytes / (spec.dram_gbps * 1e9 / spec.sms) * 1e6
    c = k_tile_compute_us(gpu, block_n) / clock_scale
    return {"bytes": tile_bytes, "copy_us": copy, "compute_us": c, "sms": spec.sms, "dram_gbps": spec.dram_gbps,
            "peak_tflops": spec.fp16_tensor_tflops, "gpu": spec.name,
            "tflops": 2 * BLOCK_M * block_n * BLOCK_K * spec.sms / ((copy + c) * 1e-6) / 1e12}


def serial_report(gpu: str = GPU) -> str:
    """serial_prediction's inputs and result, as the chapter prints them."""
    p = serial_prediction(gpu)
    return (f"{p['gpu']}: {p['sms']} SMs, DRAM {p['dram_gbps']:.0f} GB/s, fp16 tensor peak {p['peak_tflops']:.0f} TFLOP/s\n"
            f"per k tile: copy {p['copy_us']:.2f} us + math {p['compute_us']:.2f} us -> {p['tflops']:.0f} TFLOP/s")


def board_clock(gpu: str = GPU) -> dict:
    """The SM clock and board power nvidia-smi logged while GEMMs of 4096 ran for 2 s each (POWER_RUN, the same GPU
    model): median, lowest, highest; and the clock the spec sheet's peak assumes (peak / (SMs x flops per clock))."""
    past = results.experiment(POWER_RUN)
    rows = [p for p in past["power"] if p["n"] == 4096]
    mhz, watts = [p["sm_clock_mhz"] for p in rows], [p["power_w"] for p in rows]
    spec = hardware.spec_for(gpu)
    return {"gpu": past["gpu"], "date": past["date"], "mhz": float(np.median(mhz)), "mhz_lo": min(mhz),
            "mhz_hi": max(mhz), "watts": float(np.median(watts)), "n": len(rows),
            "spec_mhz": spec.fp16_tensor_tflops * 1e12 / (spec.sms * TENSOR_FLOPS_PER_CLOCK) / 1e6}


def explain_gap(step: str, model_tflops: float, size: int = 4096, at_clock: float | None = None) -> dict | None:
    """From a model's TFLOP/s (spec sheet's clock) to the record: the model at the clock the board holds under load
    (at_clock: the model run with its math alone at that clock, models_at_clock; else the whole model scaled); then what the tensor pipe delivers at that clock in the share of time Nsight Compute finds it busy (peak x
    clock x busy), beside the record and the profiler's top stall (why the pipe idles)."""
    r, prof = at(step, size), profiled(step)
    if r is None or prof is None:
        return None
    clk = board_clock()
    scale = clk["mhz"] / clk["spec_mhz"]
    peak = hardware.spec_for(GPU).fp16_tensor_tflops
    return {"model": model_tflops, "at_clock": model_tflops * scale if at_clock is None else at_clock, "busy_pct": prof["tensor_pct"],
            "peak_at_clock": peak * scale, "busy_bound": peak * scale * prof["tensor_pct"] / 100,
            "measured": r["tflops"], "stall": prof["stalls"][0][0], "profiled": profiled_tflops(step, size)}


def profiled_tflops(step: str, size: int = 4096) -> float | None:
    """The TFLOP/s of the one launch Nsight Compute profiled (gpu__time_duration, ns), to set beside the benchmark's
    median: the busy shares come from that launch, not from the benchmark's."""
    m = profile.load(GPU).get(step) or {}
    ns = m.get("gpu__time_duration.sum")
    return 2 * size ** 3 / (ns * 1e-9) / 1e12 if ns else None


def models_at_clock() -> dict:
    """Steps 01-03's models at 4096: step -> (TFLOP/s at the spec's clock, TFLOP/s with the math alone at the clock
    the board holds under load; the copy, memory's, unchanged)."""
    clk = board_clock()
    scale = clk["mhz"] / clk["spec_mhz"]
    ser, ser_c = serial_prediction(), serial_prediction(clock_scale=scale)
    ring, ring_c = ring_prediction(4096), ring_prediction(4096, clock_scale=scale)
    out = {"hopper/01_wgmma": (ser["tflops"], ser_c["tflops"]), "hopper/02_tma": (ser["tflops"], ser_c["tflops"])}
    if ring and ring_c:
        out["hopper/03_tma_ring"] = (ring["tflops_03"], ring_c["tflops_03"])
    return out


def gap_table() -> str:
    """Each step's prediction against its record at 4096, and what closes the gap: the clock (the math alone), then
    the tensor pipe's idle share with the top stall that causes it."""
    clk = board_clock()
    models = models_at_clock()
    p08 = step08_prediction()
    spec = hardware.spec_for(GPU)
    lines = [f"{GPU}, 4096, TFLOP/s. SM clock under load {clk['mhz']:.0f} MHz ({clk['mhz_lo']:.0f}-{clk['mhz_hi']:.0f}"
             f" at {clk['watts']:.0f} W, nvidia-smi, {clk['date']}); the spec's peak assumes {clk['spec_mhz']:.0f} MHz, derived: "
             f"{spec.fp16_tensor_tflops:.0f} TFLOP/s / ({spec.sms} SMs x {TENSOR_FLOPS_PER_CLOCK} FLOP per SM per clock, "
             "twice A100's 2 x 1,024 FMA: NVIDIA's H100 whitepaper)",
             f"{'step':19s} {'model':>5s} {'predicted at clock':>18s} {'peak x clock x busy':>20s} {'measured':>9s} {'profiled':>9s} {'its MHz':>7s}  top stall"]
    mhz = {f["step"]: f"{f['mhz']:7.0f}" for f in first_launches(STEPS)}
    for step, (model, at_clk) in models.items():
        g = explain_gap(step, model, at_clock=at_clk)
        if g:
            lines.append(f"{step:19s} {g['model']:5.0f} {g['at_clock']:18.0f} {g['peak_at_clock']:7.0f} x "
                         f"{g['busy_pct']:3.0f}% = {g['busy_bound']:3.0f} {g['measured']:9.0f} {g['profiled']:9.0f} {mhz.get(step, '      -')}  {g['stall']}")
    g = explain_gap("hgemm/08_wgmma", 0.0)
    if g and p08:  # step 08's prediction starts from step 03's record, so it is at the board's clock already
        lines.append(f"{'hgemm/08_wgmma':19s} {'-':>5s} {str(round(p08['tflops'])) + ' (from 03)':>18s} "
                     f"{g['peak_at_clock']:7.0f} x {g['busy_pct']:3.0f}% = {g['busy_bound']:3.0f} {g['measured']:9.0f} "
                     f"{g['profiled']:9.0f} {mhz.get('hgemm/08_wgmma', '      -')}  {g['stall']}")
        lines.append("(from 03: step 08 has no model of its own; its prediction is step 03's record divided by step 03's "
                     "tensor-pipe busy share, at most the peak at the clock, not a model scaled to the clock)\n"
                     "predicted at clock: the model with its math at the board's clock, its copy unchanged; "
                     "measured: the benchmark's median; profiled: the one launch Nsight Compute timed, whose busy "
                     "share the table uses; its MHz: the SM clock of the same protocol's launch (the first of a fresh process) "
                     f"repeated in another process ({PLACES_DATE})")
    return "\n".join(lines)


def setmaxnreg_check() -> str:
    """Step 08 compiled as it is and without setmaxnreg_inc, and step 03 (the same consumers' 128 accumulators, no
    setmaxnreg, 256 threads): registers and spills (compile only)."""
    plain = gemmlab.kernel.edited("hgemm/08_wgmma", "setmaxnreg_inc<232>();", "", backend="cpu")
    rows = [("hgemm/08_wgmma", "as it is", gemmlab.instance("hgemm/08_wgmma")),
            ("hgemm/08_wgmma", "without setmaxnreg_inc", plain),
            ("hopper/03_tma_ring", "", gemmlab.instance("hopper/03_tma_ring"))]
    return "\n".join(f"{name:18s} {who:22s} {k.resources('sm_90')}" for name, who, k in rows)


def profiled(step: str, gpu: str = GPU) -> dict | None:
    """Nsight Compute at 4096 (one launch): the top three stalls and the tensor pipe's busy share."""
    m = profile.load(gpu).get(step)
    if not m:
        return None
    return {"stalls": profile.stall_reasons(m, top=3),
            "tensor_pct": m.get(TENSOR_BUSY),
            "registers": m.get("launch__registers_per_thread")}


def stall_table(upto: str = STEPS[-1], steps=None, also=("barrier", "long_scoreboard")) -> str:
    """Nsight Compute at 4096 (results/<gpu>.ncu.json, one launch each): the tensor pipe's busy share, the top three
    stalls, and the stalls in `also` where they are not among the three (the prose quotes them). `steps` (any steps
    profiled in the run, chapter 7d's included) or the new steps up to `upto`."""
    steps = list(steps) if steps else list(STEPS[1:STEPS.index(upto) + 1])
    lines = [f"{'step (ncu, 4096, ' + GPU + ')':38s} {'tensor pipe':>11s}  top stalls (warps per issued instruction)"]
    for s in steps:
        p = profiled(s)
        if not p:
            lines.append(f"{s:38s} recorded data missing")
            continue
        top = [k for k, _ in p["stalls"]]
        more = {k: v for k, v in stall_values(s, also).items() if k not in top and v is not None}
        lines.append(f"{s:38s} {p['tensor_pct']:10.0f}%  " + ", ".join(f"{k} {v:.1f}" for k, v in p["stalls"])
                     + ("; " + ", ".join(f"{k} {v:.1f}" for k, v in more.items()) if more else ""))
    return "\n".join(lines)


def sass_counts(steps=("hgemm/07_cp_async", "hopper/01_wgmma", "hopper/02_tma")) -> str:
    """Instructions of each kernel's SASS that copy (LDG, STS, LDGSTS, UTMALDG), multiply (HMMA, HGMMA) and
    synchronise (BAR, SYNCS): compile-only, the same on any machine with the course's NVRTC."""
    ops = ["LDG", "STS", "LDGSTS", "UTMALDG", "HMMA", "HGMMA", "BAR", "SYNCS"]
    lines = []
    for s in steps:
        inst = gemmlab.instance(s)
        arch = "sm_90" if registry.lookup(s).min_arch >= 90 else "sm_80"
        c = nvrtc.count_instructions(inst.sass(arch), ops)
        lines.append(f"{s:20s} " + ", ".join(f"{k} {v}" for k, v in c.items()))
    return "\n".join(lines)


def cublas_range(size: int, gpu: str = GPU, date: str = RUN_DATE) -> tuple[float, float] | None:
    """The lowest and highest cuBLAS rate (TFLOP/s) over the cuBLAS calls timed beside this chapter's steps at
    `size` in the one run: the grey band of the ladder at that size (plots.ladder draws the same records)."""
    rates = [r["baseline_tflops"] for r in one_run(STEPS, sizes=(size,), gpu=gpu, date=date)
             if r.get("baseline_tflops")]
    return (min(rates), max(rates)) if rates else None


def cublas_drift(size: int = 8192, gpu: str = GPU, date: str = RUN_DATE) -> dict | None:
    """The cuBLAS calls timed beside this chapter's steps at `size` in the one run: their median, and the first and
    the last call in the order the run recorded them (results/<gpu>.json; the hgemm steps, then the hopper track),
    with how far cuBLAS fell between them; each step's TFLOP/s as a % of that median."""
    recs = [r for r in results.load(gpu) if r.get("gpu") == gpu and str(r.get("date", "")).startswith(date)
            and r["step"] in STEPS and r["m"] == size and r.get("baseline_tflops")]
    if not recs:
        return None
    last = {r["step"]: r for r in recs}  # the last record per step, as one_run keeps
    order = [r for r in recs if last[r["step"]] is r]
    med = float(np.median([r["baseline_tflops"] for r in order]))
    first, final = order[0], order[-1]
    return {"median": med, "first": (first["step"], first["baseline_tflops"]),
            "last": (final["step"], final["baseline_tflops"]),
            "fall_pct": 100 * (1 - final["baseline_tflops"] / first["baseline_tflops"]),
            "pct_of_median": {r["step"]: 100 * r["tflops"] / med for r in order}}


def glue_all() -> None:
    """Every value the chapter's prose quotes: the GPU, each step's rate and % of cuBLAS with cuBLAS's own rate at
    4096 and 8192, the models' numbers and the profiler's."""
    recs = records()
    glue("ch7c_gpu", recs[0]["gpu"] if recs else "GPU (recorded data missing)")
    glue("ch7c_run_date", recs[0]["date"] if recs else RUN_DATE)
    glue("ch7c_sms", hardware.spec_for(GPU).sms)
    for r in recs:
        key = f"ch7c_{KEYS[r['step']]}_{r['m']}"
        glue(f"{key}_tflops", r["tflops"])
        glue(f"{key}_pct", r["pct_of_baseline"])
        glue(f"{key}_cublas", r["baseline_tflops"])
    b7 = one_run(["hgemm/07_cp_async"], sizes=(8192,), gpu=CH7B_RUN[0], date=CH7B_RUN[1])
    if b7:  # chapter 7b's figure of step 07, from its own run on another GPU
        glue("ch7c_b7_gpu", b7[0]["gpu"]); glue("ch7c_b7_v07_8192_pct", b7[0]["pct_of_baseline"])
    for n in SIZES:
        lohi = cublas_range(n)
        if lohi:
            glue(f"ch7c_cublas_{n}_lo", lohi[0]); glue(f"ch7c_cublas_{n}_hi", lohi[1])
        d = cublas_drift(n)
        if d:
            glue(f"ch7c_cublas_{n}_median", d["median"]); glue(f"ch7c_cublas_{n}_fall_pct", d["fall_pct"])
            glue(f"ch7c_cublas_{n}_first", d["first"][1]); glue(f"ch7c_cublas_{n}_last", d["last"][1])
            for step, pct in d["pct_of_median"].items():
                glue(f"ch7c_{KEYS[step]}_{n}_pct_med", pct)
    for key, k in (("v08_plain", gemmlab.kernel.edited("hgemm/08_wgmma", "setmaxnreg_inc<232>();", "", backend="cpu")),
                   ("h03", gemmlab.instance("hopper/03_tma_ring"))):
        res = k.resources("sm_90")  # compile only, as setmaxnreg_check
        glue(f"ch7c_{key}_regs", res.registers); glue(f"ch7c_{key}_spills", res.spill_stores + res.spill_loads)
    ci = copy_instructions()
    glue("ch7c_copy_per_thread", ci["per_thread_01"]); glue("ch7c_copy_loads_per_thread", ci["per_thread_01"] // 2)
    glue("ch7c_copy_per_block", ci["per_block_01"])
    glue("ch7c_tma_per_block", ci["tma_per_block_02"])
    w = wgmma_per_tile()
    glue("ch7c_wgmma_per_tile", w["wgmma"])
    glue("ch7c_mma_per_tile", w["mma_sync_same_work"])
    glue("ch7c_compute_us", k_tile_compute_us())
    p = ring_prediction(4096)
    if p:
        for k in ("tile_02_us", "load_us", "tile_03_us", "tflops_03", "peak"):
            glue(f"ch7c_pred_{k}", p[k])
    spec = hardware.spec_for(GPU)  # what DRAM must deliver per k tile at 4096 in bands of 16 (each panel read once)
    fp4 = wave_footprint(4096 // BLOCK_M, 4096 // 256, 16, spec.sms)
    glue("ch7c_fp4096_kb", fp4["kb_per_k_tile"]); glue("ch7c_fp4096_kb_sm", fp4["kb_per_k_tile"] / spec.sms)
    glue("ch7c_fp4096_us", fp4["kb_per_k_tile"] * 1024 / (spec.dram_gbps * 1e9) * 1e6)  # = per SM at its share
    ser = serial_prediction()
    for k in ("copy_us", "tflops", "bytes"):
        glue(f"ch7c_ser_{k}", ser[k])
    clk = board_clock()
    for k in ("mhz", "mhz_lo", "mhz_hi", "watts", "spec_mhz"):
        glue(f"ch7c_clk_{k}", clk[k])
    glue("ch7c_clk_date", clk["date"])
    mc = models_at_clock()
    models = {KEYS[s]: (s,) + mc[s] for s in mc}
    if p:
        models["v08"] = ("hgemm/08_wgmma", p["tflops_03"], None)
    glue_more()
    glue_places()
    for key, (step, model, at_clk) in models.items():
        g = explain_gap(step, model, at_clock=at_clk)
        if g:
            glue(f"ch7c_{key}_at_clock", g["at_clock"]); glue(f"ch7c_{key}_busy_bound", g["busy_bound"])
            glue("ch7c_peak_at_clock", g["peak_at_clock"])
    ratios = [g["profiled"] / g["measured"] for g in (explain_gap(st, 0.0) for st in STEPS[1:]) if g and g["profiled"]]
    if ratios:
        glue("ch7c_prof_over_bench_lo", 100 * (min(ratios) - 1)); glue("ch7c_prof_over_bench_hi", 100 * (max(ratios) - 1))
    for g, key in ((1, "row"), (16, "band")):
        fp = wave_footprint(8192 // BLOCK_M, 8192 // 256, g, hardware.spec_for(GPU).sms)
        glue(f"ch7c_fp_{key}_rows", fp["rows"]); glue(f"ch7c_fp_{key}_cols", fp["cols"])
        glue(f"ch7c_fp_{key}_kb", fp["kb_per_k_tile"])
        glue(f"ch7c_fp_{key}_mb_wave", fp["kb_per_k_tile"] * (8192 // BLOCK_K) / 1024)  # all k tiles, once each
    for s in STEPS[1:]:
        prof = profiled(s)
        if prof:
            glue(f"ch7c_{KEYS[s]}_tensor_pct", prof["tensor_pct"])
            glue(f"ch7c_{KEYS[s]}_stall", prof["stalls"][0][0])
            glue(f"ch7c_{KEYS[s]}_registers", prof["registers"])


def l2_evidence() -> str:
    """Nsight Compute at 8192 in the lab's experiment on the tile order (results/experiments/hgemm-wgmma, an H100):
    L2 hit rate, L2 busy and the tensor pipe with row-major order and with bands of 16; counters only, no timing
    (the chapter's timings are the H200 run's). Glues what the prose quotes (ch7c_wg_*)."""
    wg = results.experiment("hgemm-wgmma")
    row, band = wg["ncu"]["NUM_STAGES=4, GROUP_M=1"], wg["ncu"]["NUM_STAGES=4, GROUP_M=16"]
    lines = [f"Nsight Compute, step 08 at 8192 ({wg['gpu']}, {wg['date']}):  L2 hit  L2 busy  tensor pipe"]
    for label, r in (("row-major (GROUP_M = 1)", row), ("bands of 16 (GROUP_M = 16)", band)):
        lines.append(f"  {label:44s} {r['l2_hit_pct']:5.0f}%  {r['l2_busy_pct']:6.0f}%  {r['tensor_pipe_pct']:10.0f}%")
    for key, r in (("row", row), ("band", band)):
        for m in ("tensor_pipe_pct", "l2_hit_pct", "l2_busy_pct"):
            glue(f"ch7c_wg_{key}_{m}", r[m])
    glue("ch7c_wg_gpu", wg["gpu"])
    return "\n".join(lines)


# --- Issue 51/52: the concepts step 08 brings in, each with its picture ----------------------------------------

def _kernel_text(step: str) -> str:
    return (REPO / "kernels" / f"{step}.cu").read_text()


def ws_roles(step: str = "hgemm/08_wgmma", gpu: str = GPU) -> dict:
    """Step 08's warp groups and their registers, read from the kernel: the block's threads
    (__launch_bounds__), what setmaxnreg_dec leaves the producer warp group and setmaxnreg_inc lets the consumers
    claim, the budget 128 x producer + consumer threads x consumer against the SM's register file (one block per
    SM), and the rows of the 128-row tile each consumer owns."""
    text = _kernel_text(step)
    threads = int(re.search(r"__launch_bounds__\((\d+),\s*1\)", text).group(1))
    dec = int(re.search(r"setmaxnreg_dec<(\d+)>", text).group(1))
    inc = int(re.search(r"setmaxnreg_inc<(\d+)>", text).group(1))
    regfile = hardware.spec_for(gpu).regs_per_sm
    groups = threads // 128
    consumers = groups - 1
    rows = BLOCK_M // consumers
    used = 128 * dec + 128 * consumers * inc
    return {"threads": threads, "groups": groups, "producer_regs": dec, "consumer_regs": inc,
            "consumer_threads": 128 * consumers, "regfile": regfile, "budget_used": used, "fits": used <= regfile,
            "cap_regs": regfile // threads // 8 * 8,
            "roles": [{"group": 0, "role": "producer", "threads": (0, 127), "regs": dec, "rows": None}] +
                     [{"group": g, "role": "consumer", "threads": (128 * g, 128 * g + 127), "regs": inc,
                       "rows": ((g - 1) * rows, g * rows - 1)} for g in range(1, groups)]}


def draw_warp_specialization(step: str = "hgemm/08_wgmma", stages: int = 4, block_n: int = 256):
    """Step 08's block: warp group 0 the producer (thread 0 issues TMA into the ring), warp groups 1 and 2 the
    consumers (rows 0-63 and 64-127 of the 128 x block_n tile); full[s] tells the consumers a stage has landed,
    empty[s] tells the producer it may refill it. Below, the register budget setmaxnreg sets, against the SM's
    register file. Roles differ from hopper/01-03, where warp groups 0 and 1 are both consumers."""
    w = ws_roles(step)
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(9.5, 5.4), gridspec_kw={"height_ratios": [3.4, 1]})
    colours = {"producer": "tab:orange", "consumer": "tab:blue"}
    for r in w["roles"]:
        y = 2.2 * (len(w["roles"]) - 1 - r["group"])
        ax.add_patch(Rectangle((0, y), 3.2, 1.8, color=colours[r["role"]], alpha=0.35))
        what = ("thread 0 waits on empty[s], then\nissues the TMA loads into stage s" if r["role"] == "producer"
                else f"rows {r['rows'][0]}-{r['rows'][1]} of the {BLOCK_M} x {block_n} tile:\n"
                     "waits on full[s], wgmma, arrives on empty[s]")
        ax.text(1.6, y + 0.9, f"warp group {r['group']}: {r['role']}\nthreads {r['threads'][0]}-{r['threads'][1]}, "
                f"{r['regs']} registers each\n{what}", ha="center", va="center", fontsize=7.5)
    ring_y = 2.2 * (len(w["roles"]) - 1) / 2 - 0.2
    for s in range(stages):
        ax.add_patch(Rectangle((4.6 + 0.9 * s, ring_y), 0.8, 2.2, fill=False, lw=1.2))
        ax.text(5.0 + 0.9 * s, ring_y + 1.1, f"stage {s}\nA 128x64\nB 64x{block_n}", ha="center", va="center",
                fontsize=6.5)
    ax.text(4.6 + 0.45 * stages, ring_y + 2.5, f"ring of {stages} stages in shared memory", ha="center", fontsize=7.5)
    py = 2.2 * (len(w["roles"]) - 1) + 0.9
    ax.annotate("", (4.55, ring_y + 1.9), (3.25, py), arrowprops=dict(arrowstyle="->", color="tab:orange", lw=1.5))
    ax.text(3.9, py + 0.1, "TMA", fontsize=7, color="tab:orange")
    for r in w["roles"][1:]:
        y = 2.2 * (len(w["roles"]) - 1 - r["group"]) + 0.9
        ax.annotate("", (3.25, y), (4.55, ring_y + 0.6), arrowprops=dict(arrowstyle="->", color="tab:blue", lw=1.2))
    ax.text(8.6, ring_y + 1.7, "full[s] (count 1): the bytes have landed\n-> the consumers may read stage s",
            fontsize=7, color="tab:blue", va="center")
    ax.text(8.6, ring_y + 0.5, "empty[s] (count 2): both consumers are done\n-> the producer may refill stage s",
            fontsize=7, color="tab:orange", va="center")
    ax.set_xlim(-0.1, 12.5)
    ax.set_ylim(-0.2, 2.2 * len(w["roles"]))
    ax.axis("off")
    ax.set_title(f"Step 08: {w['threads']} threads, {w['groups']} warp groups with different roles "
                 "(in hopper/01-03, warp groups 0 and 1 both multiply)", fontsize=8.5)
    prod, cons = 128 * w["producer_regs"], w["consumer_threads"] * w["consumer_regs"]
    bx.barh(0, prod, color="tab:orange", alpha=0.6)
    bx.barh(0, cons, left=prod, color="tab:blue", alpha=0.6)
    bx.axvline(w["regfile"], color="k", lw=1.5)
    bx.text(prod / 2, 0, f"128 x {w['producer_regs']}\n= {prod:,}", ha="center", va="center", fontsize=7)
    bx.text(prod + cons / 2, 0, f"{w['consumer_threads']} x {w['consumer_regs']} = {cons:,}", ha="center",
            va="center", fontsize=7)
    bx.text(w["regfile"], 0.5, f" the SM's {w['regfile']:,}", fontsize=7, va="center")
    bx.set_xlim(0, w["regfile"] * 1.18)
    bx.set_yticks([])
    bx.set_xlabel("32-bit registers of one SM (one block per SM)", fontsize=7)
    bx.set_title(f"setmaxnreg's budget: {prod:,} + {cons:,} = {prod + cons:,} <= {w['regfile']:,}", fontsize=8)
    plt.tight_layout()
    return ax, bx


def descriptor_strides(step: str = "hgemm/08_wgmma") -> dict:
    """The LBO and SBO the kernel passes to wgmma_desc_sw128 for A and for B (bytes), read from its source, with
    the constants they name: the 8-row x 128-byte swizzle atom is 1024 bytes; B's 64-column boxes B_BOX_BYTES apart."""
    text = _kernel_text(step)
    consts = {"B_BOX_BYTES": 64 * BLOCK_K * 2}
    val = lambda s: int(s) if s.isdigit() else consts[s]  # noqa: E731
    out = {}
    for op, var in (("a", "a_tile"), ("b", "b_tile")):
        m = re.search(rf"wgmma_desc_sw128\({var}[^,]*,\s*(\w+),\s*(\w+)\)", text)
        out[f"{op}_lbo"], out[f"{op}_sbo"] = val(m.group(1)), val(m.group(2))
    out["atom_bytes"] = 8 * 128
    return out


def draw_descriptor(step: str = "hgemm/08_wgmma", block_n: int = 256):
    """What a wgmma descriptor describes: 8-row x 128-byte swizzle atoms (each row's eight 16-byte chunks stored at
    chunk ^ row), stacked down the tile SBO bytes apart; for B, the next 64-column box LBO bytes to the right."""
    d = descriptor_strides(step)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [1, 2.3]})
    ax = axes[0]
    for r in range(8):
        for c in range(8):
            ax.add_patch(Rectangle((c ^ r, r), 1, 1, color=plt.get_cmap("tab10")(c), alpha=0.55, ec="white"))
            ax.text((c ^ r) + 0.5, r + 0.5, str(c), ha="center", va="center", fontsize=6.5)
    ax.set_xlim(0, 8); ax.set_ylim(8, 0); ax.set_aspect("equal")
    ax.set_xticks(range(0, 9, 2), [f"{16 * c}" for c in range(0, 9, 2)], fontsize=6.5)
    ax.set_yticks([r + 0.5 for r in range(8)], [f"row {r}" for r in range(8)], fontsize=6.5)
    ax.set_xlabel("byte within the 128-byte row", fontsize=7)
    ax.set_title(f"One swizzle atom: 8 rows x 128 bytes = {d['atom_bytes']} B\n(number: the chunk c stored at c ^ row)",
                 fontsize=8)
    bx = axes[1]
    boxes = block_n // 64
    for j in range(boxes):
        for a in range(8):  # 64 k rows = 8 atoms down each box
            bx.add_patch(Rectangle((1.15 * j, a), 1, 1, fill=True, color="tab:blue" if j == 0 else "0.85",
                                   alpha=0.5 if a % 2 else 0.3, ec="white"))
        bx.text(1.15 * j + 0.5, 8.5, f"box {j}", ha="center", fontsize=7)
    bx.annotate("", (0.5, 1.0), (0.5, 0.0), arrowprops=dict(arrowstyle="->", lw=1.5))
    bx.text(0.55, 0.6, f" SBO = {d['b_sbo']} B:\n next atom down", fontsize=7, va="center")
    bx.annotate("", (1.15 + 0.15, 3.5), (0.85, 3.5), arrowprops=dict(arrowstyle="->", lw=1.5, color="tab:red"))
    bx.text(1.15, 4.4, f"LBO = {d['b_lbo']:,} B:\nnext 64-column box", fontsize=7, color="tab:red")
    bx.set_xlim(-0.1, 1.15 * boxes); bx.set_ylim(9, -0.3); bx.axis("off")
    bx.set_title(f"B's stage (64 k x {block_n} n): {boxes} boxes of 64 columns, each 8 atoms down.\n"
                 f"A's 64-half rows are one atom wide: SBO = {d['a_sbo']} B, LBO unused (the code passes {d['a_lbo']})",
                 fontsize=8)
    plt.tight_layout()
    return axes


def tma_boxes(block_n: int = 256) -> list[dict]:
    """The TMA boxes of one k tile of a 128 x block_n block (A's 128 x 64, then B's 64 x 64 boxes) and where each
    lands in the stage: its byte offset and size (A first, B's boxes after it, 8 KB apart)."""
    a_bytes = BLOCK_M * BLOCK_K * 2
    boxes = [{"name": "A", "rows": BLOCK_M, "cols": BLOCK_K, "offset": 0, "bytes": a_bytes}]
    for j in range(block_n // 64):
        boxes.append({"name": f"B{j}", "rows": BLOCK_K, "cols": 64, "offset": a_bytes + j * 64 * BLOCK_K * 2,
                      "bytes": 64 * BLOCK_K * 2})
    return boxes


def draw_tma(block_n: int = 256):
    """One k tile by TMA: A's 128 x 64 box from the A matrix and B's 64 x 64 boxes from B, each written by the copy
    engine into its place in the stage's shared memory, already in the 128-byte swizzle (the chunk pattern of
    one atom shown in each)."""
    boxes = tma_boxes(block_n)
    fig, ax = plt.subplots(figsize=(10, 3.6))
    colours = plt.get_cmap("tab10").colors
    # global memory: A (rows x k), B (k x n) as outlines with the boxes shaded
    ax.add_patch(Rectangle((0, 0), 2.2, 2.6, fill=False, lw=1)); ax.text(1.1, -0.25, "A in global memory", ha="center", fontsize=7)
    ax.add_patch(Rectangle((0.6, 0.3), 1.1, 2.0, color=colours[0], alpha=0.5))
    ax.text(1.15, 1.3, "box\n128 x 64", ha="center", va="center", fontsize=7)
    ax.add_patch(Rectangle((2.8, 0), 4.4, 2.0, fill=False, lw=1)); ax.text(5.0, -0.25, "B in global memory", ha="center", fontsize=7)
    for j, b in enumerate(boxes[1:]):
        ax.add_patch(Rectangle((3.0 + 1.0 * j, 0.5), 0.95, 1.0, color=colours[j + 1], alpha=0.5))
        ax.text(3.475 + 1.0 * j, 1.0, f"{b['name']}\n64 x 64", ha="center", va="center", fontsize=6.5)
    # the stage in shared memory: a bar of bytes
    total = sum(b["bytes"] for b in boxes)
    scale = 9.5 / total
    for j, b in enumerate(boxes):
        x = 0.2 + b["offset"] * scale
        ax.add_patch(Rectangle((x, 3.3), b["bytes"] * scale - 0.05, 1.1, color=colours[j], alpha=0.5))
        for r in range(8):  # the swizzle pattern of the box's first atom, in miniature
            for c in range(8):
                ax.add_patch(Rectangle((x + 0.1 + 0.1 * (c ^ r), 3.4 + 0.1 * r), 0.09, 0.09,
                                       color=plt.get_cmap("tab10")(c), alpha=0.9))
        ax.text(x + 0.2, 4.55, f"{b['name']}: {b['offset'] // 1024}-{(b['offset'] + b['bytes']) // 1024} KB",
                fontsize=6.5)
        src = (1.15, 2.3) if b["name"] == "A" else (3.475 + 1.0 * (j - 1), 1.5)
        ax.annotate("", (x + 0.5, 3.3), src, arrowprops=dict(arrowstyle="->", color=colours[j], lw=1))
    ax.text(9.9, 3.85, f"one stage\n{total // 1024} KB\nin shared\nmemory", fontsize=7, va="center")
    ax.set_xlim(-0.1, 11); ax.set_ylim(4.9, -0.5); ax.axis("off")
    ax.set_title(f"One k tile: {len(boxes)} TMA boxes, each landing 128-byte swizzled in the stage "
                 "(the small squares: one atom's chunk order)", fontsize=8)
    return ax


def step08_prediction(size: int = 4096) -> dict | None:
    """Step 08's own prediction, from step 03's record and profile: in 03 thread 0's warp group refills the ring
    inside its own loop and waits there for the other warp group's release, so the two consumers run in lockstep
    and the tensor pipe idles (100 - busy)% of the time. If the producer warp group takes that job and the idle
    share goes, step 08 runs at 03's rate / busy share, capped by the peak at the board's clock. The registers add
    nothing: the consumers' 128 accumulators fit the 168 the launch bounds allow (setmaxnreg_check)."""
    r, prof = at("hopper/03_tma_ring", size), profiled("hopper/03_tma_ring")
    if r is None or prof is None:
        return None
    clk = board_clock()
    peak_at_clock = hardware.spec_for(GPU).fp16_tensor_tflops * clk["mhz"] / clk["spec_mhz"]
    pred = min(r["tflops"] / (prof["tensor_pct"] / 100), peak_at_clock)
    return {"from_tflops": r["tflops"], "busy_pct": prof["tensor_pct"], "tflops": pred,
            "gain_pct": 100 * (pred / r["tflops"] - 1), "peak_at_clock": peak_at_clock}


def stall_values(step: str, names=("barrier", "long_scoreboard")) -> dict:
    """Nsight Compute's warps stalled per issued instruction for `names` (results/<gpu>.ncu.json, at 4096)."""
    m = profile.load(GPU).get(step) or {}
    return {n: m.get(f"smsp__average_warps_issue_stalled_{n}_per_issue_active.ratio") for n in names}


def sass_count(step: str, op: str) -> int:
    """How many `op` instructions the step's sm_90a SASS holds (a static count: instruction sites, not executions)."""
    return nvrtc.count_instructions(gemmlab.instance(step).sass("sm_90"), [op])[op]


def check(step: str, arch_error: bool = False) -> None:
    """The step against float64 in the emulator, a shape the step refuses (K = 12), and for hgemm/08 the refusal
    on an sm_80 target: what the chapter's check cells print."""
    print(gemmlab.verify(gemmlab.step(step, backend="cpu")), "(emulator)")
    if arch_error:
        try:
            gemmlab.instance(step).resources("sm_80")
        except gemmlab.errors.ArchError as e:
            message = str(e).splitlines()[0]
            print("ArchError for sm_80:", "it needs sm_90a" in message, "| wgmma named:", "wgmma" in message)
    try:
        gemmlab.step(step, backend="cpu")(np.ones((64, 12), np.float16), np.ones((12, 64), np.float16))
    except gemmlab.errors.ShapeError as e:
        print("ShapeError for K = 12:", str(e).split(":")[1].strip()[:60], "...")


def glue_more() -> None:
    """The values of the pictures and predictions added for issue 51/52: step 08's roles and register budget,
    the descriptors' strides, step 08's own prediction, the stall figures and static instruction counts."""
    w = ws_roles()
    for k in ("threads", "producer_regs", "consumer_regs", "budget_used", "regfile", "cap_regs"):
        glue(f"ch7c_ws_{k}", w[k])
    d = descriptor_strides()
    for k, v in d.items():
        glue(f"ch7c_desc_{k}", v)
    p = step08_prediction()
    if p:
        glue("ch7c_v08_pred_tflops", p["tflops"]); glue("ch7c_v08_pred_gain_pct", p["gain_pct"])
    for key, step in (("h02", "hopper/02_tma"), ("h03", "hopper/03_tma_ring"), ("v08", "hgemm/08_wgmma"),
                      ("v10", "hgemm/10_tma_store"), ("v11", "hgemm/11_mma_in_flight")):
        for n, v in stall_values(step).items():
            if v is not None:
                glue(f"ch7c_{key}_{n}", v)
    for key, step in (("h02", "hopper/02_tma"), ("h03", "hopper/03_tma_ring"), ("v08", "hgemm/08_wgmma")):
        for op in ("BAR", "UTMALDG", "HGMMA"):
            glue(f"ch7c_{key}_sass_{op.lower()}", sass_count(step, op))
    per_group = BLOCK_K // 16  # wgmmas per warp group and k tile
    glue("ch7c_wgmma_per_group", per_group)
    glue("ch7c_h02_tma_copies", sass_count("hopper/02_tma", "UTMALDG") // copy_instructions()["tma_per_block_02"])
    glue("ch7c_h02_wgmma_copies", sass_count("hopper/02_tma", "HGMMA") // per_group)
    r11, r10 = profiled("hgemm/11_mma_in_flight"), profiled("hgemm/10_tma_store")
    if r11 and r10:
        glue("ch7c_v10_tensor_pct", r10["tensor_pct"]); glue("ch7c_v11_tensor_pct", r11["tensor_pct"])


# ------------------------------------------------------------------------------------------------
# Where the barrier stall sits, and the profiled launch's clock: a repeat of the profiles' protocol (H200,
# PLACES_DATE, lab/gaps/gpu.sh PART=places) in another process than the one run's profiles

PLACES = "gaps-places"  # results/experiments/gaps-places: source pages (src-*.csv.gz) and launches/first-*.csv.gz
PLACES_DATE = "2026-11-29"
SOURCE_PAGES = {"hopper/02_tma": "gaps-more/src-hopper-02_tma-4096.csv.gz",  # under results/experiments/
                "hopper/03_tma_ring": "gaps-places/src-hopper03-4096.csv.gz",
                "hgemm/08_wgmma": "gaps-places/src-h08-4096.csv.gz",
                "hgemm/09_persistent": "gaps-more/src-hgemm-09_persistent-4096.csv.gz",
                "hgemm/11_mma_in_flight": "gaps-more/src-hgemm-11_mma_in_flight-4096.csv.gz"}  # PART=places, =more
FIRST_STEPS = ("hopper/01_wgmma", "hopper/02_tma", "hopper/03_tma_ring", "hgemm/08_wgmma", "hgemm/09_persistent",
               "hgemm/10_tma_store", "hgemm/11_mma_in_flight", "hgemm/12_stream_k")
WAITS = ("BAR.SYNC", "BAR.ARV", "BAR.RED", "SYNCS", "WARPGROUP.DEPBAR", "WARPSYNC", "DEPBAR")


def source_page(text: str) -> list[dict]:
    """The per-instruction rows of Nsight Compute's source page (`ncu --page source --print-source sass --csv`), in
    address order: 'Source' (the SASS line) and each column as text (stall samples by reason: stall_<reason>)."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    table = list(csv.reader(io.StringIO("\n".join(lines))))
    start = next(i for i, r in enumerate(table) if r and r[0] == "Address")
    header = table[start]
    return [dict(zip(header, r)) for r in table[start + 1:] if len(r) == len(header)]


def _samples(text: str) -> float:
    return float(text.replace(",", "")) if text not in ("", "-") else 0.0


def wait_before(rows: list[dict], i: int, reach: int = 16) -> str:
    """The barrier or wait instruction a stall at row i belongs to: the nearest at or before it (a warp stalled at
    BAR.SYNC is sampled on the instruction after it; one stalled at WARPGROUP.DEPBAR on the DEPBAR itself), as
    its opcode family ('WARPGROUP.DEPBAR', 'BAR.SYNC', ...), or 'other'."""
    for j in range(i, max(-1, i - reach), -1):
        src = rows[j]["Source"]
        for w in WAITS:
            if w in src:
                return w
    return "other"


def _page_text(step: str) -> str | None:
    path = results.EXPERIMENTS / SOURCE_PAGES[step] if step in SOURCE_PAGES else None
    return gzip.open(path, "rt").read() if path and path.exists() else None


def stall_places(step: str, reason: str = "long_sb", text: str | None = None, near: str = "TRYWAIT") -> dict | None:
    """Where `step`'s samples of one stall `reason` (the source page's column stall_<reason>) sit: their share of all
    samples, and the instructions holding at least 10% of them, each with its share of the reason's samples and the
    nearest instruction at or before it (16 rows) whose SASS holds `near` (the mbarrier's try-wait, whose predicate a
    waiting branch reads), or ''."""
    text = _page_text(step) if text is None else text
    if text is None:
        return None
    rows = source_page(text)
    total = sum(_samples(r["Warp Stall Sampling (All Samples)"]) for r in rows) or 1.0
    col = f"stall_{reason}"
    by_row = {i: _samples(r.get(col, "0")) for i, r in enumerate(rows)}
    mine = sum(by_row.values()) or 1.0
    sites = []
    for i, v in sorted(by_row.items(), key=lambda kv: -kv[1]):
        if v < 0.1 * mine:
            break
        waits = next((rows[j]["Source"].strip() for j in range(i, max(-1, i - 16), -1) if near in rows[j]["Source"]), "")
        sites.append({"sass": rows[i]["Source"].strip(), "pct": 100 * v / mine, "after": waits})
    ops: dict[str, float] = {}
    for i, v in by_row.items():
        if v:
            op = rows[i]["Source"].split()[1 if rows[i]["Source"].split()[0].startswith("@") else 0].split(".")[0]
            ops[op] = ops.get(op, 0.0) + 100 * v / mine
    return {"step": step, "pct_of_all": 100 * sum(by_row.values()) / total, "sites": sites, "by_opcode": ops}


def barrier_places(step: str, text: str | None = None) -> dict | None:
    """Where `step`'s `barrier` stall samples sit (its source page at 4096, SOURCE_PAGES; or `text`): the share of
    all samples that are `barrier`, and of those the share on WARPGROUP.DEPBAR (wgmma.wait_group in SASS), after
    BAR.SYNC (__syncthreads) and elsewhere; the DEPBAR instructions holding them; and the overall `barrier` stall
    (warps per issued instruction) of the one run's profile beside the repeat's, to show the repeat matches it."""
    if text is None:
        text = _page_text(step)
        if text is None:
            return None
    rows = source_page(text)
    total = sum(_samples(r["Warp Stall Sampling (All Samples)"]) for r in rows) or 1.0
    by_wait: dict[str, float] = {}
    sites, kinds = {}, {}
    for i, r in enumerate(rows):
        v = _samples(r.get("stall_barrier", "0"))
        if v:
            w = wait_before(rows, i)
            by_wait[w] = by_wait.get(w, 0.0) + v
            if w == "WARPGROUP.DEPBAR":
                sites[i] = v
                kind = rows[i]["Source"].split("WARPGROUP.DEPBAR.LE")[-1].strip() if "DEPBAR" in rows[i]["Source"] else "?"
                kinds[kind] = kinds.get(kind, 0.0) + v
    bar = sum(by_wait.values()) or 1.0
    prof = profile.load(GPU)
    one, rep = (stall_values(k).get("barrier") if k in prof else None for k in (step, f"{step}<source>"))
    big = [i for i, v in sites.items() if v >= 0.01 * bar]
    return {"step": step, "samples": total, "barrier_pct": 100 * bar / total if by_wait else 0.0,
            "depbar_pct": 100 * by_wait.get("WARPGROUP.DEPBAR", 0.0) / bar,
            "barsync_pct": 100 * by_wait.get("BAR.SYNC", 0.0) / bar,
            "depbar_of_all_pct": 100 * by_wait.get("WARPGROUP.DEPBAR", 0.0) / total,
            "depbar_sites": len(big), "depbar_sass": rows[big[0]]["Source"].strip() if big else "",
            "barrier_one_run": one, "barrier_repeat": rep,
            "depbar_kinds": {k: 100 * v / bar for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])}}


def barrier_places_table(steps=("hopper/03_tma_ring",)) -> str:
    """One line per step: barrier_places as the chapter prints it."""
    w = max(19, *(len(s) for s in steps))
    lines = [f"where the barrier samples sit (Nsight Compute's source page, {GPU}, 4096, one launch; a repeat "
             f"profile, {PLACES_DATE})",
             f"{'step':{w}s} {'barrier stall: one run | repeat':>31s} {'barrier, % of samples':>22s} "
             f"{'on WARPGROUP.DEPBAR':>20s} {'after BAR.SYNC':>15s}"]
    for s in steps:
        p = barrier_places(s)
        if p is None:
            lines.append(f"{s:{w}s} recorded data missing")
            continue
        one = f"{p['barrier_one_run']:.2f}" if p["barrier_one_run"] is not None else "-"
        rep = f"{p['barrier_repeat']:.2f}" if p["barrier_repeat"] is not None else "-"
        lines.append(f"{s:{w}s} {one + ' | ' + rep:>31s} {p['barrier_pct']:21.1f}% "
                     f"{p['depbar_pct']:6.1f}% ({p['depbar_sites']} site{'s' if p['depbar_sites'] != 1 else ''}) "
                     f"{p['barsync_pct']:14.1f}%")
    lines.append("barrier stall: warps per issued instruction; the DEPBAR sites: "
                 + "; ".join(f"{s}: {p['depbar_sass']}" for s in steps if (p := barrier_places(s)) and p["depbar_sass"]))
    return "\n".join(lines)


def first_launches(steps=FIRST_STEPS) -> list[dict]:
    """The first launch of a fresh process at 4096 (the profiles' protocol, repeated in another process,
    PLACES_DATE): its SM clock (MHz) and time (µs), beside the one run's profiled launch and benchmark median (µs)
    and the clock the board holds under sustained load (board_clock): `over_board_pct`, how much faster the clock."""
    clk = board_clock()
    prof = profile.load(GPU)
    out = []
    for s in steps:
        path = results.EXPERIMENTS / PLACES / "launches" / f"first-{s.replace('/', '-')}.csv.gz"
        if not path.exists():
            continue
        launch = profile.launches(gzip.open(path, "rt").read())[0]
        rec = one_run([s], sizes=(4096,))
        mhz = launch["sm__cycles_elapsed.avg.per_second"] / 1e6
        prof_ns = (prof.get(s) or {}).get("gpu__time_duration.sum")
        out.append({"step": s, "mhz": mhz, "us": launch["gpu__time_duration.sum"] / 1e3,
                    "profiled_us": prof_ns / 1e3 if prof_ns else None,
                    "bench_us": 2 * 4096 ** 3 / (rec[0]["tflops"] * 1e12) * 1e6 if rec else None,
                    "over_board_pct": 100 * (mhz / clk["mhz"] - 1), "board_mhz": clk["mhz"]})
    return out


def glue_places() -> None:
    """The barrier's places (steps 02, 03, 08 and chapter 7d's 11), step 02's long_scoreboard places, and the first
    launches' clocks (steps 01-03 and 08, this chapter's)."""
    for key, step in (("h02", "hopper/02_tma"), ("h03", "hopper/03_tma_ring"), ("v08", "hgemm/08_wgmma"),
                      ("v11", "hgemm/11_mma_in_flight")):
        p = barrier_places(step)
        if p:
            for k in ("barrier_pct", "depbar_pct", "barsync_pct", "depbar_of_all_pct", "depbar_sites",
                      "barrier_repeat"):
                glue(f"ch7c_{key}_src_{k}", p[k])
    lsb = stall_places("hopper/02_tma", "long_sb")
    if lsb:  # step 02's long_scoreboard: the branches that loop on the mbarrier's try-wait
        glue("ch7c_h02_src_lsb_pct", lsb["pct_of_all"]); glue("ch7c_h02_src_lsb_sites", len(lsb["sites"]))
        glue("ch7c_h02_src_lsb_site_pct", sum(x["pct"] for x in lsb["sites"] if "TRYWAIT" in x["after"]))
    p11 = barrier_places("hgemm/11_mma_in_flight")
    if p11:  # step 11's warps still wait at a DEPBAR, now wgmma_wait<1>'s
        glue("ch7c_v11_src_wait1_pct", p11["depbar_kinds"].get("gsb0, 0x1", 0.0))
    first = [f for f in first_launches() if f["step"] in STEPS]
    if first:
        glue("ch7c_first_mhz_lo", min(f["mhz"] for f in first)); glue("ch7c_first_mhz_hi", max(f["mhz"] for f in first))
        glue("ch7c_first_over_lo", min(f["over_board_pct"] for f in first))
        glue("ch7c_first_over_hi", max(f["over_board_pct"] for f in first))
        glue("ch7c_first_time_diff", max(abs(f["us"] / f["profiled_us"] - 1) * 100 for f in first if f["profiled_us"]))
        glue("ch7c_places_date", PLACES_DATE)
