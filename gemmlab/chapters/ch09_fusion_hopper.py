"""Chapter 9, "Fusing on Hopper": the chapter's figures, tables, sentences and pictures, in one module.

One truth per number: every speed-up of the chapter is one record's time over another's from ONE run, the H200
benchmark run of RUN_DATE (results/nvidia-h200.fusion.json, kind "benchmark"), in which every fused step,
`a @ b @ c` eager (two cuBLAS calls) and the same two GEMMs replayed from a CUDA graph were timed in one process.
`one_run` selects it by date and kind and refuses a mix. The evidence for each gap (timelines, parts, the
profiler's stalls) comes from results/experiments/fusion-* and is quoted with the run it comes from.

The pictures are drawn from Python twins of the kernels' own index arithmetic (`consumer_ktiles`, `ring_slot`,
`reads_owed`), which tests/test_ch09_fusion_hopper.py holds to the kernels' text.
"""
from __future__ import annotations

import collections
import csv
import gzip
import re
import statistics
from typing import Sequence

from ..measure import profile, results
from ..measure import fusion
from . import ch08_fusion as ch8
from .explore import explorer  # noqa: F401  (the chapter's live sliders)
from .glue import glue
from .sitecontrols import FUSION_GPU as GPU
from .sitecontrols import fusion_twin as twin  # noqa: F401  (the chapter's static controls)
from .fusion_report import kernel_time_ratios
from ..runtime.source import REPO
from . import show
import matplotlib.pyplot as plt

__all__ = ["GPU", "RUN_DATE", "STEPS", "fusion", "one_run", "run_label", "glue_run", "row", "prediction",
           "glue_prediction", "measured", "glue_measured", "step_table", "plot_run", "speedup_table",
           "consumer_ktiles", "ring_slot", "reads_owed", "warpgroups", "ring", "tile_flags", "top_stalls",
           "timeline_07", "phases_07", "row_panel_wait", "barrier_and_panel", "small_verdict", "stall_after_trywait",
           "glue_evidence06", "glue_evidence07", "glue_evidence08", "tile_shape", "glue_tiles", "stages_spread",
           "glue_stages", "fastest_at", "compiled_for", "matches_float64", "alu_share_05", "copies_saving_06", "glue_verdict",
           "source_rows", "opcode_mix", "stall_shares", "barrier_share_at", "split_per_ktile", "pred_hgmma_06", "glue_profile06", "listing", "twin", "explorer"]

RUN_DATE, RUN_KIND = "2026-11-29", "benchmark"  # the one H200 run of every fused step with its baselines
STEPS = ("fused/06_wgmma_tf32x3", "fused/07_tma_tf32x3", "fused/08_tile_flags")
SPEC = ch8.SPEC
TF32_TFLOPS = SPEC.fp16_tensor_tflops / 2  # dense TF32 wgmma peak on the spec sheet: half the fp16 rate
SIZES = (512, 4096)
TILES = "05, 06 default tiles; 07, 08 the sweeps' tiles per size"  # FusedStep.sized_tiles


# ------------------------------------------------------------------------------------------------
# The one run
# ------------------------------------------------------------------------------------------------
def one_run(records: list[dict] | None = None, date: str = RUN_DATE, kind: str = RUN_KIND, gpu: str = GPU,
            live: bool = False) -> list[dict]:
    """The records of one run: `kind` records of `gpu` dated `date` (from `records`, else the GPU's recorded
    file). live=True times every step and both baselines on this machine's GPU instead (chapter 8's lane).
    Raises if nothing matches or the selection mixes GPUs."""
    if live:
        return ch8.lane_run(live=True)
    recs = [r for r in (fusion.load(gpu) if records is None else records)
            if r.get("kind") == kind and r.get("date") == date and r.get("gpu") == gpu]
    if not recs:
        raise LookupError(f"no {kind} records of {gpu} dated {date}: the one run (lab/one-run/gpu.sh) writes them")
    return recs


def run_label(recs: list[dict]) -> str:
    return f"{recs[0]['gpu']}, one run of {recs[0]['date']}" if recs else "no recorded run"


def glue_run(recs: list[dict]) -> None:
    glue("ch9_gpu", recs[0]["gpu"]); glue("ch9_date", recs[0]["date"])
    glue("ch9_sizes", ", ".join(str(n) for n in sorted({r["m"] for r in recs})))


def row(recs: list[dict], step: str, n: int) -> dict | None:
    """One step at n from the run: its µs (launched, and replayed from a graph), the baselines' µs, the two
    speed-ups (baseline time over the step's), its TFLOP/s and cuBLAS's own (a @ b @ c eager)."""
    r = fusion.lookup(recs, step, n)
    eager, graph = ch8.fastest_record(recs, ch8.EAGER, n), ch8.fastest_record(recs, ch8.GRAPHS, n)
    if not (r and eager and graph):
        return None
    us, gus = r["median_s"] * 1e6, r.get("graph_median_s", float("nan")) * 1e6
    return {"step": step, "n": n, "us": us, "graph_us": gus, "eager_us": eager["median_s"] * 1e6,
            "eager_name": eager["step"], "base_graph_us": graph["median_s"] * 1e6,
            "x": eager["median_s"] * 1e6 / us, "xg": graph["median_s"] * 1e6 / us,
            "x_graphs": graph["median_s"] * 1e6 / gus, "tflops": r["tflops"], "cublas_tflops": eager["tflops"],
            "date": r["date"], "gpu": r["gpu"]}


# ------------------------------------------------------------------------------------------------
# Predict: traffic, the roofline bound at the TF32 wgmma rate, one launch's floor
# ------------------------------------------------------------------------------------------------
PREVIOUS = {"fused/06_wgmma_tf32x3": "fused/05_tf32x3", "fused/07_tma_tf32x3": "fused/06_wgmma_tf32x3",
            "fused/08_tile_flags": "fused/07_tma_tf32x3"}


def prediction(step: str, n: int, recs: list[dict] | None = None) -> dict:
    """The model's numbers for `step` at n (chapter 8's model: fusion.flops, fusion.traffic_bytes): three TF32
    products per fp32 product at the spec sheet's TF32 rate, the bytes at the DRAM's rate, and the launch
    floor measured on the H200 (fusion-kernel-time); "best_us" is that bound.
    Given the run's records, each step is predicted from the step before it as measured in the run ("from_prev_us"),
    less what the new idea can take off at 512 ("saved_us", from a recorded experiment):
      06: step 05's time less the ALU pipe's share of its kernel time (fusion-counters: the splits are the ALU's
          work; the upper end of what wgmma can take off), the launch floor kept;
      07: step 06's time less what taking its copies out saved (fusion-tma parts);
      08: step 07's time less the wait its grid barrier cost (fusion-tma's timeline of step 07).
    At 4096 none of these is recorded, so the prediction is the step before's time. Without records: the model."""
    arith = 3 * fusion.flops(n) / (TF32_TFLOPS * 1e12) * 1e6
    traffic = fusion.traffic_bytes(n)
    dram = traffic / (SPEC.dram_gbps * 1e9) * 1e6
    floor = ch8.launch_floor_us(512)  # an empty kernel's call: measured at 512 only, and it does not grow with N
    p = {"n": n, "arith_us": arith, "traffic_mib": traffic / 2**20, "dram_us": dram, "floor_us": floor,
         "bound": "tensor pipe" if arith > dram else "DRAM", "best_us": max(arith, dram) + floor, "saved_us": 0.0}
    p["predicted_us"] = p["best_us"]
    prev = row(recs, PREVIOUS[step], n) if (recs and step in PREVIOUS) else None
    if prev:
        p["from_prev_us"] = round(prev["us"], 1)
        if n == 512:
            p["saved_us"] = round(_saving_at_512(step, p["from_prev_us"], floor), 1)
        p["predicted_us"] = p["from_prev_us"] - p["saved_us"]
        if step == "fused/08_tile_flags":
            p["from_07_us"] = p["from_prev_us"]
    return p


