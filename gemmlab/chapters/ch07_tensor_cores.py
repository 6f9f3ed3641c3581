"""Chapter 7, tensor cores with mma.sync and ldmatrix: hgemm/01 to 03, the fragment demos, and the ldmatrix banks.

The chapter's record wrangling, glue() calls, figures and tables, one function per figure; the notebook
(book/07_tensor_cores.ipynb) calls each once. Every number comes from results/ (live on a GPU).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
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


def fp32_start() -> None:
    """Where chapter 6 left the FFMA ladder: its best step at 4096, one GPU's records."""
    # The FFMA ladder of chapter 6 (its step 12 moves the products onto the tensor cores), one GPU's records
    sgemm = gemmlab.results.one_gpu([r for r in gemmlab.results.load() if r["step"].startswith("sgemm/")
                                     and r["step"] != "sgemm/12_tf32x3" and r["m"] == 4096])
    if sgemm:
        best = max(sgemm, key=lambda r: r["pct_of_baseline"])
        glue("ch7_fp32_best_pct", best["pct_of_baseline"])
        glue("ch7_fp32_gpu", best["gpu"])
        print(f"best FP32 step at 4096: {best['step']} {best['params']}, {best['pct_of_baseline']:.1f}% of cuBLAS "
              f"({best['gpu']}, {best.get('source', 'live')}, {best['date']})")
    else:
        glue("ch7_fp32_best_pct", float("nan")); glue("ch7_fp32_gpu", hardware.NO_DATA)
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
    for shape in ("m16n8k8", "m16n8k16"):
        demo = tc.mma_demo(shape)  # on a GPU without sm_80, m16n8k16 runs in the emulator
        same = [op.upper() for op in "abc" if demo[op] == layouts.mma_fragment(shape, op)]
        print(f"mma.{shape}: fragments {', '.join(same)} equal the twin in gemmlab.layouts: {len(same) == 3}")
    for num in (1, 2, 4):
        for trans in (False, True):
            ok = tc.ldmatrix_demo(num, trans) == layouts.ldmatrix_fragment(num, trans)
            print(f"ldmatrix.x{num}{'.trans' if trans else '      '}: equals the twin: {ok}")
    cpu = tc.mma_demo("m16n8k8", backend="cpu")["raw"]
    here = tc.mma_demo("m16n8k8")["raw"]
    print("emulator registers equal the active backend's, bit for bit:",
          all(np.array_equal(cpu[k].view(np.uint32), here[k].view(np.uint32)) for k in cpu))


def records() -> tuple[list, dict]:
    """Steps 01 to 03 against cuBLAS fp16 (live on a GPU, recorded without one); glues their % at 8192."""
    records = gemmlab.benchmark(['hgemm/01_mma_tiling', 'hgemm/02_vectorized_copy', 'hgemm/03_swizzled'], sizes=[1024, 2048, 4096, 8192], verbose=False)
    at = {(r["step"], r["m"]): r for r in records}
    for name in ['hgemm/01_mma_tiling', 'hgemm/02_vectorized_copy', 'hgemm/03_swizzled']:
        v = int(name.split("/")[1][:2])
        if (name, 8192) in at:
            glue(f"ch7_v{v}_pct", at[(name, 8192)]["pct_of_baseline"])
            glue(f"ch7_v{v}_tflops", at[(name, 8192)]["tflops"])
    if ("hgemm/01_mma_tiling", 8192) in at:
        glue("ch7_gpu", at[("hgemm/01_mma_tiling", 8192)]["gpu"])
        glue("ch7_cublas_tflops", at[("hgemm/01_mma_tiling", 8192)]["baseline_tflops"])
        glue("ch7_v2_speedup", at[("hgemm/02_vectorized_copy", 8192)]["tflops"] / at[("hgemm/01_mma_tiling", 8192)]["tflops"])
        glue("ch7_v3_speedup", at[("hgemm/03_swizzled", 8192)]["tflops"] / at[("hgemm/02_vectorized_copy", 8192)]["tflops"])
    else:
        for key in ("v1_pct", "v2_pct", "v3_pct", "v1_tflops", "v2_tflops", "v3_tflops", "cublas_tflops", "v2_speedup", "v3_speedup"):
            glue(f"ch7_{key}", float("nan"))
        glue("ch7_gpu", hardware.NO_DATA)
    seed = hardware.REFERENCE_MEASURED["t4"]["hgemm_ladder"]  # seed 001's own ladder, on the T4 at 8192
    glue("ch7_seed_v1_pct", seed["kernel1_pct"])
    glue("ch7_seed_copy", seed["copy_speedup"]); glue("ch7_seed_swizzle", seed["swizzle_speedup"])
    print(gemmlab.bench.table(records))
    return records, at


