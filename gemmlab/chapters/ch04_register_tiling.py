"""Chapter 4, register tiling: the FP32 ladder sgemm/04 to 07, its pictures, predictions and counters.

The chapter's record wrangling, glue() calls, figures and tables, one function per figure or table; the notebook
(book/04_register_tiling.ipynb) calls each once. Timings come from results/<gpu>.json (live on a GPU); the
profiler's counters of steps 03 to 07 from results/nvidia-h200.ncu.json (an H200: the chapter says so).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

import gemmlab
from gemmlab import documents, explore, hardware, nvrtc, profile, sitecontrols, tiling
from gemmlab import swizzle as sw
from gemmlab.chapters import plots
from gemmlab.chapters import ch03_smem_tiling as ch3
from gemmlab.chapters import ch05_bank_conflicts as ch5
from gemmlab.runtime import arch  # the CUDA Programming Guide's per-SM limits
from gemmlab.chapters.glue import glue
from matplotlib.colors import ListedColormap

STEPS = ["sgemm/01_naive", "sgemm/02_coalesced", "sgemm/03_smem_tiling", "sgemm/04_1d_blocktiling",
         "sgemm/05_2d_blocktiling", "sgemm/06_vectorized", "sgemm/07_warptiling"]
LADDER = STEPS[2:]          # step 03 and this chapter's four steps
NEW = STEPS[3:]             # this chapter's steps
SIZE = 4096
COUNTERS_GPU = "NVIDIA H200"  # the GPU whose profiler record holds steps 03 to 07
FMA_PIPES_PER_SM = 4          # warp-wide FFMA instructions an SM issues per cycle (128 FP32 lanes)
SHARED_BYTES_PER_CYCLE = 128  # bytes an SM's shared memory delivers per cycle (one warp request of 4-byte words)

loads_per_fma = tiling.shared_loads_per_fma     # the model: shared floats a thread loads per multiply-add
register_tiling_twin = sitecontrols.register_tiling_twin
explorer = explore.explorer


def _num(step: str) -> str:
    return step.split("/")[1][:2]


def thread_tile(step: str) -> tuple[int, int]:
    """(THREAD_M, THREAD_N) of a step's default configuration: (1, 1) for step 03, (THREAD_M, 1) for 04."""
    p = gemmlab.instance(step).params
    return p.get("THREAD_M", 1), p.get("THREAD_N", 1)


def where_we_are(records: list) -> None:
    """Glue the ladder's figures at 4096 (GPU, % of cuBLAS, TFLOP/s, gain per rung) and print the starting point:
    the records of steps 01 to 03 with cuBLAS's rate beside each (this chapter's steps are shown where they are
    measured, by `ladder`)."""
    at = {(r["step"], r["m"]): r for r in records}
    if all((s, SIZE) in at for s in LADDER):
        glue("ch4_gpu", at[(LADDER[0], SIZE)]["gpu"])
        glue("ch4_date", at[(LADDER[-1], SIZE)]["date"])
        glue("ch4_v3_pct", at[(LADDER[0], SIZE)]["pct_of_baseline"])
        glue("ch4_v3_tflops", at[(LADDER[0], SIZE)]["tflops"])
        glue("ch4_best_pct", at[(LADDER[-1], SIZE)]["pct_of_baseline"])
        for before, step in zip(LADDER, LADDER[1:]):
            v = _num(step)
            glue(f"ch4_v{v}_pct", at[(step, SIZE)]["pct_of_baseline"])
            glue(f"ch4_v{v}_tflops", at[(step, SIZE)]["tflops"])
            glue(f"ch4_v{v}_gain", at[(step, SIZE)]["tflops"] / at[(before, SIZE)]["tflops"])
        glue("ch4_cublas_tflops", at[(LADDER[-1], SIZE)]["baseline_tflops"])
        for step in NEW:  # cuBLAS's rate in the same run, from each step's own record
            glue(f"ch4_cublas{_num(step)}_tflops", at[(step, SIZE)]["baseline_tflops"])
    print(gemmlab.bench.table([r for r in records if r["step"] not in NEW]))


def shared_bound(tm: int, tn: int) -> float:
    """The model's ceiling, as a share of the FP32 peak, that shared-memory loads put on a thread tile tm x tn.

    Per k a warp loads (tm + tn) x 32 floats, which take at least tm + tn cycles of its SM's shared memory
    (128 bytes a cycle), and issues tm x tn FFMA instructions, which take tm x tn / 4 cycles of the SM's four
    FMA pipes. All warps of the SM share both, so the FMA pipes can be busy at most a fraction
    tm tn / (4 (tm + tn)) = 1 / (4 x loads per multiply-add) of the time, and never more than all of it."""
    return min(1.0, 1.0 / (FMA_PIPES_PER_SM * loads_per_fma(tm, tn)))


BROADCAST_A = {"sgemm/03_smem_tiling", "sgemm/04_1d_blocktiling"}  # all 32 lanes of a warp read the same sA float


broadcast_wavefronts = ch3.broadcast_wavefronts  # chapter 3's measurement, used by this chapter's model