def alu_share_05() -> float:
    """Step 05 at 512 (fusion-counters, Nsight Compute): the ALU pipe's busy share of the kernel's cycles."""
    return results.experiment("fusion-counters")["ncu"]["ncu-05-default-512"]["alu_pipe_pct"] / 100


def copies_saving_06() -> float:
    """Step 06 at 512 (fusion-tma parts): the call's median less the median with its copies taken out."""
    p = {k[3:]: statistics.median(v) for k, v in
         results.experiment("fusion-tma")["parts"][GPU]["us"]["512"].items() if k.startswith("06 ")}
    return p["as it is"] - p["no copies"]


def _saving_at_512(step: str, prev_us: float, floor: float) -> float:
    if step == "fused/06_wgmma_tf32x3":
        return alu_share_05() * (prev_us - floor)
    if step == "fused/07_tma_tf32x3":
        return copies_saving_06()
    return barrier_wait_07()


def barrier_wait_07() -> float:
    """Step 07 at 512, the median block (fusion-tma's timeline, 2026-11-24): from its arrival at the grid barrier
    to phase 2's first data, the wait that a counter per tile of T could remove."""
    marks = results.experiment("fusion-tma")["timeline"][GPU]["marks"]["as it is"]
    return marks["p2 first data"][1] - marks["before barrier"][1]


def glue_prediction(step: str, sizes: Sequence[int] = SIZES, recs: list[dict] | None = None) -> None:
    idea = step.split("/")[1][:2]
    for n in sizes:
        for k, v in prediction(step, n, recs).items():
            glue(f"ch9_p{idea}_{n}_{k}", v)
    glue("ch9_tf32_peak", TF32_TFLOPS); glue("ch9_spec", SPEC.name)


def step_table(recs: list[dict], step: str, sizes: Sequence[int] = SIZES, part: str = "predicted") -> None:
    """Predict, then measure, for one step, microseconds first. part="predicted" (before the kernel): the model's
    traffic, bound and launch floor at each size, and at 512 the prediction from the step before as measured in the
    run, less what the new idea can take off (a recorded experiment); at 4096 no such experiment is recorded, so no
    prediction beyond the model's bound. part="measured" (after the check): the run's time beside both baselines."""
    from_prev = "from_prev_us" in prediction(step, sizes[0], recs)
    if part == "measured":
        print(f"{step}: measured ({run_label(recs)}), µs")
        print(f"{'N':>5s} {'predicted':>10s} {'measured':>9s} {'a@b@c':>8s} {'graph':>8s}  x eager  x graph  "
              "TFLOP/s (cuBLAS)")
        for n in sizes:
            p, m = prediction(step, n, recs), row(recs, step, n)
            pred = f"{p['predicted_us']:7.1f} µs" if n == 512 or not from_prev else f"{'-':>10s}"
            if m:
                print(f"{n:5d} {pred} {m['us']:6.1f} µs {m['eager_us']:8.1f} {m['base_graph_us']:8.1f}  {m['x']:7.2f}  "
                      f"{m['xg']:7.2f}  {m['tflops']:5.1f} ({m['cublas_tflops']:.1f})")
        return
    how = f"at 512 from the step before as measured in the {run_label(recs)}" if from_prev else "the model"
    print(f"{step}: predicted ({how}), µs")
    print(f"{'N':>5s} {'traffic':>9s} {'bound':>12s} {'launch':>7s} {'predicted':>10s}")
    for n in sizes:
        p = prediction(step, n, recs)
        bound = f"{max(p['arith_us'], p['dram_us']):.1f} {'TC' if p['bound'] == 'tensor pipe' else 'DRAM'}"
        pred = f"{p['predicted_us']:7.1f} µs" if n == 512 or not from_prev else f"{'-':>10s}"
        print(f"{n:5d} {p['traffic_mib']:6.0f} MiB {bound:>12s} {p['floor_us']:7.1f} {pred}")
    if from_prev:
        print(f"predicted: step {PREVIOUS[step][6:8]}'s time in this run, less {SAVINGS[step]}, at 512; at 4096 "
              "nothing of the kind is recorded, so no prediction beyond the model's bound (TC: tensor cores at the "
              "spec rate) and launch floor")


SAVINGS = {"fused/06_wgmma_tf32x3": "the ALU pipe's share of step 05's kernel time (fusion-counters)",
           "fused/07_tma_tf32x3": "what taking step 06's copies out saved (fusion-tma parts)",
           "fused/08_tile_flags": "its grid barrier's wait (fusion-tma's timeline)"}


TILE_M = 64  # steps 06 to 08: a warp group's 64 rows (TILE_M in the kernels)


def tile_shape(recs: list[dict], step: str, n: int) -> str:
    """The output tile one block computes in the run's record of `step` at n, rows x columns: BLOCK_M x BLOCK_N
    for steps 01-05, a warp group's TILE_M rows x BLOCK_N for steps 06-08."""
    params = (fusion.lookup(recs, step, n) or {}).get("params", {})
    if "BLOCK_N" not in params:
        return "?"
    return f"{params.get('BLOCK_M', TILE_M)} x {params['BLOCK_N']}"


def glue_tiles(recs: list[dict], n: int = 4096) -> None:
    """ch9_tile05_<n>, ch9_tile06_<n>: the tiles steps 05 and 06 ran at n in the run (their records' params)."""
    for step in ("fused/05_tf32x3",) + STEPS:
        glue(f"ch9_tile{step[6:8]}_{n}", tile_shape(recs, step, n))


def stages_spread(recs: list[dict], step: str = "fused/07_tma_tf32x3", n: int = 512) -> dict:
    """The recorded tile sweep of `step` at n (kind "sweep"): the configurations with the run's BLOCK_N and SPLIT_K,
    NUM_STAGES varied alone; their fastest and slowest µs and the stage counts, and the sweep's date."""
    params = (fusion.lookup(recs, step, n) or {}).get("params", {})
    same = [r for r in fusion.load(GPU) if r.get("kind") == "sweep" and r["step"] == step and r["m"] == n
            and all(r["params"].get(k) == params.get(k) for k in ("BLOCK_N", "SPLIT_K"))]
    if not same:
        return {}
    fast, slow = min(same, key=lambda r: r["median_s"]), max(same, key=lambda r: r["median_s"])
    return {"spread_us": (slow["median_s"] - fast["median_s"]) * 1e6, "fast_stages": fast["params"]["NUM_STAGES"],
            "slow_stages": slow["params"]["NUM_STAGES"], "date": fast["date"], "configs": len(same)}


def glue_stages(recs: list[dict]) -> None:
    for k, v in stages_spread(recs).items():
        glue(f"ch9_st07_{k}", v)


