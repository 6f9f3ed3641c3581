"""Chapter 2, coalescing: steps sgemm/01 and 02, their ownership pictures, the sector model's prediction, and the
profiler's counters that explain why the measured gain is larger than the prediction.

The chapter's record wrangling, glue() calls, figures and tables, one function per figure or table; the notebook
(book/02_coalescing.ipynb) calls each once. The model and the access pictures live in gemmlab.coalescing, the
static control in gemmlab.sitecontrols, the live sliders in gemmlab.widgets: this module re-exports them. Timings
come from results/<gpu>.json (live on a GPU); the profiler's counters of both steps from
results/nvidia-h200.ncu.json (an H200: the chapter says so).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

import gemmlab
from gemmlab import coalescing, documents, hardware, profile, sitecontrols, widgets
from gemmlab.chapters import plots
from gemmlab.chapters.glue import glue
from matplotlib.colors import ListedColormap

STEPS = ["sgemm/01_naive", "sgemm/02_coalesced"]
MAPPING_OF = {step: mapping for mapping, step in coalescing.STEP_OF.items()}
SIZE = 4096
BLOCK = (32, 8)               # the block the pictures draw (the timed runs use the registry's 32 x 32)
COUNTERS_GPU = "NVIDIA H200"  # the GPU whose profiler record holds both steps

describe = coalescing.describe
coalescing_twin = sitecontrols.coalescing_twin
explorer = widgets.block_shape_explorer


def where_we_are() -> None:
    """The starting point only: no kernel of ours yet, and the cuBLAS that every step is measured against (chapter
    1's fp32 call at 4096: live on a GPU, else recorded), with its GPU; glued for the text. The steps' timings come
    in the Measure section (timings), after the prediction."""
    blas = hardware.measure_cublas()
    fp32 = blas.get("fp32")
    where = f"{blas['gpu']} ({blas['source']}, {blas['date']})" if fp32 else hardware.NO_DATA
    glue("ch2_start_gpu", blas["gpu"] if fp32 else hardware.NO_DATA)
    glue("ch2_start_cublas", f"{fp32['tflops']:.1f}" if fp32 else "n/a")
    print(f"starting point: no kernel of ours yet; cuBLAS fp32 at {SIZE}^3 on the {where}: "
          + (f"{fp32['tflops']:.1f} TFLOP/s (chapter 1)" if fp32 else "n/a"))


def timings(records: list) -> None:
    """The table of both steps at every size, each row with the cuBLAS timed beside it in that step's run; glues
    the records' GPU and both steps' figures at 4096 (TFLOP/s, % of cuBLAS, the gain)."""
    at = {(r["step"], r["m"]): r for r in records}
    v1, v2 = at.get((STEPS[0], SIZE)), at.get((STEPS[1], SIZE))
    have = bool(v1 and v2)
    glue("ch2_speedup", f"{v2['tflops'] / v1['tflops']:.1f}x" if have else "large (no recorded data yet)")
    glue("ch2_gain", v2["tflops"] / v1["tflops"] if have else float("nan"))
    glue("ch2_where", f"{v1['gpu']} ({v1['source']}, {v1['date']})" if have else hardware.NO_DATA)
    for key, rec in (("v1", v1), ("v2", v2)):
        glue(f"ch2_{key}_tflops", f"{rec['tflops']:.2f}" if have else "n/a")
        glue(f"ch2_{key}_pct", f"{rec['pct_of_baseline']:.1f}%" if have else "n/a")
    glue("ch2_cublas_tflops", f"{v2['baseline_tflops']:.2f}" if have else "n/a")
    bound = line_bound("coalesced", v2["gpu"]) if have else float("nan")   # the line model's ceiling, its GPU
    glue("ch2_v2_of_line_bound", f"{v2['tflops'] / bound:.0%}" if bound == bound else "n/a")
    print(gemmlab.bench.table(records) if records else hardware.NO_DATA)


# ----------------------------------------------------------------------------------------------- pictures
def owners(step: str, block=BLOCK, size: int = 32) -> np.ndarray:
    """The flat thread number (block number x threads per block + tid) that computes each element of C's top-left
    size x size corner under `step`'s mapping; tid = threadIdx.x + threadIdx.y x BLOCK_X, as the GPU numbers them.
    From gemmlab.coalescing.thread_element, the Python twin of the kernels' index lines."""
    mapping = MAPPING_OF[step]
    bx, by = (int(v) for v in block)
    gx_max, gy_max = coalescing.grid_dim(mapping, (bx, by), size, size)
    own = np.full((size, size), -1)
    for gx in range(gx_max):
        for gy in range(gy_max):
            for tid in range(bx * by):
                row, col = coalescing.thread_element(mapping, (bx, by), (gx, gy), (tid % bx, tid // bx))
                if row < size and col < size:
                    own[row, col] = (gx + gy * gx_max) * bx * by + tid
    return own


def ownership(step: str, block=BLOCK, size: int = 32, ax=None):
    """Who computes what in `step`: C's top-left corner coloured by warp, warp 0 of block (0, 0) in red with each
    lane's number on the element it computes, block (0, 0) outlined. Returns the axes."""
    own = owners(step, block, size)
    warps = own // coalescing.WARP_SIZE
    if ax is None:
        _, ax = plt.subplots(figsize=(5.2, 5.2))
    pale = plt.get_cmap("tab20")(np.arange(20))[:, :3] * 0.35 + 0.65
    n = int(warps.max()) + 1
    colours = [(0.85, 0.15, 0.15)] + [pale[1 + (w - 1) % 19] for w in range(1, n)]  # warp 0 red, the others pale
    ax.imshow(warps, cmap=ListedColormap(colours), vmin=-0.5, vmax=n - 0.5,
              interpolation="nearest")
    for r, c in zip(*np.nonzero(warps == 0)):
        ax.text(c, r, str(own[r, c] % coalescing.WARP_SIZE), ha="center", va="center", fontsize=5, color="white")
    rows, cols = np.nonzero(own < block[0] * block[1])
    ax.add_patch(plt.Rectangle((cols.min() - 0.5, rows.min() - 0.5), cols.max() - cols.min() + 1,
                               rows.max() - rows.min() + 1, fill=False, lw=1.5, ec="black"))
    ax.set_xlabel("column of C")
    ax.set_ylabel("row of C")
    ax.tick_params(labelsize=7)
    ax.set_title(f"{step}, block {tuple(int(v) for v in block)}: colour = warp\n"
                 f"warp 0 in red (numbers: its lanes), block (0, 0) outlined", fontsize=9)
    return ax


def show_ownership(step: str, block=BLOCK) -> None:
    """Draw `step`'s ownership picture and say in one line what warp 0 owns."""
    ownership(step, block)
    plt.show()
    rows, cols = np.nonzero(owners(step, block) // coalescing.WARP_SIZE == 0)
    shape = "one column" if len(set(cols)) == 1 else "one row" if len(set(rows)) == 1 else "a block"
    print(f"{step}: warp 0 computes {len(rows)} elements of C, {shape}: rows {rows.min()}-{rows.max()}, "
          f"columns {cols.min()}-{cols.max()}")


def access_picture(block=BLOCK) -> None:
    """Both mappings' access picture (coalescing.draw_comparison): who computes what, and the sectors of A and B
    that warp 0 loads at k = 0."""
    coalescing.draw_comparison(block)
    plt.show()


def sector_sweep() -> None:
    """Bytes moved per FFMA by the A and B loads for every block shape (coalescing.draw_sector_sweep)."""
    coalescing.draw_sector_sweep()
    plt.show()


# ----------------------------------------------------------------------------------------------- the model
def warp_requests(block=BLOCK) -> None:
    """Sectors per warp request of A, B and C in both mappings (the model), glued for the prose, and printed."""
    req = {(mp, op): coalescing.request(mp, op, block) for mp in coalescing.MAPPINGS for op in coalescing.OPERANDS}
    for (mp, op), r in req.items():
        glue(f"ch2_{mp}_{op}_sectors", f"{r.sectors}")
        glue(f"ch2_{mp}_{op}_lines", f"{r.lines}")
    glue("ch2_warp", f"{coalescing.WARP_SIZE}")
    glue("ch2_naive_A_bytes", f"{req['naive', 'A'].bytes_moved}")
    glue("ch2_naive_A_useful", f"{req['naive', 'A'].words * coalescing.ELEMENT_BYTES}")
    glue("ch2_coalesced_B_bytes", f"{req['coalesced', 'B'].words * coalescing.ELEMENT_BYTES}")
    print(describe(block))


def lines_per_k_step(mapping: str, block=BLOCK) -> int:
    """128-byte cache lines one warp's A and B loads touch per k (the model)."""
    return sum(coalescing.request(mapping, op, block).lines for op in ("A", "B"))


def predicted_gain(block=BLOCK) -> float:
    """The sector model's speed-up of step 02 over step 01: the ratio of sectors per k step (A + B loads)."""
    return coalescing.sectors_per_k_step("naive", block) / coalescing.sectors_per_k_step("coalesced", block)


def predict(block=BLOCK) -> None:
    """The prediction before the measurement: sectors and bytes per FFMA, and the speed-up they imply."""
    for mp in coalescing.MAPPINGS:
        glue(f"ch2_{mp}_kstep", f"{coalescing.sectors_per_k_step(mp, block):g}")
        glue(f"ch2_{mp}_bpf", f"{coalescing.bytes_per_fma(mp, block):g}")
        print(f"{coalescing.STEP_OF[mp]:20s} {coalescing.sectors_per_k_step(mp, block):3g} sectors per k step, "
              f"{coalescing.bytes_per_fma(mp, block):3g} bytes per FFMA")
    glue("ch2_predicted", predicted_gain(block))
    print(f"prediction, if time follows sectors: step 02 is {predicted_gain(block):.1f}x faster than step 01")


L1_LINES_PER_CYCLE = 1   # the course's model of L1: one 128-byte line looked up per SM per clock cycle
FLOP_PER_K_STEP = 2 * 32  # a warp's multiply-adds per k step, 2 FLOP each


def prediction_gpu() -> str | None:
    """The GPU the prediction is for: the reader's (live) or the recorded one chapter 1 measured cuBLAS on."""
    info = hardware.device_info() if hardware.gpu_available() else None
    if info:
        return info["name"]
    return (hardware.load_hardware() or {}).get("gpu")


def line_bound(mapping: str, gpu: str | None, block=BLOCK) -> float:
    """The course's L1 model's ceiling in TFLOP/s: L1 looks up one line per SM per cycle, so a warp's k step takes
    at least its lines' cycles; 64 FLOP per k step on every SM at the data sheet's boost clock. NaN without spec."""
    spec = hardware.spec_for(gpu)
    if spec is None:
        return float("nan")
    cycles = lines_per_k_step(mapping, block) / L1_LINES_PER_CYCLE
    return FLOP_PER_K_STEP / cycles * spec.sms * spec.boost_mhz * 1e6 / 1e12


def predict_lines(block=BLOCK, gpu: str | None = None) -> None:
    """The second prediction, from the course's model of L1 (one line per SM per cycle): each step's ceiling in
    TFLOP/s on the chapter's GPU and the speed-up it allows, the ratio of lines per k step."""
    gpu = gpu or prediction_gpu()
    spec = hardware.spec_for(gpu)
    naive, coal = (lines_per_k_step(mp, block) for mp in ("naive", "coalesced"))
    b1, b2 = line_bound("naive", gpu, block), line_bound("coalesced", gpu, block)
    glue("ch2_pred_lines_v1", naive); glue("ch2_pred_lines_v2", coal); glue("ch2_pred_line_gain", naive / coal)
    glue("ch2_pred_v1_bound", b1); glue("ch2_pred_v2_bound", b2); glue("ch2_pred_spec", spec.name if spec else hardware.NO_DATA)
    glue("ch2_pred_sms", spec.sms if spec else 0); glue("ch2_pred_boost", spec.boost_mhz if spec else 0)
    print(f"lines per k step (128-byte lines a warp's A and B loads touch): step 01 {naive}, step 02 {coal}")
    if spec:
        print(f"model: L1 looks up {L1_LINES_PER_CYCLE} line per SM per cycle; {FLOP_PER_K_STEP} FLOP per k step, "
              f"{spec.sms} SMs at {spec.boost_mhz} MHz ({spec.name}): step 01 <= {b1:.2f} TFLOP/s, "
              f"step 02 <= {b2:.2f} TFLOP/s")
    print(f"prediction, if time follows lines: step 02 up to {naive / coal:.1f}x faster than step 01")


def emulator_counts(size: int = 256) -> None:
    """Sectors per warp request of both kernels, counted by the CPU emulator from the real kernels."""
    for name in STEPS:
        counts = gemmlab.step(name, backend="cpu", BLOCK_X=BLOCK[0], BLOCK_Y=BLOCK[1]).counters(
            size, size, size, max_blocks=2)
        a = counts.global_sectors_per_request(kind="load", array="A")
        b = counts.global_sectors_per_request(kind="load", array="B")
        c = counts.global_sectors_per_request(kind="store", array="C")
        print(f"{name}: sectors per warp request: A load {a:g}, B load {b:g}, C store {c:g}")


# ----------------------------------------------------------------------------------------------- measure
def measure(records: list) -> None:
    """Both steps and cuBLAS at 4096 in TFLOP/s with cuBLAS's run-to-run band (plots.ladder)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    at = {(r["step"], r["m"]): r for r in records}
    v2 = at.get((STEPS[1], SIZE))
    if at.get((STEPS[0], SIZE)) and v2:
        title = f"{v2['gpu']}, {SIZE}, {v2.get('date', '')}: cuBLAS {v2['baseline_tflops']:.2f} TFLOP/s (step 02's run)"
        plots.ladder(records, STEPS, ax=ax, size=SIZE, title=title)
    else:
        ax.set_title(hardware.NO_DATA)
    fig.tight_layout()
    plt.show()


def seed_table(records: list):
    """Seed 000's V1 and V2 as it quotes them (a Quadro K620, 4096) beside our steps 01 and 02 from `records`."""
    glue("ch2_seed_gpu", documents.DOCUMENTS[0].gpu)
    glue("ch2_seed_size", documents.figure(0, "v1_pct").size)
    for key in ("v1_pct", "v2_pct", "v2_gain"):
        glue(f"ch2_seed_{key}", documents.figure(0, key).text())
    v1, v2, gain = (documents.figure(0, k) for k in ("v1_pct", "v2_pct", "v2_gain"))
    glue("ch2_seed_v1_times_gain", f"{v1.value * gain.value:.1f}%")   # what V1 x the stated gain would give
    glue("ch2_seed_v2_over_v1", f"{v2.value / v1.value:.1f}x")         # the gain the two percentages give
    glue("ch2_seed_gain_factor", f"{gain.value:g}")
    return documents.table_000(records, through=2)


# ----------------------------------------------------------------------------------------------- why
def counter_rows(rec: dict | None = None, block=BLOCK) -> dict[str, dict]:
    """What the profiler recorded of each step at 4096 (one launch on the H200), next to the model: sectors per
    request (model and measured), L1 and L2 hit rates, DRAM bytes, L2 sectors read, the top stall, the profiled
    time, and the model's cache lines per k step."""
    rec = profile.load(COUNTERS_GPU) if rec is None else rec
    out = {}
    for step in STEPS:
        m = rec.get(step)
        if not m:
            continue
        mapping = MAPPING_OF[step]
        requests = m["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]
        out[step] = {
            "model_sectors": coalescing.sectors_per_k_step(mapping, block) / 2,  # an A and a B request per k
            "sectors": m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] / requests,
            "l1_hit": m["l1tex__t_sector_hit_rate.pct"], "l2_hit": m["lts__t_sector_hit_rate.pct"],
            "l2_sectors": m["lts__t_sectors_srcunit_tex_op_read.sum"], "dram_gb": m["dram__bytes_read.sum"] / 1e9,
            "time_s": m["gpu__time_duration.sum"] / 1e9, "stall": profile.stall_reasons(m, top=1)[0],
            "stalls": dict(profile.stall_reasons(m, top=10)), "fma": m["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"],
            "lines": lines_per_k_step(mapping, block), "requests": requests,
        }
    return out


def lines_per_cycle(row: dict, gpu: str = COUNTERS_GPU) -> float:
    """Cache lines L1 got through per SM per clock cycle: the model's lines per k step times the measured k steps
    (half the load requests), over the profiled time at the data sheet's boost clock."""
    spec = hardware.spec_for(gpu)
    return row["requests"] / 2 * row["lines"] / (row["time_s"] * spec.boost_mhz * 1e6 * spec.sms)


def counters(block=BLOCK) -> None:
    """Print the profiler's record of both steps beside the model, and glue what the prose explains the gap with."""
    rows = counter_rows(block=block)
    print(f"Nsight Compute, one launch at {SIZE} on the {COUNTERS_GPU} (results/nvidia-h200.ncu.json):")
    print(f"{'':20s} {'sectors/request':>15s} {'model':>5s} {'L1 hit':>7s} {'L2 hit':>7s} {'L2 read':>9s} "
          f"{'DRAM read':>9s} {'lg_throttle':>11s}  top stall")
    for step, r in rows.items():
        print(f"{step:20s} {r['sectors']:15.2f} {r['model_sectors']:5g} {r['l1_hit']:6.1f}% {r['l2_hit']:6.1f}% "
              f"{r['l2_sectors'] / 1e6:7.0f} M {r['dram_gb']:6.1f} GB {r['stalls'].get('lg_throttle', 0.0):11.1f}  "
              f"{r['stall'][0]} {r['stall'][1]:.1f}")
    if len(rows) < 2:
        return
    r1, r2 = rows[STEPS[0]], rows[STEPS[1]]
    for v, r in (("v1", r1), ("v2", r2)):
        glue(f"ch2_{v}_l1_hit", r["l1_hit"]); glue(f"ch2_{v}_l2_hit", r["l2_hit"])
        glue(f"ch2_{v}_l2_msectors", r["l2_sectors"] / 1e6); glue(f"ch2_{v}_dram_gb", r["dram_gb"])
        glue(f"ch2_{v}_dram_gbps", r["dram_gb"] / r["time_s"]); glue(f"ch2_{v}_lines", r["lines"])
        glue(f"ch2_{v}_stall", r["stall"][0]); glue(f"ch2_{v}_stall_v", r["stall"][1])
        glue(f"ch2_{v}_throttle", r["stalls"].get("lg_throttle", 0.0)); glue(f"ch2_{v}_fma", r["fma"])
        glue(f"ch2_{v}_lines_per_cycle", lines_per_cycle(r)); glue(f"ch2_{v}_model_sectors", f"{r['model_sectors']:g}")
        glue(f"ch2_{v}_dram_pct", f"{100 * r['dram_gb'] / r['time_s'] / hardware.spec_for(COUNTERS_GPU).dram_gbps:.0f}%")
    glue("ch2_line_gain", r1["lines"] / r2["lines"])
    glue("ch2_ncu_gain", r1["time_s"] / r2["time_s"])
    glue("ch2_dram_peak", hardware.spec_for(COUNTERS_GPU).dram_gbps)
    glue("ch2_boost_mhz", hardware.spec_for(COUNTERS_GPU).boost_mhz)
    print(f"(L2 read: sectors; stall: warps waiting per issued instruction)\ncache lines per k step (model): "
          f"{r1['lines']} -> {r2['lines']}, {r1['lines'] / r2['lines']:.1f}x; profiled time: {1e3 * r1['time_s']:.1f} ms "
          f"-> {1e3 * r2['time_s']:.1f} ms, {r1['time_s'] / r2['time_s']:.1f}x")


def claim(shapes=((32, 8), (16, 16), (8, 32))) -> None:
    """A+B sectors per k step of both mappings for three block shapes (the model: the same on every backend)."""
    for shape in shapes:
        t = coalescing.sector_table(shape)
        print(f"block {shape}: A+B sectors per k step, naive {t['naive']['A'] + t['naive']['B']:g} -> "
              f"coalesced {t['coalesced']['A'] + t['coalesced']['B']:g}")