def merged_model(step: str, broadcast: float = 1.0) -> dict:
    """The model once the compiler merges loads: four consecutive floats of a row (four k of an sA row in steps 03
    and 04, four columns of a sliver from step 05 on) become one 128-bit load (LDS.128). A wavefront delivers at
    most 128 bytes (one 4-byte word per bank), so a warp's LDS.128 of 32 different float4s takes 4 wavefronts, the
    same as the 4 scalar loads it replaces; a broadcast (all lanes one float4) takes `broadcast` wavefronts: 1 by
    the one-word-per-bank rule, 2 as chapter 3 measured (broadcast_wavefronts()), which the chapter uses. Returns
    shared-load instructions and wavefronts per warp-wide FFMA, and the ceiling 1 / (4 x wavefronts per FFMA)."""
    tm, tn = thread_tile(step)
    if step in BROADCAST_A:   # per k: tm / 4 broadcast LDS.128 of sA (`broadcast` wavefronts each), tn scalar sB loads
        lds, wavefronts = tm / 4 + tn, tm / 4 * broadcast + tn
    else:                     # per k: (tm + tn) / 4 LDS.128 of distinct float4s, 4 wavefronts each
        lds, wavefronts = (tm + tn) / 4, float(tm + tn)
    ffma = tm * tn
    return {"lds": lds / ffma, "wavefronts": wavefronts / ffma,
            "bound": min(1.0, 1.0 / (FMA_PIPES_PER_SM * wavefronts / ffma))}


def bank_model(step: str) -> float:
    """Shared-load wavefronts per warp-wide FFMA under chapter 5's bank model (quarter-warp rule, conflicts counted,
    broadcast passes not merged): the merged model at 4 wavefronts per broadcast LDS.128 for 03 and 04, chapter 5's
    count of the source's loads for 06 and 07; nan for 05, whose source reads scalars that nvcc merges."""
    if step in BROADCAST_A:
        return merged_model(step, sw.ideal_wavefronts(32, 16))["wavefronts"]
    per_load = ch5.model_average(step, "load")
    return per_load * merged_model(step)["lds"]


def predict(records: list) -> None:
    """The prediction before the ladder is measured: loads per multiply-add, the shared-memory ceiling and the
    TFLOP/s it allows on the records' GPU (its FP32 peak from the data sheet), per step; then the same ceiling
    once the compiler merges four floats into one 128-bit load (merged_model)."""
    gpu = next((r["gpu"] for r in records if r["step"] in LADDER), None)
    spec = hardware.spec_for(gpu) if gpu else None
    peak = spec.fp32_tflops if spec else float("nan")
    glue("ch4_peak", peak)
    glue("ch4_peak_name", spec.name if spec else hardware.NO_DATA)
    bcast = round(broadcast_wavefronts())  # 2.001 measured: the fraction is the edge tiles' extra loads
    glue("ch4_bcast_waves", bcast)
    print(f"FP32 peak of the {spec.name if spec else gpu} (data sheet): {peak:g} TFLOP/s; a broadcast LDS.128 "
          f"costs {bcast:.0f} wavefronts (chapter 3's measurement)")
    for step in LADDER:
        tm, tn = thread_tile(step)
        bound = shared_bound(tm, tn)
        glue(f"ch4_bound{_num(step)}", 100 * bound)
        glue(f"ch4_bound{_num(step)}_tflops", bound * peak)
        merged = merged_model(step, bcast)
        glue(f"ch4_mbound{_num(step)}", 100 * merged["bound"])
        glue(f"ch4_mbound{_num(step)}_tflops", merged["bound"] * peak)
        glue(f"ch4_mwave{_num(step)}", merged["wavefronts"])
        rec = next((r for r in records if r["step"] == step and r["m"] == SIZE), None)
        glue(f"ch4_v{_num(step)}_of_mbound", 100 * rec["tflops"] / (merged["bound"] * peak) if rec else float("nan"))
        print(f"{step:24s} {tm} x {tn}: {loads_per_fma(tm, tn):.3f} loads/FMA, ceiling {100 * bound:5.1f}% = "
              f"{bound * peak:4.1f} TFLOP/s | merged: {merged['wavefronts']:.3f} wavefronts/FMA, ceiling "
              f"{100 * merged['bound']:5.1f}% = {merged['bound'] * peak:4.1f}")
    inst = gemmlab.instance("sgemm/05_2d_blocktiling")
    threads = inst.step.launch(SIZE, SIZE, SIZE, inst.params).threads
    least = min_registers(*thread_tile(inst.name))
    glue("ch4_min_regs", least)
    glue("ch4_model_blocks", explore.blocks_per_sm(least, threads, 0, 90)[0])
    glue("ch4_regs_per_sm", arch.SM_LIMITS[90][0])


