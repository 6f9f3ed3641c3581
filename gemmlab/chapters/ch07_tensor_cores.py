"""Chapter 7, tensor cores with mma.sync and ldmatrix: hgemm/01 to 03, the fragment demos, and the ldmatrix banks.

The chapter's record wrangling, glue() calls, figures and tables, one function per figure; the notebook
(book/07_tensor_cores.ipynb) calls each once. Every number comes from results/ (live on a GPU).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
import numpy as np

import gemmlab
from gemmlab import documents, explore, hardware, layouts, profile
from gemmlab import swizzle as sw
from gemmlab import tensorcores as tc
from gemmlab.chapters import plots
from gemmlab.chapters.glue import glue

STEPS = ["hgemm/01_mma_tiling", "hgemm/02_vectorized_copy", "hgemm/03_swizzled"]
KS = [64, 256, 1024, 4096, 8192]
MODEL_KS = [64, 256, 1024, 4096, 16384, 65536]


def _hgemm_records() -> list:
    """The recorded (or live) rows of steps 01 to 03, one GPU's."""
    return gemmlab.results.one_gpu([r for r in gemmlab.results.load() if r["step"] in STEPS])


def fp32_start() -> None:
    """Where chapter 6 left the FFMA ladder (its best step at 4096, one GPU's records) and the fp16 cuBLAS to beat."""
    # The FFMA ladder of chapter 6 (its step 12 moves the products onto the tensor cores), one GPU's records
    sgemm = gemmlab.results.one_gpu([r for r in gemmlab.results.load() if r["step"].startswith("sgemm/")
                                     and r["step"] != "sgemm/12_tf32x3" and r["m"] == 4096])
    hgemm = {r["m"]: r for r in _hgemm_records() if r["step"] == STEPS[0]}
    if sgemm and 8192 in hgemm:
        best = max(sgemm, key=lambda r: r["pct_of_baseline"])
        glue("ch7_fp32_best_pct", best["pct_of_baseline"])
        glue("ch7_fp32_gpu", best["gpu"])
        glue("ch7_gpu", hgemm[8192]["gpu"])
        glue("ch7_cublas_tflops", hgemm[8192]["baseline_tflops"])
        print(f"best FP32 step at 4096: {best['step']}, {best['tflops']:.1f} TFLOP/s = {best['pct_of_baseline']:.1f}% "
              f"of cuBLAS SGEMM ({best['baseline_tflops']:.1f} TFLOP/s) ({best['gpu']}, {best.get('source', 'live')}, "
              f"{best['date']})")
        print("cuBLAS fp16 (HGEMM) on the " + hgemm[8192]["gpu"] + ", the target of this chapter: "
              + ", ".join(f"{hgemm[n]['baseline_tflops']:.0f} TFLOP/s at {n}" for n in (4096, 8192) if n in hgemm))
    else:
        glue("ch7_fp32_best_pct", float("nan")); glue("ch7_fp32_gpu", hardware.NO_DATA)
        glue("ch7_gpu", hardware.NO_DATA); glue("ch7_cublas_tflops", float("nan"))
        print(hardware.NO_DATA)


def t4_balance() -> None:
    """The T4's measured HMMA and FFMA rates and DRAM bandwidth, and the balance points they give."""
    t4 = hardware.spec_for("T4")
    meas = hardware.achievable("T4")
    hmma, ffma, dram = meas["fp16_tensor_tflops"], meas["fp32_tflops"], meas["dram_gbps"]
    b_hmma, b_ffma = hardware.balance_point(hmma, dram), hardware.balance_point(ffma, dram)
    for name, value in [("ch7_t4_hmma", hmma), ("ch7_t4_ffma", ffma), ("ch7_t4_dram", dram), ("ch7_t4_b_hmma", b_hmma),
                        ("ch7_t4_b_ffma", b_ffma), ("ch7_t4_ratio", b_hmma / b_ffma),
                        ("ch7_t4_spec_ratio", t4.fp16_tensor_tflops / t4.fp32_tflops)]:
        glue(name, value)
    print(f"{t4.name}, measured ({meas['label']}):")
    print(f"  HMMA {hmma:.1f} TFLOP/s, FFMA {ffma:.2f} TFLOP/s, DRAM {dram:.0f} GB/s")
    print(f"  balance points: HMMA {b_hmma:.0f} FLOP/B, FFMA {b_ffma:.0f} FLOP/B: "
          f"{b_hmma / b_ffma:.1f}x the arithmetic intensity to stay compute-bound")
    h100 = hardware.spec_for("H100")  # this chapter's GPU: data sheet only (no measured rates recorded)
    b_h100 = hardware.balance_point(h100.fp16_tensor_tflops, h100.dram_gbps)
    glue("ch7_h100_b_hmma", b_h100)
    print(f"{h100.name}, data sheet: HMMA {h100.fp16_tensor_tflops:.0f} TFLOP/s, DRAM {h100.dram_gbps:.0f} GB/s: "
          f"balance point {b_h100:.0f} FLOP/B")


