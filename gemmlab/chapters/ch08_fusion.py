"""Chapter 8, "Fusing A x B x C": the chapter's figures, tables, sentences and pictures, in one module.

One truth per number: every measured figure of the chapter comes from ONE run of the fusion lane, the benchmark
records of one GPU and one date (results/<gpu>.fusion.json, kind "benchmark"), in which the fused steps, `a @ b @ c`
(PyTorch and CuPy, eager) and the same two GEMMs replayed from a CUDA graph were timed in turn on the same inputs.
`lane_run` returns that run and refuses a mix. A figure from another run (a tile sweep, an experiment under
results/experiments/) is quoted only in a sentence that names that run. The ownership pictures are drawn from
Python twins of the kernels' index arithmetic (`tile_owner`, `k_tiles_of`, `warp_origin`, `panel_rows`), which
tests/test_ch08_fusion.py holds to the kernels' own loops.
"""
from __future__ import annotations

import gzip
import statistics
from typing import Sequence

import numpy as np

from ..measure import hardware, profile, results
from ..measure import fusion
from .explore import blocks_per_sm, explorer  # noqa: F401  (explorer: the chapter's live sliders)
from .glue import glue
from .sitecontrols import FUSION_GPU as GPU
from .sitecontrols import fusion_twin as twin  # noqa: F401  (the chapter's static controls)
from .plots import COLOURS, roofline as draw
from .. import errors
from ..measure.check import verify
from ..runtime import variants
from ..runtime.kernel import step as kernel_step
from ..runtime.source import REPO
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

__all__ = ["GPU", "SPEC", "STEPS", "fusion", "lane_run", "run_label", "glue_run", "baseline_table",
           "glue_baseline", "prediction", "roofline", "glue_prediction", "tile_owner", "k_tiles_of",
           "warp_origin", "panel_rows", "ownership", "occupancy", "glue_tf32x3_bound", "plot_run",
           "speedup_table", "glue_measure", "glue_step04", "glue_counters", "one_tf32_source", "glue_gap",
           "sweep_table", "glue_sweep", "twin", "explorer", "tf32_tflops", "occupancy_of", "glue_panels", "error_head",
           "error_subject", "warm_launches", "glue_warm"]

STEPS = ("fused/01_naive_row", "fused/02_row_panel", "fused/03_two_phase", "fused/04_split_k", "fused/05_tf32x3")
EAGER = ("torch a@b@c", "cupy a@b@c")          # a @ b @ c: two cuBLAS launches (fusion.BASELINES)
GRAPHS = ("torch graph a@b@c", "cupy graph a@b@c")  # the same two GEMMs replayed from a CUDA graph
H100 = "NVIDIA H100 80GB HBM3"  # the GPU of the earlier tile sweeps and the blocks' timeline (fusion-tf32x3)
SPEC = hardware.spec_for("h200")  # the spec sheet of the GPU whose run the chapter reads (132 SMs, like the H100)


# ------------------------------------------------------------------------------------------------
# The one run
# ------------------------------------------------------------------------------------------------
def lane_run(live: bool = False, gpu: str = GPU) -> list[dict]:
    """The benchmark records of one run of the fusion lane: live on a GPU (`live=True`, a minute or two), else
    the recorded run of `gpu`. Raises if the records mix GPUs or dates (records of two runs)."""
    recs = fusion.benchmark(verbose=False, live=live, gpu=None if live else gpu)
    recs = [r for r in recs if r["kind"] == "benchmark"]
    runs = {(r["gpu"], r["date"]) for r in recs}
    if len(runs) > 1:
        raise ValueError(f"the benchmark records mix runs {sorted(runs)}: run the lane again "
                         "(python -m gemmlab fusion-lane) so that every step and baseline comes from one run")
    return recs


def run_label(recs: list[dict]) -> str:
    """'NVIDIA H200, lane run of 2026-11-25' (or a sentence saying that no run is recorded)."""
    return f"{recs[0]['gpu']}, lane run of {recs[0]['date']}" if recs else "no recorded lane run"


def _us(recs: list[dict], step: str, n: int) -> float | None:
    r = fusion.lookup(recs, step, n)
    return r["median_s"] * 1e6 if r else None


def fastest_record(recs: list[dict], steps: Sequence[str], n: int) -> dict | None:
    rows = [r for r in (fusion.lookup(recs, s, n) for s in steps) if r]
    return min(rows, key=lambda r: r["median_s"]) if rows else None


def glue_run(recs: list[dict]) -> None:
    """Glue the run's GPU and date (ch8_gpu, ch8_date, ch8_nsteps)."""
    glue("ch8_gpu", recs[0]["gpu"] if recs else "GPU (no run recorded yet)")
    glue("ch8_date", recs[0]["date"] if recs else "-")
    glue("ch8_sizes", ", ".join(str(n) for n in sorted({r["m"] for r in recs})) or "-")


def baseline_table(recs: list[dict]) -> None:
    """The run's baselines in microseconds at each size: a @ b @ c eager, from a CUDA graph, one GEMM."""
    if not recs:
        print("No recorded lane run yet: the GPU lane (python -m gemmlab fusion-lane) writes one.")
        return
    sizes = sorted({r["m"] for r in recs})
    print(f"{run_label(recs)}: device time per call, median, µs")
    print(f"{'N':22s}" + "".join(f"{n:>9d}" for n in sizes))
    for step in EAGER + GRAPHS + ("torch a@b",):
        row = [_us(recs, step, n) for n in sizes]
        if any(row):
            print(f"{step:22s}" + "".join(f"{t:9.1f}" if t else f"{'-':>9s}" for t in row))