def compiled_for(res) -> str:
    """The architecture a resources report was compiled for ("sm_90a"), the head of its one-line summary."""
    return str(res).split(":")[0]


def spills(res) -> None:
    """One line: the architecture a resources report was compiled for and its spills (stores/loads, bytes)."""
    print(f"compiled for {compiled_for(res)}: spills {res.spill_stores}/{res.spill_loads} B (stores/loads)")


def fewer_registers(res, than, name: str = "07", other: str = "06") -> None:
    """One line: the registers per thread of step `name` (res) and step `other` (than), whether `name` needs fewer,
    and its spills; glued as ch9_regs<name>, ch9_regs<other>."""
    glue(f"ch9_regs{name}", res.registers); glue(f"ch9_regs{other}", than.registers)
    print(f"at {compiled_for(res)}, registers per thread: step {name} {res.registers}, step {other} {than.registers} "
          f"(fewer: {res.registers < than.registers}); {name} spills {res.spill_stores}/{res.spill_loads} B")


def glue_ch8_bound(n: int = 512) -> None:
    """Chapter 8's prediction for step 05 at n beside this chapter's model (ch9_c8_*): the same three TF32 products
    at the TF32 mma.sync rate the course's probe measured (fusion-tf32x3), plus the launch floor."""
    rate = results.experiment("fusion-tf32x3")["peaks"]["mma_m16n8k8_tf32"]["tflops"]
    glue("ch9_c8_rate", rate)
    glue("ch9_c8_best_us", 3 * fusion.flops(n) / (rate * 1e12) * 1e6 + ch8.launch_floor_us(n))


def mix_table(n: int = 4096) -> None:
    """Step 06's executed warp instructions at n by opcode (Nsight Compute's source page, lab/gaps, one launch):
    HGMMA (the wgmmas) and the split's and the addresses' opcodes, then the rest."""
    mix = opcode_mix(source_rows(PLACES / f"src-f06-{n}.csv.gz"))
    total = sum(mix.values())
    print(f"fused/06_wgmma_tf32x3 at {n}: {total / 1e6:,.0f}M warp instructions executed (one launch)")
    ops = ("HGMMA", "IMAD", "FADD", "LDS", "VIADD", "LOP3", "STS")
    for op, k in [(op, mix[op]) for op in ops] + [("the rest", total - sum(mix[op] for op in ops))]:
        print(f"  {op:8s} {100 * k / total:5.1f}%  {k / 1e6:7.1f}M")


def log_tiles(experiment: str, part: str) -> str:
    """The tiles a recorded experiment ran ("BLOCK_N 32, SPLIT_K 4, NUM_STAGES 3"): the first {...} of its log."""
    t = results.experiment(experiment)[part][GPU]
    text = (results.EXPERIMENTS / experiment / t["log"]).read_text()
    found = re.search(r"\{([^}]*)\}", text)
    return ", ".join(f"{k} {v}" for k, v in re.findall(r"'(\w+)': (\d+)", found.group(1))) if found else "?"


def matches_float64(e, a, b, c) -> bool:
    """True when no element of E = A B C computed by a step is out of tolerance against float64."""
    return not fusion.compare(e, a, b, c)[0].any()


def measured(recs: list[dict], step: str, n: int) -> dict:
    return row(recs, step, n) or {}


def glue_measured(recs: list[dict], step: str, sizes: Sequence[int] = SIZES) -> None:
    idea = step.split("/")[1][:2]
    for n in sizes:
        m, p = row(recs, step, n) or {}, prediction(step, n, recs)
        for k in ("us", "graph_us", "eager_us", "base_graph_us", "x", "xg", "x_graphs", "tflops", "cublas_tflops"):
            glue(f"ch9_m{idea}_{n}_{k}", m.get(k, float("nan")))
        glue(f"ch9_m{idea}_{n}_gap", m.get("us", float("nan")) / p["predicted_us"])
        glue(f"ch9_m{idea}_{n}_gap_us", m.get("us", float("nan")) - p["predicted_us"])
        r = fusion.lookup(recs, step, n)
        glue(f"ch9_t{idea}_{n}", ", ".join(f"{k} {v}" for k, v in (r or {}).get("params", {}).items()) or "?")


# ------------------------------------------------------------------------------------------------
# Measure: the run's table and figure (chapter 8's, with steps 05 to 08)
# ------------------------------------------------------------------------------------------------
def speedup_table(recs: list[dict], sizes: Sequence[int] = SIZES) -> None:
    ch8.speedup_table(recs, ("fused/05_tf32x3",) + STEPS, sizes, TILES)


def plot_run(recs: list[dict]) -> None:
    ch8.plot_run(recs, ("fused/05_tf32x3",) + STEPS, TILES)


def glue_verdict(recs: list[dict], n: int = 512) -> None:
    """The fastest fused step at n in the run against both baselines, and the kernels' own time (another run)."""
    best = min((row(recs, s, n) for s in STEPS if row(recs, s, n)), key=lambda m: m["us"])
    glue("ch9_v_step", best["step"]); glue("ch9_v_us", best["us"]); glue("ch9_v_x", best["x"])
    glue("ch9_v_xg", best["xg"]); glue("ch9_v_graph_us", best["graph_us"]); glue("ch9_v_x_graphs", best["x_graphs"])
    ratio, date = _kernel_time_ratio(n)
    glue("ch9_kt_512", ratio); glue("ch9_kt_date", date)
    pf = results.experiment("fusion-kernel-time").get("profiler", {}).get(GPU, {}).get("kernels", {}).get(str(n), {})
    med = {k: statistics.median(v["sum_us"]) for k, v in pf.items()}
    glue("ch9_kt_fused_us", min(med.get("07", float("nan")), med.get("08", float("nan"))))
    glue("ch9_kt_cublas_us", min(med.get("torch a@b@c", float("nan")), med.get("cupy a@b@c", float("nan"))))
    glue("ch9_v_small", small_verdict(recs))
    sizes = [n for n in fastest_at(recs) if n in SIZES]  # the sizes the chapter's tables show
    glue("ch9_v07_fastest_at", ", ".join(map(str, sizes[:-1])) + (" and " if len(sizes) > 1 else "")
         + (str(sizes[-1]) if sizes else "no size"))


def fastest_at(recs: list[dict], step: str = "fused/07_tma_tf32x3") -> list[int]:
    """The sizes of the run at which `step` is the fastest fused step (05 to 08), smallest first."""
    steps = ("fused/05_tf32x3",) + STEPS
    sizes = sorted({r["m"] for r in recs})
    return [n for n in sizes if (rows := [m for s in steps if (m := row(recs, s, n))])
            and min(rows, key=lambda m: m["us"])["step"] == step]


def small_verdict(recs: list[dict], n: int = 256) -> str:
    """Which fused steps reach 3x over `a @ b @ c` eager at n in the run, the fastest first, in µs and x."""
    rows = sorted((m for s in ("fused/05_tf32x3",) + STEPS if (m := row(recs, s, n))), key=lambda m: -m["x"])
    met = [m for m in rows if m["x"] >= 3]
    if not met:
        return f"at {n} none does either (the best, {rows[0]['step']}, {rows[0]['x']:.2f}x)" if rows else ""
    top = met[0]
    who = "every fused step does" if len(met) == len(rows) else ", ".join(m["step"][6:8] for m in met) + " do"
    return (f"at {n} {who}, step {top['step'][6:8]} the most ({top['us']:.1f} against {top['eager_us']:.1f} µs, "
            f"{top['x']:.2f}x)")


