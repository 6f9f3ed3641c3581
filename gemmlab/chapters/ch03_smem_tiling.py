"""Chapter 3, shared-memory tiling: step 03 against step 02, its pictures, prediction, banks and counters.

The chapter's record wrangling, glue() calls, figures and tables, one function per figure or table; the notebook
(book/03_smem_tiling.ipynb) calls each once. Timings come from results/<gpu>.json (live on a GPU); the profiler's
counters of steps 02 and 03 from results/nvidia-h200.ncu.json (an H200: the chapter says so). The model lives in
tiling.py, the bank rules in swizzle.py, the site's control in sitecontrols.py; this module draws and quotes them.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

import gemmlab
from gemmlab import documents, hardware, nvrtc, profile, sitecontrols, tiling
from gemmlab import swizzle as sw
from gemmlab.chapters import coalescing, plots
from gemmlab.chapters import ch01_gpu_hardware as ch1
from gemmlab.chapters.glue import glue
from matplotlib.colors import ListedColormap
from matplotlib.patches import Rectangle
from ..runtime import optional
widgets = optional.lazy("ipywidgets")  # the live controls only: the command line runs without it

STEPS = ["sgemm/02_coalesced", "sgemm/03_smem_tiling"]
STEP = STEPS[1]
SIZE = 4096
BLOCK = 32                     # step 03's default tile edge
COUNTERS_GPU = "NVIDIA H200"   # the GPU whose profiler record holds steps 02 and 03
SECTOR = 32                    # bytes per sector (chapter 2)
WAVEFRONTS_PER_CYCLE = 1       # shared-memory wavefronts an SM serves per cycle
FFMA_PER_CYCLE = ch1.warp_ffma_per_cycle("sm_90")  # warp FFMAs an SM completes per cycle (chapter 1: 4 x 32 lanes)
READS_PER_FFMA = 2             # step 03's source: sA[ty][k] and sB[k][tx] per multiply-add
NOT_STALLS = ("selected", "not_selected")  # a warp that issued, or could have but another did: not a wait
STALL_MEANING = {  # what a warp waits for, in Nsight Compute's words, shortened
    "mio_throttle": "the queue that takes shared-memory instructions is full",
    "long_scoreboard": "a global load has not arrived",
    "lg_throttle": "the queue that takes global-memory instructions is full",
    "barrier": "other warps have not reached `__syncthreads()`",
    "short_scoreboard": "a shared-memory result has not arrived",
    "dispatch_stall": "the dispatcher could not issue",
    "math_pipe_throttle": "the arithmetic pipe is busy",
    "wait": "a fixed latency",
    "no_instruction": "the next instruction has not been fetched",
}

smem_tiling_twin = sitecontrols.smem_tiling_twin
WARP_COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7"]


def where_we_are() -> list:
    """The starting point only: step 02 at 4096 and the cuBLAS of its run (benchmarked live on a GPU, else the
    records); glues the records' GPU, date and step 02's figures, prints its row. Returns step 02's records (the
    prediction's input); step 03 is measured in the chapter's Measure section, after its prediction."""
    records = gemmlab.benchmark([STEPS[0]], sizes=[SIZE], verbose=False)
    v2 = next((r for r in records if r["step"] == STEPS[0] and r["m"] == SIZE), None)
    if v2:
        glue("ch3_gpu", v2["gpu"]); glue("ch3_date", v2["date"])
        glue("ch3_v2_pct", v2["pct_of_baseline"]); glue("ch3_v2_tflops", v2["tflops"])
    print(gemmlab.bench.table(records))
    return records


def traffic(size: int = SIZE) -> None:
    """The model: bytes of A and B the whole grid requests from global memory, without and with tiles."""
    print(f"{size}^3, bytes of A and B requested from global memory by the whole grid:")
    for block in (None, 4, 8, 16, 32):
        name = "step 02 (no tiling)" if block is None else f"step 03, BLOCK={block}"
        print(f"  {name:22s} {tiling.global_bytes(size, size, size, block) / 1e9:8.1f} GB"
              f"   {tiling.intensity(size, size, size, block):5.2f} FLOP/byte")


def sliding_window() -> None:
    """The block's C tile and the K window it slides along A and B (tiling.draw_sliding_window)."""
    tiling.draw_sliding_window(block=4, step=2, size=16)
    plt.show()


# ----------------------------------------------------------------------------------------------- who does what
def roles(block: int = BLOCK) -> np.ndarray:
    """The thread (tid = ty * BLOCK + tx) that stores each element of sA and of sB, and computes each element of
    the C tile: the Python twin of step 03's indexing. Thread (ty, tx) stores sA[ty][tx] = A[row][k0 + tx] and
    sB[ty][tx] = B[k0 + ty][col] and computes C[row][col], row = blockIdx.y BLOCK + ty, col = blockIdx.x BLOCK + tx;
    all three maps are this one array."""
    ty, tx = np.indices((block, block))
    return ty * block + tx