def glue_baseline(recs: list[dict], n: int = 512) -> None:
    """Where a @ b @ c's time goes at n, in the run (eager, one GEMM, the graph), with the H200 profiler's kernel
    time (another run: fusion-kernel-time's profiler.py) and the spread of a @ b @ c over the GPU's recorded runs."""
    eager, graph, one = fastest_record(recs, EAGER, n), fastest_record(recs, GRAPHS, n), fusion.lookup(recs, "torch a@b", n)
    glue("ch8_n", n)
    glue("ch8_eager_us", eager["median_s"] * 1e6 if eager else float("nan"))
    glue("ch8_eager_name", eager["step"] if eager else "-")
    glue("ch8_graph_us", graph["median_s"] * 1e6 if graph else float("nan"))
    glue("ch8_one_us", one["median_s"] * 1e6 if one else float("nan"))
    glue("ch8_launch_share", (eager["median_s"] - graph["median_s"]) * 1e6 if eager and graph else float("nan"))
    kt = results.experiment("fusion-kernel-time")["profiler"][GPU]
    sums = kt["kernels"][str(n)]["torch a@b@c"]
    glue("ch8_prof_date", kt["date"])
    glue("ch8_prof_kernels", sums["per_call"])
    glue("ch8_prof_kernel_us", statistics.median(sums["sum_us"]))
    # a @ b @ c at n in every recorded run of this GPU: the benchmark's own, and each sweep's (a run of its own)
    seen = [r["baseline_median_s"] * 1e6 for r in fusion.load(GPU) if r["m"] == n and "baseline_median_s" in r]
    glue("ch8_eager_lo", min(seen)); glue("ch8_eager_hi", max(seen))
    glue("ch8_eager_runs", len({(r["kind"], r["date"], r["step"]) for r in fusion.load(GPU)
                                if r["m"] == n and r["kind"] != "benchmark"}) + 1)


# ------------------------------------------------------------------------------------------------
# The prediction: traffic and a time bound (models only, no records)
# ------------------------------------------------------------------------------------------------
def prediction(sizes: Sequence[int] = (512, 4096)) -> None:
    """Bytes at best (fused, and as two GEMMs) and the roofline's bound on the H200's spec sheet, at each size."""
    print(f"{SPEC.name}: fp32 FFMA {SPEC.fp32_tflops:g} TFLOP/s, DRAM {SPEC.dram_gbps:g} GB/s, L2 {SPEC.l2_mb:g} MB")
    for n in sizes:
        fused, pair = fusion.traffic_bytes(n), fusion.traffic_bytes(n, fused=False)
        flops_us = fusion.flops(n) / (SPEC.fp32_tflops * 1e12) * 1e6
        print(f"N={n}: {fusion.flops(n) / 1e9:.2f} GFLOP; {fused / 2**20:.0f} MiB fused, {pair / 2**20:.0f} MiB as "
              f"two GEMMs (T: {4 * n * n / 2**20:.0f} MiB); arithmetic {flops_us:.1f} µs, traffic "
              f"{fused / (SPEC.dram_gbps * 1e9) * 1e6:.2f} µs fused / {pair / (SPEC.dram_gbps * 1e9) * 1e6:.2f} µs")


def roofline(recs: list[dict], steps: Sequence[str] = (), sizes: Sequence[int] = (512, 4096)) -> None:
    """The H200's roofline with the fused problem's intensity at a few N, and the run's `a @ b @ c` (and `steps`)
    as points at `sizes` (a point: FLOP/s of the fused problem against its intensity, fused or as two GEMMs)."""

    fig, ax = plt.subplots(figsize=(7, 4))
    points = []
    for step in ("torch a@b@c",) + tuple(steps):
        for n in sizes:
            r = fusion.lookup(recs, step, n)
            if r:
                tag = "a@b@c" if step == "torch a@b@c" else step.split("/")[1][:2]
                points.append((f"{tag} {n}", fusion.intensity(n, fused=step.startswith("fused")), r["tflops"]))
    draw(ax, SPEC, points, measured=False, xlim=(1, 4096))
    for line in ax.get_lines():  # the shared roofline draws fp16's tensor ceiling: not this chapter's pipe
        if line.get_label().startswith("fp16 tensor"):
            line.set_label(line.get_label().replace("fp16 tensor (spec)", "fp16 tensor (spec; not used here)"))
            line.set_alpha(0.35)
    tf32 = tf32_tflops()
    x = np.geomspace(1, 4096, 400)
    ax.plot(x, np.minimum(tf32, SPEC.dram_gbps * 1e9 * x / 1e12), "-", color="tab:purple", lw=2,
            label=f"TF32 tensor (spec): {tf32:g} TFLOP/s; 3xTF32 does 3 per fp32 product")
    ax.legend(fontsize=7, loc="lower right")
    for n in (256, 512, 1024, 4096):
        ax.axvline(fusion.intensity(n), color="0.6", lw=0.8, ls=":")
        ax.annotate(f"N={n}", (fusion.intensity(n), 0.3), rotation=90, fontsize=7, color="0.4", xytext=(2, 0),
                    textcoords="offset points")
    ax.text(0.01, 0.97, f"points: {run_label(recs)}", transform=ax.transAxes, fontsize=7, va="top",
            color=COLOURS["point"])
    plt.show()


def tf32_tflops() -> float:
    """The spec sheet's dense TF32 tensor rate of the run's GPU: half its dense fp16 rate on Hopper (H100/H200 data
    sheets: 494.7 against 989.4 TFLOP/s without sparsity)."""
    return SPEC.fp16_tensor_tflops / 2


def launch_floor_us(n: int = 512) -> float:
    """An empty kernel's call, launched as the lane launches a fused step (arguments packed once, cuLaunchKernel),
    on the H200: median of the rounds of fusion-kernel-time's launch run (a run of its own, 2026-11-24)."""
    launch = results.experiment("fusion-kernel-time")["launch"][GPU]
    return statistics.median(launch["us"][str(n)]["empty packed"])