def _kernel_time_ratio(n: int) -> tuple[float, str]:
    ratios, date = kernel_time_ratios(results.experiment("fusion-kernel-time"))
    return ratios.get(n, float("nan")), date or "not recorded"


# ------------------------------------------------------------------------------------------------
# The evidence for each gap (results/experiments/fusion-*, each a run of its own)
# ------------------------------------------------------------------------------------------------
def top_stalls(step: str = "fused/08_tile_flags", top: int = 3) -> list[tuple[str, float]]:
    """The profiler's warp-stall samples of `step` at 512 (Nsight Compute's source page, summed over the
    kernel's instructions), as shares of all stall samples, largest first. Step 05: fusion-counters' raw page
    (stalls per issued instruction, as shares too); step 08: fusion-tma's source page."""
    if step == "fused/05_tf32x3":
        s = results.experiment("fusion-counters")["ncu"]["ncu-05-default-512"]["stalls_per_issue"]
        s = {k: v for k, v in s.items() if k not in ("selected", "not_selected")}
    else:
        head, rows = _source_page(step)
        cols = [i for i, h in enumerate(head) if h.startswith("stall_") and "(" not in h and h not in
                ("stall_selected", "stall_not_selected")]
        s = {head[i][6:]: sum(float(r[i] or 0) for r in rows) for i in cols}
    total = sum(s.values()) or 1.0
    return sorted(((k, v / total) for k, v in s.items()), key=lambda kv: -kv[1])[:top]


STALL_WORDS = {**ch8.STALL_WORDS, "long_sb": "long scoreboard (the result of a global load or of an mbarrier wait)",
               "short_sb": ch8.STALL_WORDS["short_scoreboard"], "math": "math pipe throttle",
               "sleep": "sleeping (a warp parked on an mbarrier's try_wait)", "membar": "memory barrier (a fence)",
               "gmma": "gmma (waiting for a wgmma's result)", "lg": "LG throttle (the global-memory queue full)"}


def _glue_stalls(key: str, step: str) -> None:
    for i, (name, share) in enumerate(top_stalls(step, 2), 1):
        glue(f"{key}_stall{i}", STALL_WORDS.get(name, name.replace("_", " "))); glue(f"{key}_stall{i}_pct", 100 * share)


def glue_evidence06() -> None:
    """Step 05's profile at 512 (fusion-counters, 2026-11-28) where step 06 starts, and step 06's tile timeline
    at 512 (fusion-wgmma, 2026-11-24): ch9_e06_*."""
    c = results.experiment("fusion-counters")
    r = c["ncu"]["ncu-05-default-512"]
    glue("ch9_e05_date", c["date"]); glue("ch9_e05_tensor", r["tensor_pipe_pct"])
    glue("ch9_e05_issue", r["issue_active_pct"]); glue("ch9_e05_alu", r["alu_pipe_pct"])
    _glue_stalls("ch9_e05", "fused/05_tf32x3")
    wg = results.experiment("fusion-wgmma")
    parts = wg["timeline"][GPU]["parts"]["512 n32 k4 s3"]["phase 1"]
    glue("ch9_e06_date", wg["date"])
    glue("ch9_e06_tile", parts["the whole tile"]["us"]); glue("ch9_e06_mma", parts["the wgmmas and the chunk's add"]["us"])
    glue("ch9_e06_wait", parts["waiting for the round's tiles"]["us"] + parts["issuing the next loads"]["us"])
    glue("ch9_e06_split", parts["the split of B"]["us"]); glue("ch9_e06_afrag", parts["the A fragments"]["us"])
    glue("ch9_e06_mma_pct", 100 * parts["the wgmmas and the chunk's add"]["us"] / parts["the whole tile"]["us"])
    named = ("waiting for the round's tiles", "issuing the next loads", "the split of B", "the A fragments",
             "the wgmmas and the chunk's add")
    rest = ("the reduction", "the stores", "the second barrier")
    glue("ch9_e06_named", sum(parts[k]["us"] for k in named))
    glue("ch9_e06_reduce", parts["the reduction"]["us"]); glue("ch9_e06_stores", parts["the stores"]["us"])
    glue("ch9_e06_bar2", parts["the second barrier"]["us"])
    glue("ch9_e06_unattributed", parts["the whole tile"]["us"] - sum(parts[k]["us"] for k in named + rest))
    both = wg["timeline"][GPU]["parts"]["512 n32 k4 s3"].values()  # the split of B and the A fragments, both phases
    glue("ch9_e06_kept", sum(ph["the split of B"]["us"] + ph["the A fragments"]["us"] for ph in both))


def glue_evidence07() -> None:
    """Step 06's parts at 512 (fusion-tma parts, 2026-11-24): what its copies cost; and step 07's timeline."""
    t = results.experiment("fusion-tma")
    p = {k[3:]: statistics.median(v) for k, v in t["parts"][GPU]["us"]["512"].items() if k.startswith("06 ")}
    glue("ch9_e07_date", t["date"]); glue("ch9_e07_06", p["as it is"]); glue("ch9_e07_tiles", log_tiles("fusion-tma", "parts"))
    glue("ch9_e07_copies", p["as it is"] - p["no copies"]); glue("ch9_e07_split", p["as it is"] - p["no split of B"])
    glue("ch9_e07_mmas", p["as it is"] - p["no wgmmas"]); glue("ch9_e07_empty", p["returns at once"])
    marks = t["timeline"][GPU]["marks"]["as it is"]
    glue("ch9_e07_loop1", marks["p1 K loop done"][1] - marks["p1 first data"][1])
    glue("ch9_e07_first", marks["p1 first data"][1] - marks["start"][1])


def glue_evidence08() -> None:
    """Step 08's profile at 512 (fusion-tma's source page, 2026-11-25) and its parts (fusion-tma waits)."""
    _glue_stalls("ch9_e08", "fused/08_tile_flags")
    w = {k: statistics.median(v) for k, v in results.experiment("fusion-tma")["waits"][GPU]["us"]["512"].items()}
    glue("ch9_e08_08", w["08"]); glue("ch9_e08_wgmmas", w["08 only the wgmmas"])
    glue("ch9_e08_noring", w["08 only the wgmmas, no ring"]); glue("ch9_e08_nocopies", w["08 no copies"])
    glue("ch9_e08_barrier", barrier_wait_07())
    ho = {k: statistics.median(v) for k, v in results.experiment("fusion-tma")["handover"][GPU]["us"]["512"].items()}
    glue("ch9_e08_ho_wait", f"{ho['08 no wait'] - ho['08']:+.2f}")
    glue("ch9_e08_ho_wait_graph", f"{ho['08 no wait graph'] - ho['08 graph']:+.2f}")
    glue("ch9_e08_longsb_trywait", 100 * stall_after_trywait("long_sb"))
    w = row_panel_wait()  # the marks behind barrier_and_panel: step 08's (presplit run), step 07's (timeline)
    m7, m8 = w["07"], w["08"]
    glue("ch9_e08_p1done", m8["phase 1 done"][1]); glue("ch9_e08_end", m8["end"][1])
    glue("ch9_e08_after_p1", m8["end"][1] - m8["phase 1 done"][1])
    glue("ch9_e07_end", m7["end"][1]); glue("ch9_e07_after_bar", m7["end"][1] - m7["before barrier"][1])
    glue("ch9_e08_sooner", m7["end"][1] - m8["end"][1])
    glue("ch9_e08_shorter", (m7["end"][1] - m7["before barrier"][1]) - (m8["end"][1] - m8["phase 1 done"][1]))
    glue("ch9_e08_marks_date", w["logs"][1].split("-h200-")[-1][:-4] if "-h200-" in w["logs"][1] else "?")


