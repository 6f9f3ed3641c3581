"""Chapter 5, bank conflicts on the FP32 kernels: banks and wavefronts, padding against an XOR swizzle, counted by
the model (gemmlab.swizzle), the emulator (analysis mode) and Nsight Compute (recorded).

The chapter's record wrangling, glue() calls, figures and tables, one function each; the notebook
(book/05_bank_conflicts.ipynb) calls them. The tensor-core half (ldmatrix on hgemm/01-03) is chapter 7's.
"""
from __future__ import annotations

import gzip
import re

import matplotlib.pyplot as plt
import numpy as np

import gemmlab
from gemmlab import documents, profile, registry, sitecontrols
from gemmlab import swizzle as sw
from gemmlab.chapters.glue import glue
from gemmlab.chapters import show
from gemmlab.chapters import ch03_smem_tiling as ch3
import difflib

STEPS = ["sgemm/05_2d_blocktiling", "sgemm/06_vectorized", "sgemm/07_warptiling"]
SIZE = 4096
COUNTERS_GPU = "NVIDIA H200"
# Step 07's sA tile is 128 floats wide: offset = k * 128 + m. Bit 2 of the row k sits at offset bit 9; XORed into
# bit 4 of the column (16 floats, four 16-byte chunks), it moves rows 4-7 half a bank sweep over.
SA_SWIZZLE = sw.Swizzle(1, 4, 5)
wavefronts = sw.wavefronts
column_read = sw.column_read
Swizzle = sw.Swizzle


def where_we_are(records: list) -> None:
    """Glue step 06's and 07's % of cuBLAS at 4096 and their shared cycles per load (the H200's profiler record)."""
    at = {(r["step"], r["m"]): r for r in records}
    if ("sgemm/07_warptiling", SIZE) in at:
        glue("ch5_gpu", at[("sgemm/07_warptiling", SIZE)]["gpu"])
        glue("ch5_s6_pct", at[("sgemm/06_vectorized", SIZE)]["pct_of_baseline"])
        glue("ch5_s7_pct", at[("sgemm/07_warptiling", SIZE)]["pct_of_baseline"])
    rec = profile.load(COUNTERS_GPU)
    for step in ("sgemm/06_vectorized", "sgemm/07_warptiling"):
        m = rec.get(step, {})
        per = m.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", float("nan")) / \
            m.get("smsp__inst_executed_op_shared_ld.sum", float("nan"))
        glue(f"ch5_h200_{step[6:8]}", per)
        glue(f"ch5_h200_{step[6:8]}_inst", m.get("smsp__inst_executed_op_shared_ld.sum", float("nan")))
    print(gemmlab.bench.table(records))


def three_layouts() -> dict:
    """A row write and a column read of a 32-wide fp32 tile on the plain, padded (1 float) and chunk-swizzled
    layouts: banks coloured, the request outlined. Returns {access: [AccessCount per layout]}."""
    fig, axes = plt.subplots(2, 3, figsize=(13, 5.6))
    counts = {}
    for row, access in enumerate(("row write", "column read")):
        counts[access] = sw.draw_three_layouts(access, 32, 4, 1, axes=axes[row])
        axes[row][0].set_ylabel(access, fontsize=9)
    fig.suptitle("banks (colour) and one warp request (outlined): plain | padded | swizzled (16-byte chunks)",
                 fontsize=10)
    fig.tight_layout()
    plt.show()
    return counts