def glue_prediction(recs: list[dict], n: int = 512, big: int = 4096) -> None:
    """The chapter's prediction at n: the arithmetic bound at the FFMA peak, one launch's floor (measured on the
    H200 in another run) and what they allow against the run's baselines (ch8_p_*)."""
    bound = fusion.ideal_time_s(n, SPEC.fp32_tflops, SPEC.dram_gbps) * 1e6
    saved = (fusion.traffic_bytes(n, fused=False) - fusion.traffic_bytes(n)) / (SPEC.dram_gbps * 1e9) * 1e6
    floor = launch_floor_us(n)
    glue("ch8_p_bound", bound)
    glue("ch8_p_saved_mib", (fusion.traffic_bytes(n, fused=False) - fusion.traffic_bytes(n)) / 2**20)
    glue("ch8_p_saved_us", saved)
    glue("ch8_p_launch", floor)
    glue("ch8_p_launch_date", results.experiment("fusion-kernel-time")["launch"][GPU]["date"])
    glue("ch8_p_best", bound + floor)
    eager, graph = fastest_record(recs, EAGER, n), fastest_record(recs, GRAPHS, n)
    nan = float("nan")
    glue("ch8_p_vs_eager", eager["median_s"] * 1e6 / (bound + floor) if eager else nan)
    glue("ch8_p_vs_graph", graph["median_s"] * 1e6 / (bound + floor) if graph else nan)
    glue("ch8_n_cross", next(k for k in range(1, 10000) if fusion.intensity(k) > SPEC.balance()))
    glue("ch8_balance", SPEC.balance())
    glue("ch8_sms", SPEC.sms); glue("ch8_l2_mb", SPEC.l2_mb)
    glue("ch8_tiles128", cdiv(n, 128) ** 2)
    eager = fastest_record(recs, EAGER, big)
    glue("ch8_p_big", big)
    glue("ch8_p_big_us", eager["median_s"] * 1e6 if eager else nan)
    glue("ch8_p_big_tf", eager["tflops"] if eager else nan)
    glue("ch8_p_big_pct", 100 * eager["tflops"] / SPEC.fp32_tflops if eager else nan)
    glue("ch8_p_big_headroom", SPEC.fp32_tflops / eager["tflops"] if eager else nan)  # a kernel at the FFMA peak