def draw_roles(block: int = BLOCK, thread: tuple[int, int] = (2, 5)):
    """Who loads which element of the A and B tiles and who computes which element of C (colour: warp; black:
    thread `thread` = (ty, tx)); outlined: the row of sA and the column of sB that thread reads in the inner loop.
    Returns the three axes."""
    own = roles(block)
    ty, tx = thread
    me = ty * block + tx
    warps = own // 32
    n_warps = int(warps.max()) + 1
    cmap = ListedColormap((WARP_COLOURS * 32)[:n_warps])
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.9))
    titles = [f"sA: thread (ty, tx) stores\nA[block_row + ty][k0 + tx]; it reads row {ty}",
              f"sB: thread (ty, tx) stores\nB[k0 + ty][block_col + tx]; it reads column {tx}",
              "C tile: thread (ty, tx) computes\nC[block_row + ty][block_col + tx]"]
    for i, (ax, title) in enumerate(zip(axes, titles)):
        ax.imshow(warps, cmap=cmap, vmin=-0.5, vmax=n_warps - 0.5, interpolation="nearest")
        ax.imshow(np.ma.masked_where(own != me, np.ones_like(own)), cmap=ListedColormap(["black"]),
                  interpolation="nearest")
        if i == 0:
            ax.add_patch(Rectangle((-0.5, ty - 0.5), block, 1, fill=False, lw=2, ec="black"))
        elif i == 1:
            ax.add_patch(Rectangle((tx - 0.5, -0.5), 1, block, fill=False, lw=2, ec="black"))
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("tx (column)", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0].set_ylabel("ty (row)", fontsize=8)
    shape = "one row of 32 threads each" if block == 32 else "up to 32 consecutive threads each, across rows"
    fig.suptitle(f"step 03, BLOCK = {block}: colour = warp ({n_warps} warps, {shape}), "
                 f"black = thread ({ty}, {tx})", fontsize=10)
    fig.tight_layout()
    return axes