def _source_page(step: str = "fused/08_tile_flags") -> tuple[list[str], list[list[str]]]:
    """Nsight Compute's source page of step 08 at 512 (fusion-tma, 2026-11-25): its header and SASS rows."""
    path = results.RESULTS / "experiments" / "fusion-tma" / "ncu-src-08-nvidia-h200-2026-11-25.csv.gz"
    with gzip.open(path, "rt") as f:
        lines = [ln for ln in f if ln.startswith('"')]
    rows = list(csv.reader(lines[1:]))
    return rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]


PLACES = REPO / "results" / "experiments" / "gaps-places"  # lab/gaps PART=places (H200, 2026-11-29): source pages
SAMPLES = "Warp Stall Sampling (All Samples)"


def source_rows(path) -> list[dict[str, str]]:
    """The per-SASS-instruction rows of an Nsight Compute source page (`--page source --print-source sass --csv`,
    gzipped; the format lab/gaps/places.py reads), in address order: 'Source', 'Instructions Executed', stall_*."""
    with gzip.open(path, "rt") as f:
        table = list(csv.reader(ln for ln in f if ln.startswith('"')))
    start = next(i for i, r in enumerate(table) if r and r[0] == "Address")
    return [dict(zip(table[start], r)) for r in table[start + 1:] if len(r) == len(table[start])]


def _num(text: str) -> float:
    return float(text.replace(",", "")) if text not in ("", "-") else 0.0


def _opcode(source: str) -> str:
    """'@!P0 LDS.U.128 R4, [R2]' -> 'LDS' (the predicate and the modifiers dropped)."""
    words = re.sub(r"^\s*@!?U?P\w+\s+", "", source).split()
    return words[0].split(".")[0] if words else "?"


def opcode_mix(rows: list[dict[str, str]]) -> collections.Counter:
    """Warp instructions executed per opcode (HGMMA, FADD, LDS, ...), summed over the kernel's SASS."""
    mix: collections.Counter = collections.Counter()
    for r in rows:
        mix[_opcode(r["Source"])] += _num(r["Instructions Executed"])
    return mix


def stall_shares(rows: list[dict[str, str]]) -> dict[str, float]:
    """Each stall reason's share of all warp-state samples (selected included, as the source page counts them)."""
    total = sum(_num(r[SAMPLES]) for r in rows) or 1.0
    cols = [h for h in rows[0] if h.startswith("stall_") and "Not Issued" not in h]
    return {h[6:]: sum(_num(r[h]) for r in rows) / total for h in cols}


def barrier_share_at(rows: list[dict[str, str]], opcode: str) -> float:
    """The share of the `barrier` samples that sit on instructions of `opcode` (e.g. EXIT: warps done, waiting at
    the block's last barrier for the others)."""
    bar = [(_num(r["stall_barrier"]), _opcode(r["Source"])) for r in rows]
    return sum(v for v, op in bar if op == opcode) / (sum(v for v, _ in bar) or 1.0)