# ------------------------------------------------------------------------------------------------
# Who computes what: Python twins of the kernels' index arithmetic, and the pictures drawn from them
# ------------------------------------------------------------------------------------------------
def cdiv(a: int, b: int) -> int:
    """Ceiling division, as common.cuh's cdiv."""
    return -(-a // b)


def tile_owner(rows: int, cols: int, block_m: int, block_n: int, grid: int) -> np.ndarray:
    """The block that computes each BLOCK_M x BLOCK_N output tile of a rows x cols product in steps 03 to 05:
    `for (tile = blockIdx.x; tile < tiles; tile += gridDim.x)`, tile -> (tile / tile_cols, tile % tile_cols)."""
    tile_rows, tile_cols = cdiv(rows, block_m), cdiv(cols, block_n)
    owner = np.full((tile_rows, tile_cols), -1, dtype=int)
    for block in range(grid):
        for tile in range(block, tile_rows * tile_cols, grid):
            owner[tile // tile_cols, tile % tile_cols] = block
    return owner


def k_tiles_of(group: int, inner: int, block_k: int, split_k: int) -> list[int]:
    """The K tiles (indices) that thread group `group` sums in steps 04 and 05: round r loads K tile
    r * SPLIT_K + group, for the same cdiv(K tiles, SPLIT_K) rounds in every group; a tile past the end is zeros."""
    k_tiles = cdiv(inner, block_k)
    rounds = cdiv(k_tiles, split_k)
    return [t for t in (r * split_k + group for r in range(rounds)) if t < k_tiles]


def warp_origin(warp_id: int, block_n: int, warp_m: int, warp_n: int) -> tuple[int, int]:
    """Step 05: the (row, column) in its group's BLOCK_M x BLOCK_N tile where warp `warp_id` starts its WARP_M x
    WARP_N tile (warp_row = warp_id / WARPS_N * WARP_M, warp_col = warp_id % WARPS_N * WARP_N)."""
    warps_n = block_n // warp_n
    return warp_id // warps_n * warp_m, warp_id % warps_n * warp_n


def panel_rows(block: int, rows: int, panel_m: int) -> range:
    """Steps 01 (PANEL_M = 1) and 02: the rows of T and E that block `block` computes."""
    return range(block * panel_m, min(rows, (block + 1) * panel_m))


def step_colours(k: int):
    cmap = plt.get_cmap("tab20")
    return [cmap(i % 20) for i in range(k)]


def draw_box(ax, x: float, y: float, w: float, h: float, colour, label: str = "", fontsize: int = 7, **kw) -> None:
    ax.add_patch(Rectangle((x, y), w, h, facecolor=colour, edgecolor=kw.pop("edgecolor", "white"),
                           lw=kw.pop("lw", 1), **kw))
    if label:
        ax.text(x + w / 2, y + h / 2, label, ha="center", va="center", fontsize=fontsize)


def draw_frame(ax, width: float, height: float) -> None:
    ax.set_xlim(0, width); ax.set_ylim(height, 0)
    ax.set_aspect("equal"); ax.axis("off")


def _draw_panels(step: str, p: dict, n: int) -> None:
    """Steps 01 and 02: A x B = T (on chip) and T x C = E, the rows of each block coloured, B and C grey."""
    panel = p.get("PANEL_M", 1)
    blocks = cdiv(n, panel)
    colours = step_colours(blocks)
    fig, ax = plt.subplots(figsize=(10, 2.6))
    names = ("A", "B", "T = A B", "C", "E = T C")
    notes = ("block b: its rows", "read whole by\nevery block", "rows of block b:\nshared memory",
             "read whole by\nevery block", "the same rows")
    for i, (name, note) in enumerate(zip(names, notes)):
        x0 = i * 1.5 * n
        if name in ("B", "C"):
            draw_box(ax, x0, 0, n, n, "0.85", edgecolor="0.5")
        else:
            for b in range(blocks):
                rows = panel_rows(b, n, panel)
                draw_box(ax, x0, rows.start, n, len(rows), colours[b], f"block {b}" if blocks <= 8 else "",
                     edgecolor="white")
        ax.text(x0 + n / 2, -n * 0.08, name, ha="center", va="bottom", fontsize=9)
        ax.text(x0 + n / 2, n * 1.06, note, ha="center", va="top", fontsize=7)
        if i < 4:
            ax.text(x0 + 1.25 * n, n / 2, "x" if i in (0, 2) else ("=" if i == 1 else "="), ha="center",
                    va="center", fontsize=12)
    if panel > 1:  # step 02: block 0's rows of T and E, cut into each thread's THREAD_M x THREAD_N tiles
        tm, tn, chunk = p["THREAD_M"], p["THREAD_N"], min(p["BLOCK_N"], n)
        for x0 in (2 * 1.5 * n, 4 * 1.5 * n):
            for r in range(0, panel, tm):
                for c in range(0, chunk, tn):
                    draw_box(ax, x0 + c, r, tn, tm, "none", edgecolor="0.15", lw=0.4)
    ax.text(3 * n * 1.5 - 0.25 * n, n / 2, "", fontsize=1)
    draw_frame(ax, 7.5 * n - 0.5 * n, n * 1.4)
    ax.set_ylim(n * 1.45, -n * 0.25)
    fig.suptitle(f"{step}, M = K = L = N = {n}, PANEL_M = {panel}: {blocks} blocks, one per "
                 + ("row" if panel == 1 else f"panel of {panel} rows;\noutlined in block 0's rows of T and E: each "
                    f"thread's {p['THREAD_M']} x {p['THREAD_N']} tile of a {p['BLOCK_N']}-column chunk"), fontsize=9)


def ownership(step: str, n: int | None = None, grid: int | None = None, **params) -> None:
    """The picture of who computes what in a fused step, drawn from the twins above (default tiles unless
    `params`): 01/02 the rows of T kept on chip; 03 the two phases' tiles by block around the grid barrier;
    04 the K tiles of one output tile by thread group; 05 a tile's warps and their mma tiles, per group."""
    st = fusion.get(step)
    p = st.resolve(params)
    idea = step.split("/")[1][:2]
    if idea in ("01", "02"):
        _draw_panels(step, p, n or (8 if idea == "01" else 32))
    elif idea == "03":
        n, grid = n or 256, grid or 12
        bm, bn = p["BLOCK_M"], p["BLOCK_N"]
        owner = tile_owner(n, n, bm, bn, grid)
        colours = step_colours(grid)
        fig, ax = plt.subplots(figsize=(9, 3))
        for k, title in enumerate(("phase 1: T = A B", "phase 2: E = T C")):
            x0 = k * 1.6 * n
            for (i, j), b in np.ndenumerate(owner):
                draw_box(ax, x0 + j * bn, i * bm, bn, bm, colours[b], str(b))
            ax.text(x0 + n / 2, -n * 0.05, title, ha="center", va="bottom", fontsize=9)
        ax.axvline(1.3 * n, color="tab:red", lw=2, ls="--")
        ax.text(1.3 * n, n * 1.05, "grid barrier: every block\nhas finished phase 1", ha="center", va="top",
                fontsize=7, color="tab:red", bbox=dict(facecolor="white", edgecolor="none"))
        draw_frame(ax, 2.6 * n, n)
        ax.set_ylim(n * 1.25, -n * 0.15)
        fig.suptitle(f"{step}, N = {n}, {bm} x {bn} tiles: {owner.size} tiles per product, a grid of {grid} "
                     f"resident blocks;\nblock b computes tiles b, b + {grid}, ... (the number in each tile)",
                     fontsize=9)
    elif idea == "04":
        n = n or 256
        split, bk = p["SPLIT_K"], p["BLOCK_K"]
        k_tiles = cdiv(n, bk)
        colours = step_colours(split)
        threads = (p["BLOCK_M"] // p["THREAD_M"]) * (p["BLOCK_N"] // p["THREAD_N"])
        fig, ax = plt.subplots(figsize=(10, 2.4))
        for g in range(split):
            for t in k_tiles_of(g, n, bk, split):
                draw_box(ax, t, 0, 1, 1, colours[g], f"g{g}")
            draw_box(ax, g * k_tiles / split, 1.8, k_tiles / split, 1, colours[g],
                 f"group {g}: threads {threads * g}..{threads * (g + 1) - 1}")
        ax.text(0, -0.2, f"the {k_tiles} K tiles ({bk} deep) of one {p['BLOCK_M']} x {p['BLOCK_N']} output tile: "
                "group g sums K tiles g, g + SPLIT_K, ... into a partial tile of its own", fontsize=8, va="bottom")
        ax.text(0, 3.0, f"each thread of a group: a {p['THREAD_M']} x {p['THREAD_N']} piece of the same tile;\n"
                f"at the end groups 1..{split - 1} write their partial tiles to shared memory, "
                "and group 0 adds them up and stores the tile", fontsize=8, va="top")
        draw_frame(ax, k_tiles, 3.6)
        ax.set_ylim(3.8, -0.9)
        fig.suptitle(f"{step}, N = {n}, SPLIT_K = {split}: the tiles go to blocks as in step 03; inside a block, "
                     f"{split} groups of {threads} threads split K", fontsize=9)
    elif idea == "05":
        bm, bn, wm, wn, split = p["BLOCK_M"], p["BLOCK_N"], p["WARP_M"], p["WARP_N"], p["SPLIT_K"]
        warps = (bm // wm) * (bn // wn)
        colours = step_colours(warps)
        fig, ax = plt.subplots(figsize=(3.4 * split + 1, 3.2))
        for g in range(split):
            x0 = g * 1.4 * bn
            for w in range(warps):
                r, c = warp_origin(w, bn, wm, wn)
                draw_box(ax, x0 + c, r, wn, wm, colours[w], f"warp {g * warps + w}", fontsize=8)
                for mr in range(r, r + wm, 16):  # the m16n8k8 tiles the warp issues
                    for mc in range(c, c + wn, 8):
                        draw_box(ax, x0 + mc, mr, 8, 16, "none", edgecolor="0.25", lw=0.6)
            ax.text(x0 + bn / 2, -1, f"group {g}: K tiles {g}, {g + split}, ...", ha="center", va="bottom",
                    fontsize=8)
        draw_frame(ax, (1.4 * split - 0.4) * bn + 1, bm)
        ax.set_xlim(-1, (1.4 * split - 0.4) * bn + 1)
        ax.set_ylim(bm + 1, -bm * 0.2)
        fig.suptitle(f"{step}: one {bm} x {bn} tile, {split} groups of {warps} warps; a warp owns {wm} x {wn} "
                     f"of the tile: {(wm // 16) * (wn // 8)} mma tiles of 16 x 8 (outlined)", fontsize=9)
    else:
        raise ValueError(f"{step} is chapter 9's: chapter 8 draws steps 01 to 05")
    plt.tight_layout(); plt.show()


def occupancy(step: str, configs: Sequence[dict] = ({},), n: int = 512) -> None:
    """Threads, registers (this machine's NVRTC for sm_90: compiler-dependent), shared memory and resident
    blocks per SM of each configuration, and the grid and warps per SM the persistent launch gets at N = n."""
    for params in configs:
        o = occupancy_of(step, params, n)
        print(f"{o['label']}\n    {o['threads']} threads, {o['registers']} registers, {o['smem'] / 1024:.1f} KB "
              f"shared: {o['per_sm']} blocks/SM ({o['limiter']}); at N = {n}: {o['blocks']} blocks, "
              f"{o['warps_per_sm']:.1f} warps per SM" + (f", {o['idle_sms']} SMs with no block" if o['idle_sms'] else ""))


def occupancy_of(step: str, params: dict | None = None, n: int = 512) -> dict:
    """One configuration's resources (registers: this machine's NVRTC for sm_90) and the grid it launches at N = n:
    a persistent step min(tiles, resident blocks), steps 01 and 02 one block per row panel (their own grid)."""
    k = fusion.step(step, backend="cpu", **(params or {}))
    r = k.resources("sm_90")
    threads, smem = k.step.threads(k.params), k.step.smem(k.params, (n,) * 4)
    per_sm, limiter = blocks_per_sm(r.registers, threads, r.shared_bytes + smem, 90)
    blocks = min(k.tiles((n,) * 4), per_sm * SPEC.sms) if k.step.persistent else k.grid_for((n,) * 4)
    return {"label": k.label, "threads": threads, "registers": r.registers, "smem": r.shared_bytes + smem,
            "per_sm": per_sm, "limiter": limiter, "blocks": blocks, "warps_per_sm": blocks * threads / 32 / SPEC.sms,
            "idle_sms": max(0, SPEC.sms - blocks), "serial_fmas": 2 * n ** 3 / (blocks * threads)}


def glue_panels(recs: list[dict], n: int = 512) -> None:
    """Why step 02 is slower than step 01 at n (ch8_o01_*, ch8_o02_*): each one's grid, warps per SM and idle SMs
    (resources, not counters: neither step was profiled) beside its time in the run."""
    for step in STEPS[:2]:
        o, idea = occupancy_of(step, None, n), step.split("/")[1][:2]
        glue(f"ch8_o{idea}_blocks", o["blocks"]); glue(f"ch8_o{idea}_warps", o["warps_per_sm"])
        glue(f"ch8_o{idea}_idle", o["idle_sms"]); glue(f"ch8_o{idea}_fmas", o["serial_fmas"])
        glue(f"ch8_o{idea}_us", _us(recs, step, n) or float("nan"))


def glue_panel_profiles(recs: list[dict], n: int = 512) -> None:
    """Nsight Compute's one launch of steps 01 and 02 at n on the run's GPU (results/<gpu>.ncu.json, keys
    "fused/0N_...@n", lab/gaps): ch8_p01_*, ch8_p02_* (kernel µs, warps per active SM, % issue slots used, top stall,
    L2 hit rate, instructions) and ch8_p_issue_ratio (the issue throughput of 01 over 02: SMs with a block x issue
    share) beside ch8_p_inst_ratio (02's instructions over 01's) and the time ratios, Nsight's and the run's."""
    prof, got = profile.load(GPU), {}
    for step in STEPS[:2]:
        idea, m = step.split("/")[1][:2], prof[f"{step}@{n}"]
        stall, value = profile.stall_reasons(m, top=1)[0]
        got[idea] = {"us": m["gpu__time_duration.sum"] / 1e3, "warps": m["sm__warps_active.avg.per_cycle_active"],
                     "issue": m["smsp__issue_active.avg.pct_of_peak_sustained_active"],
                     "l2": m["lts__t_sector_hit_rate.pct"], "inst": m["smsp__inst_issued.sum"] / 1e6,
                     "sms": min(SPEC.sms, m["launch__grid_size"]), "stall": STALL_WORDS.get(stall, stall),
                     "stall_v": value, "stall_sum": sum(v for _, v in profile.stall_reasons(m, top=99))}
        for k, v in got[idea].items():
            glue(f"ch8_p{idea}_{k}", v)
    a, b = got["01"], got["02"]
    glue("ch8_p_issue_ratio", a["sms"] * a["issue"] / (b["sms"] * b["issue"]))
    glue("ch8_p_inst_ratio", b["inst"] / a["inst"])
    glue("ch8_p_pred_ratio", b["inst"] / a["inst"] * a["sms"] * a["issue"] / (b["sms"] * b["issue"]))
    glue("ch8_p_ncu_ratio", b["us"] / a["us"])
    run = [_us(recs, step, n) or float("nan") for step in STEPS[:2]]
    glue("ch8_p_run_ratio", run[1] / run[0])


def glue_grid_prediction(n: int = 512) -> None:
    """The prediction from steps 01 and 02's grids at n (ch8_q*): multiply-adds per thread, and the floor one
    scheduler's issue of one FFMA a cycle sets (a lower bound, far below either time)."""
    for step in STEPS[:2]:
        o, idea = occupancy_of(step, None, n), step.split("/")[1][:2]
        glue(f"ch8_q{idea}_blocks", o["blocks"]); glue(f"ch8_q{idea}_warps", o["warps_per_sm"])
        glue(f"ch8_q{idea}_idle", o["idle_sms"]); glue(f"ch8_q{idea}_fmas", o["serial_fmas"])
    o1, o2 = occupancy_of(STEPS[0], None, n), occupancy_of(STEPS[1], None, n)
    glue("ch8_q_fma_ratio", o2["serial_fmas"] / o1["serial_fmas"])


def error_head(e: Exception, before: str = "") -> str:
    """An error's message without the step's name in front (after its first ': '), cut before `before` if given:
    the part a claim cell prints, the same on every backend."""
    text = str(e).split(": ", 1)[-1]
    return text.split(before)[0] if before else text


def error_subject(e: Exception) -> str:
    """An error's subject: its message up to the first ':' (the step and its parameters)."""
    return str(e).split(":")[0]


def refuse(call, *args, cut: str = "", **kwargs) -> None:
    """Run call(*args, **kwargs) and print the refusal it raises (a gemmlab error), one line: the error's kind and its
    message without the step's name in front (a message's parameters end in '}: '), cut before `cut` if given."""
    try:
        call(*args, **kwargs)
    except (errors.ShapeError, errors.ConfigError, errors.ArchError) as e:
        text = str(e)
        if isinstance(e, errors.ArchError):  # its subject says it all: the step, and the arch it needs
            head = error_subject(e)
        else:
            head = text.split("}: ", 1)[-1] if "}: " in text else error_head(e)
        print(f"{type(e).__name__}: {head.split(cut)[0] + cut + ' ...' if cut and cut in head else head}")
    else:
        print("no refusal")


def split_errors(n_cases: int = 0) -> None:
    """Step 05's check and its one-mma variant (one_tf32_source, big x big only), each as the worst |error| over the
    fp32 bound of its cases (check.Case.worst: under 1 passes): what chapter 7b's split buys inside the fused kernel."""
    for label, kern in (("3xTF32 (step 05)", kernel_step("fused/05_tf32x3", backend="cpu")),
                        ("one TF32 mma", kernel_step("fused/05_tf32x3", backend="cpu", source=one_tf32_source()))):
        r = verify(kern, raise_on_fail=False)
        ran = [c for c in r.cases if not c.rejected and c.kind in ("random", "identity", "ones")]
        where = f"{len(ran)} inputs" if r.passed else f"first failing input: {r.failed.kind}"
        print(f"{label}: {'PASS' if r.passed else 'FAIL'}, worst |error| {max(c.worst for c in ran):.2f} x the fp32 "
              f"bound ({where})")


def glue_step04(recs: list[dict], n: int = 512, big: int = 4096) -> None:
    """Where step 04 stands in the run (ch8_s4_*): its rate at n and at big, against cuBLAS's fp32 GEMMs there."""
    nan = float("nan")
    for size in (n, big):
        r, eager = fusion.lookup(recs, "fused/04_split_k", size), fastest_record(recs, EAGER, size)
        glue(f"ch8_s4_{size}_tf", r["tflops"] if r else nan)
        glue(f"ch8_s4_{size}_pct", 100 * r["tflops"] / SPEC.fp32_tflops if r else nan)
        glue(f"ch8_s4_{size}_base_tf", eager["tflops"] if eager else nan)
    k = [s for s in (1024, 2048, big) if (_speedups(recs, "fused/04_split_k", s) or (0, 2))[1] < 1]
    glue("ch8_s4_loses_from", min(k) if k else "-")


def one_tf32_source() -> str:
    """Step 05's kernel with one TF32 mma per product (big x big only): lab/fusion-tf32x3's "1x" variant."""
    return variants.variant_source("fusion-tf32x3", fusion.get("fused/05_tf32x3"), "1x")


def glue_tf32x3_bound(n: int = 512) -> None:
    """Step 05's prediction: three TF32 mmas per product at the TF32 mma.sync rate the probe measured
    (kernels/probe/peak.cu, on the H100 of fusion-tf32x3, whose 132 SMs and clocks the H200 shares)."""
    tf = results.experiment("fusion-tf32x3")
    rate = tf["peaks"]["mma_m16n8k8_tf32"]["tflops"]
    glue("ch8_tf_rate", rate)
    glue("ch8_tf_ffma", tf["peaks"]["ffma"]["tflops"])
    glue("ch8_tf_gpu", tf["peaks"]["gpu"])
    glue("ch8_tf_bound", 3 * fusion.flops(n) / (rate * 1e12) * 1e6)
    glue("ch8_tf_best", 3 * fusion.flops(n) / (rate * 1e12) * 1e6 + launch_floor_us(n))


STALL_WORDS = {"short_scoreboard": "short scoreboard (a shared-memory load's result)",
               "long_scoreboard": "long scoreboard (a global-memory load's result)",
               "wait": "wait (a fixed-latency dependency: an mma or an ALU result)",
               "barrier": "barrier (the block's or the group's)", "math_pipe_throttle": "math pipe throttle",
               "mio_throttle": "MIO throttle (the shared-memory queue full)"}


def glue_counters(step: str, n: int = 512) -> None:
    """Nsight Compute's view of `step` at n with its default tiles, on the GPU of the chapter's run
    (results/experiments/fusion-counters, a run of its own): ch8_cNN_* (NN: the step's number)."""
    exp = results.experiment("fusion-counters")
    idea = step.split("/")[1][:2]
    r = exp["ncu"][f"ncu-{idea}-default-{n}"]
    stalls = [(k, v) for k, v in r["stalls_per_issue"].items() if k not in ("selected", "not_selected")]
    key = f"ch8_c{idea}"
    glue(f"{key}_gpu", exp["gpu"]); glue(f"{key}_date", exp["date"])
    glue(f"{key}_kernel", r["kernel_us"]); glue(f"{key}_issue", r["issue_active_pct"])
    glue(f"{key}_warps", r["warps_active_pct"] / 100 * SPEC.max_threads_per_sm / 32)
    glue(f"{key}_fma", r["fma_pipe_pct"]); glue(f"{key}_tensor", r["tensor_pipe_pct"])
    for i, (name, value) in enumerate(stalls[:2], 1):
        glue(f"{key}_stall{i}", STALL_WORDS.get(name, name.replace("_", " "))); glue(f"{key}_stall{i}_v", value)


# ------------------------------------------------------------------------------------------------
# Measure: the run, microseconds first
# ------------------------------------------------------------------------------------------------
def _speedups(recs: list[dict], step: str, n: int) -> tuple[float, float, float] | None:
    """(µs, x over the faster eager a @ b @ c, x over the faster graph replay), all from the run."""
    r, eager, graph = fusion.lookup(recs, step, n), fastest_record(recs, EAGER, n), fastest_record(recs, GRAPHS, n)
    if not (r and eager):
        return None
    nan = float("nan")
    return r["median_s"] * 1e6, eager["median_s"] / r["median_s"], graph["median_s"] / r["median_s"] if graph else nan


def speedup_table(recs: list[dict], steps: Sequence[str] = STEPS, sizes: Sequence[int] = (512, 4096),
                  tiles: str = "default tiles") -> None:
    """Each step at `sizes`: µs, TFLOP/s, and how many times faster than a @ b @ c eager and from a graph."""
    if not recs:
        print("No recorded lane run yet.")
        return
    print(f"{run_label(recs)} ({tiles}; x: the baseline's time over the step's, same run)")
    for n in sizes:
        eager, graph = fastest_record(recs, EAGER, n), fastest_record(recs, GRAPHS, n)
        print(f"N={n}: a @ b @ c {eager['median_s'] * 1e6:.1f} µs ({eager['step']}), from a graph "
              f"{graph['median_s'] * 1e6:.1f} µs")
        for step in steps:
            s = _speedups(recs, step, n)
            if s:
                tf = fusion.lookup(recs, step, n)["tflops"]
                print(f"  {step:20s} {s[0]:9.1f} µs {tf:6.1f} TFLOP/s  x{s[1]:5.2f} eager  x{s[2]:5.2f} graph")


def plot_run(recs: list[dict], steps: Sequence[str] = STEPS, tiles: str = "default tiles") -> None:
    """The run: device time against N (left), and each step's speed-up over a @ b @ c eager (solid) and over its
    CUDA-graph replay (dotted), all at default tiles, all from the one run (right)."""
    if not recs:
        print("The figure appears once the GPU lane has run (python -m gemmlab fusion-lane).")
        return
    colour = {s: plt.cm.viridis(0.9 * j / max(1, len(steps) - 1)) for j, s in enumerate(steps)}
    style = {"torch a@b@c": ("0.0", "--"), "cupy a@b@c": ("0.55", "--"), "torch graph a@b@c": ("0.0", ":"),
             "cupy graph a@b@c": ("0.55", ":"), "torch a@b": ("0.75", "-.")}
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    for step in tuple(style) + tuple(steps):
        rows = sorted((r for r in recs if r["step"] == step), key=lambda r: r["m"])
        if not rows:
            continue
        c, ls = style.get(step, (colour.get(step), "-"))
        ax.plot([r["m"] for r in rows], [r["median_s"] * 1e6 for r in rows], marker="o", ms=3, color=c, ls=ls,
                label=step)
        if step in steps:
            sp = [(r["m"], _speedups(recs, step, r["m"])) for r in rows]
            ax2.plot([m for m, s in sp], [s[1] for m, s in sp], marker="o", ms=3, color=c, ls="-")
            ax2.plot([m for m, s in sp], [s[2] for m, s in sp], marker=".", ms=3, color=c, ls=":")
    ax.set_ylabel("device time per call (µs)"); ax.set_yscale("log")
    ax2.set_ylabel("times faster than a @ b @ c"); ax2.set_yscale("log", base=2)

    ax2.yaxis.set_major_locator(FixedLocator([1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1, 2, 3, 4]))
    ax2.yaxis.set_minor_locator(NullLocator())
    ax2.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:.3g}x"))
    ax2.axhline(1, color="0.5", lw=0.8)
    ax2.axhline(3, color="tab:red", lw=0.8, ls=":")
    ax2.text(max(r["m"] for r in recs), 3, "the seed's 3x", color="tab:red", fontsize=7, ha="right", va="bottom")
    ax2.set_title("solid: over a @ b @ c eager; dotted: over its CUDA-graph replay", fontsize=8)
    for a_ in (ax, ax2):
        a_.set_xscale("log", base=2); a_.set_xlabel("N")
    fig.suptitle(f"{run_label(recs)}: every line from this one run, {tiles}", fontsize=9)
    fig.legend(*ax.get_legend_handles_labels(), loc="center left", bbox_to_anchor=(0.8, 0.5), fontsize=7)
    plt.tight_layout(rect=(0, 0, 0.8, 1)); plt.show()


def glue_measure(recs: list[dict], n: int = 512, big: int = 4096) -> None:
    """The run's measurements the Measure section quotes (ch8_m_*): each step at n and big against both baselines."""
    nan = float("nan")
    for step in STEPS:
        idea = step.split("/")[1][:2]
        for size in (256, n, big):
            s = _speedups(recs, step, size) or (nan, nan, nan)
            glue(f"ch8_m{idea}_{size}_us", s[0]); glue(f"ch8_m{idea}_{size}_x", s[1])
            glue(f"ch8_m{idea}_{size}_xg", s[2])
    r5 = fusion.lookup(recs, "fused/05_tf32x3", n)
    graph = fastest_record(recs, GRAPHS, n)
    glue("ch8_m05_graph_us", r5["graph_median_s"] * 1e6 if r5 else nan)
    glue("ch8_m05_graph_x", graph["median_s"] / r5["graph_median_s"] if r5 and graph else nan)
    glue("ch8_m_big", big)
    eager, graph = fastest_record(recs, EAGER, big), fastest_record(recs, GRAPHS, big)
    glue("ch8_m_big_eager_us", eager["median_s"] * 1e6 if eager else nan)
    glue("ch8_m_big_graph_us", graph["median_s"] * 1e6 if graph else nan)
    glue("ch8_m_big_list", "; ".join(f"step {s.split('/')[1][:2]} {sp[0]:.1f} µs, {sp[1]:.2f}x" for s in STEPS
                                     if (sp := _speedups(recs, s, big))))
    wins = [s for s in STEPS if (_speedups(recs, s, n) or (0, 0))[1] > 1]
    names = [s.split("/")[1][:2] for s in wins]
    glue("ch8_m_wins", _names(names))
    glue("ch8_m_losers", _names([s.split("/")[1][:2] for s in STEPS if s not in wins]))


def _names(names: list[str]) -> str:
    """'03, 04 and 05' ('none' for no names)."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names) or "none"


def glue_gap(n: int = 512) -> None:
    """The evidence for the gap between step 05's prediction and its measurement at n (ch8_g_*): the launch run on
    the H200 (fusion-kernel-time) and the blocks' timeline of fusion-tf32x3 (its GPU); glue_counters gives the
    profiler's warp states on the H200."""
    kt = results.experiment("fusion-kernel-time")["launch"][GPU]
    us = {k: statistics.median(v) for k, v in kt["us"][str(n)].items()}
    glue("ch8_g_launch_date", kt["date"])
    glue("ch8_g_05", us["05 packed"]); glue("ch8_g_05_graph", us["05 graph"]); glue("ch8_g_empty", us["empty packed"])
    glue("ch8_g_tiles", ", ".join(f"{k} {v}" for k, v in kt["config"][str(n)].items()))
    c = kt["config"][str(n)]
    glue("ch8_g_tiles_short", f"{c['BLOCK_M']} x {c['BLOCK_N']}, SPLIT_K {c['SPLIT_K']}")
    tf = results.experiment("fusion-tf32x3")
    tl, inside = tf["timeline_us"][f"{n} best512"], tf["tile_timeline_us"][f"{n} best512"]
    glue("ch8_g_tl_gpu", tf["gpu"]); glue("ch8_g_tl_date", tf["date"])
    glue("ch8_g_phase1", tl["phase 1 (median block)"]); glue("ch8_g_phase2", tl["phase 2 (median block)"])
    glue("ch8_g_barrier", tl["barrier (last arrival -> last release)"])
    glue("ch8_g_blocks", tl["first start -> last phase-2 end"])
    loop = (inside["phase 1"]["K loop"] + inside["phase 2"]["K loop"]) / 2
    rate = tf["peaks"]["mma_m16n8k8_tf32"]["tflops"]
    cfg = kt["config"][str(n)]  # the timeline's tiles too (the H100 sweep's fastest at 512)
    blocks = cdiv(n, cfg["BLOCK_M"]) * cdiv(n, cfg["BLOCK_N"])
    phase_floor = 3 * fusion.flops(n) / 2 / (rate * 1e12 * min(blocks, SPEC.sms) / SPEC.sms) * 1e6
    glue("ch8_g_rounds", cdiv(cdiv(n, cfg["BLOCK_K"]), cfg["SPLIT_K"]))
    dflt = fusion.get("fused/05_tf32x3").resolve({})
    glue("ch8_g_rounds_default", cdiv(cdiv(n, dflt["BLOCK_K"]), dflt["SPLIT_K"]))
    glue("ch8_g_loop", loop)
    glue("ch8_g_floor", phase_floor)
    glue("ch8_g_loop_pct", 100 * phase_floor / loop)


WARM = REPO / "results" / "experiments" / "gaps-places" / "launches" / "warm-f05-512.csv.gz"


def warm_launches(path=WARM) -> list[dict[str, float]]:
    """Step 05's launches 11-20 at 512 in one process under Nsight Compute with the L2 left warm (lab/gaps, PART=places,
    --cache-control none, clock not locked), one dict per launch: us, mhz (SM clock), l2 (% hit)."""
    with gzip.open(path, "rt") as f:
        pages = profile.launches(f.read())
    return [{"us": m["gpu__time_duration.sum"] / 1e3, "mhz": m["sm__cycles_elapsed.avg.per_second"] / 1e6,
             "l2": m["lts__t_sector_hit_rate.pct"]} for m in pages]


def glue_warm(recs: list[dict], n: int = 512) -> None:
    """The run's call of step 05 at n split into the warm kernel time (warm_launches) and the rest, beside the launch
    floor (ch8_w_*): the sum kernel + floor against the call, and what it overshoots by."""
    w = warm_launches()
    us = statistics.median(r["us"] for r in w)
    call, floor = _us(recs, "fused/05_tf32x3", n) or float("nan"), launch_floor_us(n)
    glue("ch8_w_n", len(w)); glue("ch8_w_us", us)
    glue("ch8_w_lo", min(r["us"] for r in w)); glue("ch8_w_hi", max(r["us"] for r in w))
    glue("ch8_w_mhz", statistics.median(r["mhz"] for r in w)); glue("ch8_w_l2", statistics.median(r["l2"] for r in w))
    glue("ch8_w_rest", call - us); glue("ch8_w_sum", us + floor); glue("ch8_w_over", us + floor - call)


# ------------------------------------------------------------------------------------------------
# The tile sweeps: each a run of its own
# ------------------------------------------------------------------------------------------------
def _sweep(step: str, n: int, gpu: str = GPU) -> list[dict]:
    return sorted((r for r in fusion.load(gpu) if r["kind"] == "sweep" and r["step"] == step and r["m"] == n),
                  key=lambda r: r["median_s"])


def sweep_table(step: str = "fused/05_tf32x3", sizes: Sequence[int] = (512, 1024, 4096), top: int = 3) -> None:
    """The recorded tile sweep of `step` at each size (a run of its own: its own a @ b @ c, its own date): the
    fastest configurations, and the default tiles where the sweep timed them, all against that sweep's baseline."""
    default = fusion.get(step).resolve({})
    for n in sizes:
        rows = _sweep(step, n)
        if not rows:
            print(f"{step}, N={n}: no recorded sweep")
            continue
        base = rows[0]["baseline_median_s"] * 1e6
        print(f"{step}, N={n}, {rows[0]['gpu']}, sweep of {rows[0]['date']} (own run): {len(rows)} configurations, "
              f"its a @ b @ c {base:.1f} µs")
        mine = [r for r in rows if r["params"] == default]
        for r in rows[:top] + [r for r in mine if r not in rows[:top]]:
            tag = "  (default tiles)" if r in mine else ""
            print(f"  {r['median_s'] * 1e6:8.1f} µs  x{fusion.speedup(r):4.2f}  "
                  + ", ".join(f"{k} {v}" for k, v in r["params"].items()) + f", grid {r['grid']}{tag}")


def glue_sweep(step: str = "fused/05_tf32x3", n: int = 512, big: int = 4096) -> None:
    """The sweep's figures the chapter quotes (ch8_s_*), each with its own run's baseline and date."""
    default = fusion.get(step).resolve({})
    for size in (n, big):
        rows = _sweep(step, size)
        best = rows[0]
        mine = next((r for r in rows if r["params"] == default), None)
        glue(f"ch8_s_{size}_date", best["date"])
        glue(f"ch8_s_{size}_base", best["baseline_median_s"] * 1e6)
        glue(f"ch8_s_{size}_best", best["median_s"] * 1e6)
        glue(f"ch8_s_{size}_best_x", fusion.speedup(best))
        glue(f"ch8_s_{size}_tiles", f"{best['params']['BLOCK_M']} x {best['params']['BLOCK_N']}, SPLIT_K "
                                    f"{best['params']['SPLIT_K']}")
        glue(f"ch8_s_{size}_default", mine["median_s"] * 1e6 if mine else float("nan"))
        glue(f"ch8_s_{size}_default_note", "" if mine else " (the sweep did not time the default tiles)")