def ncu_ldmatrix() -> None:
    """Nsight Compute's shared wavefronts per ldmatrix of steps 01 to 03 (recorded, one launch at 4096)."""
    ncu = {name: gemmlab.profile.load_csv(name) for name in ['hgemm/01_mma_tiling', 'hgemm/02_vectorized_copy', 'hgemm/03_swizzled']}
    for name, m in ncu.items():
        if m:
            ratio = m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] / m["smsp__inst_executed_op_ldsm.sum"]
            glue(f"ch7_ncu_{name.split('/')[1][:2]}", ratio)
            print(f"{name}: Nsight Compute (recorded, one launch at 4096): {ratio:.2f} shared wavefronts per ldmatrix")
    if not ncu["hgemm/01_mma_tiling"]:
        glue("ch7_ncu_01", float("nan")); glue("ch7_ncu_03", float("nan"))


def ladder(records: list) -> None:
    """Steps 01 to 03 in TFLOP/s at 8192 (cuBLAS's band), and % of cuBLAS by size."""
    fig, (bars, ax) = plt.subplots(1, 2, figsize=(12, 3.6))
    plots.ladder(records, STEPS, ax=bars, size=8192)
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
        print("No GPU here: the emulator's numbers above are the ones to compare with a GPU run.")


# ---- ldmatrix and the banks (moved from chapter 5, whose FP32 half stays there) ----

def ldmatrix_layouts() -> None:
    """One ldmatrix 8x8 request on a 64-halves-wide tile: plain, padded (8 halves) and swizzled; banks by colour."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 3))
    counts = sw.draw_three_layouts("ldmatrix 8x8", 64, 2, 8, axes=axes)
    fig.suptitle("banks (colour) and one ldmatrix matrix (outlined): plain | padded | swizzled", fontsize=10)
    fig.tight_layout(); plt.show()
    print("ldmatrix 8x8: " + " | ".join(f"{c.layout} {c.wavefronts}" for c in counts) + "  wavefronts")


def ldmatrix_counts() -> list:
    """Wavefronts per request of steps 01 to 03's ldmatrix and 16-byte stores: the emulator against the model.

    Returns rows (step, access, layout, emulator, model, Nsight Compute kind or None).
    """
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
    for step, access, layout, emu, model, _ in rows:
        print(f"{step:25s} {access:18s} {layout:9s} emulator {emu:5.2f}  model {model:5.2f}  "
              + ("agree" if emu == model else "DISAGREE"))
    return rows


def ldmatrix_ncu(rows: list) -> None:
    """The same rows beside Nsight Compute on an H100 (results/gpu-lane/ncu), kernel-wide per instruction."""
    ncu = {name: profile.shared_per_request(profile.load_csv(name)) for name in STEPS}
    print(f"{'step':25s} {'access':18s} {'emulator':>8s} {'model':>6s} {'ncu (H100)':>11s} {'ncu ideal':>10s}")
    for step, access, layout, emu, model, kind in rows:
        got = ncu[step].get(kind) if kind and ncu[step] else None
        hw = f"{got['per_request']:11.2f} {got['ideal_per_request']:10.2f}" if got else \
            f"{'-' if kind is None else 'not recorded':>11s} {'':>10s}"
        print(f"{step:25s} {access:18s} {emu:8.2f} {model:6.2f} {hw}")
    h1, h3 = ncu[STEPS[0]], ncu[STEPS[2]]
    if h1 and h3:
        glue("ch7_ncu_h1", h1["ldmatrix"]["per_request"])
        glue("ch7_ncu_h1_excess", h1["ldmatrix"]["conflicts"] / h1["ldmatrix"]["instructions"])
        glue("ch7_ncu_h3", h3["ldmatrix"]["per_request"])
        glue("ch7_ncu_h3_extra", h3["ldmatrix"]["conflicts"])
        glue("ch7_ncu_h3_inst", h3["ldmatrix"]["instructions"])
        if h3.get("store"):
            glue("ch7_ncu_h3_store", h3["store"]["per_request"])


def ldmatrix_alternatives() -> None:
    """Plain, padded and swizzled tiles for steps 02/03's defaults: ldmatrix and store wavefronts, shared memory."""
    p = gemmlab.instance("hgemm/03_swizzled").params
    bm, bn, bk = p["BLOCK_M"], p["BLOCK_N"], p["BLOCK_K"]
    for layout, pad in (("plain", 0), ("padded", 8), ("swizzled", 0)):
        lds = sw.hgemm_ldmatrix_requests("A", layout=layout, pad=pad, **p) + \
            sw.hgemm_ldmatrix_requests("B", layout=layout, pad=pad, **p)
        sts = sw.hgemm_store_requests("A", layout=layout, pad=pad, **p) + \
            sw.hgemm_store_requests("B", layout=layout, pad=pad, **p)
        smem = (bm * (bk + pad) + bk * (bn + pad)) * 2
        print(f"{layout:8s}: ldmatrix.x4 {sw.per_request(lds, ldmatrix=True):5.2f} wavefronts, 16-byte stores "
              f"{sw.per_request(sts, 16):4.2f}, shared memory {smem} B "
              f"({100 * (smem / ((bm * bk + bk * bn) * 2) - 1):.1f}% more than plain)")