def split_per_ktile(block_n: int = 32, tile_k: int = 32) -> dict[str, int]:
    """What one warp of step 06 issues per K tile, from the kernel's text (kernels/fused/06_wgmma_tf32x3.cu): three
    wgmmas per 8-wide k slice; the A fragments (4 x ldmatrix.x4, 4 values each) and its share of B (BLOCK_N / 4
    values: one LDS, two STS each) split, three instructions per value (tf32_round's add and mask, the FADD of
    x - big); the chunk's add into acc (BLOCK_N / 2 FADDs)."""
    a_vals, b_vals, acc = tile_k // 8 * 4, block_n // 4, block_n // 2
    splits = a_vals + b_vals
    return {"HGMMA": 3 * tile_k // 8, "FADD": splits + acc, "LOP3": splits, "VIADD": splits, "STS": 2 * b_vals,
            "LDS": b_vals, "LDSM": tile_k // 8, "splits": splits}


def pred_hgmma_06(n: int, block_n: int = 32, tile_k: int = 32) -> int:
    """Warp-level HGMMAs step 06 executes for both products at n: per 64 x BLOCK_N tile, per K tile, four warps
    issue split_per_ktile's HGMMAs."""
    return 2 * ch8.cdiv(n, 64) * ch8.cdiv(n, block_n) * ch8.cdiv(n, tile_k) * 4 * split_per_ktile(block_n, tile_k)["HGMMA"]


def glue_profile06(recs: list[dict], n: int = 4096, small: int = 512) -> None:
    """Step 06's profile at n and at small (results/<gpu>.ncu.json "fused/06_wgmma_tf32x3[@512]", and the source
    pages src-f06-*.csv.gz, lab/gaps, one launch each): ch9_f06_* (predicted per-K-tile ratios to HGMMA, the
    measured mix, issue and tensor-pipe shares, the stalls, the bounds from the tensor rate and the issue rate)."""
    m = profile.load(GPU)["fused/06_wgmma_tf32x3"]
    rows = source_rows(PLACES / "src-f06-4096.csv.gz")
    mix, all_inst = opcode_mix(rows), sum(opcode_mix(rows).values())
    block_n = fusion.get("fused/06_wgmma_tf32x3").resolve({})["BLOCK_N"]
    pred = split_per_ktile(block_n)
    for op in ("FADD", "STS", "LOP3"):
        glue(f"ch9_f06_pred_{op.lower()}", pred[op] / pred["HGMMA"]); glue(f"ch9_f06_meas_{op.lower()}", mix[op] / mix["HGMMA"])
    per_mma = sum(pred[k] for k in pred if k not in ("splits", "HGMMA")) / pred["HGMMA"]
    glue("ch9_f06_pred_per_mma", per_mma)
    ms, hz = m["gpu__time_duration.sum"] / 1e6, m["sm__cycles_elapsed.avg.per_second"]
    hgmma = pred_hgmma_06(n, block_n)  # warp-level HGMMAs of both products
    glue("ch9_f06_pred_hgmma_m", hgmma / 1e6); glue("ch9_f06_meas_hgmma_m", mix["HGMMA"] / 1e6)
    glue("ch9_f06_pred_issue_ms", hgmma * (1 + per_mma) / (4 * SPEC.sms * SPEC.boost_mhz * 1e6) * 1e3)
    glue("ch9_f06_meas_per_mma", (all_inst - mix["HGMMA"]) / mix["HGMMA"])
    for op in ("HGMMA", "IMAD", "FADD", "LDS", "VIADD", "LOP3", "STS"):
        glue(f"ch9_f06_mix_{op.lower()}", 100 * mix[op] / all_inst)
    glue("ch9_f06_inst_m", m["smsp__inst_executed.sum"] / 1e6)
    glue("ch9_f06_ms", ms); glue("ch9_f06_mhz", hz / 1e6)
    glue("ch9_f06_issue", m["smsp__issue_active.avg.pct_of_peak_sustained_active"])
    glue("ch9_f06_warps", m["sm__warps_active.avg.per_cycle_active"])
    glue("ch9_f06_wps", m["sm__warps_active.avg.per_cycle_active"] / 4)  # per scheduler (four per SM)
    glue("ch9_f06_tensor", m["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"])
    tensor_ms = 3 * fusion.flops(n) / (TF32_TFLOPS * 1e12) * 1e3
    glue("ch9_f06_tensor_ms", tensor_ms); glue("ch9_f06_tensor_pct", 100 * tensor_ms / ms)
    issue_ms = m["smsp__inst_executed.sum"] / (4 * SPEC.sms * hz) * 1e3  # one instruction per scheduler per cycle
    glue("ch9_f06_issue_ms", issue_ms); glue("ch9_f06_issue_pct", 100 * issue_ms / ms)
    st = stall_shares(rows)
    for k in ("wait", "short_sb", "selected", "barrier"):
        glue(f"ch9_f06_s_{k}", 100 * st[k])
    sh = profile.shared_per_request(m)["store"]
    glue("ch9_f06_sts_conf_m", sh["conflicts"] / 1e6); glue("ch9_f06_sts_per", sh["per_request"])
    r06 = row(recs, "fused/06_wgmma_tf32x3", n) or {"us": float("nan"), "eager_us": float("nan"),
                                                     "cublas_tflops": float("nan")}
    glue("ch9_f06_run_ms", r06["us"] / 1e3); glue("ch9_f06_cublas_ms", r06["eager_us"] / 1e3)
    glue("ch9_f06_cublas_pct", 100 * r06["cublas_tflops"] / SPEC.fp32_tflops)  # cuBLAS fp32, TF32 off: the FMA pipe
    glue("ch9_fp32_peak", SPEC.fp32_tflops)
    rows512 = source_rows(PLACES / f"src-f06-{small}.csv.gz")
    st = stall_shares(rows512)
    for k in ("barrier", "wait", "long_sb"):
        glue(f"ch9_f06s_{k}", 100 * st[k])
    glue("ch9_f06s_exit", 100 * barrier_share_at(rows512, "EXIT"))


def stall_after_trywait(stall: str = "long_sb", before: int = 4) -> float:
    """The share of step 08's `stall` samples that sit within `before` instructions after an mbarrier try_wait
    (SASS `SYNCS.PHASECHK`): the branch that tests the wait's predicate stalls on its result, not on a load."""
    head, rows = _source_page()
    col, src = head.index(f"stall_{stall}"), head.index("Source")
    total = sum(float(r[col] or 0) for r in rows) or 1.0
    hits = sum(float(r[col] or 0) for i, r in enumerate(rows)
               if any("SYNCS.PHASECHK" in q[src] for q in rows[max(0, i - before):i]))
    return hits / total


# ------------------------------------------------------------------------------------------------
# Who computes what: twins of the kernels' index arithmetic, and the pictures drawn from them
# ------------------------------------------------------------------------------------------------
def consumer_ktiles(group: int, ktiles: int, split_k: int) -> list[int]:
    """The K tiles warpgroup `group` multiplies (06, 07, 08: `for (int kt = group; kt < ktiles; kt += SPLIT_K)`)."""
    return list(range(group, ktiles, split_k))


def ring_slot(ring_pos: int, stages: int) -> tuple[int, int, int]:
    """Ring position `ring_pos` (K tiles through the ring so far): (its stage, the parity a consumer waits for on
    `full`, the parity the producer waits for on `empty`) (07, 08: `stage = ring_pos % NUM_STAGES`,
    `(ring_pos / NUM_STAGES) & 1`, and that ^ 1)."""
    parity = (ring_pos // stages) & 1
    return ring_pos % stages, parity, parity ^ 1


def reads_owed(n_cols_e: int, block_n: int, width: int, tile_k: int = 32) -> int:
    """What the block that stores a tile of T adds to its counter (08): the tiles of E in its row panel, times
    the K tiles of 32 the tile spans (`cdiv(N, BLOCK_N) * k_tiles_in(cols - col)`)."""
    return ch8.cdiv(n_cols_e, block_n) * ch8.cdiv(min(width, block_n), tile_k)


def _axes(width: float, height: float, size=(9, 2.8)):
    fig, ax = plt.subplots(figsize=size)
    ch8.draw_frame(ax, width, height)
    return fig, ax


def warpgroups(split_k: int = 4, block_n: int = 32, ktiles: int = 16) -> None:
    """Step 06: one block's 64 x BLOCK_N tile, SPLIT_K warpgroups of four warps each taking every SPLIT_K-th K
    tile of 32; per K tile a warpgroup splits its B tile into big and small (K-major, in shared memory) and issues
    three wgmmas per 8-wide slice; group 0 adds the others' sums at the end."""
    colours = ch8.step_colours(split_k)
    fig, ax = _axes(ktiles + 14, split_k + 3.4)
    for kt in range(ktiles):
        g = kt % split_k
        ch8.draw_box(ax, kt, 1.0, 1, 1, colours[g], f"{kt}", fontsize=6)
    ax.text(0, 0.7, f"K tiles of 32 (each coloured by the warpgroup that multiplies it; {ktiles} shown)",
            fontsize=8)
    for g in range(split_k):
        mine = consumer_ktiles(g, ktiles, split_k)
        ch8.draw_box(ax, 0, 2.4 + g, 5.5, 0.9, colours[g], f"group {g}: warps {4 * g}-{4 * g + 3}", fontsize=7)
        ax.text(5.8, 2.85 + g, f"K tiles {', '.join(map(str, mine[:3]))}, ...: split B (big + small),"
                " 3 wgmma per 8 of K", fontsize=7, va="center")
    ch8.draw_box(ax, ktiles + 4, 2.4, 10, split_k - 0.1, "0.92", "", fontsize=7)
    ax.text(ktiles + 9, 2.4 + (split_k - 0.1) / 2, f"64 x {block_n} tile of T (phase 1)\nor E (phase 2):\ngroup 0 adds "
            f"groups 1..{split_k - 1}'s sums\nand stores it", ha="center", va="center", fontsize=7)
    ax.text(0, 2.4 + split_k + 0.5, "each wgmma: A from registers (ldmatrix, mma.m16n8k8's fragment layout, split "
            "in registers); B (big or small) from shared memory through a descriptor", fontsize=7, va="center")
    ax.set_title(f"Step 06: who computes what in one block (SPLIT_K = {split_k}, BLOCK_N = {block_n})", fontsize=9)
    plt.show()


def ring(stages: int = 4, split_k: int = 2, steps: int = 10) -> None:
    """Step 07: the producer warp puts ring step t into stage t mod NUM_STAGES once that stage's `empty` barrier
    has flipped; consumer warpgroup t mod SPLIT_K waits on its `full` barrier for parity (t / NUM_STAGES) & 1."""
    colours = ch8.step_colours(split_k)
    fig, ax = _axes(max(2 * steps + 3, 26), stages + 3.2, size=(9, 3.4))
    for s in range(stages):
        ax.text(-0.2, 2.6 + s + 0.5, f"stage {s}", ha="right", va="center", fontsize=7)
    for t in range(steps):
        stage, full, empty = ring_slot(t, stages)
        g = consumer_ktiles(t % split_k, steps, split_k)[0]
        ch8.draw_box(ax, 2 * t, 2.6 + stage, 1.9, 0.95, colours[g], f"t={t}: full {full}\nempty {empty}", fontsize=6)
    ax.text(0, 0.5, "producer warp (1 lane): copies ring step t by TMA into stage t mod NUM_STAGES,"
            " once `empty` shows its parity", fontsize=7)
    ax.text(0, 1.3, f"warpgroup t mod {split_k} (colour): waits on `full` for its parity, splits,"
            " arrives on `empty`, multiplies", fontsize=7)
    ax.text(0, 2.1, "NUM_STAGES >= SPLIT_K: a waiter is never two fills ahead (a parity names only one)",
            fontsize=7, color="tab:red")
    ax.set_title(f"Step 07: the ring (NUM_STAGES = {stages}, SPLIT_K = {split_k}): stage, and the parity each side "
                 "waits for", fontsize=9)
    plt.show()


def tile_flags(n: int = 512, block_n: int = 32, row_panel: int = 2) -> None:
    """Step 08: phase 1 stores T's tiles and releases a counter per tile (the reads it owes); a tile of E in row
    panel i waits only for the counters of T's row panel i, not for the whole grid."""
    rows, cols = ch8.cdiv(n, 64), ch8.cdiv(n, block_n)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.2))
    for ax, title in ((a1, f"T: {rows} x {cols} tiles, a counter each"), (a2, "E: a tile of phase 2 waits for")):
        ch8.draw_frame(ax, cols, rows)
        ax.set_title(title, fontsize=8)
    owed = reads_owed(n, block_n, n)
    for i in range(rows):
        for j in range(cols):
            hot = i == row_panel
            ch8.draw_box(a1, j, i, 1, 1, "tab:orange" if hot else "0.9", "", lw=0.3)
            ch8.draw_box(a2, j, i, 1, 1, "tab:blue" if (hot and j == 3) else "0.97", "", lw=0.3)
    a1.text(cols / 2, row_panel + 1.8, f"row panel {row_panel}: {cols} counters, each released with "
            f"+{owed} reads", ha="center", va="center", fontsize=7)
    a2.text(cols / 2, row_panel + 1.8, f"tile ({row_panel}, 3) needs T's row panel {row_panel} only: "
            f"{cols} of {rows * cols} tiles", ha="center", va="center", fontsize=7)
    fig.suptitle(f"Step 08 at N = {n}, BLOCK_N = {block_n}: a counter per tile of T in place of the grid barrier",
                 fontsize=9)
    plt.tight_layout(); plt.show()