def counters() -> None:
    """The profiler's record of steps 03 to 07 (one launch each at 4096, on the H200): shared-load instructions
    and shared-memory cycles per FFMA instruction against the model, FMA pipe busy, occupancy, top stall."""
    rec = profile.load(COUNTERS_GPU)
    out = {}
    print(f"Nsight Compute, one launch at {SIZE} on the {COUNTERS_GPU} (results/nvidia-h200.ncu.json); per FFMA:")
    print(f"{'':24s} {'LDS':^14s}   {'wavefronts':^42s}   {'FMA pipe':>8s} {'occupancy':>9s}   "
          "top stall (per issued instruction)")
    print(f"{'':24s} {'model':>5s} {'measured':>8s}   {'merged, no conflicts':>20s} {'bank model':>11s} "
          f"{'measured':>9s}   {'busy':>8s}")
    for step in LADDER:
        m = rec.get(step)
        if not m:
            print(f"{step}: no profiler record")
            continue
        ffma = m["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"] / 32  # warp-wide FFMA instructions
        merged = merged_model(step, round(broadcast_wavefronts()))
        row = {"model": loads_per_fma(*thread_tile(step)), "m_lds": merged["lds"], "m_wave": merged["wavefronts"],
               "bank": bank_model(step),
               "lds": m["smsp__inst_executed_op_shared_ld.sum"] / ffma,
               "cycles": m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] / ffma,
               "fma": m["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"],
               "occupancy": m["sm__warps_active.avg.pct_of_peak_sustained_active"],
               "registers": m["launch__registers_per_thread"], "stall": profile.stall_reasons(m, top=1)[0]}
        out[step] = row
        v = _num(step)
        glue(f"ch4_ncu{v}_lds", row["lds"]); glue(f"ch4_ncu{v}_cycles", row["cycles"])
        glue(f"ch4_ncu{v}_fma", row["fma"]); glue(f"ch4_ncu{v}_occ", row["occupancy"])
        glue(f"ch4_ncu{v}_regs", row["registers"]); glue(f"ch4_ncu{v}_bound", 100 * min(1, 1 / (4 * row["cycles"])))
        glue(f"ch4_bank{v}", row["bank"])
        bank = "n/a" if np.isnan(row["bank"]) else f"{row['bank']:.3f}"  # 05: not modelled
        print(f"{step:24s} {row['m_lds']:5.3f} {row['lds']:8.3f}   {row['m_wave']:20.3f} {bank:>11s} "
              f"{row['cycles']:9.3f}   "
              f"{row['fma']:7.1f}% {row['occupancy']:8.1f}%   {row['stall'][0]} {row['stall'][1]:.2f}")
    glue("ch4_bank_bcast_waves", sw.ideal_wavefronts(32, 16))  # the bank model's wavefronts per broadcast LDS.128
    print("bank model: chapter 5's quarter-warp rule with conflicts, broadcasts unmerged (n/a for 05: its source's "
          "scalars, which nvcc compiles to 06's loads, are not modelled)")
    for step in NEW[1:]:  # the three largest stall reasons (the issue itself, 'selected', left out) and their total
        if step in out:
            stalls = [kv for kv in profile.stall_reasons(rec[step], top=100) if kv[0] != "selected"]
            total = sum(v for _, v in stalls)
            v = _num(step)
            glue(f"ch4_ncu{v}_stall_total", total)
            glue(f"ch4_ncu{v}_stalls3", ", ".join(f"*{k}* {x:.2f}" for k, x in stalls[:3]))
            print(f"{step}: stalls per issued instruction {', '.join(f'{k} {x:.2f}' for k, x in stalls[:3])}; "
                  f"all reasons {total:.2f}")
    for step in BROADCAST_A & set(out):  # the wavefronts the merged model misses (or adds), per broadcast LDS.128
        r = out[step]
        n_broadcast = thread_tile(step)[0] / 4 / (thread_tile(step)[0] * thread_tile(step)[1])  # per FFMA
        glue(f"ch4_ncu{_num(step)}_extra", (r["cycles"] - r["m_wave"]) / n_broadcast)
    for step in NEW:
        if step in out:
            glue(f"ch4_ncu{_num(step)}_stall", out[step]["stall"][0])
            glue(f"ch4_ncu{_num(step)}_stall_v", out[step]["stall"][1])
    for step in ("sgemm/06_vectorized", "sgemm/07_warptiling"):  # wavefronts per shared load instruction
        if step in out:
            glue(f"ch4_ncu{_num(step)}_per_lds", out[step]["cycles"] / out[step]["lds"])
    if "sgemm/03_smem_tiling" in out:
        glue("ch4_ncu03_stall", out["sgemm/03_smem_tiling"]["stall"][0])
        glue("ch4_ncu03_stall_v", out["sgemm/03_smem_tiling"]["stall"][1])
    if "sgemm/07_warptiling" in out:
        glue("ch4_ncu07_stall", out["sgemm/07_warptiling"]["stall"][0])
        glue("ch4_ncu07_stall_v", out["sgemm/07_warptiling"]["stall"][1])