def show_roles(block: int = BLOCK, thread: tuple[int, int] = (2, 5)) -> None:
    """Draw the roles picture and say what one thread and one warp do per tile."""
    draw_roles(block, thread)
    plt.show()
    ty, tx = thread
    warp = (ty * block + tx) // 32
    rows = sorted({t // block for t in range(32 * warp, 32 * warp + 32)})
    print(f"thread ({ty}, {tx}): per tile, stores 1 element of sA and 1 of sB, reads {block} of each (row {ty} of "
          f"sA, column {tx} of sB), and adds to 1 element of C; its warp {warp} holds tile row(s) {rows}")


# ----------------------------------------------------------------------------------------------- banks
def bank(byte_address: int) -> int:
    """The bank of a byte address: 32 banks of 4-byte words, word w in bank w % 32."""
    return byte_address // sw.WORD % sw.BANKS


def inner_loop_requests(block: int = BLOCK, k: int = 5, warp: int = 0) -> dict[str, list[int]]:
    """The byte addresses the 32 lanes of `warp` read at step `k` of the inner loop (sA at 0, sB after it), and,
    for contrast, the column read sA[tx][k] that the kernel does not make."""
    tid = np.arange(32 * warp, 32 * warp + 32)
    tx, ty = tid % block, tid // block
    sb = block * block * tiling.FLOAT_BYTES
    return {"sA[ty][k]": [int(4 * (t * block + k)) for t in ty],
            "sB[k][tx]": [int(sb + 4 * (k * block + x)) for x in tx],
            "sA[tx][k] (a column: not in step 03)": [int(4 * (x * block + k)) for x in tx]}


def draw_banks(block: int = BLOCK, k: int = 5, warp: int = 0):
    """One warp request per panel: lane -> the bank its word lives in; banks coloured by the distinct words asked
    of them (green: one, red: more). Returns (axes, {access: wavefronts}) with the counts of swizzle.wavefronts."""
    reqs = inner_loop_requests(block, k, warp)
    fig, axes = plt.subplots(len(reqs), 1, figsize=(10, 1.9 * len(reqs)))
    counts = {}
    for ax, (name, addrs) in zip(axes, reqs.items()):
        words: dict[int, set[int]] = {}
        for a in addrs:
            words.setdefault(bank(a), set()).add(a // sw.WORD)
        n = counts[name] = sw.wavefronts(addrs)
        for lane, a in enumerate(addrs):
            ax.plot([lane, bank(a)], [1, 0], color="0.45", lw=0.7)
        ax.scatter(range(32), [1] * 32, s=60, marker="s", color="#4e79a7", zorder=3)
        colours = ["0.9" if b not in words else "#59a14f" if len(words[b]) == 1 else "#e15759" for b in range(32)]
        ax.scatter(range(32), [0] * 32, s=60, marker="s", color=colours, zorder=3)
        for b, ws in words.items():  # name the banks that several lanes ask of
            lanes = sum(bank(a) == b for a in addrs)
            if lanes > 1:
                ax.text(b + 0.6, -0.05, f"{lanes} lanes, {len(ws)} word{'s' if len(ws) > 1 else ''}", fontsize=8,
                        va="center")
        ax.set_yticks([0, 1], ["bank", "lane"], fontsize=8)
        ax.set_xticks(range(0, 32, 4))
        ax.tick_params(labelsize=7)
        ax.set_ylim(-0.3, 1.3)
        ax.set_xlim(-1, 32)
        distinct = len({a // sw.WORD for a in addrs})
        kind = ("a broadcast" if distinct == 1 else "conflict-free" if n == 1 else f"a {n}-way conflict")
        ax.set_title(f"{name}: {distinct} distinct word(s) in {len(words)} bank(s): {kind}, {n} wavefront(s)",
                     fontsize=9)
    fig.suptitle(f"step 03, BLOCK = {block}, warp {warp}, k = {k}: which bank each lane's word is in", fontsize=10)
    fig.tight_layout()
    return axes, counts


def show_banks(block: int = BLOCK, k: int = 5) -> None:
    """Draw the bank picture of the inner loop's reads; glue the column read's wavefronts."""
    _, counts = draw_banks(block, k)
    plt.show()
    glue("ch3_bank_column", counts["sA[tx][k] (a column: not in step 03)"])


def bank_counts(block: int = BLOCK, size: int = 64) -> None:
    """The emulator's count of step 03's shared loads (one block at size^3) beside the picture's prediction."""
    predicted = {name.split("[")[0]: n for name, n in draw_counts(block).items() if "column" not in name}
    counts = gemmlab.step(STEP, backend="cpu", BLOCK=block).counters(size, size, size, max_blocks=1)
    for s in counts.select(space="shared", kind="load"):
        print(f"{s.array} read: emulator {s.wavefronts / s.requests:g} wavefront per request over {s.requests} "
              f"requests (at most {s.max}); the picture predicts {predicted[s.array]}")


def draw_counts(block: int = BLOCK, k: int = 5) -> dict[str, int]:
    """The picture's wavefronts per access, without drawing."""
    return {name: sw.wavefronts(a) for name, a in inner_loop_requests(block, k).items()}


# ----------------------------------------------------------------------------------------------- predict
def predict(records: list) -> None:
    """The model's prediction before the measurement: requested global bytes of 02 and 03 at 4096, their ratio,
    and the speed-up bound it allows (the traffic ratio, capped by the FP32 peak of the records' GPU)."""
    v2 = next((r for r in records if r["step"] == STEPS[0] and r["m"] == SIZE), None)
    before = tiling.global_bytes(SIZE, SIZE, SIZE, None)
    after = tiling.global_bytes(SIZE, SIZE, SIZE, BLOCK)
    ratio = before / after
    spec = hardware.spec_for(v2["gpu"]) if v2 else None
    peak = spec.fp32_tflops if spec else float("nan")
    cap = peak / v2["tflops"] if v2 else float("nan")
    glue("ch3_ratio", ratio); glue("ch3_peak", peak); glue("ch3_peak_cap", cap)
    glue("ch3_bound", min(sec_ratio(), cap)); glue("ch3_peak_name", spec.name if spec else hardware.NO_DATA)
    sec2, sec3 = sector_bytes()
    glue("ch3_words02_gb", before / 1e9)
    glue("ch3_sec02_gb", sec2 / 1e9); glue("ch3_sec03_gb", sec3 / 1e9); glue("ch3_sec_ratio", sec2 / sec3)
    print(f"requested from global memory at {SIZE}^3, in words: step 02 {before / 1e9:.0f} GB, step 03 "
          f"{after / 1e9:.1f} GB: {ratio:.0f}x less")
    print(f"in 32-byte sectors (chapter 2's model: step 02's A read is one sector for the warp): step 02 "
          f"{sec2 / 1e9:.0f} GB, step 03 {sec3 / 1e9:.1f} GB: {sec2 / sec3:.0f}x less")
    if v2:
        print(f"bound on step 03 / step 02: {sec2 / sec3:.0f}x if time followed requested sectors; the "
              f"{spec.name if spec else v2['gpu']}'s FP32 peak ({peak:g} TFLOP/s) caps it at {cap:.1f}x "
              f"(step 02: {v2['tflops']:.2f} TFLOP/s)")
    smem = shared_bound(peak, READS_PER_FFMA)
    glue("ch3_ffma_per_cycle", FFMA_PER_CYCLE)
    glue("ch3_subparts", ch1.SUBPARTITIONS); glue("ch3_lanes", ch1.FP32_LANES["sm_90"])
    glue("ch3_smem_div", FFMA_PER_CYCLE * READS_PER_FFMA / WAVEFRONTS_PER_CYCLE); glue("ch3_smem_bound", smem)
    print(f"shared-memory bound: {READS_PER_FFMA} reads of 1 wavefront per warp FFMA, {WAVEFRONTS_PER_CYCLE} "
          f"wavefront and {FFMA_PER_CYCLE} warp FFMAs per SM per cycle: peak / "
          f"{FFMA_PER_CYCLE * READS_PER_FFMA // WAVEFRONTS_PER_CYCLE} = {smem:.1f} TFLOP/s")


ASSUMED_WAVES_PER_WIDE = 2  # the prediction's assumption for an LDS.128 whose lanes all read one 16-byte piece


def predict_compiled(records: list) -> None:
    """The prediction from the compiled loop (sm_90 SASS, compile-only, no GPU): a warp's shared loads per tile
    (LDS of sB, LDS.128 of sA) at one wavefront per LDS and ASSUMED_WAVES_PER_WIDE per LDS.128 (an assumption:
    chapter 5 measures the hardware's merging), wavefronts per FFMA, the shared-memory bound on the records' GPU."""
    v2 = next((r for r in records if r["step"] == STEPS[0] and r["m"] == SIZE), None)
    spec = hardware.spec_for(v2["gpu"]) if v2 else None
    peak = spec.fp32_tflops if spec else float("nan")
    m = block_model(BLOCK, peak, per_wide=ASSUMED_WAVES_PER_WIDE)
    glue("ch3_pred_lds", m["lds"]); glue("ch3_pred_lds128", m["lds128"]); glue("ch3_pred_ffma", m["ffma"])
    glue("ch3_pred_wide_waves", ASSUMED_WAVES_PER_WIDE); glue("ch3_pred_per_ffma", m["per_ffma"])
    glue("ch3_pred_div", m["div"]); glue("ch3_pred_bound", m["bound"])
    print(f"step 03's loop compiled for sm_90 (NVRTC {nvrtc.version()}), per warp and tile of {BLOCK}: "
          f"{m['lds']} LDS (sB) + {m['lds128']} LDS.128 (sA) for {m['ffma']} FFMA")
    print(f"assumed: 1 wavefront per LDS, {ASSUMED_WAVES_PER_WIDE} per LDS.128: ({m['lds']} x 1 + {m['lds128']} x "
          f"{ASSUMED_WAVES_PER_WIDE}) / {m['ffma']} = {m['per_ffma']:.1f} wavefronts per FFMA, so shared memory "
          f"bounds step 03 at peak / {m['div']:.0f} = {m['bound']:.1f} TFLOP/s")


def sec_ratio() -> float:
    """How many times fewer global sectors step 03 requests than step 02 at SIZE^3 (chapter 2's sector model)."""
    sec2, sec3 = sector_bytes()
    return sec2 / sec3


def sector_bytes(size: int = SIZE, block: int = BLOCK) -> tuple[int, int]:
    """Bytes of 32-byte sectors steps 02 and 03 request from global memory at size^3 (chapter 2's sector model):
    step 02's warp loads coalescing.sectors_per_k_step sectors per k; step 03's loads a row of each tile."""
    warps = size * size // 32
    step02 = coalescing.sectors_per_k_step("coalesced", (32, 32)) * coalescing.SECTOR_BYTES * warps * size
    row = coalescing.count_sectors([i * tiling.FLOAT_BYTES for i in range(block)])  # one tile row of A or B
    step03 = 2 * row * coalescing.SECTOR_BYTES * warps * (size // block)
    return int(step02), int(step03)


def shared_bound(peak: float, wavefronts_per_ffma: float) -> float:
    """The FP32 rate (TFLOP/s) shared memory allows when each warp FFMA costs wavefronts_per_ffma wavefronts."""
    return peak * WAVEFRONTS_PER_CYCLE / (FFMA_PER_CYCLE * wavefronts_per_ffma)


# ----------------------------------------------------------------------------------------------- measure
def ladder(records: list) -> None:
    """Steps 02 and 03 in TFLOP/s at 4096 with cuBLAS's run-to-run band (plots.ladder); glues step 03's measured
    figures (TFLOP/s, % of cuBLAS, the gain over step 02, its share of the shared-memory bound)."""
    at = {(r["step"], r["m"]): r for r in records}
    v2, v3 = at.get((STEPS[0], SIZE)), at.get((STEP, SIZE))
    if v2 and v3:
        glue("ch3_v3_pct", v3["pct_of_baseline"]); glue("ch3_v3_tflops", v3["tflops"])
        glue("ch3_speedup", v3["tflops"] / v2["tflops"]); glue("ch3_cublas", v3["baseline_tflops"])
        spec = hardware.spec_for(v3["gpu"])
        smem = shared_bound(spec.fp32_tflops if spec else float("nan"), READS_PER_FFMA)
        glue("ch3_v3_of_smem_bound", 100 * v3["tflops"] / smem)
        compiled = block_model(BLOCK, spec.fp32_tflops if spec else float("nan"), per_wide=ASSUMED_WAVES_PER_WIDE)
        glue("ch3_v3_of_pred_bound", 100 * v3["tflops"] / compiled["bound"])
    plots.ladder(records, STEPS, size=SIZE)
    plt.tight_layout()
    plt.show()


def seed_table(records: list):
    """Seed 000's V1 to V3 (a Quadro K620, 4096) beside our steps 01 to 03 (step 01 benchmarked here, as in
    chapter 2: recorded without a GPU, measured on one)."""
    naive = gemmlab.benchmark(["sgemm/01_naive"], sizes=[SIZE], verbose=False)
    glue("ch3_seed_gpu", documents.DOCUMENTS[0].gpu)
    for key in ("v2_pct", "v3_pct", "v3_gain"):
        glue(f"ch3_seed_{key}", documents.figure(0, key).text())
    return documents.table_000(naive + records, through=3)


def emulator_counts(small: int = 128) -> None:
    """The emulator's counts of steps 02 and 03 at small^3 (the real kernels on the CPU): global bytes requested
    against the model, sectors per load request of A and B, shared wavefronts per load request, barriers."""
    for name, params in ((STEPS[0], {}), (STEP, {"BLOCK": BLOCK})):
        counts = gemmlab.step(name, backend="cpu", **params).counters(small, small, small, max_blocks=None)
        loaded = sum(s.bytes for s in counts.select(space="global", kind="load"))
        shared = (f"{counts.shared_wavefronts_per_request(kind='load'):.1f}"
                  if counts.select(space="shared", kind="load") else "none")
        print(f"{name}: {loaded / 2**20:.2f} MiB requested from global memory at {small}^3, "
              f"sectors per load request: A {counts.global_sectors_per_request(kind='load', array='A'):.0f}, "
              f"B {counts.global_sectors_per_request(kind='load', array='B'):.0f}; "
              f"shared wavefronts per load request: {shared}, barriers: {counts.totals['barriers']}")
    print(f"model: {tiling.global_bytes(small, small, small, None) / 2**20:.2f} MiB -> "
          f"{tiling.global_bytes(small, small, small, BLOCK) / 2**20:.2f} MiB")


def counters(records: list | None = None) -> dict[str, dict[str, float]]:
    """The profiler's record of steps 02 and 03 (one launch each at 4096, on the H200): where the global loads were
    served (L1, L2, DRAM), the bytes that left each SM for L2, shared-memory wavefronts and conflicts, the top
    stalls. Glues each figure the chapter quotes; returns {step: {figure: value}}."""
    rec = profile.load(COUNTERS_GPU)
    out: dict[str, dict[str, float]] = {}
    lines: list[str] = []
    print(f"Nsight Compute, one launch at {SIZE} on the {COUNTERS_GPU} (results/nvidia-h200.ncu.json):")
    print(f"{'':22s} {'time ms':>8s} {'L1 hit':>7s} {'to L2 GB':>9s} {'L2 hit':>7s} {'DRAM rd GB':>10s}"
          f" {'LDS':>6s} {'wavefronts/LDS':>14s}")
    for step in STEPS:
        m = rec.get(step)
        if not m:
            print(f"{step}: no profiler record")
            continue
        lds = m["smsp__inst_executed_op_shared_ld.sum"]
        row = {"ms": m["gpu__time_duration.sum"] / 1e6, "l1": m["l1tex__t_sector_hit_rate.pct"],
               "to_l2": m["lts__t_sectors_srcunit_tex_op_read.sum"] * SECTOR / 1e9,
               "l2": m["lts__t_sector_hit_rate.pct"], "dram": m["dram__bytes_read.sum"] / 1e9,
               "requested": m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] * SECTOR / 1e9,
               "lds_per_wave": m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] / lds if lds else 0.0,
               "conflict_pct": 100 * m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"]
               / m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] if lds else 0.0,
               "mem_pct": m["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"]}
        stalls = [s for s in profile.stall_reasons(m, top=6) if s[0] not in NOT_STALLS][:3]
        out[step] = row
        v = step[6:8]
        for key in ("ms", "l1", "to_l2", "l2", "dram", "requested", "mem_pct"):
            glue(f"ch3_ncu{v}_{key}", row[key])
        for i, (name, value) in enumerate(stalls):
            glue(f"ch3_ncu{v}_stall{i}", name.replace("_", " ")); glue(f"ch3_ncu{v}_stall{i}_v", value)
            glue(f"ch3_ncu{v}_stall{i}_why", STALL_MEANING.get(name, "see Nsight Compute's warp-state docs"))
        print(f"{step:22s} {row['ms']:8.2f} {row['l1']:6.1f}% {row['to_l2']:9.1f} {row['l2']:6.1f}% "
              f"{row['dram']:10.1f} {lds / 1e9:5.2f}G {row['lds_per_wave']:14.2f}")
        lines.append(f"{step:22s} top stalls (warps per issued instruction): "
                     + ", ".join(f"{n} {v:.1f}" for n, v in stalls))
    print("\n".join(lines))
    if len(out) == 2:
        a, b = (out[s] for s in STEPS)
        glue("ch3_ncu_gain", a["ms"] / b["ms"])
        glue("ch3_ncu_requested_ratio", a["requested"] / b["requested"])
        glue("ch3_ncu03_conflict_pct", b["conflict_pct"])
        m = rec[STEP]
        warp_tiles = (SIZE // BLOCK) ** 2 * (BLOCK * BLOCK // 32) * (SIZE // BLOCK)  # warps x K tiles each
        glue("ch3_ncu03_lds_per_tile", m["smsp__inst_executed_op_shared_ld.sum"] / warp_tiles)
        glue("ch3_ncu03_waves_per_tile", m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] / warp_tiles)
        if records is not None:
            corrected_bound(records, m["smsp__inst_executed_op_shared_ld.sum"] / warp_tiles,
                            m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] / warp_tiles)
    return out


def show_counters(records: list) -> None:
    """Print and glue the profiler's figures (counters), for the page: nothing returned to display."""
    counters(records)


def corrected_bound(records: list, lds: float, waves: float) -> None:
    """The shared-memory bound from the measured loads and wavefronts per warp and K tile: BLOCK FFMAs read sB
    with BLOCK 32-bit LDS (1 wavefront each) and sA with BLOCK / 4 LDS.128; the rest of the wavefronts are theirs."""
    wide = BLOCK // 4
    narrow = round(lds) - wide
    per_wide = (waves - narrow) / wide
    per_ffma = waves / BLOCK
    v3 = next((r for r in records if r["step"] == STEP and r["m"] == SIZE), None)
    bound = shared_bound(peak_of(records), per_ffma)
    glue("ch3_lds_narrow", narrow); glue("ch3_lds_wide", wide); glue("ch3_waves_per_wide", per_wide)
    glue("ch3_waves_per_ffma", per_ffma); glue("ch3_smem_div2", FFMA_PER_CYCLE * per_ffma)
    glue("ch3_smem_bound2", bound); glue("ch3_ffma_per_tile", BLOCK)
    glue("ch3_v3_of_smem_bound2", 100 * v3["tflops"] / bound if v3 else float("nan"))
    h = next((r for r in sweep_records() if r["params"]["BLOCK"] == BLOCK), None)  # timed on the counters' GPU
    glue("ch3_sweep32_gpu", h["gpu"] if h else hardware.NO_DATA)
    glue("ch3_sweep32_tflops", h["tflops"] if h else float("nan"))
    glue("ch3_sweep32_of_bound2", 100 * h["tflops"] / bound if h else float("nan"))
    print(f"per warp and K tile: {lds:.0f} shared loads = {narrow} LDS (sB) + {wide} LDS.128 (sA); {waves:.0f} "
          f"wavefronts = {narrow} x 1 + {wide} x {per_wide:.0f}: {per_ffma:.1f} per FFMA, so shared memory bounds "
          f"step 03 at peak / {FFMA_PER_CYCLE * per_ffma:.0f} = {bound:.1f} TFLOP/s")


# ----------------------------------------------------------------------------------------------- tile edges


def lds128_wavefronts() -> float:
    """Wavefronts per LDS.128 of step 03 (BLOCK = 32) as the H200's profiler counted them: per warp and K tile, the
    shared-load wavefronts less one per 32-bit LDS (sB's BLOCK loads), over sA's BLOCK / 4 LDS.128. NaN without it."""
    m = profile.load(COUNTERS_GPU).get(STEP)
    if not m:
        return float("nan")
    warp_tiles = (SIZE // BLOCK) ** 2 * (BLOCK * BLOCK // 32) * (SIZE // BLOCK)
    waves = m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] / warp_tiles
    return (waves - BLOCK) / (BLOCK // 4)


def loop_wavefronts(block: int) -> int:
    """The bank model's wavefronts for one 32-bit read of sA[ty][k] or sB[k][tx], the worst over every full warp of
    a BLOCK x BLOCK block and every k (a warp that spans two tile rows reads two words of each)."""
    warps = block * block // 32
    return max(sw.wavefronts(a) for w in range(warps) for k in range(block)
               for name, a in inner_loop_requests(block, k, w).items() if "column" not in name)


def block_model(block: int, peak: float, per_wide: float | None = None) -> dict:
    """The chapter's model of step 03 at tile edge `block`, per warp and K tile: the compiler's shared loads (LDS,
    LDS.128), FFMAs, barriers and all instructions (sm_90 SASS, compile-only); wavefronts per FFMA (an LDS at the
    bank model's count, an LDS.128 at the profiler's); the shared-memory bound on `peak`; global bytes at 4096^3."""
    c = tiling.power_of_two_counts(block)["loop"]
    loop = nvrtc.split_at_loop(gemmlab.instance(STEP, BLOCK=block).sass("sm_90"))["loop"]
    per_wide = lds128_wavefronts() if per_wide is None else per_wide
    narrow = loop_wavefronts(block)
    waves = c["LDS"] * narrow + (c["LDS.128"] * per_wide if c["LDS.128"] else 0.0)
    per_ffma = waves / c["FFMA"]
    return {"block": block, "lds": c["LDS"], "lds128": c["LDS.128"], "ffma": c["FFMA"], "lds_waves": narrow,
            "per_ffma": per_ffma, "div": FFMA_PER_CYCLE * per_ffma / WAVEFRONTS_PER_CYCLE,
            "bound": shared_bound(peak, per_ffma), "instructions": len(loop),
            "bars": sum(op.startswith("BAR") for op in loop),
            "global_gb": tiling.global_bytes(SIZE, SIZE, SIZE, block) / 1e9}


def peak_of(records: list | None) -> float:
    """The FP32 spec-sheet peak of the records' GPU (TFLOP/s), NaN when they name none the course knows."""
    spec = hardware.spec_for(records[0]["gpu"]) if records else None
    return spec.fp32_tflops if spec else float("nan")


def power_of_two(records: list | None = None, odd: int = 31) -> None:
    """Step 03's SASS for sm_90 (compile-only) with BLOCK = 32 and `odd`: the shared loads (LDS, LDS.128) and FFMAs
    of one iteration of the K loop; then the shared-memory bound the chapter's model gives `odd` on the records'
    GPU, beside the corrected bound of 32, and the recorded times of both. (Seed 000's 1-D indexing, which divides
    by BLOCK, is tiling.one_d_indexing; tiling.power_of_two_counts counts its integer instructions too.)"""
    print(f"step 03's K loop, compiled for sm_90 (NVRTC {nvrtc.version()}), per warp and iteration:")
    p2 = {}
    for block in (32, odd):
        c = p2["2-D", block] = tiling.power_of_two_counts(block, "2-D")
        print(f"  BLOCK = {block}: {c['loop']['LDS']} LDS + {c['loop']['LDS.128']} LDS.128 for {c['loop']['FFMA']} FFMA")
    shared = {key: c["loop"]["LDS"] + c["loop"]["LDS.128"] for key, c in p2.items()}
    glue("ch3_p2_lds_32", shared["2-D", 32]); glue("ch3_p2_lds128_32", p2["2-D", 32]["loop"]["LDS.128"])
    glue("ch3_p2_lds_31", shared["2-D", odd]); glue("ch3_p2_fma_31", p2["2-D", odd]["loop"]["FFMA"])
    glue("ch3_p2_row_31", odd * tiling.FLOAT_BYTES)
    glue("ch3_p2_threads_31", odd * odd); glue("ch3_p2_warps_31", odd * odd // 32)
    glue("ch3_p2_rest_31", odd * odd % 32)
    peak = peak_of(records)
    m_odd, m_32 = block_model(odd, peak), block_model(BLOCK, peak)
    glue("ch3_p2_waves_lds_31", m_odd["lds_waves"]); glue("ch3_p2_per_ffma_31", m_odd["per_ffma"])
    glue("ch3_p2_div_31", m_odd["div"]); glue("ch3_p2_bound_31", m_odd["bound"])
    glue("ch3_p2_bound_32", m_32["bound"]); glue("ch3_p2_bound_ratio", m_odd["bound"] / m_32["bound"])
    at = {r["params"]["BLOCK"]: r for r in sweep_records()}  # the recorded sweep: one GPU, one run
    hit = at.get(odd), at.get(BLOCK)
    glue("ch3_p2_meas_gpu", hit[1]["gpu"] if hit[1] else hardware.NO_DATA)
    glue("ch3_p2_meas_31", hit[0]["tflops"] if hit[0] else float("nan"))
    glue("ch3_p2_meas_32", hit[1]["tflops"] if hit[1] else float("nan"))
    glue("ch3_p2_meas_ratio", hit[0]["tflops"] / hit[1]["tflops"] if all(hit) else float("nan"))
    prof = sweep_profile((odd, BLOCK), quiet=True)
    for b, key in ((odd, "31"), (BLOCK, "32")):
        glue(f"ch3_p2_mio_{key}", prof[b]["mio"] if b in prof else float("nan"))
        glue(f"ch3_p2_ls_{key}", prof[b]["long_scoreboard"] if b in prof else float("nan"))
    print(f"prediction, BLOCK = {odd}: {m_odd['lds']} LDS x {m_odd['lds_waves']} wavefront (bank model) per "
          f"{m_odd['ffma']} FFMA = {m_odd['per_ffma']:.0f} wavefronts per FFMA;\n  shared memory bounds it at peak / "
          f"{m_odd['div']:.0f} = {m_odd['bound']:.1f} TFLOP/s, against BLOCK = {BLOCK}'s peak / {m_32['div']:.0f} = "
          f"{m_32['bound']:.1f}: {m_odd['bound'] / m_32['bound']:.0%} of it")
    if all(hit):
        print(f"measured ({hit[1]['gpu']}, {hit[1]['date']}, one run): BLOCK = {odd} {hit[0]['tflops']:.2f} TFLOP/s, "
              f"BLOCK = {BLOCK} {hit[1]['tflops']:.2f}: {hit[0]['tflops'] / hit[1]['tflops']:.0%}")


# ----------------------------------------------------------------------------------------------- try it
def sweep_records(size: int = SIZE) -> list:
    """The recorded runs of step 03 at size^3, one GPU, by tile edge."""
    sweep = gemmlab.results.one_gpu([r for r in gemmlab.results.load() if r["step"] == STEP and r["m"] == size])
    return sorted(sweep, key=lambda r: r["params"]["BLOCK"])


def sweep_prediction(blocks=(8, 16, 31, 32)) -> list[dict]:
    """Before the sweep's figure: per tile edge, the global bytes the grid requests at 4096^3 and the shared-memory
    bound of the chapter's model on the sweep's GPU, with the loop's instructions and barriers per FFMA (SASS)."""
    sweep = sweep_records()
    peak = peak_of(sweep)
    rows = [block_model(b, peak) for b in blocks]
    print(f"the model, per tile edge, at {SIZE}^3 on the {sweep[0]['gpu'] if sweep else hardware.NO_DATA} "
          f"(FP32 peak {peak:g} TFLOP/s); per warp and iteration of the compiled loop, sm_90 SASS\n"
          f"(an iteration covers FFMA / BLOCK tiles of K: the compiler unrolls two 8-wide tiles into one at BLOCK = 8):")
    print(f"{'BLOCK':>5s} {'global GB':>9s} {'LDS':>4s} {'LDS.128':>7s} {'FFMA':>4s} {'wavefronts/FFMA':>15s} "
          f"{'shared bound':>12s} {'instr/FFMA':>10s} {'barriers/FFMA':>13s}")
    for m in rows:
        print(f"{m['block']:5d} {m['global_gb']:9.1f} {m['lds']:4d} {m['lds128']:7d} {m['ffma']:4d} "
              f"{m['per_ffma']:15.2f} {m['bound']:7.1f} TF/s {m['instructions'] / m['ffma']:10.2f} "
              f"{m['bars'] / m['ffma']:13.3f}")
    dates = sorted({r["date"] for r in sweep})
    glue("ch3_sw_gpu", sweep[0]["gpu"] if sweep else hardware.NO_DATA)
    glue("ch3_sw_runs", "one run" if len(dates) == 1 else f"{len(dates)} runs")
    glue("ch3_sw_dates", ", ".join(dates) if dates else "none")
    by = {m["block"]: m for m in rows}
    lo, hi = by[min(blocks)], by[BLOCK]
    glue("ch3_sw_lo", lo["block"]); glue("ch3_sw_lo_gb", lo["global_gb"]); glue("ch3_sw_hi_gb", hi["global_gb"])
    glue("ch3_sw_lo_bound", lo["bound"]); glue("ch3_sw_hi_bound", hi["bound"])
    glue("ch3_sw_lo_ipf", lo["instructions"] / lo["ffma"]); glue("ch3_sw_hi_ipf", hi["instructions"] / hi["ffma"])
    glue("ch3_sw_req_ratio", lo["global_gb"] / hi["global_gb"])
    glue("ch3_sw_lo_bpf", lo["ffma"] / lo["bars"]); glue("ch3_sw_hi_bpf", hi["ffma"] / hi["bars"])
    return rows


def draw_block_sweep(sweep: list, model: list[dict]):
    """The recorded sweep in TFLOP/s, one bar per tile edge, the model's shared-memory bound as a black tick over
    each. Returns the axes."""
    bound = {m["block"]: m["bound"] for m in model}
    fig, ax = plt.subplots(figsize=(5.5, 2.8))
    labels = [str(r["params"]["BLOCK"]) for r in sweep]
    ax.bar(labels, [r["tflops"] for r in sweep], color="#4e79a7", label="measured")
    ax.scatter(labels, [bound.get(r["params"]["BLOCK"], float("nan")) for r in sweep], marker="_", s=900,
               color="black", label="shared-memory bound (model)")
    ax.set_xlabel("BLOCK"); ax.set_ylabel(f"TFLOP/s at {SIZE}^3")
    dates = sorted({r["date"] for r in sweep})  # a sweep recorded over several runs names each date
    runs = "one run" if len(dates) == 1 else "several runs"
    ax.set_title(f"{sweep[0]['gpu']} ({runs}, {', '.join(dates)})", fontsize=9)
    ax.set_ylim(0, 1.4 * max([r["tflops"] for r in sweep] + list(bound.values())))
    ax.legend(fontsize=7, loc="upper left", ncol=2, frameon=False, markerscale=0.35)
    fig.tight_layout()
    return ax


SWEEP_PROFILE = "sgemm/03_smem_tiling<BLOCK={}>"  # the profiler's key of step 03 at one tile edge


def sweep_profile(blocks=(8, 16, 31, 32), quiet: bool = False) -> dict[int, dict[str, float]]:
    """The profiler's record of step 03 at each tile edge (one launch at 4096 on the H200): long-scoreboard and
    MIO-throttle stalls (warps per issued instruction), L1 hit rate of the global loads, DRAM bytes read. Prints a
    row per tile edge; returns {BLOCK: figures}, empty where no record."""
    rec = profile.load(COUNTERS_GPU)
    out = {}
    for b in blocks:
        m = rec.get(SWEEP_PROFILE.format(b))
        if not m:
            continue
        stalls = dict(profile.stall_reasons(m, top=40))
        out[b] = {"long_scoreboard": stalls.get("long_scoreboard", 0.0), "mio": stalls.get("mio_throttle", 0.0),
                  "l1": m["l1tex__t_sector_hit_rate.pct"], "dram_gb": m["dram__bytes_read.sum"] / 1e9,
                  "ms": m["gpu__time_duration.sum"] / 1e6}
    if out and not quiet:
        print(f"Nsight Compute, one launch per tile edge at {SIZE} on the {COUNTERS_GPU}:")
        print(f"{'BLOCK':>5s} {'time ms':>8s} {'long_scoreboard':>15s} {'mio_throttle':>12s} {'L1 hit':>7s} "
              f"{'DRAM rd GB':>10s}")
        for b, f in out.items():
            print(f"{b:5d} {f['ms']:8.2f} {f['long_scoreboard']:15.1f} {f['mio']:12.1f} {f['l1']:6.1f}% "
                  f"{f['dram_gb']:10.1f}")
    return out


def block_sweep(model: list[dict]) -> None:
    """The recorded sweep of BLOCK at 4096 against the model's bound (draw_block_sweep), then the profiler's
    figures per tile edge (sweep_profile); glues the figures the text after it quotes."""
    sweep = sweep_records()
    if not sweep:
        print("no recorded sweep of BLOCK yet")
        return
    draw_block_sweep(sweep, model)
    plt.show()
    at = {r["params"]["BLOCK"]: r for r in sweep}
    lo = min(at)
    glue("ch3_sw_lo_tflops", at[lo]["tflops"]); glue("ch3_sw_hi_tflops", at[BLOCK]["tflops"])
    glue("ch3_sw_lo_of_hi", 100 * at[lo]["tflops"] / at[BLOCK]["tflops"])
    note = gemmlab.results.timing_note(sweep)
    if note:
        print(note)
    prof = sweep_profile()
    nan = {"long_scoreboard": float("nan"), "mio": float("nan"), "l1": float("nan"), "dram_gb": float("nan")}
    p_lo, p_hi = prof.get(lo, nan), prof.get(BLOCK, nan)
    glue("ch3_sw_lo_ls", p_lo["long_scoreboard"]); glue("ch3_sw_hi_ls", p_hi["long_scoreboard"])
    glue("ch3_sw_lo_mio", p_lo["mio"]); glue("ch3_sw_hi_mio", p_hi["mio"])
    glue("ch3_sw_lo_l1", p_lo["l1"]); glue("ch3_sw_hi_l1", p_hi["l1"])
    glue("ch3_sw_lo_dram", p_lo["dram_gb"]); glue("ch3_sw_hi_dram", p_hi["dram_gb"])


def explorer(choices=(4, 8, 16, 32, 64), value: int = BLOCK) -> None:
    """The live sliders: recompile step 03 for a tile edge, check it and, on a GPU, time it (tiling.block_report)."""
    widgets.interact(lambda block: print(tiling.block_report(block)),
                            block=widgets.Dropdown(options=list(choices), value=value, description="BLOCK"))


def claim(blocks=(8, 16, 32)) -> None:
    """Step 03 passes the float64 check at several tile edges; its intensity is BLOCK times step 02's."""
    for block in blocks:
        k = gemmlab.step(STEP, BLOCK=block)
        print(f"BLOCK={block}: {gemmlab.verify(k)}; {tiling.intensity(SIZE, SIZE, SIZE, block):g} FLOP/byte "
              f"({block}x step 02's), {tiling.shared_bytes(block)} bytes of shared memory")


def broadcast_wavefronts() -> float:
    """Wavefronts per broadcast LDS.128 as chapter 3 measured them (the H200's profile of step 03 at 4096): per warp
    and K tile, BLOCK 32-bit LDS of sB at 1 wavefront each and BLOCK / 4 broadcast LDS.128 of sA take the rest."""
    m = profile.load(COUNTERS_GPU)[STEP]
    warp_tiles = (SIZE // BLOCK) ** 2 * (BLOCK * BLOCK // 32) * (SIZE // BLOCK)
    lds = m["smsp__inst_executed_op_shared_ld.sum"] / warp_tiles
    waves = m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] / warp_tiles
    wide = BLOCK // 4
    narrow = round(lds) - wide
    return (waves - narrow) / wide