def roofline_t4() -> None:
    """Chapter 1's roofline for the T4 with the HMMA and FFMA roofs."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    plots.roofline(ax, "T4")
    plt.show()


def fragments(shape: str = "m16n8k8", operands: str = "abc") -> None:
    """The mma fragments of `shape`, one panel per operand: which lane holds which element."""
    widths = {"a": 16 if shape == "m16n8k16" else 8, "b": 8, "c": 8}
    fig, axes = plt.subplots(1, len(operands), figsize=(13, 6),
                             gridspec_kw={"width_ratios": [widths[o] for o in operands]})
    for ax, operand in zip(axes, operands):
        tc.draw_mma_fragment(ax, shape, operand)
    plt.tight_layout(); plt.show()


def ldmatrix_shapes() -> None:
    """ldmatrix .x1, .x2, .x4 and .x4.trans: which lane receives each element in which register."""
    fig, axes = plt.subplots(4, 1, figsize=(13, 11))
    for ax, (num, trans) in zip(axes, [(1, False), (2, False), (4, False), (4, True)]):
        tc.draw_ldmatrix(ax, num, trans)
    plt.tight_layout(); plt.show()


def hierarchy() -> dict:
    """The mma tile hierarchy of step 01 (block, warp, mma tiles: who computes what) and its tile intensity."""
    params = gemmlab.instance("hgemm/01_mma_tiling").params
    tc.draw_hierarchy(params)
    plt.show()
    bm, bn = params["BLOCK_M"], params["BLOCK_N"]
    glue("ch7_tile", f"{bm} x {bn}")
    glue("ch7_tile_intensity", bm * bn / (bm + bn))
    print(f"block tile {bm} x {bn}: {bm * bn / (bm + bn):.0f} FLOP per byte loaded into shared memory "
          f"(BM*BN/(BM+BN): {bm * bn} fp16 multiply-adds per k for {bm + bn} halves)")
    return params


def fragment_checks() -> None:
    """The demo kernel's fragments (mma and ldmatrix) against the Python twins in gemmlab.layouts."""
    where = {"cpu": "the CPU emulator", "gpu": "the GPU's own instructions"}
    for shape in ("m16n8k8", "m16n8k16"):
        demo = tc.mma_demo(shape)  # on a GPU without sm_80, m16n8k16 runs in the emulator
        same = [op.upper() for op in "abc" if demo[op] == layouts.mma_fragment(shape, op)]
        print(f"mma.{shape} ({where[demo['backend']]}): fragments {', '.join(same)} equal the twin in "
              f"gemmlab.layouts: {len(same) == 3}")
    for num in (1, 2, 4):
        for trans in (False, True):
            ok = tc.ldmatrix_demo(num, trans) == layouts.ldmatrix_fragment(num, trans)
            print(f"ldmatrix.x{num}{'.trans' if trans else '      '}: equals the twin: {ok}")
    if gemmlab.backend() == "gpu":
        cpu = tc.mma_demo("m16n8k8", backend="cpu")["raw"]
        here = tc.mma_demo("m16n8k8")["raw"]
        print("the GPU's registers equal the emulator's, bit for bit:",
              all(np.array_equal(cpu[k].view(np.uint32), here[k].view(np.uint32)) for k in cpu))
    else:
        print("ran in the emulator (no GPU): this checks the emulator against the twin; on a GPU the demo runs the "
              "hardware's ldmatrix and mma and this line compares its registers with the emulator's, bit for bit")


# ---- the prediction: what shared memory allows, per warp per K step ----

# An H100 SM's tensor cores, dense fp16: 4 tensor cores x 512 multiply-adds x 2 FLOP per cycle (Hopper whitepaper);
# the data sheet's peak (arch.SPECS) is this rate on all SMs. The shared-memory pipe serves one wavefront per cycle.
TENSOR_FLOP_PER_SM_CYCLE = 4 * 512 * 2
MMA_FLOP = 2 * 16 * 8 * 8  # one mma.m16n8k8