STEP06_COUNTERS = [  # (what, metric, glue key): the counters that tell step 06's two changes apart
    ("global load instructions", "smsp__inst_executed_op_global_ld.sum", "gld"),
    ("global load sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "gld_sectors"),
    ("global store sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "gst_sectors"),
    ("shared load instructions", "smsp__inst_executed_op_shared_ld.sum", "lds"),
    ("shared load wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "lds_wavefronts"),
    ("shared store wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", "sts_wavefronts"),
    ("kernel time (ms)", "gpu__time_duration.sum", "time"),
]


def _global_ops(step: str, arch: str = "sm_90") -> dict:
    """Static SASS counts of a step's global loads and shared loads and FFMAs (one K iteration is unrolled, so the
    ratios are per K tile)."""
    return nvrtc.count_instructions(gemmlab.instance(step).sass(arch), ["LDG", "LDS", "LDS.128", "FFMA", "STG"])


def step06_predict(before: str = "sgemm/05_2d_blocktiling", step: str = "sgemm/06_vectorized") -> None:
    """What each half of step 06 should change, before the profiler: the float4 global loads a quarter of the
    global load instructions for the same bytes (each thread's share of the tiles, one float or one float4 per
    instruction); the transposed sA no shared load per FFMA, since nvcc already reads step 05's sA as LDS.128 (the
    static SASS counts); and chapter 5's bank model's wavefronts per shared load of step 06 and step 07."""
    out = {}
    for s in (before, step):
        p = gemmlab.instance(s).params
        threads = gemmlab.instance(s).step.launch(SIZE, SIZE, SIZE, p).threads
        per_thread = (p["BLOCK_M"] * p["BLOCK_K"] + p["BLOCK_K"] * p["BLOCK_N"]) / threads  # floats per K tile
        width = 4 if s == step else 1
        ops = _global_ops(s)
        # count_instructions matches opcode prefixes: ops["LDS"] already counts the LDS.128 among them
        out[s] = {"ldg": per_thread / width, "lds_per_ffma": ops["LDS"] / ops["FFMA"],
                  "lds": ops["LDS"], "ffma": ops["FFMA"]}
    g = out[step]["ldg"] / out[before]["ldg"]
    l = out[step]["lds_per_ffma"] / out[before]["lds_per_ffma"]
    w6, w7 = ch5.model_average("sgemm/06_vectorized", "load"), ch5.model_average("sgemm/07_warptiling", "load")
    glue("ch4_p06_gld", g); glue("ch4_p06_lds", l); glue("ch4_p06_wave", w6); glue("ch4_p07_wave", w7)
    glue("ch4_p06_ldg05", out[before]["ldg"]); glue("ch4_p06_ldg06", out[step]["ldg"])
    print(f"global load instructions per thread and K tile: {out[before]['ldg']:.0f} -> {out[step]['ldg']:.0f}"
          f"  (x {g:.2f}, same bytes)")
    print(f"shared loads per FFMA (static SASS, edge paths incl.): {out[before]['lds']} / {out[before]['ffma']} -> "
          f"{out[step]['lds']} / {out[step]['ffma']}  (x {l:.2f})")
    print(f"wavefronts per shared load (chapter 5's model):   step 06 {w6:.0f}, step 07 {w7:.0f}")
    sec = {s: c_store_sectors(s) for s in (before, step)}
    glue("ch4_p06_gst", sec[step] / sec[before])
    glue("ch4_p06_gst_touch05", c_store_touches(before)); glue("ch4_p06_gst_touch06", c_store_touches(step))
    print(f"global store sectors, one warp's C tile:          {sec[before]} -> {sec[step]}  (x {sec[step] / sec[before]:.2f}: "
          f"each 32-byte sector stored {c_store_touches(before)} -> {c_store_touches(step)} times)")
    sts = {s: shared_store_wavefronts(s) for s in (before, step)}
    glue("ch4_p06_sts", sts[step] / sts[before])
    glue("ch4_p06_sts05", sts[before]); glue("ch4_p06_sts06", sts[step])
    print(f"shared-store wavefronts per warp and K tile:      {sts[before]:.0f} -> {sts[step]:.0f}  "
          f"(x {sts[step] / sts[before]:.2f}, chapter 5's model)")


def _c_store_requests(step: str) -> list[list[int]]:
    """Byte offsets in C (N = SIZE) of warp 0's C stores, one list per store instruction: scalar in step 05, float4
    from step 06 on (the kernels' thread_row/thread_col formulas)."""
    p = gemmlab.instance(step).params
    tm, tn = thread_tile(step)
    width = 1 if step == "sgemm/05_2d_blocktiling" else 4
    lanes = range(32)
    col = [t % (p["BLOCK_N"] // tn) * tn for t in lanes]
    row = [t // (p["BLOCK_N"] // tn) * tm for t in lanes]
    return [[4 * ((row[t] + m) * SIZE + col[t] + n) for t in lanes] for m in range(tm) for n in range(0, tn, width)]


def c_store_sectors(step: str) -> int:
    """32-byte sectors that warp 0's C stores touch, summed over its store instructions (a sector counted once per
    instruction that writes it, as Nsight Compute counts them)."""
    return sum(len({a // 32 for a in req}) for req in _c_store_requests(step))


def c_store_touches(step: str) -> int:
    """How many store instructions of warp 0 write each 32-byte sector of its C tile."""
    reqs = _c_store_requests(step)
    return c_store_sectors(step) // len({a // 32 for req in reqs for a in req})


def shared_store_wavefronts(step: str) -> float:
    """Chapter 5's model of one warp's shared-store wavefronts per K tile: step 05 stores one float per
    instruction along the tiles' rows (1 wavefront each); from step 06 on, the model's transposed sA stores and the
    float4 sB stores (ch5.model_average)."""
    p = gemmlab.instance(step).params
    threads = gemmlab.instance(step).step.launch(SIZE, SIZE, SIZE, p).threads
    floats = (p["BLOCK_M"] * p["BLOCK_K"] + p["BLOCK_K"] * p["BLOCK_N"]) / threads  # per thread and K tile
    if step == "sgemm/05_2d_blocktiling":
        return floats * 1.0
    a_floats = p["BLOCK_M"] * p["BLOCK_K"] / threads
    instructions = a_floats + (floats - a_floats) / 4   # A's floats one by one (transposed), B's as float4s
    return instructions * ch5.model_average(step, "store")


def step06_split(before: str = "sgemm/05_2d_blocktiling", step: str = "sgemm/06_vectorized") -> None:
    """Step 06's two changes told apart by the profiler (one launch each at 4096, H200): float4 global accesses
    change the global columns, the transposed sA the shared ones."""
    rec = profile.load(COUNTERS_GPU)
    a, b = rec.get(before), rec.get(step)
    if not a or not b:
        print("no profiler record of steps 05 and 06")
        return
    print(f"Nsight Compute at {SIZE} on the {COUNTERS_GPU}: {before} -> {step}")
    glue("ch4_counters_gpu", COUNTERS_GPU)
    for what, metric, key in STEP06_COUNTERS:
        scale = 1e-6 if metric == "gpu__time_duration.sum" else 1
        ratio = b[metric] / a[metric]
        spec = ",.2f" if scale != 1 else ",.0f"
        print(f"  {what:26s} {format(a[metric] * scale, spec):>13s} -> {format(b[metric] * scale, spec):>13s}  "
              f"(x {ratio:.2f})")
        glue(f"ch4_s06_{key}", ratio)
    for s in (step, "sgemm/07_warptiling"):  # wavefronts per shared load instruction, against chapter 5's model
        m = rec.get(s, {})
        if m:
            glue(f"ch4_per_lds{_num(s)}", m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]
                 / m["smsp__inst_executed_op_shared_ld.sum"])


def min_registers(tm: int, tn: int) -> int:
    """The model's least registers for a thread tile: tm x tn sums and one sliver of tm + tn operands."""
    return tm * tn + tm + tn


def registers(arch: str = "sm_90") -> None:
    """Registers per thread: the model's least (with the blocks per SM it would allow), the compile the GPU ran
    (the profiler's record, with its blocks per SM and the occupancy the profiler measured), and this machine's
    compile (NVRTC; its count varies by release, so no blocks are derived from it: the GPU's count is the one)."""
    rec = profile.load(COUNTERS_GPU)
    for step in NEW:
        inst = gemmlab.instance(step)
        threads = inst.step.launch(SIZE, SIZE, SIZE, inst.params).threads
        res = inst.resources(arch)
        tm, tn = thread_tile(step)
        least = min_registers(tm, tn)
        b_model = explore.blocks_per_sm(least, threads, res.shared_bytes, 90)[0]
        gpu_regs = int(rec.get(step, {}).get("launch__registers_per_thread", 0))
        occupancy = rec.get(step, {}).get("sm__warps_active.avg.pct_of_peak_sustained_active", float("nan"))
        b_gpu = explore.blocks_per_sm(gpu_regs, threads, res.shared_bytes, 90)[0] if gpu_regs else 0
        glue(f"ch4_min_regs{_num(step)}", least); glue(f"ch4_model_blocks{_num(step)}", b_model)
        glue(f"ch4_gpu_blocks{_num(step)}", b_gpu)
        print(f"{step:24s} {threads} threads: model >= {least:3d} regs ({b_model} blocks/SM) | GPU run "
              f"{gpu_regs or '-':>3} regs: {b_gpu or '-'} block(s)/SM, occupancy {occupancy:4.1f}% | here {res.registers:3d} regs")
    print(f"GPU run: Nsight Compute's launch__registers_per_thread and occupancy ({COUNTERS_GPU}); here: NVRTC "
          f"{nvrtc.version()}, {arch}, another compiler release")


TILE_RUN = "gaps-tiles"  # results/experiments/<TILE_RUN>/records.json: one H200 process at 4096, tile against idea
TILE_CONFIGS = [  # (label, step, template parameters that differ from the step's defaults, step compared with)
    ("03", "sgemm/03_smem_tiling", {}, None),
    ("04s", "sgemm/04_1d_blocktiling", {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, "03"),  # at step 03's tile
    ("04", "sgemm/04_1d_blocktiling", {}, "03"),
    ("05s", "sgemm/05_2d_blocktiling", {"BLOCK_M": 64, "BLOCK_N": 64}, "04"),                # at step 04's tile
    ("05", "sgemm/05_2d_blocktiling", {}, "04"),
]


def tile_run() -> list[dict]:
    """The records of the tile-against-idea run (results/experiments/gaps-tiles/records.json): each configuration
    of TILE_CONFIGS timed at 4096 in one process on an H200, beside cuBLAS (kept out of results/nvidia-h200.json, where
    its step-03 record would replace the one chapter 3's sweep was timed with)."""
    path = gemmlab.source.REPO / "results" / "experiments" / TILE_RUN / "records.json"
    return gemmlab.results.read_json(path)


def _profile_key(step: str, changed: dict) -> str:
    """The profiler record's key of `step` with `changed` template parameters: 'step<K=V,...>', or the step alone."""
    return f"{step}<{','.join(f'{k}={v}' for k, v in changed.items())}>" if changed else step


def _tile_bytes(params: dict) -> int:
    """Static shared memory of a step's two tiles (fp32): step 03's BLOCK x BLOCK twice, else sA and sB."""
    if "BLOCK" in params:
        return 2 * params["BLOCK"] ** 2 * 4
    return (params["BLOCK_M"] + params["BLOCK_N"]) * params["BLOCK_K"] * 4


def tile_rows() -> dict[str, dict]:
    """Steps 04 and 05, each at the tile of the step before and at its own, with step 03 (TILE_CONFIGS): time and
    TFLOP/s from one H200 process (tile_run), the gain over the step compared with in that run, and from the H200
    profiles (one launch each) the registers, the blocks per SM they allow (explore.blocks_per_sm) with the warps
    the profiler found active, the FMA pipe's busy time, the stalls per issued instruction (long_scoreboard,
    barrier, the top reason besides 'selected'), shared wavefronts per load, global loads per FFMA, DRAM bytes
    read. Glues each figure as ch4_ti_<label>_<what>; returns the rows by label."""
    recs = tile_run()
    ncu = profile.load(COUNTERS_GPU)
    rows: dict[str, dict] = {}
    for label, step, changed, before in TILE_CONFIGS:
        inst = gemmlab.instance(step, **changed)
        rec = next((r for r in recs if r["step"] == step and r["params"] == inst.params and r["m"] == SIZE), None)
        m = ncu.get(_profile_key(step, changed))
        if rec is None or m is None:
            raise gemmlab.results.RecordsError(f"{step} {inst.params}: no record in results/experiments/{TILE_RUN} "
                                               f"or no profile in {COUNTERS_GPU}'s; run lab/gaps/gpu.sh PART=tiles")
        p = inst.params
        threads = inst.step.launch(SIZE, SIZE, SIZE, p).threads
        regs = int(m["launch__registers_per_thread"])
        blocks = explore.blocks_per_sm(regs, threads, _tile_bytes(p), 90)[0]
        ffma = m["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"] / 32   # warp-wide FFMA instructions
        stalls = [kv for kv in profile.stall_reasons(m, top=100) if kv[0] != "selected"]
        row = {"step": step, "params": p, "threads": threads, "tflops": rec["tflops"], "ms": 1e3 * rec["median_s"],
               "cublas": rec["baseline_tflops"], "registers": regs, "blocks": blocks, "warps": blocks * threads // 32,
               "warps_measured": m["sm__warps_active.avg.pct_of_peak_sustained_active"] / 100 * 64,
               "fma": m["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"],
               "long_scoreboard": m["smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"],
               "barrier": m["smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"],
               "mio_throttle": m["smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio"],
               "stall": stalls[0][0], "stall_v": stalls[0][1],
               "per_lds": profile.shared_per_request(m)["load"]["per_request"],
               "lds_waves": m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] / ffma,
               "gld": m["smsp__inst_executed_op_global_ld.sum"] / ffma,
               "dram_gb": m["dram__bytes_read.sum"] / 1e9}
        row["x"] = row["tflops"] / rows[before]["tflops"] if before else 1.0
        row["before"] = before
        rows[label] = row
        for key in ("tflops", "ms", "x", "registers", "blocks", "warps", "warps_measured", "fma", "long_scoreboard",
                    "barrier", "mio_throttle", "stall", "stall_v", "per_lds", "lds_waves", "gld", "dram_gb", "threads"):
            glue(f"ch4_ti_{label}_{key}", row[key])
    glue("ch4_ti_05s_of_05", rows["05s"]["tflops"] / rows["05"]["tflops"])
    glue("ch4_ti_gpu", recs[0]["gpu"]); glue("ch4_ti_date", recs[0]["date"])
    lo, hi = min(r["cublas"] for r in rows.values()), max(r["cublas"] for r in rows.values())
    glue("ch4_ti_cublas_lo", lo); glue("ch4_ti_cublas_hi", hi)
    return rows


def tile_against_idea() -> None:
    """The table of tile_rows: each configuration's tile, threads, time, gain in the run, and its profile."""
    rows = tile_rows()
    recs = tile_run()
    lo, hi = min(r["cublas"] for r in rows.values()), max(r["cublas"] for r in rows.values())
    print(f"{recs[0]['gpu']}, {recs[0]['date']}, one process at {SIZE} (results/experiments/{TILE_RUN}), cuBLAS at "
          f"{lo:.1f}-{hi:.1f} TFLOP/s beside each; profiles: one launch each (results/nvidia-h200.ncu.json)")
    print(f"{'':20s} {'tile':>11s} {'threads':>7s} {'TFLOP/s':>7s} {'ms':>6s} {'gain':>11s} | {'regs':>4s} "
          f"{'warps/SM':>9s} {'FMA':>5s} {'long_sb':>7s} {'barrier':>7s} {'mio':>5s}  {'top stall':21s} {'wf/LDS':>6s} "
          f"{'LDG/FFMA':>8s} {'DRAM GB':>7s}")
    for label, step, changed, before in TILE_CONFIGS:
        r, p = rows[label], rows[label]["params"]
        tile = f"{p['BLOCK']}x{p['BLOCK']}x{p['BLOCK']}" if "BLOCK" in p else f"{p['BLOCK_M']}x{p['BLOCK_N']}x{p['BLOCK_K']}"
        name = f"step {_num(step)}" + (f" at {before}'s tile" if changed else "")
        gain = f"x {r['x']:.2f} of {before}" if before else ""
        print(f"{name:20s} {tile:>11s} {r['threads']:7d} {r['tflops']:7.2f} {r['ms']:6.2f} {gain:>11s} | "
              f"{r['registers']:4d} {r['warps']:3d} ({r['warps_measured']:4.1f}) {r['fma']:4.1f}% "
              f"{r['long_scoreboard']:7.2f} {r['barrier']:7.2f} {r['mio_throttle']:5.2f}  {r['stall'] + ' ' + format(r['stall_v'], '.2f'):21s} "
              f"{r['per_lds']:6.2f} {r['gld']:8.3f} {r['dram_gb']:7.2f}")
    print("tile: BLOCK_M x BLOCK_N x BLOCK_K; gain: TFLOP/s against the step named, same run; warps/SM: blocks per SM "
          "from the GPU's registers x warps per block (in brackets the profiler's active warps); FMA: pipe busy; "
          "long_sb, barrier, mio (mio_throttle), top stall ('selected' left out): warps stalled per issued instruction; wf/LDS: shared "
          "wavefronts per load; LDG: global load instructions; DRAM GB: bytes read")


def sass_excerpt(step: str = "sgemm/07_warptiling", lines: int = 16, arch: str = "sm_90") -> None:
    """The first lines of a step's inner loop on `arch`, from its first 128-bit shared load on."""
    sass = gemmlab.instance(step).sass(arch).splitlines()
    first = next(i for i, line in enumerate(sass) if "LDS.128" in line)
    print("\n".join(line.strip() for line in sass[first:first + lines]))


def sb_lanes(steps=("sgemm/06_vectorized", "sgemm/07_warptiling")) -> dict:
    """One quarter warp's sB float4 read (lanes 0-7, which the hardware serves together) in step 06 and in step 07,
    each lane's 16 bytes drawn at their banks: chapter 5's drawing (ch5.sb_picture). Step 06's lanes read float4s
    spread over two sweeps of the banks (2-way), step 07's side by side in one. Returns {step: (wavefronts of the
    quarter warp, sweeps of the banks, distinct float4s)}."""
    out = ch5.sb_picture(steps)
    glue("ch4_lanes06_waves", out[steps[0]][0]); glue("ch4_lanes07_waves", out[steps[1]][0])
    return out


def sass_counts(arch: str = "sm_90") -> dict[str, dict[str, int]]:
    """Static SASS counts of each step's FFMA, LDS (32-bit and other narrow widths), LDS.128, LDG and BAR
    instructions on `arch`, as chapter 3 counts them: an LDS.128 is not also an LDS. Prints and returns them."""
    out = {}
    for step in LADDER:
        ops = nvrtc.count_instructions(gemmlab.instance(step).sass(arch), ["FFMA", "LDS", "LDS.128", "LDG", "BAR"])
        ops["LDS"] -= ops["LDS.128"]   # count_instructions matches prefixes: its LDS includes the LDS.128
        out[step] = ops
        print(f"{step:24s} {ops}")
    return out


# ----------------------------------------------------------------------------------------------- pictures
WARP_COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                "#9c755f", "#86bcb6", "#8cd17d", "#f1ce63", "#a0cbe8", "#ffbe7d", "#d4a6c8", "#d7b5a6"]


def ownership(step: str, ax_block=None, ax_warp=None, highlight: int = 0):
    """Who computes what in `step`'s block tile (colour: warp; black: thread `highlight`), and the highlighted
    thread's warp by lane (colour: lane, its number written on each piece; black: the thread). Returns (block axes,
    warp axes). The maps come from tiling.owners, the Python twin of the kernels' index arithmetic."""
    p = gemmlab.instance(step).params
    own = tiling.owners(step, p)
    if ax_block is None or ax_warp is None:
        _, (ax_block, ax_warp) = plt.subplots(1, 2, figsize=(10, 4.2))
    warps = own // 32
    n_warps = int(warps.max()) + 1
    ax_block.imshow(warps, cmap=ListedColormap((WARP_COLOURS * 4)[:n_warps]), vmin=-0.5, vmax=n_warps - 0.5,
                    interpolation="nearest")
    ax_block.imshow(np.ma.masked_where(own != highlight, np.ones_like(own)), cmap=ListedColormap(["black"]),
                    interpolation="nearest")
    ax_block.set_title(f"{step.split('/')[1]}: block tile {own.shape[0]} x {own.shape[1]}\n"
                       f"colour = warp ({n_warps} warps), black = thread {highlight}", fontsize=9)
    ax_block.tick_params(labelsize=7)
    rows, cols = np.nonzero(warps == highlight // 32)
    r0, r1, c0, c1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
    part = own[r0:r1, c0:c1]
    extent = (c0 - 0.5, c1 - 0.5, r1 - 0.5, r0 - 0.5)
    ax_warp.imshow(np.ma.masked_where(part // 32 != highlight // 32, part % 32), cmap="hsv", vmin=0, vmax=32,
                   interpolation="nearest", extent=extent, aspect="auto")
    ax_warp.imshow(np.ma.masked_where(part != highlight, np.ones_like(part)), cmap=ListedColormap(["black"]),
                   interpolation="nearest", extent=extent, aspect="auto")
    seen = set()
    for (r, c), tid in np.ndenumerate(part):  # the lane's number on the top-left cell of each of its pieces
        up = part[r - 1, c] if r else -1
        left = part[r, c - 1] if c else -1
        if tid // 32 == highlight // 32 and up != tid and left != tid and len(seen) < 160:
            seen.add((r, c))
            ax_warp.text(c0 + c, r0 + r, str(tid % 32), fontsize=5, ha="left", va="top",
                         color="white" if tid == highlight else "black")
    ax_warp.set_title(f"warp {highlight // 32}: rows {r0}-{r1 - 1}, columns {c0}-{c1 - 1}\n"
                      f"colour and number = lane, black = thread {highlight}", fontsize=9)
    ax_warp.tick_params(labelsize=7)
    ax_block.figure.tight_layout()
    return ax_block, ax_warp


def show_ownership(step: str) -> None:
    """Draw `step`'s ownership picture and print what thread 0 and warp 0 own."""
    p = gemmlab.instance(step).params
    own = tiling.owners(step, p)
    ownership(step)
    plt.show()
    r, c = np.nonzero(own == 0)
    wr, wc = np.nonzero(own // 32 == 0)
    print(f"{step}: thread 0 owns {len(r)} outputs in rows {r.min()}-{r.max()}, columns {c.min()}-{c.max()}; "
          f"warp 0 owns a {wr.max() - wr.min() + 1} x {wc.max() - wc.min() + 1} region "
          f"({len(wr)} of its {(wr.max() - wr.min() + 1) * (wc.max() - wc.min() + 1)} cells)")


# ----------------------------------------------------------------------------------------------- measure
def ladder(records: list) -> None:
    """Steps 03 to 07 in TFLOP/s at 4096 with cuBLAS's run-to-run band (plots.ladder), then the records of this
    chapter's steps at every size, with cuBLAS's rate beside each."""
    plots.ladder(records, LADDER, size=SIZE)
    plt.tight_layout()
    plt.show()
    print(gemmlab.bench.table([r for r in records if r["step"] in NEW]))


def seed_table(records: list):
    """Seed 002's ladder (GFLOP/s on a V100) beside our FP32 steps; its level 6 (async copies and tensor cores) is
    taught in chapters 6 and 7b, so its row here names them instead of a record."""
    top = documents.value(2, "level7_gflops")
    glue("ch4_seed_gpu", documents.DOCUMENTS[2].gpu)
    glue("ch4_seed_l1", documents.value(2, "level1_gflops")); glue("ch4_seed_l7", top)
    glue("ch4_seed_l6_share", 100 * documents.value(2, "level6_gflops") / top)
    table = documents.table_002([r for r in records if r["step"] in STEPS])
    for row in table.rows:
        if row["step"] == "sgemm/12_tf32x3":
            row["step"], row["ours"] = None, None
            row["cells"][3:] = ["chapters 6 (async copies) and 7b (tensor cores)", "-", "-"]
    table.notes = [table.notes[0], "Our register tiling (steps 04 and 05) has no level of its own there."]
    return table


def heat_map(step: str = "sgemm/07_warptiling", size: int = SIZE) -> None:
    """The recorded tile sweep of `step` at size^3: % of cuBLAS by block tile and (BLOCK_K, warp tile, thread
    tile); glues what tuning gained over the default tiles."""
    recs = gemmlab.results.one_gpu([r for r in gemmlab.results.load() if r["step"] == step and r["m"] == size])
    if not recs:
        print(f"no recorded sweep of {step} yet")
        return
    rows = sorted({(r["params"]["BLOCK_M"], r["params"]["BLOCK_N"]) for r in recs})
    cols = sorted({(r["params"]["BLOCK_K"], r["params"]["WARP_M"], r["params"]["WARP_N"], r["params"]["THREAD_N"])
                   for r in recs})
    grid = np.full((len(rows), len(cols)), np.nan)
    for r in recs:
        p = r["params"]
        i, j = rows.index((p["BLOCK_M"], p["BLOCK_N"])), cols.index((p["BLOCK_K"], p["WARP_M"], p["WARP_N"], p["THREAD_N"]))
        grid[i, j] = np.fmax(grid[i, j], r["pct_of_baseline"])
    fig, ax = plt.subplots(figsize=(9, 2.8))
    im = ax.imshow(grid, cmap="viridis", aspect="auto")
    ax.set_yticks(range(len(rows)), [f"{m}x{n}" for m, n in rows], fontsize=7)
    ax.set_xticks(range(len(cols)), [f"K{k} W{wm}x{wn} T8x{tn}" for k, wm, wn, tn in cols], rotation=90, fontsize=6)
    ax.set_ylabel("BLOCK_M x BLOCK_N")
    fig.colorbar(im, ax=ax, label="% of cuBLAS")
    ax.set_title(f"{step} at {size}^3, {recs[0]['gpu']} (recorded {', '.join(sorted({r['date'] for r in recs}))})",
                 fontsize=9)
    plt.show()
    print(gemmlab.results.timing_note(recs))
    default = gemmlab.registry.get(step).resolve({})
    best = max(recs, key=lambda r: r["pct_of_baseline"])
    at_default = gemmlab.results.default_record(recs, step, size)
    glue("ch4_tuned_pct", best["pct_of_baseline"])
    glue("ch4_tuned_params", ", ".join(f"{k} {v}" for k, v in best["params"].items() if default.get(k) != v)
         or "the defaults")
    glue("ch4_default_pct", at_default["pct_of_baseline"] if at_default else float("nan"))
    glue("ch4_tuned_n", len(recs))
    glue("ch4_tuned_date", best["date"]); glue("ch4_tuned_gpu", best["gpu"])
    glue("ch4_tuned_protocol", "interleaved with cuBLAS" if best["date"] >= gemmlab.results.INTERLEAVED_SINCE
         else "cuBLAS timed first, the older protocol")


def claim(arch: str = "sm_75") -> None:
    """Every step of the chapter fits a T4: registers x threads, shared memory, no spills (compile-only)."""
    for step in NEW:
        fit = gemmlab.instance(step).fit(arch)
        print(f"{step}: {'fits' if fit.ok else 'does not fit'} a T4 ({arch})" + ("" if fit.ok else f": {fit}"))


def transposed_store(step: str = "sgemm/06_vectorized") -> dict[int, list[tuple[int, int, int, int]]]:
    """Who stages what of the A tile in `step` (the twin of its store_tiles): thread tid's i-th float4 of A, element
    e = i * NUM_THREADS + tid, is row r = e / (BLOCK_K / 4) of A at k = c .. c + 3, c = e % (BLOCK_K / 4) * 4, and
    its four floats go to sA[c + j][r]. Returns {tid: [(m, k) of A -> (k, m) of sA, as (m, k, k, m)]}."""
    p = gemmlab.instance(step).params
    threads = gemmlab.instance(step).step.launch(SIZE, SIZE, SIZE, p).threads
    vecs = p["BLOCK_M"] * p["BLOCK_K"] // 4
    out: dict[int, list] = {}
    for e in range(vecs):
        tid = e % threads
        r, c = e // (p["BLOCK_K"] // 4), e % (p["BLOCK_K"] // 4) * 4
        out.setdefault(tid, []).extend((r, c + j, c + j, r) for j in range(4))
    return out


def transposed_store_picture(step: str = "sgemm/06_vectorized", rows: int = 16) -> dict:
    """The A tile's first `rows` rows as the threads load them (row m, columns k: one float4 per thread) and the same
    floats in sA[k][m] after the transposing store, coloured and numbered by thread. Returns {tid: cells}."""
    p = gemmlab.instance(step).params
    owner = transposed_store(step)
    a = np.full((rows, p["BLOCK_K"]), -1)
    s = np.full((p["BLOCK_K"], rows), -1)
    for tid, cells in owner.items():
        for m, k, k2, m2 in cells:
            if m < rows:
                a[m, k] = tid
                s[k2, m2] = tid
    shown = sorted({t for t in a.flat if t >= 0})
    cmap = ListedColormap((WARP_COLOURS * 4)[:len(shown)])
    fig, (ax_a, ax_s) = plt.subplots(1, 2, figsize=(10, 3.6), gridspec_kw={"width_ratios": [1, 2]})
    for ax, grid, title in ((ax_a, a, f"A tile, rows m = 0-{rows - 1}: a thread loads a float4 along k"),
                            (ax_s, s, f"sA[k][m], columns m = 0-{rows - 1}: its four floats in four rows")):
        ax.imshow(np.vectorize(shown.index)(grid), cmap=cmap, vmin=-0.5, vmax=len(shown) - 0.5,
                  interpolation="nearest", aspect="auto")
        for (i, j), t in np.ndenumerate(grid):
            ax.text(j, i, str(t), ha="center", va="center", fontsize=6)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=7)
    ax_a.set_xlabel("k", fontsize=8); ax_a.set_ylabel("m", fontsize=8)
    ax_s.set_xlabel("m", fontsize=8); ax_s.set_ylabel("k", fontsize=8)
    fig.suptitle(f"{step}: the transposing store (number and colour: the thread)", fontsize=9)
    fig.tight_layout()
    plt.show()
    return {t: [c for c in owner[t] if c[0] < rows] for t in shown}