def seed_count() -> None:
    """Seed 002's 16 x 16 tile: which rows a warp holds, the model's wavefronts of the read it pads, and the
    emulator's count of the real kernel (step 03 with BLOCK = 16)."""
    edge = int(documents.value(2, "tile"))            # the seed's tile and block edge: 16
    lines = [f"warp {w}: threadIdx.y in {sorted({t // edge for t in range(32 * w, 32 * w + 32)})}" for w in range(2)]
    k = 5
    as_row = lambda ty: 4 * (ty * edge + k)       # noqa: E731 (byte address of As[ty][k])
    warp0 = [as_row(t // edge) for t in range(32)]
    bs = [4 * (k * edge + t % edge) for t in range(32)]
    pair = [as_row(0)] * 16 + [as_row(2)] * 16    # rows 0 and 2 in one request, as the seed counts them
    lines.append(f"As[ty][k], warp 0 (rows 0 and 1): {sw.wavefronts(warp0)} wavefront per request")
    lines.append(f"Bs[k][tx], warp 0:                {sw.wavefronts(bs)} wavefront per request")
    lines.append(f"rows 0 and 2 in one request (no warp does this): {sw.wavefronts(pair)} wavefronts")
    c16 = gemmlab.step("sgemm/03_smem_tiling", backend="cpu", BLOCK=edge).counters(64, 64, 64, max_blocks=1)
    for s in c16.select(space="shared", kind="load"):
        lines.append(f"emulator, step 03 with BLOCK = {edge}, {s.array} read: {s.wavefronts / s.requests:g} wavefront "
                     f"per request ({s.requests} requests, at most {s.max})")
    print("\n".join(lines))
    glue("ch5_seed_tile", edge)
    glue("ch5_seed_real", max(s.max for s in c16.select(space="shared", kind="load")))
    glue("ch5_seed_pair", sw.wavefronts(pair))


def swizzle_pictures() -> None:
    """The toy Swizzle<2,0,2> on a 4x4 tile, and Swizzle<3,2,3> on 8 rows of a 32-wide fp32 tile in 16-byte chunks;
    then the toy's offsets in binary."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6), gridspec_kw={"width_ratios": [1, 2]})
    toy = sw.Swizzle(2, 0, 2)
    sw.draw_permutation(4, 4, toy, ax=a, title="toy: Swizzle<2,0,2> on a 4x4 tile")
    sw.draw_permutation(8, 32, sw.Swizzle(3, 2, 3), unit=4, ax=b,
                        title="Swizzle<3,2,3> on 8 rows of a 32-wide fp32 tile (16-byte chunks)")
    fig.tight_layout()
    plt.show()
    for i in range(16):
        print(f"{i:2d} = {i:04b} -> {toy(i):04b} = {toy(i):2d}", end="   " if i % 4 != 3 else "\n")


def variant(layout: str, step: str = "sgemm/07_warptiling", pad: int = 4) -> str:
    """Step 07's kernel text with its sA tile 'padded' (rows of BLOCK_M + pad floats) or 'swizzled' (column m of row
    k stored at m ^ ((k & 4) << 2): SA_SWIZZLE on the tile's offsets); 'plain' is the step as it is."""
    text = gemmlab.source.kernel_path(registry.get(step).file).read_text()
    if layout == "plain":
        return text
    if layout == "padded":
        return text.replace("float sA[BLOCK_K][BLOCK_M];", f"float sA[BLOCK_K][BLOCK_M + {pad}];")
    if layout != "swizzled":
        raise ValueError(f"layout is 'plain', 'padded' or 'swizzled', not {layout!r}")
    for j in range(4):
        text = text.replace(f"sA[c + {j}][r] =", f"sA[c + {j}][r ^ (((c + {j}) & 4) << 2)] =")
    return text.replace("&sA[k][thread_row + i * WARP_SUB_M]", "&sA[k][(thread_row + i * WARP_SUB_M) ^ ((k & 4) << 2)]")


def model_requests(access: str, layout: str = "plain", step: str = "sgemm/07_warptiling", pad: int = 4):
    """(requests, bytes) of one K tile of `step`'s sA or sB access on a layout, from swizzle.sgemm_requests."""
    p = gemmlab.instance(step).params
    reqs, size = sw.sgemm_requests(step, access, pad=pad if layout == "padded" else 0, **p)
    if layout == "swizzled" and access.startswith("sA"):
        reqs = [[SA_SWIZZLE(a // 4) * 4 for a in req] for req in reqs]
    return reqs, size


def emulated(step: str, source: str | None = None):
    """The emulator's counts of one block of a 256 x 256 x 64 problem (analysis mode)."""
    return gemmlab.step(step, backend="cpu", source=source).counters(256, 256, 64, max_blocks=1)


ACCESSES = [("sgemm/06_vectorized", "plain", "sA load", "load"), ("sgemm/06_vectorized", "plain", "sB load", "load"),
            ("sgemm/06_vectorized", "plain", "sA store", "store"),
            ("sgemm/07_warptiling", "plain", "sA load", "load"), ("sgemm/07_warptiling", "plain", "sB load", "load"),
            ("sgemm/07_warptiling", "plain", "sA store", "store"),
            ("sgemm/07_warptiling", "padded", "sA store", "store"), ("sgemm/07_warptiling", "padded", "sA load", "load"),
            ("sgemm/07_warptiling", "swizzled", "sA store", "store"),
            ("sgemm/07_warptiling", "swizzled", "sA load", "load")]


def predict() -> dict:
    """The model's wavefronts per warp request for each access of steps 06 and 07 (and 07's padded and swizzled
    sA), against the fewest its bytes allow; glued for the prose. Returns {(step, layout, access): wavefronts}."""
    out = {}
    for step, layout, access, _ in ACCESSES:
        reqs, size = model_requests(access, layout, step)
        per = sw.per_request(reqs, size)
        ideal = sw.ideal_wavefronts(32, size)
        out[(step, layout, access)] = per
        glue(f"ch5_model_{step[6:8]}_{layout}_{access.replace(' ', '_')}", per)
        print(f"{step:20s} {layout:8s} {access:9s} ({size:2d}-byte): model {per:4.2f} wavefronts per request, "
              f"fewest {ideal}")
    both = [sw.per_request(*model_requests(a, "plain", s)) for s in ("sgemm/06_vectorized", "sgemm/07_warptiling")
            for a in ("sA load", "sB load")]
    glue("ch5_model_06_loads", (both[0] + both[1]) / 2)
    glue("ch5_model_07_loads", (both[2] + both[3]) / 2)
    return out


def count(model: dict) -> list:
    """The emulator's count of the same accesses in the real kernels (the variants built by `variant`), beside
    the model's; returns rows (step, layout, access, emulator, model)."""
    rows, cache = [], {}
    for step, layout, access, kind in ACCESSES:
        if (step, layout) not in cache:
            cache[(step, layout)] = emulated(step, None if layout == "plain" else variant(layout, step))
        emu = cache[(step, layout)].shared_wavefronts_per_request(kind, array=access[:2])
        rows.append((step, layout, access, emu, model[(step, layout, access)]))
        print(f"{step:20s} {layout:8s} {access:9s} emulator {emu:4.2f}  model {model[(step, layout, access)]:4.2f}  "
              f"{'agree' if emu == model[(step, layout, access)] else 'DISAGREE'}")
    return rows


def ncu_table() -> None:
    """Nsight Compute's shared-memory wavefronts per instruction (kernel-wide, loads and stores) for steps 05 to 07:
    the H100's recorded CSVs and the H200's record, beside the model's average over the same instructions."""
    h200 = profile.load(COUNTERS_GPU)
    print(f"{'step':24s} {'kind':6s} {'model':>6s} {'H100':>6s} {'H200':>6s} {'ideal':>6s}  (wavefronts per instruction)")
    for step in STEPS:
        h100 = profile.shared_per_request(profile.load_csv(step))
        other = profile.shared_per_request(h200.get(step, {}))
        for kind in ("load", "store"):
            if kind not in h100:
                continue
            model = model_average(step, kind)
            shown = f"{model:6.2f}" if model == model else f"{'–':>6s}"  # step 05: no model (its source reads scalars)
            print(f"{step:24s} {kind:6s} {shown} {h100[kind]['per_request']:6.2f} "
                  f"{other.get(kind, {}).get('per_request', float('nan')):6.2f} {h100[kind]['ideal_per_request']:6.2f}")
            v = step[6:8]
            glue(f"ch5_model_{v}_{kind}", model)
            glue(f"ch5_ncu_{v}_{kind}", h100[kind]["per_request"])
            glue(f"ch5_ncu_{v}_{kind}_conflicts", h100[kind]["conflicts"])
            glue(f"ch5_ncu_{v}_{kind}_ideal", h100[kind]["ideal_per_request"])
    print("H100: results/gpu-lane/ncu/shared-*.csv; H200: results/nvidia-h200.ncu.json; one launch at 4096 each")
    print("–: no model for step 05, whose source reads scalars that nvcc compiles to 128-bit loads (see below)")
    glue("ch5_ch3_broadcast", ch3.broadcast_wavefronts())   # chapter 3's broadcast LDS.128, measured (H200)
    glue("ch5_ch3_broadcast_model", sw.ideal_wavefronts(32, 16))


def model_average(step: str, kind: str, layout: str = "plain") -> float:
    """The model's wavefronts per instruction over all of a step's shared loads (or stores) of one K tile; step 05's
    scalar loads as the source writes them."""
    if step.endswith("05_2d_blocktiling"):
        return float("nan")
    accesses = ("sA load", "sB load") if kind == "load" else ("sA store",)
    reqs = [model_requests(a, layout if a.startswith("sA") else "plain", step) for a in accesses]
    if kind == "store":  # sB's 16-byte stores: four wavefronts each, the fewest
        b = len(reqs[0][0]) // 4  # one float4 of B per thread per K tile: a quarter as many requests as sA's
        return (sum(sw.wavefronts(r, 4) for r in reqs[0][0]) + 4 * b) / (len(reqs[0][0]) + b)
    return sum(sw.wavefronts(r, s) for rs, s in reqs for r in rs) / sum(len(rs) for rs, _ in reqs)


def ladder_conflicts() -> None:
    """The emulator's wavefronts per request of every shared access of steps 05 to 07, against the fewest."""
    for step in STEPS:
        c = emulated(step)
        parts = []
        for s in sorted(c.select(space="shared"), key=lambda s: (s.kind, s.array, s.line)):
            parts.append(f"{s.array} {s.kind} {s.per_request:.0f}/{sw.ideal_wavefronts(s.lanes // s.requests, s.bytes // s.lanes)}")
        print(f"{step}: " + ", ".join(dict.fromkeys(parts)))


def fix_store(step: str = "sgemm/07_warptiling") -> None:
    """Step 07's transposed sA store, plain, padded and swizzled: the emulator's count, the check against float64
    in the emulator, the shared memory each costs, and the share of all shared wavefronts the fix removes."""
    plain = emulated(step)
    p = gemmlab.instance(step).params
    for layout in ("padded", "swizzled"):
        source = variant(layout, step)
        c = emulated(step, source)
        extra = 4 * p["BLOCK_K"] * 4 if layout == "padded" else 0
        print(f"{layout:8s}: sA store {plain.shared_wavefronts_per_request('store', array='sA'):.0f} -> "
              f"{c.shared_wavefronts_per_request('store', array='sA'):.0f} wavefronts, sA load "
              f"{c.shared_wavefronts_per_request('load', array='sA'):.0f}; {extra} B more shared memory; "
              f"{gemmlab.verify(gemmlab.step(step, backend='cpu', source=source))}")
        t0, t1 = plain.totals, c.totals
        glue(f"ch5_{layout}_share", 100 * (t0["shared_wavefronts"] - t1["shared_wavefronts"]) / t0["shared_wavefronts"])
        glue(f"ch5_{layout}_bytes", extra)


VARIANTS_RUN = "ch5-variants"  # lab/ch5-variants/gpu.sh: step 07, padded, swizzled, interleaved, one run


def timing() -> None:
    """Step 07 and its padded and swizzled variants timed in one run (lab/ch5-variants/gpu.sh): launch by launch in
    turn against cuBLAS, three rounds at 4096 and 8192; the table, and each variant's mean % of cuBLAS and
    TFLOP/s (with the rounds' lowest and highest), the spread (highest minus lowest % of cuBLAS over the three
    rounds; the widest of all rows), cuBLAS's lowest and highest TFLOP/s at each size, and each fix's gain over
    step 07 in TFLOP/s glued."""
    folder = gemmlab.source.REPO / "results" / "experiments" / VARIANTS_RUN
    gpu, date = (folder / "gpu.txt").read_text().splitlines()[1:3]
    rows = cublas_runs((folder / "bench.log").read_text())
    print(f"{gpu.split(',')[0]}, {date}, one run (results/experiments/{VARIANTS_RUN}): step 07 and its variants "
          "launched in turn against cuBLAS (TF32 off), three rounds")
    print(cublas_runs_table(rows, {"step": "step 07", "padded": "sA padded", "swizzled": "sA swizzled"}))
    for (name, n), r in rows.items():
        glue(f"ch5_t_{name}_{n}", sum(r["pct"]) / len(r["pct"]))
        glue(f"ch5_t_{name}_{n}_tf", sum(r["tflops"]) / len(r["tflops"]))
        glue(f"ch5_t_{name}_{n}_tf_lo", min(r["tflops"])); glue(f"ch5_t_{name}_{n}_tf_hi", max(r["tflops"]))
    widest = max(rows, key=lambda key: max(rows[key]["pct"]) - min(rows[key]["pct"]))
    glue("ch5_t_spread", max(rows[widest]["pct"]) - min(rows[widest]["pct"]))
    glue("ch5_t_spread_hi", max(rows[widest]["pct"])); glue("ch5_t_spread_lo", min(rows[widest]["pct"]))
    glue("ch5_t_spread_of", f"{ {'step': 'step 07'}.get(widest[0], 'the ' + widest[0] + ' variant')} at {widest[1]}")
    for n in sorted({n for _, n in rows}):
        cub = [t for (name, m), r in rows.items() if m == n for t in r["cublas_tflops"]]
        glue(f"ch5_t_cublas_{n}_lo", min(cub)); glue(f"ch5_t_cublas_{n}_hi", max(cub))
        base = rows[("step", n)]["tflops"]
        for name in ("padded", "swizzled"):
            mine = rows[(name, n)]["tflops"]
            glue(f"ch5_t_{name}_{n}_gain", 100 * (sum(mine) / len(mine) / (sum(base) / len(base)) - 1))
    glue("ch5_t_gpu", gpu.split(",")[0]); glue("ch5_t_date", date)


VARIANT_KEYS = {"plain": "sgemm/07_warptiling<base>", "padded": "sgemm/07_warptiling<padded>",
                "swizzled": "sgemm/07_warptiling<swizzled>"}


def variant_profiles() -> dict:
    """Nsight Compute's one launch of step 07 and each variant at 4096 (the H200's record, lab/gaps/gpu.sh): store
    wavefronts per instruction against the model's, store conflicts, instructions executed, L2 hit rate and kernel
    time; the differences to step 07 glued. Returns {layout: row}."""
    rec = profile.load(COUNTERS_GPU)
    rows = {}
    print(f"{COUNTERS_GPU}, Nsight Compute, one launch of each at {SIZE}:")
    print("| layout | store wavefronts/instr: model | measured | store conflicts (M): model | measured "
          "| instructions (M) | L2 hit % | DRAM read (MB) | kernel (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for layout, key in VARIANT_KEYS.items():
        m = rec[key]
        st = profile.shared_per_request(m)["store"]
        shared = sum(v["wavefronts"] for v in profile.shared_per_request(m).values())
        reqs, size = model_requests("sA store", layout)
        excess = sum(sw.wavefronts(q, size) - sw.ideal_wavefronts(32, size) for q in reqs) / len(reqs)
        # the model's excess per sA store, times the sA stores (4 of each thread's 5 stores per K tile)
        rows[layout] = r = {"model": model_average("sgemm/07_warptiling", "store", layout),
                            "model_conflicts": excess * st["instructions"] * 4 / 5 / 1e6,
                            "store": st["per_request"], "conflicts": st["conflicts"] / 1e6,
                            "inst": m["smsp__inst_executed.sum"] / 1e6, "l2": m["lts__t_sector_hit_rate.pct"],
                            "dram": m["dram__bytes_read.sum"] / 1e6, "ms": m["gpu__time_duration.sum"] / 1e6,
                            "shared": shared}
        print(f"| {layout} | {r['model']:.2f} | {r['store']:.2f} | {r['model_conflicts']:.1f} | {r['conflicts']:.1f} "
              f"| {r['inst']:,.1f} "
              f"| {r['l2']:.1f} | {r['dram']:,.1f} | {r['ms']:.3f} |")
        for name in ("model", "store", "model_conflicts", "conflicts", "inst", "l2", "ms"):
            glue(f"ch5_p_{layout}_{name}", r[name])
    base = rows["plain"]
    for layout in ("padded", "swizzled"):
        r = rows[layout]
        glue(f"ch5_p_{layout}_faster", 100 * (base["ms"] / r["ms"] - 1))
        glue(f"ch5_p_{layout}_l2_gain", r["l2"] - base["l2"])
        glue(f"ch5_p_{layout}_shared_cut", 100 * (base["shared"] - r["shared"]) / base["shared"])
        # the same cut if each load took the model's 4 wavefronts (the quarter-warp rule), not the measured 3
        ld = profile.shared_per_request(rec[VARIANT_KEYS["plain"]])["load"]
        at4 = base["shared"] - ld["wavefronts"] + sw.ideal_wavefronts(32, 16) * ld["instructions"]
        glue(f"ch5_p_{layout}_shared_cut_at4", 100 * (base["shared"] - r["shared"]) / at4)
    glue("ch5_p_residual", base["conflicts"] - base["model_conflicts"])
    glue("ch5_p_inst_diff", max(abs(r["inst"] - base["inst"]) for r in rows.values()))
    return rows


SPREAD_RUN = "gaps-places/launches"  # lab/gaps/gpu.sh PART=places: launches 3-10 of each kernel, L2 flushed
SPREAD_FILES = {"plain": "spread-07-step", "padded": "spread-07-padded", "swizzled": "spread-07-swizzled"}


def spread_rows(folder=None) -> dict[str, dict]:
    """Per layout, its profiled launches (results/experiments/gaps-places/launches/spread-07-*.csv.gz, read with
    profile.launches): kernel times (us), SM clocks (MHz), L2 hit rates (%), their median and spread (highest minus
    lowest time, % of the median)."""
    folder = folder or gemmlab.source.REPO / "results" / "experiments" / SPREAD_RUN
    rows = {}
    for layout, name in SPREAD_FILES.items():
        with gzip.open(folder / f"{name}.csv.gz", "rt") as f:
            runs = profile.launches(f.read())
        t = [r["gpu__time_duration.sum"] / 1e3 for r in runs]
        rows[layout] = {"us": t, "median": float(np.median(t)), "spread": 100 * (max(t) - min(t)) / np.median(t),
                        "mhz": [r["sm__cycles_elapsed.avg.per_second"] / 1e6 for r in runs],
                        "l2": [r["lts__t_sector_hit_rate.pct"] for r in runs]}
    return rows


def launch_spread() -> dict[str, dict]:
    """Eight profiled launches of step 07 and each variant at 4096 (spread_rows): a table of medians, spreads, gains
    over step 07, L2 hit and SM clock ranges; glued with each variant's registers and barrier stall from its one-launch
    profile."""
    rows = spread_rows()
    base = rows["plain"]["median"]
    print(f"{COUNTERS_GPU}, Nsight Compute, launches 3 to 10 of one process each at {SIZE}, L2 flushed before each:")
    print("| layout | launches | median (us) | spread (%) | faster than step 07 (%) | L2 hit % (lowest-highest) "
          "| SM clock (MHz) |")
    print("|---|---|---|---|---|---|---|")
    for layout, r in rows.items():
        r["gain"] = 100 * (base / r["median"] - 1)
        print(f"| {layout} | {len(r['us'])} | {r['median']:,.1f} | {r['spread']:.1f} | {r['gain']:.2f} "
              f"| {min(r['l2']):.1f}-{max(r['l2']):.1f} | {min(r['mhz']):,.0f}-{max(r['mhz']):,.0f} |")
        for name in ("median", "spread", "gain"):
            glue(f"ch5_s_{layout}_{name}", r[name])
        glue(f"ch5_s_{layout}_l2_lo", min(r["l2"])); glue(f"ch5_s_{layout}_l2_hi", max(r["l2"]))
    glue("ch5_s_n", len(rows["plain"]["us"]))
    glue("ch5_s_widest", max(r["spread"] for r in rows.values()))
    l2 = [x for r in rows.values() for x in r["l2"]]
    mhz = [x for r in rows.values() for x in r["mhz"]]
    glue("ch5_s_l2_lo", min(l2)); glue("ch5_s_l2_hi", max(l2))
    glue("ch5_s_mhz_lo", min(mhz)); glue("ch5_s_mhz_hi", max(mhz))
    rec = profile.load(COUNTERS_GPU)
    for layout, key in VARIANT_KEYS.items():
        glue(f"ch5_s_{layout}_regs", int(rec[key]["launch__registers_per_thread"]))
        glue(f"ch5_s_{layout}_barrier", rec[key]["smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"])
    return rows


def show_variant(layout: str = "swizzled", step: str = "sgemm/07_warptiling"):
    """The lines of step 07 that a variant changes, as a unified diff (a highlighted listing)."""

    old, new = variant("plain", step).splitlines(), variant(layout, step).splitlines()
    text = "\n".join(line for line in difflib.unified_diff(old, new, n=0, lineterm="") if not line.startswith(("---", "+++")))
    return show.Listing(f"kernels/{step}.cu with sA {layout} (chapter 5's variant, not a step)",
                        show.highlighted_lines(text), text)


def bank_twin():
    """The site's static control, started on the fp32 column read of a 32-wide tile (sitecontrols)."""
    return sitecontrols.bank_conflicts_twin(access="column read", width=32, elem_bytes=4, pad=0, bits=0)


def explorer():
    """The live sliders (swizzle.bank_explorer), started on the fp32 column read of a 32-wide tile."""
    return sw.bank_explorer(width=32, elem_bytes=4, pad=0, bits=0, access="column read")


def claim(rows: list) -> None:
    """Emulator and model agree on every access counted; step 07's sA store before and after each fix."""
    agree = all(emu == model for *_, emu, model in rows)
    print(f"emulator and model agree on all {len(rows)} shared accesses counted above: {agree}")
    store = {layout: emu for step, layout, access, emu, _ in rows if step.endswith("07_warptiling") and access == "sA store"}
    print(f"step 07's sA store: {store['plain']:.0f} wavefronts per request -> {store['padded']:.0f} padded, "
          f"{store['swizzled']:.0f} swizzled")


_RUN = re.compile(r"^round (\d+) n=(\d+) (\S+)\s+([\d.]+) TF\s+([\d.]+)% of cuBLAS \(([\d.]+)\)\s*$")


def cublas_runs(text: str) -> dict[tuple[str, int], dict]:
    """Read a log of time_against_cublas (lab/*/gpu.sh): per (variant, n), the rounds' % of cuBLAS (the SUMMARY
    lines), the variant's and cuBLAS's TFLOP/s per round (the 'round R n=N ...' lines)."""
    out: dict[tuple[str, int], dict] = {}
    lines = text.splitlines()
    for line in lines:
        m = _RUN.match(line)
        if m:
            row = out.setdefault((m[3], int(m[2])), {"pct": [], "tflops": [], "cublas_tflops": []})
            row["tflops"].append(float(m[4]))
            row["cublas_tflops"].append(float(m[6]))
    if "SUMMARY" in lines:
        for line in lines[lines.index("SUMMARY") + 1:]:
            parts = line.split()
            if len(parts) >= 3 and parts[1].isdigit():
                out.setdefault((parts[0], int(parts[1])), {"pct": [], "tflops": [], "cublas_tflops": []})["pct"] = \
                    [float(p) for p in parts[2:]]
    return out


def cublas_runs_table(rows: dict[tuple[str, int], dict], names: dict[str, str] | None = None) -> str:
    """A markdown table: per variant and size, mean % of cuBLAS (round-to-round spread), mean TFLOP/s, cuBLAS's."""
    mean = lambda v: sum(v) / len(v) if v else float("nan")  # noqa: E731
    out = ["| variant | n | % of cuBLAS (spread) | TFLOP/s | cuBLAS TFLOP/s |", "|---|---|---|---|---|"]
    for (name, n), r in rows.items():
        spread = max(r["pct"]) - min(r["pct"]) if r["pct"] else float("nan")
        out.append(f"| {(names or {}).get(name, name)} | {n} | {mean(r['pct']):.1f} (±{spread / 2:.1f}) | "
                   f"{mean(r['tflops']):.1f} | {mean(r['cublas_tflops']):.1f} |")
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------- pictures of the
# two conflicts the FP32 ladder has: step 07's transposed sA store and step 06's sB float4 load
STORE_LAYOUTS = (("plain", 0, sw.IDENTITY), ("padded", 4, sw.IDENTITY), ("swizzled", 0, SA_SWIZZLE))


def store_cells(step: str = "sgemm/07_warptiling", warp: int = 0, which: int = 0) -> list[tuple[int, int]]:
    """(k, m) of every element of sA that one store instruction of `warp` writes (the `which`-th request of the warp
    in sgemm_requests' order: float j = which % 4 of the warp's first float4s), in logical (unpadded) coordinates."""
    p = gemmlab.instance(step).params
    reqs, _ = sw.sgemm_requests(step, "sA store", **p)
    per_warp = len(reqs) // (p["BLOCK_M"] * p["BLOCK_N"] // (p["THREAD_M"] * p["THREAD_N"]) // 32)
    return [(a // 4 // p["BLOCK_M"], a // 4 % p["BLOCK_M"]) for a in reqs[warp * per_warp + which]]


def store_picture(step: str = "sgemm/07_warptiling", shown: int = 48) -> dict:
    """Step 07's sA[BLOCK_K][BLOCK_M] (8 x 128 floats) coloured by bank in three layouts, plain, padded by 4 floats
    and Swizzle<1,4,5>, with warp 0's first transposed store instruction outlined (lanes 0, 2, .. write row 0, lanes
    1, 3, .. row 4, 16 columns each); the first `shown` columns are drawn. Returns {layout: (wavefronts, the most words the request puts in one bank)}."""
    p = gemmlab.instance(step).params
    rows, width = p["BLOCK_K"], p["BLOCK_M"]
    cells = store_cells(step)
    fig, axes = plt.subplots(3, 1, figsize=(13, 6.6))
    out = {}
    for ax, (layout, pad, swz) in zip(axes, STORE_LAYOUTS):
        addrs = [sw.tile_offset(k, m, width, pad, swz) * 4 for k, m in cells]
        per_bank: dict[int, set] = {}
        for a in addrs:
            per_bank.setdefault(a // 4 % sw.BANKS, set()).add(a // 4)
        waves = sw.wavefronts(addrs, 4)
        assert waves == sw.per_request(*model_requests("sA store", layout, step)) or layout == "plain"
        out[layout] = (waves, max(len(v) for v in per_bank.values()))
        name = {"plain": "plain sA[8][128]", "padded": "padded: rows of 128 + 4 floats",
                "swizzled": f"Swizzle<{swz.bits},{swz.base},{swz.shift}>: column m of row k at m ^ ((k & 4) << 2)"}[layout]
        sw.draw_bank_map(rows, width, 4, pad, swz, (), ax=ax,
                         title=f"{name}: {waves} wavefront(s), at most {out[layout][1]} word(s) per bank")
        banks = sw.bank_map(rows, width, 4, pad, swz)
        for k, m in cells:
            ax.add_patch(plt.Rectangle((m - 0.5, k - 0.5), 1, 1, fill=False, edgecolor="black", lw=1.2))
            if m % 2 == 0:
                ax.text(m, k, str(banks[k, m]), ha="center", va="center", fontsize=6,
                        bbox={"facecolor": "white", "pad": 0.3, "lw": 0})
        ax.set_aspect("auto")
        ax.set_xlim(-0.5, shown - 0.5)
        ax.set_yticks(range(rows), [f"k={k}" for k in range(rows)], fontsize=6)
        ax.set_xticks(range(0, shown + 1, 8))
        ax.tick_params(labelsize=6)
    axes[-1].set_xlabel(f"column m of sA, the first {shown} of {width} (colour: the bank the element is stored in; "
                        "outlined: one store instruction of warp 0, with the bank of every other cell)", fontsize=8)
    fig.tight_layout()
    plt.show()
    for layout, (waves, most) in out.items():
        glue(f"ch5_pic_{layout}_store", waves)
    glue("ch5_pic_store_cols", len({m for _, m in cells}))
    glue("ch5_pic_store_rows", ", ".join(str(k) for k in sorted({k for k, _ in cells})))
    return out


def quarter_warp_sb(step: str, lanes: int = 8, which: int = 0) -> list[int]:
    """Byte offsets (in sB's row k = 0) of the float4s lanes 0..lanes-1 of warp 0 read in `step`'s sB load."""
    reqs, _ = sw.sgemm_requests(step, "sB load", **gemmlab.instance(step).params)
    return reqs[which][:lanes]


def sb_picture(steps=("sgemm/06_vectorized", "sgemm/07_warptiling")) -> dict:
    """One quarter warp's sB float4 loads (8 lanes: the hardware serves 16-byte loads 8 lanes at a time): each
    lane's 16 bytes drawn at their banks (columns) and the sweep of the 32 banks they fall in (rows: byte offset //
    128). Step 06's lanes read float4s 32 bytes apart, within 256 bytes, two sweeps: banks 0-3 hold a word of lane 0
    and one of lane 4, 2-way. Returns {step: (wavefronts of the quarter warp, sweeps of the banks, distinct
    float4s)}."""
    fig, axes = plt.subplots(len(steps), 1, figsize=(11, 1.5 * len(steps) + 0.6))
    out = {}
    for ax, step in zip(axes, steps):
        offs = quarter_warp_sb(step)
        sweeps = max(offs) // (sw.BANKS * sw.WORD) + 1
        grid = np.full((max(sweeps, 2), sw.BANKS), np.nan)
        for lane, off in enumerate(offs):
            for word in range(off // 4, off // 4 + 4):
                grid[word // sw.BANKS, word % sw.BANKS] = lane
        ax.imshow(grid, cmap="tab10", vmin=0, vmax=9, interpolation="nearest", aspect="auto")
        for off in sorted(set(offs)):
            w, who = off // 4, [str(lane) for lane, o in enumerate(offs) if o == off]
            ax.text(w % sw.BANKS + 1.5, w // sw.BANKS, ("lanes " if len(who) > 1 else "lane ") + ",".join(who),
                    ha="center", va="center", fontsize=7)
        waves = sw.wavefronts(offs, 16)
        out[step] = (waves, sweeps, len(set(offs)))
        ax.set_yticks(range(grid.shape[0]), [f"bytes {128 * s}-{128 * s + 127}" for s in range(grid.shape[0])],
                      fontsize=7)
        ax.set_xticks(range(0, sw.BANKS, 4))
        ax.tick_params(labelsize=7)
        ax.set_title(f"{step}: lanes 0-7 read {len(set(offs))} different float4s within {128 * sweeps} bytes "
                     f"({sweeps} sweep(s) of the banks): {waves} wavefront(s)", fontsize=9)
    axes[-1].set_xlabel("bank (a column holds one word per wavefront; two rows coloured in one column = 2-way)",
                        fontsize=8)
    fig.tight_layout()
    plt.show()
    v6 = out[steps[0]]
    glue("ch5_sb06_stride", quarter_warp_sb(steps[0])[1] - quarter_warp_sb(steps[0])[0])
    glue("ch5_sb06_span", 128 * v6[1]); glue("ch5_sb06_sweeps", v6[1]); glue("ch5_sb06_waves", v6[0])
    glue("ch5_sb07_waves", out[steps[1]][0])
    return out


def print_counts(counts: dict) -> None:
    """The wavefronts of each access of the three-layout figure, one line per access."""
    for access, row in counts.items():
        print(f"{access:13s}: " + " | ".join(f"{c.layout} {c.wavefronts}" for c in row) + "  wavefronts")