def warp_k_step(name: str) -> dict:
    """Per warp per K step of a step's default tiles: its mma count and FLOP, its ldmatrix.x4 of sA and sB and their
    wavefronts (the model, gemmlab.swizzle, which the emulator and Nsight Compute confirm below)."""
    p = gemmlab.instance(name).params
    layout = "swizzled" if name == STEPS[2] else "plain"
    mma = (p["WARP_M"] // 16) * (p["WARP_N"] // 8) * (p["BLOCK_K"] // 8)
    ldsm = {"A": (p["WARP_M"] // 16) * (p["BLOCK_K"] // 16), "B": (p["WARP_N"] // 16) * (p["BLOCK_K"] // 16)}
    per = {op: sw.per_request(sw.hgemm_ldmatrix_requests(op, layout=layout, **p), ldmatrix=True) for op in "AB"}
    waves = sum(ldsm[op] * per[op] for op in "AB")
    flop = mma * MMA_FLOP
    return {"mma": mma, "flop": flop, "ldsm": ldsm, "per_ldsm": per, "waves": waves,
            "flop_per_cycle": flop / waves, "params": p}


_PEAKS: dict = {}


def mma_ceiling(gpu) -> float | None:
    """The measured mma.m16n8k8 ceiling (kernels/probe/peak.cu, chapter 7b's instruction ceilings) in TFLOP/s if it
    was recorded (or runs now) on `gpu` itself, else None: a probe on another GPU is not this one's roof."""
    if "peaks" not in _PEAKS:
        _PEAKS["peaks"] = hardware.measure_peaks()
    peaks = _PEAKS["peaks"]
    same = peaks.get("gpu") == gpu if isinstance(gpu, str) else hardware.spec_for(peaks.get("gpu")) is gpu
    return peaks["mma_m16n8k8"]["tflops"] if same and peaks.get("mma_m16n8k8") else None


def predicted_tflops(name: str, gpu) -> float | None:
    """The bound of step `name` on `gpu` (a name or a GpuSpec): the lower of the shared pipe's bound, peak x FLOP per
    shared cycle / 4096 (the data sheet's peak is 4096 FLOP per SM cycle at its clock), and the compute roof: the
    measured mma.m16n8k8 ceiling where recorded on this GPU, else the data sheet's peak."""
    spec = hardware.spec_for(gpu)
    if spec is None:
        return None
    shared = spec.fp16_tensor_tflops * warp_k_step(name)["flop_per_cycle"] / TENSOR_FLOP_PER_SM_CYCLE
    return min(shared, mma_ceiling(gpu) or spec.fp16_tensor_tflops)


def shared_bound(name: str, gpu: str | None = None) -> None:
    """The prediction: the TFLOP/s that shared memory's wavefronts allow step `name` on the chapter's GPU.

    Per warp per K step, the mma need FLOP / 4096 cycles of an SM's tensor cores and the ldmatrix need one cycle of the
    shared pipe per wavefront; the slower of the two bounds the kernel: peak x min(1, FLOP per shared cycle / 4096)."""
    w = warp_k_step(name)
    gpu = gpu or (_hgemm_records() or [{"gpu": "H100"}])[0]["gpu"]
    spec = hardware.spec_for(gpu) or hardware.spec_for("H100")
    bound = predicted_tflops(name, gpu)
    w.update(bound=bound, peak=spec.fp16_tensor_tflops, spec=spec.name)
    v = name.split("/")[1][:2]
    glue(f"ch7_bound_{v}", bound)
    glue(f"ch7_fpc_{v}", w["flop_per_cycle"])
    glue("ch7_peak", spec.fp16_tensor_tflops)
    glue("ch7_tc_fpc", TENSOR_FLOP_PER_SM_CYCLE)
    ldsm, per = w["ldsm"], w["per_ldsm"]
    print(f"{name}, per warp per K step (BLOCK_K = {w['params']['BLOCK_K']}, warp tile "
          f"{w['params']['WARP_M']} x {w['params']['WARP_N']}):")
    print(f"  tensor cores: {w['mma']} mma x {MMA_FLOP} FLOP = {w['flop']} FLOP")
    print(f"  shared pipe:  {ldsm['A']} ldmatrix.x4 of sA x {per['A']:.0f} wavefronts + {ldsm['B']} of sB x "
          f"{per['B']:.0f} = {w['waves']:.0f} cycles (average {w['waves'] / (ldsm['A'] + ldsm['B']):.0f} per x4)")
    print(f"  -> {w['flop_per_cycle']:.0f} FLOP per shared cycle per SM, against {TENSOR_FLOP_PER_SM_CYCLE} the tensor "
          f"cores can do")
    if name == STEPS[0]:
        clock = spec.fp16_tensor_tflops * 1e12 / (spec.sms * TENSOR_FLOP_PER_SM_CYCLE) / 1e9
        glue("ch7_tc_clock", clock)
        print(f"     ({TENSOR_FLOP_PER_SM_CYCLE} = 4 tensor cores x 512 multiply-adds x 2 FLOP; the data sheet's "
              f"{spec.fp16_tensor_tflops:.0f}e12 / ({spec.sms} SMs x {clock:.2f} GHz) is the same rate)")
    ceiling = mma_ceiling(gpu)
    glue("ch7_mma_ceiling", ceiling or float("nan"))
    roof = (f"mma.m16n8k8 measured at {ceiling:.0f} TFLOP/s on this GPU (kernels/probe/peak.cu, chapter 7b)"
            if ceiling else f"data-sheet peak {spec.fp16_tensor_tflops:.0f} TFLOP/s (no mma probe recorded on {gpu})")
    limit = (f"at most {bound:.0f} TFLOP/s (shared memory)" if bound < (ceiling or spec.fp16_tensor_tflops)
             else f"at most {bound:.0f} TFLOP/s (the compute roof: shared memory allows more)")
    print(f"  compute roof: {roof}")
    print(f"  predicted on the {gpu}: {limit}")


def measure() -> list:
    """Steps 01 to 03 against cuBLAS fp16, one run (live on a GPU, recorded without one); prints step 01 against
    its prediction and glues the figures the prose quotes."""
    records = gemmlab.benchmark(STEPS, sizes=[1024, 2048, 4096, 8192], verbose=False)
    at = {(r["step"], r["m"]): r for r in records}
    for name in STEPS:
        v = int(name.split("/")[1][:2])
        for size in (4096, 8192):
            if (name, size) in at:
                glue(f"ch7_v{v}_tflops" + ("" if size == 8192 else "_4096"), at[(name, size)]["tflops"])
        if (name, 8192) in at:
            glue(f"ch7_v{v}_pct", at[(name, 8192)]["pct_of_baseline"])
            bound = predicted_tflops(name, at[(name, 8192)]["gpu"])
            glue(f"ch7_v{v}_of_bound", at[(name, 8192)]["tflops"] / bound if bound else float("nan"))
    glue("ch7_v1_tflops_2048", at[(STEPS[0], 2048)]["tflops"] if (STEPS[0], 2048) in at else float("nan"))
    if (STEPS[2], 8192) in at:
        glue("ch7_v2_speedup", at[(STEPS[1], 8192)]["tflops"] / at[(STEPS[0], 8192)]["tflops"])
        glue("ch7_v3_speedup", at[(STEPS[2], 8192)]["tflops"] / at[(STEPS[1], 8192)]["tflops"])
        glue("ch7_cublas_tflops_03", at[(STEPS[2], 8192)]["baseline_tflops"])
    else:
        for key in ("v1_pct", "v2_pct", "v3_pct", "v1_tflops", "v2_tflops", "v3_tflops", "v1_tflops_4096",
                    "v2_tflops_4096", "v3_tflops_4096", "v1_of_bound", "v2_of_bound", "v3_of_bound", "v2_speedup", "v3_speedup", "cublas_tflops_03"):
            glue(f"ch7_{key}", float("nan"))
    seed = hardware.REFERENCE_MEASURED["t4"]["hgemm_ladder"]  # seed 001's own ladder, on the T4 at 8192
    glue("ch7_seed_v1_pct", seed["kernel1_pct"])
    glue("ch7_seed_copy", seed["copy_speedup"]); glue("ch7_seed_swizzle", seed["swizzle_speedup"])
    against_bound(records, STEPS[:1])
    return records


def against_bound(records: list, steps: list) -> None:
    """Predicted bound beside the measured TFLOP/s of `steps`, with cuBLAS's rate in the same run."""
    print(f"{'step':25s} {'size':>5s} {'predicted':>10s} {'measured':>9s} {'of bound':>9s} {'cuBLAS':>7s}  gpu (source)")
    for name in steps:
        bound = predicted_tflops(name, records[0]["gpu"]) if records else None
        for r in sorted((r for r in records if r["step"] == name), key=lambda r: r["m"]):
            b = f"{bound:10.0f}" if bound else f"{'-':>10s}"
            share = f"{100 * r['tflops'] / bound:8.0f}%" if bound else f"{'-':>9s}"
            print(f"{name:25s} {r['m']:5d} {b} {r['tflops']:9.1f} {share} {r['baseline_tflops']:7.0f}  "
                  f"{r['gpu']} ({r.get('source', 'live')}, {r['date']})")


# ---- the gaps, from the recorded profiles (results/gpu-lane/ncu, one launch at 4096 on the H100) ----

def _ncu_raw(name: str) -> dict:
    """The last profiled kernel's raw row of a step's recorded Nsight Compute CSV ({} if none)."""
    for prefix in ("", "shared-"):
        path = profile.NCU_CSV / f"{prefix}{name.replace('/', '-')}.csv"
        if path.exists():
            return profile.raw_csv_rows(path.read_text())[-1]
    return {}


def _num(row: dict, key: str) -> float:
    return float(row[key].replace(",", ""))


def shared_pipe(name: str) -> dict | None:
    """From a step's recorded profile at 4096: shared wavefronts (loads, stores) per warp per K step, and the share
    of the SMs' cycles the shared pipe was busy (at least: cycles counted at the GPU's top clock)."""
    m, raw = profile.load_csv(name), _ncu_raw(name)
    if not m or not raw:
        return None
    p = gemmlab.instance(name).params
    n = 4096  # the profiled launch (the CSV's first line says so)
    warp_steps = (n // p["BLOCK_M"]) * (n // p["BLOCK_N"]) * (p["BLOCK_M"] // p["WARP_M"]) \
        * (p["BLOCK_N"] // p["WARP_N"]) * (n // p["BLOCK_K"])
    ld = m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]
    st = m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"]
    sms, clock = _num(raw, "device__attribute_multiprocessor_count"), _num(raw, "device__attribute_clock_rate") * 1e3
    seconds = m["gpu__time_duration.sum"] * 1e-9
    return {"ld": ld / warp_steps, "st": st / warp_steps, "sts": m["smsp__inst_executed_op_shared_st.sum"] / warp_steps,
            "busy": (ld + st) / (sms * seconds * clock), "tflops": hardware.gemm_flops(n, n, n) / seconds / 1e12,
            "warps_pct": m.get("sm__maximum_warps_per_active_cycle_pct"), "sms": sms, "clock": clock,
            "regs": m.get("launch__registers_per_thread"), "blocks": m.get("launch__occupancy_limit_registers"),
            "l2": _num(raw, "device__attribute_l2_cache_size"), "gpu": raw.get("device__attribute_display_name")}


def profile_gaps() -> None:
    """Per step, what the recorded profile at 4096 says: shared wavefronts per warp per K step (ldmatrix, stores), the
    share of cycles the shared pipe was busy, and the occupancy."""
    print(f"Nsight Compute, one launch at 4096 on the {_ncu_raw(STEPS[0]).get('device__attribute_display_name', '?')} "
          "(results/gpu-lane/ncu); wavefronts and stores per warp per K step:")
    print(f"{'step':25s} {'ldmatrix wf':>11s} {'store wf':>8s} {'stores':>6s} {'shared busy':>11s} {'TFLOP/s':>7s} "
          f"{'blocks (regs)':>13s} {'warps':>6s}")
    for name in STEPS:
        g = shared_pipe(name)
        if g is None:
            print(f"{name:25s} not recorded"); continue
        v = name.split("/")[1][:2]
        glue(f"ch7_busy_{v}", 100 * g["busy"]); glue(f"ch7_sts_{v}", g["sts"]); glue(f"ch7_stw_{v}", g["st"])
        glue("ch7_warps_pct", g["warps_pct"]); glue(f"ch7_blocks_{v}", g["blocks"])
        print(f"{name:25s} {g['ld']:11.0f} {g['st']:8.0f} {g['sts']:6.0f} {'>= %.0f%%' % (100 * g['busy']):>11s} "
              f"{g['tflops']:7.0f} {'%.0f (%.0f)' % (g['blocks'], g['regs']):>13s} {g['warps_pct']:5.1f}%")
        glue("ch7_top_clock_ghz", g["clock"] / 1e9)
    print(f"shared busy: wavefronts over (SMs x seconds x top clock, {g['clock'] / 1e9:.2f} GHz), a lower bound on the "
          "share of cycles the pipe worked; TFLOP/s: of the one profiled launch (not the run's median above); warps: "
          "the most the registers allow, of 64")
    print("\nNsight Compute on the H200 (results/nvidia-h200.ncu.json; top stalls in warps stalled per issued instruction):")
    print(f"{'step':30s} {'L2 hit':>6s} {'ldmatrix wf':>11s} {'warps/SM':>8s} {'issue':>6s}  top stalls")
    for name in STEPS:
        for n in (2048, 4096):
            h = h200_profile(name, n)
            if h is None:
                print(f"{name}@{n}: not recorded"); continue
            v = name.split("/")[1][:2]
            if n == 4096:
                for i, (why, x) in enumerate(h["stalls"][:2]):
                    glue(f"ch7_stall{i}_{v}", why.replace("_", " ")); glue(f"ch7_stall{i}_{v}_x", x)
                glue(f"ch7_issue_{v}", h["issue"]); glue(f"ch7_h200_warps_{v}", h["warps"])
                glue(f"ch7_h200_regs_{v}", h["regs"]); glue(f"ch7_h200_blocks_{v}", h["blocks"])
                glue(f"ch7_h200_warps_pct_{v}", 100 * h["warps"] / 64)
            print(f"{name + '@' + str(n):30s} {h['l2_hit']:5.1f}% {h['ldsm']:11.2f} {h['warps']:8.1f} {h['issue']:5.1f}%  "
                  + ", ".join(f"{why} {x:.2f}" for why, x in h["stalls"]))


H200 = "nvidia-h200"  # lab/gaps PART=ch7 profiled steps 01 to 03 at 2048 and 4096 on the H200 (results/<gpu>.ncu.json)


def h200_profile(name: str, n: int) -> dict | None:
    """The H200's recorded Nsight Compute metrics of step `name` at size n: L2 hit rate, ldmatrix wavefronts per
    instruction, warps per SM, issue-active share and the top three stalls (warps stalled per issued instruction)."""
    m = profile.load(H200).get(f"{name}@{n}")
    if not m:
        return None
    return {"l2_hit": m["lts__t_sector_hit_rate.pct"], "warps": m["sm__warps_active.avg.per_cycle_active"],
            "issue": m["smsp__issue_active.avg.pct_of_peak_sustained_active"],
            "ldsm": profile.shared_per_request(m)["ldmatrix"]["per_request"],
            "stalls": profile.stall_reasons(m, top=3), "regs": m["launch__registers_per_thread"],
            "blocks": m["launch__occupancy_limit_registers"]}


def size_effect(records: list) -> None:
    """Steps 01 to 03 at 2048 and 4096: the timed rates, the waves of blocks, whether A and B fit in L2, and what the
    H200's profiles (one launch each) say: the profiled rate, the L2 hit rate and the bytes read from DRAM."""
    g = shared_pipe(STEPS[0])
    p = gemmlab.instance(STEPS[0]).params
    at = {(r["step"], r["m"]): r for r in records}
    if g is None or (STEPS[0], 2048) not in at or (STEPS[0], 4096) not in at:
        print("not recorded"); return
    slots = g["sms"] * g["blocks"]
    glue("ch7_l2_mib", g["l2"] / 2**20); glue("ch7_slots", slots)
    for n in (2048, 4096):
        blocks = (n // p["BLOCK_M"]) * (n // p["BLOCK_N"])
        ab = 2 * n * n * 2
        print(f"{n}: {blocks} blocks on {slots:.0f} slots ({g['sms']:.0f} SMs x {g['blocks']:.0f} blocks, limited by "
              f"registers: below), {blocks / slots:.2f} waves; A and B {ab / 2**20:.0f} MiB, "
              f"{'inside' if ab <= g['l2'] else 'more than'} the {g['l2'] / 2**20:.0f} MiB L2")
    print(f"\n{'step':25s} {'size':>5s} {'timed':>6s} {'profiled':>8s} {'L2 hit':>7s} {'DRAM read':>10s}")
    print(f"{'':25s} {'':5s} {'H100':>6s} {'H200':>8s} {'H200':>7s} {'H200':>10s}")
    for name in STEPS:
        v = name.split("/")[1][:2]
        for n in (2048, 4096):
            m = profile.load(H200).get(f"{name}@{n}")
            if not m or (name, n) not in at:
                print(f"{name:25s} {n:5d} not recorded"); continue
            prof = hardware.gemm_flops(n, n, n) / (m["gpu__time_duration.sum"] * 1e-9) / 1e12
            dram = m["dram__bytes_read.sum"] / 2**20
            glue(f"ch7_l2hit_{v}_{n}", m["lts__t_sector_hit_rate.pct"]); glue(f"ch7_prof_{v}_{n}", prof)
            glue(f"ch7_dram_{v}_{n}", dram)
            print(f"{name:25s} {n:5d} {at[(name, n)]['tflops']:6.1f} {prof:8.1f} {m['lts__t_sector_hit_rate.pct']:6.1f}% "
                  f"{dram:6.0f} MiB")
    print("timed: TFLOP/s, median of the run (H100, recorded); profiled: one launch under Nsight Compute "
          "(H200, results/nvidia-h200.ncu.json)")


def ladder(records: list) -> None:
    """Steps 02 and 03 against their predictions, then steps 01 to 03 in TFLOP/s at 8192 (cuBLAS's band) with the
    predicted bounds, and % of cuBLAS by size."""
    against_bound(records, STEPS[1:])
    for n in (4096, 8192):  # each step's cuBLAS is timed beside it: the reference differs by row
        cublas = [r["baseline_tflops"] for r in records if r["m"] == n]
        if cublas:
            if n == 8192:
                glue("ch7_cublas_lo", min(cublas)); glue("ch7_cublas_hi", max(cublas))
            print(f"cuBLAS fp16 at {n}, timed beside each step: {min(cublas):.0f} to {max(cublas):.0f} TFLOP/s")
    fig, (bars, ax) = plt.subplots(1, 2, figsize=(12, 3.6))
    plots.ladder(records, STEPS, ax=bars, size=8192)
    if records and hardware.spec_for(records[0]["gpu"]):
        for i, name in enumerate(STEPS):
            bound = predicted_tflops(name, records[0]["gpu"])
            bars.plot([i - 0.4, i + 0.4], [bound, bound], color="tab:red", lw=2,
                      label="predicted (shared wavefronts)" if i == 0 else None)
            bars.set_ylim(top=max(bars.get_ylim()[1], 1.1 * bound))
        bars.legend(fontsize=7)
    plots.pct_by_size(ax, records, STEPS, "% of cuBLAS fp16").legend(fontsize=8)
    plt.tight_layout(); plt.show()


def seed_table(records: list):
    """Seed 001's kernels 1 to 3 as it quotes them (a T4, 8192) beside our steps 01 to 03."""
    # Seed 001's kernels 1 to 3 as it quotes them (a T4, 8192) beside our steps 01 to 03 from the records above
    glue("ch7_seed_gpu", documents.DOCUMENTS[1].gpu)
    for n in (3, 4, 5, 6):
        glue(f"ch7_seed_k{n}_pct", documents.figure(1, f"kernel{n}_pct").text())
    return documents.table_001(records, through=3)


def occupancy() -> None:
    """Registers, shared memory and blocks per SM of steps 01 to 03 on sm_75 and sm_90."""
    for name in ['hgemm/01_mma_tiling', 'hgemm/02_vectorized_copy', 'hgemm/03_swizzled']:
        inst = gemmlab.instance(name)
        launch = inst.step.launch(4096, 4096, 4096, inst.params)
        for arch, cc in (("sm_75", 75), ("sm_90", 90)):
            res = inst.resources(arch)
            blocks, limiter = explore.blocks_per_sm(res.registers, launch.threads, res.shared_bytes, cc)
            print(f"{name:25s} {arch}: {res.registers:3d} registers x {launch.threads} threads, {res.shared_bytes} B shared: "
                  f"{blocks} block(s) = {blocks * launch.threads // 32} warps per SM (limited by {limiter})")
            if name.endswith("03_swizzled") and arch == "sm_90":
                glue("ch7_warps_sm90", blocks * launch.threads // 32)


def f16_resources(f16) -> None:
    """Registers and shared memory of step 01 with fp32 and with fp16 accumulators (sm_75)."""
    for label, inst in (("fp32 accumulators (step 01)", gemmlab.instance(STEPS[0])), ("fp16 accumulators", f16)):
        print(f"{label:28s} {inst.resources('sm_75')}")


def f16_errors() -> dict:
    """fp32 against fp16 accumulators in the kernels (emulator) and the NumPy model, 64 x K x 64."""
    k32 = gemmlab.step("hgemm/01_mma_tiling", backend="cpu", BLOCK_M=64, BLOCK_N=64, WARP_M=32, WARP_N=32)
    k16 = tc.f16_accumulate(backend="cpu", BLOCK_M=64, BLOCK_N=64, WARP_M=32, WARP_N=32)
    print(gemmlab.verify(tc.f16_accumulate(backend="cpu")), "(emulator; fp16 accumulation bound)")
    errors = {}
    print("    K   fp32 acc   fp16 acc   (relative error vs float64, uniform inputs in [-1, 1], 64 x K x 64)")
    for K in KS:
        a, b = tc.accuracy_inputs(64, 64, K)
        g32, g16 = k32(a, b), k16(a, b)
        same = (np.array_equal(g32.view(np.uint16), tc.accumulate_model(a, b, "float32").view(np.uint16)) and
                np.array_equal(g16.view(np.uint16), tc.accumulate_model(a, b, "float16").view(np.uint16)))
        errors[K] = (tc.relative_error(g32, a, b), tc.relative_error(g16, a, b))
        print(f"{K:5d}   {errors[K][0]:.2e}   {errors[K][1]:.2e}   kernels equal the NumPy model: {same}")
    # glued to 4 significant digits: the last digits of a float64 sum differ between NumPy builds
    sig4 = lambda x: float(f"{x:.3e}")
    glue("ch7_err32_8192", sig4(errors[8192][0])); glue("ch7_err16_8192", sig4(errors[8192][1]))
    glue("ch7_err16_64", sig4(errors[64][1])); glue("ch7_err_ratio", sig4(errors[8192][1] / errors[8192][0]))
    return errors


def f16_model() -> dict:
    """The NumPy model's relative error with fp32 and fp16 accumulators, uniform and positive inputs, 16 x K x 16."""
    model = {}
    for kind in ("uniform", "positive"):
        for K in MODEL_KS:
            a, b = tc.accuracy_inputs(16, 16, K, kind)
            model[kind, K] = (tc.relative_error(tc.accumulate_model(a, b, "float32"), a, b),
                              tc.relative_error(tc.accumulate_model(a, b, "float16"), a, b))
    print("NumPy model, 16 x K x 16: relative error with fp32 / fp16 accumulators")
    for K in MODEL_KS:
        print(f"K = {K:5d}: uniform [-1, 1] {model['uniform', K][0]:.1e} / {model['uniform', K][1]:.1e};   "
              f"positive [0, 1] {model['positive', K][0]:.1e} / {model['positive', K][1]:.1e}")
    glue("ch7_pos_err16", model["positive", 65536][1])
    glue("ch7_pos_sum", 65536 / 4)
    return model


def error_plot(model: dict, errors: dict) -> None:
    """Relative error against K: the model's curves and the kernels' points."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for kind, style in (("uniform", "-"), ("positive", "--")):
        for i, acc in enumerate(("fp32", "fp16")):
            ax.plot(MODEL_KS, [model[kind, K][i] for K in MODEL_KS], style, marker="o", color=("tab:blue", "tab:red")[i],
                    label=f"{acc} accumulators, {kind} inputs (model)")
    ax.plot(KS, [errors[K][1] for K in KS], "kx", ms=8, label="fp16 kernel, uniform, 64 x K x 64 (emulator)")
    ax.plot(KS, [errors[K][0] for K in KS], "k+", ms=8, label="fp32 kernel, uniform, 64 x K x 64 (emulator)")
    ax.set_xscale("log", base=2); ax.set_yscale("log"); ax.set_xlabel("K"); ax.set_ylabel("relative error vs float64")
    ax.legend(fontsize=7); plt.tight_layout(); plt.show()


def gpu_errors(errors: dict) -> None:
    """On a GPU, the same errors measured on the hardware beside the emulator's."""
    if gemmlab.backend() == "gpu":
        g16 = tc.f16_accumulate(BLOCK_M=64, BLOCK_N=64, WARP_M=32, WARP_N=32)
        g32 = gemmlab.step("hgemm/01_mma_tiling", BLOCK_M=64, BLOCK_N=64, WARP_M=32, WARP_N=32)
        for K in KS:
            a, b = tc.accuracy_inputs(64, 64, K)
            print(f"K = {K:5d}: GPU fp32 acc {tc.relative_error(g32(a, b), a, b):.2e}, fp16 acc "
                  f"{tc.relative_error(g16(a, b), a, b):.2e} (emulator: {errors[K][0]:.2e}, {errors[K][1]:.2e})")
    else:
        print("Stored from a run without a GPU: on a GPU this cell prints the hardware's errors beside the emulator's "
              "above.")


# ---- ldmatrix and the banks (moved from chapter 5, whose FP32 half stays there) ----

def ldmatrix_layouts() -> None:
    """One ldmatrix 8x8 request on a 64-halves-wide tile: plain, padded (8 halves) and swizzled; banks by colour."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 3))
    counts = sw.draw_three_layouts("ldmatrix 8x8", 64, 2, 8, axes=axes)
    fig.suptitle("banks (colour) and one ldmatrix matrix (outlined): plain | padded | swizzled", fontsize=10)
    fig.tight_layout(); plt.show()
    print("ldmatrix 8x8: " + " | ".join(f"{c.layout} {c.wavefronts}" for c in counts) + "  wavefronts")


def ldmatrix_counts() -> list:
    """Wavefronts per request of steps 01 to 03's ldmatrix and 16-byte stores, by the emulator and by the model.

    Returns rows (step, access, layout, emulator, model, Nsight Compute kind or None)."""
    rows = []
    for name, layout in [(STEPS[0], "plain"), (STEPS[1], "plain"), (STEPS[2], "swizzled")]:
        c = gemmlab.step(name, backend="cpu").counters(256, 256, 64, max_blocks=1)
        p = gemmlab.instance(name).params
        reqs = {op: sw.hgemm_ldmatrix_requests(op, layout=layout, **p) for op in "AB"}
        for op in "AB":
            rows.append((name, f"s{op} ldmatrix.x4", layout, c.shared_wavefronts_per_request("ldmatrix", array=f"s{op}"),
                         sw.per_request(reqs[op], ldmatrix=True), None))
        rows.append((name, "all ldmatrix", layout, c.shared_wavefronts_per_request("ldmatrix"),
                     sw.per_request(reqs["A"] + reqs["B"], ldmatrix=True), "ldmatrix"))
        if name != STEPS[0]:
            stores = sw.hgemm_store_requests("A", layout=layout, **p) + sw.hgemm_store_requests("B", layout=layout, **p)
            rows.append((name, "16-byte stores", layout, c.shared_wavefronts_per_request("store"),
                         sw.per_request(stores, 16), "store"))
    return rows


def ldmatrix_three_ways() -> None:
    """The emulator, the model and Nsight Compute on an H100 (results/gpu-lane/ncu, kernel-wide per instruction),
    side by side, and whether the emulator and the model agree on every row (they must)."""
    rows = ldmatrix_counts()
    ncu = {name: profile.shared_per_request(profile.load_csv(name)) for name in STEPS}
    print(f"{'step':25s} {'access':17s} {'emulator':>8s} {'model':>6s} {'ncu (H100)':>11s} {'ncu ideal':>10s}")
    for step, access, layout, emu, model, kind in rows:
        got = ncu[step].get(kind) if kind and ncu[step] else None
        hw = f"{got['per_request']:11.2f} {got['ideal_per_request']:10.2f}" if got else \
            f"{'-' if kind is None else 'not recorded':>11s} {'':>10s}"
        print(f"{step:25s} {access:17s} {emu:8.2f} {model:6.2f} {hw}")
    h1, h3 = ncu[STEPS[0]], ncu[STEPS[2]]
    if h1 and h3:
        glue("ch7_ncu_h1", h1["ldmatrix"]["per_request"])
        glue("ch7_ncu_h1_excess", h1["ldmatrix"]["conflicts"] / h1["ldmatrix"]["instructions"])
        glue("ch7_ncu_h3", h3["ldmatrix"]["per_request"])
        glue("ch7_ncu_h3_extra", h3["ldmatrix"]["conflicts"])
        glue("ch7_ncu_h3_inst", h3["ldmatrix"]["instructions"])
        if h3.get("store"):
            glue("ch7_ncu_h3_store", h3["store"]["per_request"])
    print("emulator and model agree on every row:", all(emu == model for _, _, _, emu, model, _ in rows))


def ldmatrix_alternatives() -> None:
    """Plain, padded and swizzled tiles for steps 02/03's defaults: ldmatrix and store wavefronts of sA and sB,
    shared memory."""
    p = gemmlab.instance("hgemm/03_swizzled").params
    bm, bn, bk = p["BLOCK_M"], p["BLOCK_N"], p["BLOCK_K"]
    for layout, pad in (("plain", 0), ("padded", 8), ("swizzled", 0)):
        lds = sw.hgemm_ldmatrix_requests("A", layout=layout, pad=pad, **p) + \
            sw.hgemm_ldmatrix_requests("B", layout=layout, pad=pad, **p)
        st = {op: sw.per_request(sw.hgemm_store_requests(op, layout=layout, pad=pad, **p), 16) for op in "AB"}
        smem = (bm * (bk + pad) + bk * (bn + pad)) * 2
        print(f"{layout:8s}: ldmatrix.x4 {sw.per_request(lds, ldmatrix=True):5.2f} wavefronts; 16-byte stores "
              f"sA {st['A']:4.2f}, sB {st['B']:4.2f}; shared memory {smem} B "
              f"({100 * (smem / ((bm * bk + bk * bn) * 2) - 1):.1f}% more than plain)")


# ---- small helpers the page calls once each ----

def demo_registers() -> dict:
    """The one-warp demo of mma.m16n8k8: lanes 0 to 3's raw registers (A and B halves, D floats)."""
    demo = tc.mma_demo("m16n8k8")
    print(f"ran on the {demo['backend'].upper()} backend; lane 0..3 registers (raw):")
    for lane in range(4):
        a = tc.halves(demo["raw"]["a"]).reshape(32, 4)[lane].tolist()
        b = tc.halves(demo["raw"]["b"]).reshape(32, 2)[lane].tolist()
        d = demo["raw"]["d"][4 * lane:4 * lane + 4].tolist()
        print(f"  lane {lane}: A halves {a} (= r*8 + c)  B halves {b} (= k*8 + n)  D {d} (= 8m + n)")
    return demo


def verify_cases(kernel) -> None:
    """Which shapes and inputs gemmlab.verify tried (one shape twice: random, then with an Inf)."""
    cases = gemmlab.verify(kernel).cases
    shapes = {(c.m, c.n, c.k) for c in cases}
    print(f"{len(cases)} cases on {len(shapes)} shapes:", ", ".join(f"{c.m}x{c.n}x{c.k} {c.kind}" for c in cases))


def copy_requests(*kernels) -> None:
    """Global load requests per warp per K step, and their bytes and sectors, of each kernel (emulator, 256^3)."""
    for k in kernels:
        t = k.counters(256, 256, 256, max_blocks=1).totals
        warps, steps = len(tc.block_warp_mma_tiles(k.params)["warps"]), 256 // k.params["BLOCK_K"]
        print(f"{k.name}: {t['global_load_requests'] // (warps * steps)} global load requests per warp per K step, "
              f"{t['global_load_bytes'] // t['global_load_requests']} bytes each, "
              f"{t['global_load_sectors'] // t['global_load_requests']} sectors each")


def sass_counts() -> None:
    """Static SASS instruction counts of steps 01 to 03 for sm_75 and sm_80 (NVRTC, compile-only)."""
    for name in STEPS:
        inst = gemmlab.instance(name)
        for arch in ("sm_75", "sm_80"):
            s = tc.sass_summary(inst, arch)
            print(f"{name:25s} {arch}: LDG.128 {s['LDG.128']:3d}, narrower LDG {s['LDG narrower']:3d}, "
                  f"STS.128 {s['STS.128']:3d}, LDSM {s['LDSM']:3d}, HMMA {s['HMMA']:4d}, integer {s['integer']:4d}, "
                  f"registers {s['registers']}")


F16_GPU = "NVIDIA H200"  # one run (2026-11-29) timed the variant beside step 01 at 4096 and 8192, and profiled both


def f16_speed() -> dict:
    """The fp16-accumulate variant against step 01: the blocks per SM predicted from the registers of NVRTC's sm_90
    build, then one run's timing of both (live on a GPU, else the H200's run, named: results.one_gpu would pick
    older rows of another GPU), then the H200's profile of each at 4096 beside the prediction; all glued.
    Returns {"f32" | "f16": the profile's row (h200_profile) with the predicted warps per SM}."""
    rows = {}
    for key, name, inst in (("f32", STEPS[0], gemmlab.instance(STEPS[0])),
                            ("f16", tc.F16_ACCUMULATE.name, tc.f16_accumulate(backend="cpu"))):
        res = inst.resources("sm_90")
        threads = inst.step.launch(4096, 4096, 4096, inst.params).threads
        blocks, limiter = explore.blocks_per_sm(res.registers, threads, res.shared_bytes, 90)
        glue(f"ch7_{key}_regs", res.registers); glue(f"ch7_{key}_blocks", blocks)
        print(f"predicted: {name:24s} sm_90: {res.registers} registers x {threads} threads: {blocks} blocks = "
              f"{blocks * threads // 32} warps per SM (limited by {limiter})")
        rows[key] = dict(h200_profile(name, 4096) or {}, predicted=blocks * threads // 32)
    speed = gemmlab.benchmark([tc.f16_accumulate(), STEPS[0]], sizes=[4096, 8192], verbose=False, gpu=F16_GPU)
    at = {(r["step"], r["m"]): r for r in speed}
    if any(r["step"] == tc.F16_ACCUMULATE.name for r in speed):
        print(gemmlab.bench.table(speed))
        glue("ch7_f16_gpu", speed[0]["gpu"])
    for n in (4096, 8192):
        if (tc.F16_ACCUMULATE.name, n) in at and (STEPS[0], n) in at:
            glue(f"ch7_f16_speedup_{n}", at[(tc.F16_ACCUMULATE.name, n)]["tflops"] / at[(STEPS[0], n)]["tflops"])
    print(f"\nmeasured: Nsight Compute, one launch of each at 4096 on the {F16_GPU} (results/nvidia-h200.ncu.json):")
    print(f"{'step':24s} {'registers':>9s} {'blocks':>6s} {'warps/SM (predicted)':>21s} {'issue':>6s} "
          f"{'long sb':>7s} {'L2 hit':>6s}  top stalls")
    for key, name in (("f32", STEPS[0]), ("f16", tc.F16_ACCUMULATE.name)):
        h = rows[key]
        if "warps" not in h:
            print(f"{name:24s} not recorded"); continue
        h["long"] = dict(profile.stall_reasons(profile.load(H200)[f"{name}@4096"], top=99)).get("long_scoreboard", 0.0)
        for what in ("regs", "blocks", "warps", "issue", "long", "l2_hit"):
            glue(f"ch7_{key}_gpu_{what}", h[what])
        print(f"{name:24s} {h['regs']:9.0f} {h['blocks']:6.0f} {h['warps']:13.1f} ({h['predicted']:2d})    "
              f"{h['issue']:5.1f}% {h['long']:7.2f} {h['l2_hit']:5.1f}%  "
              + ", ".join(f"{why} {x:.2f}" for why, x in h["stalls"]))
    if "issue" in rows["f16"] and "issue" in rows["f32"]:
        glue("ch7_f16_issue_ratio", rows["f16"]["issue"] / rows["f32"]["issue"])
    return rows


def claim() -> None:
    """The chapter's claim: steps 01 to 03 and the fp16 variant are correct (emulator), fit a T4, and step 03's
    ldmatrix are conflict-free (one wavefront per 8x8 matrix, emulator)."""
    for name in STEPS:
        print(gemmlab.verify(gemmlab.step(name, backend="cpu")), "(emulator)")
    print(gemmlab.verify(tc.f16_accumulate(backend="cpu")), "(emulator)")
    for name in STEPS:
        fit = gemmlab.instance(name).fit("sm_75")  # registers x threads, shared memory (static + dynamic), spills
        print(f"{name}: fits a T4 (sm_75): {'yes' if fit.ok else f'NO: {fit}'}")
    c3 = gemmlab.step(STEPS[2], backend="cpu").counters(256, 256, 256, max_blocks=1)
    print("hgemm/03_swizzled: ldmatrix conflict-free (one wavefront per 8x8 matrix):",
          c3.shared_wavefronts_per_request(kind="ldmatrix") == 4)


# ---- the picture: where the kernel's ldmatrix.x4 puts its four matrices ----

X4_PLACEMENT = {
    # operand: [(matrix, first row, first column of the 16x16 piece, register it lands in)]
    "A": [(0, 0, 0, "rA[m][0][0]"), (1, 8, 0, "rA[m][0][1]"), (2, 0, 8, "rA[m][1][0]"), (3, 8, 8, "rA[m][1][1]")],
    "B": [(0, 0, 0, "rB[n][0][0]"), (1, 8, 0, "rB[n][1][0]"), (2, 0, 8, "rB[n+1][0][0]"), (3, 8, 8, "rB[n+1][1][0]")],
}


def draw_x4_placement(axes=None):
    """Step 01's two ldmatrix.x4: which 8x8 quarter of the 16x16 A piece (m x k) and of the B piece (k x n, read with
    .trans) is matrix 0..3, which lanes give its rows' addresses, and the register it lands in (as in the kernel's
    call: ldmatrix_x4(rA[m][0][0], rA[m][0][1], rA[m][1][0], rA[m][1][1], ...) and ldmatrix_x4_trans(rB[n][0][0],
    rB[n][1][0], rB[n + 1][0][0], rB[n + 1][1][0], ...)). Returns the axes."""
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 5))
    colours = plt.get_cmap("Pastel2")
    titles = {"A": "A piece, 16 (m) x 16 (k), sA[m][k]: ldmatrix.x4",
              "B": "B piece, 16 (k) x 16 (n), sB[k][n]: ldmatrix.x4.trans"}
    for ax, op in zip(axes, "AB"):
        for mat, r0, c0, reg in X4_PLACEMENT[op]:
            ax.add_patch(Rectangle((c0, r0), 8, 8, fc=colours(mat), ec="0.3", lw=1.2))
            ax.text(c0 + 4, r0 + 3.2, f"matrix {mat}", ha="center", va="center", fontsize=10, weight="bold")
            ax.text(c0 + 4, r0 + 4.6, f"lanes {8 * mat}-{8 * mat + 7} give its rows", ha="center", va="center",
                    fontsize=7.5)
            ax.text(c0 + 4, r0 + 6.0, f"-> {reg}", ha="center", va="center", fontsize=9, family="monospace")
        rows, cols = ("m", "k") if op == "A" else ("k", "n")
        ax.set_xticks([0, 8, 16]); ax.set_yticks([0, 8, 16])
        ax.set_xlabel(f"{cols} within the piece"); ax.set_ylabel(f"{rows} within the piece")
        ax.set_xlim(0, 16); ax.set_ylim(16, 0); ax.set_aspect("equal")
        ax.set_title(titles[op], fontsize=9)
    return axes


# ---- the picture: step 02's copy, which thread moves which 16-byte chunk ----

def copy_mapping(params: dict) -> dict:
    """Step 02's copy (kernels/hgemm/02_vectorized_copy.cu): chunk e of a tile (16 bytes, 8 halves, row-major) goes to
    thread e % NUM_THREADS in copy iteration e // NUM_THREADS. Returns {"A" | "B": {"tid", "copy": arrays of shape
    (rows, chunks per row)}, "threads": NUM_THREADS}, sA being BLOCK_M x BLOCK_K halves and sB BLOCK_K x BLOCK_N."""
    threads = (params["BLOCK_M"] // params["WARP_M"]) * (params["BLOCK_N"] // params["WARP_N"]) * 32
    out = {"threads": threads}
    for op, rows, cols in (("A", params["BLOCK_M"], params["BLOCK_K"]), ("B", params["BLOCK_K"], params["BLOCK_N"])):
        e = np.arange(rows * cols // 8).reshape(rows, cols // 8)
        out[op] = {"tid": e % threads, "copy": e // threads}
    return out


def draw_copy_mapping(params: dict | None = None, axes=None):
    """Step 02's copy of one K step: each 16-byte chunk of sA and sB coloured by the warp that copies it, each band of
    rows labelled with the warp and the copy iteration (one LDG.128 + STS.128 per thread). Returns the axes."""
    params = params or gemmlab.instance("hgemm/02_vectorized_copy").params
    mp = copy_mapping(params)
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [1, 2.2]})
    colours = plt.get_cmap("Set2")
    for ax, op in zip(axes, "AB"):
        tid, copy = mp[op]["tid"], mp[op]["copy"]
        rows, chunks = tid.shape
        for r in range(rows):
            for c in range(chunks):
                ax.add_patch(Rectangle((c, r), 1, 1, fc=colours(tid[r, c] // 32), ec="white", lw=0.3))
        for (w, i) in sorted({(int(t) // 32, int(k)) for t, k in zip(tid.ravel(), copy.ravel())}):
            band = np.argwhere((tid // 32 == w) & (copy == i))
            r0, r1 = band[:, 0].min(), band[:, 0].max() + 1
            ax.text(chunks / 2, (r0 + r1) / 2, f"warp {w}, copy {i}", ha="center", va="center",
                    fontsize=6.5 if op == "A" else 7)
        ax.set_xlim(0, chunks); ax.set_ylim(rows, 0)
        ax.set_xlabel("16-byte chunk of the row (8 halves)"); ax.set_ylabel("tile row")
        ax.set_title(f"s{op}: {rows} x {chunks * 8} halves, {rows * chunks} chunks; thread t copies chunks t, "
                     f"t + {mp['threads']}, ...", fontsize=9)
    return axes