# Step 07's phases at 512, from its recorded timeline (fusion-tma, `steps.py timeline`: marks written by thread 0
# of each block, us from the first block's start; min, median and max over the 128 blocks, each a median of 40
# launches). Each phase runs from one mark to the next.
PHASES_07 = (("start", "p1 first data", "first data (set-up, first copy)"),
             ("p1 first data", "p1 K loop done", "phase 1: K loop"),
             ("p1 K loop done", "before barrier", "phase 1: store T"),
             ("before barrier", "after barrier", "grid barrier wait"),
             ("after barrier", "p2 first data", "phase 2: first data of T"),
             ("p2 first data", "p2 K loop done", "phase 2: K loop"),
             ("p2 K loop done", "end", "phase 2: store E"))


def timeline_07(variant: str = "as it is") -> tuple[list[tuple[str, float, float]], dict, str]:
    """Step 07 at 512 from its recorded marks: (phase, start, end) of the median block, us; the marks themselves
    ({name: [min, median, max] over blocks}); and the run's log."""
    tl = results.experiment("fusion-tma")["timeline"][GPU]
    marks = tl["marks"][variant]
    return [(label, marks[a][1], marks[b][1]) for a, b, label in PHASES_07], marks, tl["log"]


_PHASE_COLOURS = {"first data": "0.75", "K loop": "tab:blue", "store": "tab:green", "barrier": "tab:red"}


def _phase_colour(label: str) -> str:
    return next((c for k, c in _PHASE_COLOURS.items() if k in label), "0.75")


def phases_07() -> None:
    """Step 07 at 512 over time: the median block's phases (first data, K loop, store, the grid barrier's wait,
    phase 2's first data, K loop, store) as one bar, and below it how far apart the 128 blocks reach each mark
    (min to max over blocks): what a block does, and where it only waits."""
    segs, marks, log = timeline_07()
    fig, ax = plt.subplots(figsize=(9, 2.9))
    for label, t0, t1 in segs:
        ax.broken_barh([(t0, t1 - t0)], (1.6, 0.8), facecolors=_phase_colour(label), edgecolor="white")
        ax.text((t0 + t1) / 2, 2.45 + (0.35 if "first data" in label or "store" in label else 0), label,
                ha="center", va="bottom", fontsize=6.5, rotation=0)
        ax.text((t0 + t1) / 2, 2.0, f"{t1 - t0:.1f}", ha="center", va="center", fontsize=7,
                color="white" if "first data" not in label else "black")
    for name, (lo, med, hi) in marks.items():
        ax.plot([lo, hi], [0.8, 0.8], color="0.3", lw=3, solid_capstyle="butt")
        ax.plot([med], [0.8], "k|", ms=8)
    ax.text(0, 0.25, "each mark's spread over the 128 blocks (min to max; tick: the median block)", fontsize=7)
    ax.set_yticks([0.8, 2.0], ["all blocks", "median block"], fontsize=7)
    ax.set_ylim(0, 3.3); ax.set_xlim(0, max(m[2] for m in marks.values()) * 1.02)
    ax.set_xlabel("µs from the first block's start (thread 0's clock)", fontsize=8)
    ax.set_title(f"Step 07 at 512, one block's phases over time ({GPU}, {log}; bars in µs)", fontsize=9)
    plt.tight_layout(); plt.show()


def row_panel_wait() -> dict:
    """What phase 2 waits for, from the records: step 07's grid barrier at 512 (timeline, min/median/max over
    blocks of its arrival and departure) and step 08's phases (presplit run's marks of step 08) with what leaving
    out its wait for T changed (hand-over run, direct and from a graph), us."""
    t = results.experiment("fusion-tma")
    m7 = t["timeline"][GPU]["marks"]["as it is"]
    m8 = t["presplit"][GPU]["marks"]["08"]
    ho = {k: statistics.median(v) for k, v in t["handover"][GPU]["us"]["512"].items()}
    return {"07": {k: m7[k] for k in ("start", "before barrier", "after barrier", "p2 first data", "end")},
            "08": m8, "no_wait": ho["08 no wait"] - ho["08"], "no_wait_graph": ho["08 no wait graph"] - ho["08 graph"],
            "logs": (t["timeline"][GPU]["log"], t["presplit"][GPU]["log"], t["handover"][GPU]["log"])}


def barrier_and_panel() -> None:
    """Step 07's grid barrier beside step 08's wait on its own row panel, at 512: a row per step (median block),
    phase 1, the wait before phase 2's first data, phase 2; step 07 waits for all 128 blocks, step 08 for the 16
    blocks of its row panel of T. The two rows come from two runs (each step's marks were taken in its own)."""
    w = row_panel_wait()
    m7, m8 = w["07"], w["08"]
    fig, ax = plt.subplots(figsize=(9, 2.6))
    p1, wait, end = m7["before barrier"][1], m7["p2 first data"][1], m7["end"][1]
    ax.broken_barh([(0, p1)], (2, 0.7), facecolors="tab:blue")
    ax.broken_barh([(p1, wait - p1)], (2, 0.7), facecolors="tab:red")
    ax.broken_barh([(wait, end - wait)], (2, 0.7), facecolors="tab:cyan")
    ax.text(p1 + (wait - p1) / 2, 2.85, f"waits for all 128 blocks, then fetches T: {wait - p1:.1f} µs",
            ha="center", fontsize=7, color="tab:red")
    q1, q_end = m8["phase 1 done"][1], m8["end"][1]
    ax.broken_barh([(0, q1)], (0.6, 0.7), facecolors="tab:blue")
    ax.broken_barh([(q1, q_end - q1)], (0.6, 0.7), facecolors="tab:cyan")
    ax.plot([q1, q1], [0.5, 1.4], color="tab:orange", lw=2)
    ax.text(q1, 0.15, f"waits only for its row panel's 16 counters; leaving the wait out: {w['no_wait']:+.2f} µs "
            f"direct, {w['no_wait_graph']:+.2f} µs from a graph", ha="center", fontsize=7, color="tab:orange")
    for y, what in ((2.35, "phase 1"), (0.95, "phase 1")):
        ax.text(0.3, y, what, va="center", fontsize=7, color="white")
    ax.text(end - 0.3, 2.35, "phase 2", va="center", ha="right", fontsize=7)
    ax.text(q_end - 0.3, 0.95, "phase 2", va="center", ha="right", fontsize=7)
    ax.set_yticks([2.35, 0.95], [f"step 07 ({w['logs'][0][:-4]})", f"step 08 ({w['logs'][1][:-4]})"], fontsize=7)
    ax.set_ylim(-0.2, 3.3); ax.set_xlim(0, max(end, q_end) * 1.02)
    ax.set_xlabel("µs from the first block's start, median block (each row from its own run)", fontsize=8)
    ax.set_title("At 512: step 07's grid barrier against step 08's wait on its own row panel of T", fontsize=9)
    plt.tight_layout(); plt.show()


class Folded:
    """A listing folded under a one-line summary (HTML <details>): the page keeps its height, the reader opens it."""

    def __init__(self, inner, summary: str):
        self.inner, self.summary = inner, summary

    def _repr_html_(self) -> str:
        return f"<details><summary>{self.summary}</summary>{self.inner._repr_html_()}</details>"

    def __repr__(self) -> str:
        return f"{self.summary}\n{self.inner!r}"


def listing(name: str, against: str | None = None) -> Folded:
    """Step `name`'s whole kernel (or its diff against `against`), folded: chapter 9's steps are 300-700 lines."""
    inner = show.diff(name, against) if against else show.source(name)
    what = f"the diff of {name} against {against}" if against else f"the whole of {name}"
    return Folded(inner, f"{what} ({len(inner.html_lines)} lines): click to open")


# ------------------------------------------------------------------------------------------------
# The lab note's verdict at 512 (book/lab_08_fusion_at_512.ipynb): like against like, from the one run
# ------------------------------------------------------------------------------------------------
def glue_launch_verdict(recs: list[dict], n: int = 512, prefix: str = "ch8_gr") -> None:
    """The fastest fused step at n launched directly against `a @ b @ c` eager, and the fastest replayed from a
    CUDA graph against the two GEMMs replayed from a graph, both from the one run (issue 52: never a graph-replayed
    step against the eager baseline). Glues {prefix}_lane (the sentence) and {prefix}_claim (the verdict on 3x)."""
    fused = [r for r in recs if r["m"] == n and r["step"].startswith("fused/")]
    eager, graph = ch8.fastest_record(recs, ch8.EAGER, n), ch8.fastest_record(recs, ch8.GRAPHS, n)
    top = min(fused, key=lambda r: r["median_s"])
    top_g = min((r for r in fused if "graph_median_s" in r), key=lambda r: r["graph_median_s"])
    xe, xg = eager["median_s"] / top["median_s"], graph["median_s"] / top_g["graph_median_s"]
    glue(f"{prefix}_lane", f"In {run_label(recs)}, at {n} the fastest fused call launched directly is {top['step']}: "
         f"{top['median_s'] * 1e6:.1f} µs, {xe:.2f}x `a @ b @ c` eager ({eager['median_s'] * 1e6:.1f} µs); replayed "
         f"from a CUDA graph, the fastest is {top_g['step']}: {top_g['graph_median_s'] * 1e6:.1f} µs, {xg:.2f}x the "
         f"two GEMMs replayed from a graph ({graph['median_s'] * 1e6:.1f} µs)")
    glue(f"{prefix}_claim", "The seed's 3x at 512 is " + (
        "met both ways" if min(xe, xg) >= 3 else "not met either way, even with the graph launch" if max(xe, xg) < 3
        else "met " + ("eagerly launched" if xe >= 3 else "from graphs") + " only, so we do not claim it"))


def launch_paths(paths: dict, prefix: str = "ch8_gr") -> None:
    """fusion-kernel-time's paths run (paths.py): host µs per call and event time, direct and from a CUDA graph,
    printed as a table; glues the host cost of each launch and what the graph saved (step 07, the empty kernel)."""
    med = {k: statistics.median(v) for k, v in paths["us"].items()}
    print(f"{GPU}, {paths['log']}: host us per call; event time, median over three rounds of 300 (us)")
    for name, host in paths["host_us"].items():
        print(f"{name:14s} host {host:5.2f}   event {med[name]:6.1f}")
    for name in ("torch a@b@c", "torch graph a@b@c"):
        print(f"{name:18s}          event {med[name]:6.1f}")
    glue(f"{prefix}_host_direct", f"{paths['host_us']['07 direct']:.1f}")
    glue(f"{prefix}_host_graph", f"{paths['host_us']['07 graph']:.1f}")
    glue(f"{prefix}_saved", f"{med['07 direct'] - med['07 graph']:.1f}")
    glue(f"{prefix}_empty_saved", f"{med['empty direct'] - med['empty graph']:.1f}")


def perktile_table(pk: dict | None, key: str = "ch8_fl_perk") -> None:
    """fusion-tma's perktile run (step 08's first try, a counter per K tile, against step 07 in the same run):
    median event time per size and tiling; glues the range of the slow-down."""
    if not pk:
        glue(key, "(the run of `steps.py perktile` appears here once it is recorded)")
        return
    med = {int(n): {k: statistics.median(v) for k, v in calls.items()} for n, calls in pk["us"].items()}
    print(f"{GPU}, {pk['log']}: median event time over three rounds (us), every kernel checked first")
    perk = []
    for n in sorted(med):
        for t in sorted(k[3:] for k in med[n] if k.startswith("07 ") and not k.endswith(" graph")):
            p7, p8 = med[n]["07 " + t], med[n]["08 " + t]
            perk.append(100 * (p8 / p7 - 1))
            print(f"N={n:5d} {t:12s} 07 {p7:7.1f}  first try {p8:7.1f} ({perk[-1]:+.0f}%)")
    glue(key, f"{min(perk):.0f}% to {max(perk):.0f}%")
