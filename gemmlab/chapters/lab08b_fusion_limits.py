"""Lab note 8b, "What bounds step 08 at 512": its tables, figure and glued figures, in one module.

Every figure comes from recorded runs: the experiments' (results/experiments/fusion-tma/results.json), the
seed's own measure (results/experiments/fusion-kernel-time/results.json) and chapter 9's one H200 run
(results/nvidia-h200.fusion.json). Each function prints one experiment's table (what the notebook shows) and
glues the figures its prose quotes; `glue_all` glues every figure without printing, so the prose can come in
reading order. A speed-up or a difference is only ever taken within one run.
"""
from __future__ import annotations

import contextlib
import functools
import io
import re

import matplotlib.pyplot as plt
import numpy as np

from ..measure import results
from . import ch09_fusion_hopper as ch9
from .glue import glue

GPU = "NVIDIA H200"
BASELINE = "torch a@b@c"  # chapter 9's baseline: a @ b @ c eager through PyTorch (the seed's own call)

__all__ = ["GPU", "BASELINE", "runs", "lane_records", "limits_need", "glue_all", "lane", "limits", "operand",
           "handover", "fp16", "ordered", "waits", "presplit", "readsplit", "overlap", "profiler", "changes",
           "changes_figure"]


def medians(us: dict) -> dict:
    """The median of each call's recorded times (event times, µs)."""
    return {k: float(np.median(v)) for k, v in us.items()}


def direct_graph_table(run: dict, m: dict) -> None:
    """One run's medians at 512, each call direct and (where timed) replayed from a CUDA graph."""
    print(f"NVIDIA H200, {run['log']}: median event time over three rounds at 512, us (direct / from a CUDA graph)")
    for name in (k for k in m if not k.endswith(" graph")):
        graph = f"{m[name + ' graph']:7.2f}" if name + " graph" in m else "      -"
        print(f"  {name:28s} {m[name]:7.2f} / {graph}")


@functools.lru_cache(maxsize=None)
def runs() -> dict:
    """The fusion-tma experiment's recorded runs (results/experiments/fusion-tma/results.json)."""
    return results.experiment("fusion-tma")


def lane_records() -> tuple[list[dict], dict | None, dict | None]:
    """Chapter 9's one H200 run, its `a @ b @ c` (torch, eager) at 512 and step 08 at 512 (None if missing)."""
    try:
        recs = ch9.one_run()
    except LookupError:
        return [], None, None
    return (recs, results.lookup_fused(recs, BASELINE, 512),
            results.lookup_fused(recs, "fused/08_tile_flags", 512))


def _k_loops() -> list[float]:
    """Step 07's two K loops at 512 (first data to the loop's end, median block), from its timeline in the lab
    note on chapter 8."""
    marks = runs()["timeline"][GPU]["marks"]["as it is"]
    return [marks[f"p{p} K loop done"][1] - marks[f"p{p} first data"][1] for p in (1, 2)]


def limits_need() -> tuple[float, float, str] | None:
    """What the seed's 3x asks of step 08 within the limits run at 512: (a third of that run's `a @ b @ c` less
    that run's step 08, µs, negative = a saving; that run's step 08, µs; the run's log), or None."""
    lim = runs().get("limits", {}).get(GPU)
    if not lim:
        return None
    calls = lim["us"]["512"]
    step08 = float(np.median(calls["08"]))
    return float(np.median(calls[BASELINE])) / 3 - step08, step08, lim["log"]


def glue_all() -> None:
    """Glue every figure the note's prose quotes, printing nothing (the tables come later, each in its section)."""
    with contextlib.redirect_stdout(io.StringIO()):
        for f in (lane, limits, operand, handover, fp16, ordered, waits, presplit, readsplit, overlap, profiler):
            f()


def lane() -> None:
    """Chapter 9's run at 512: `a @ b @ c` (torch, eager) and step 08, launched directly and from a graph."""
    _, base, step08 = lane_records()
    if base and step08:
        lane_base = base["median_s"] * 1e6
        print(f"the lane at 512 ({step08['gpu']}, {step08['date']}): {base['step']} {lane_base:.1f} us; "
              f"step 08 {step08['median_s'] * 1e6:.1f} us direct, {step08['graph_median_s'] * 1e6:.1f} us from a graph")
        glue("ch8b_base", f"{lane_base:.1f}")
        glue("ch8b_08", f"{step08['median_s'] * 1e6:.1f}")
        glue("ch8b_08_graph", f"{step08['graph_median_s'] * 1e6:.1f}")
        glue("ch8b_ratio", f"{base['median_s'] / step08['median_s']:.2f}")
        glue("ch8b_where", f"{step08['gpu']} (recorded, {step08['date']})")
        recs = lane_records()[0]
        fastest = ch9.ch8.fastest_record(recs, ch9.ch8.EAGER, 512)
        glue("ch8b_base_why", "the seed's own call, and at 512 the faster of PyTorch's and CuPy's in that run, "
             "which chapter 9's speed-ups take" if fastest["step"] == BASELINE else
             f"the seed's own call; CuPy's was faster in that run ({fastest['median_s'] * 1e6:.1f} µs)")
    else:
        print("No recorded fusion lane yet: run python -m gemmlab fusion-lane on a GPU")
        for key in ("base", "08", "08_graph", "ratio", "where", "base_why"):
            glue(f"ch8b_{key}", "(the lane's records appear here once it has run)")


def limits() -> None:
    """`limits.py calls` and `limits.py rate`: step 08 with one thing changed at a time, multicast, the tensor pipe's rate; and the sum for 3x within that run."""
    tm = runs()
    _, base, _ = lane_records()
    lane_base = base["median_s"] * 1e6 if base else float("nan")
    k_loops = _k_loops()
    lim, rt = tm.get("limits", {}).get("NVIDIA H200"), tm.get("rate", {}).get("NVIDIA H200")
    if lim and rt:
        lm = {int(n): medians(calls) for n, calls in lim["us"].items()}
        print(f"NVIDIA H200, {lim['log']}: median event time over three rounds, us (change against step 08)")
        for n in sorted(lm):
            for name, us in lm[n].items():
                print(f"{n:5d} {name:22s} {us:7.1f}" + ("" if name in ("08", "torch a@b@c") else f"  {us - lm[n]['08']:+6.1f}"))
        print(f"\n{rt['log']}: step 08's wgmmas alone (12 per commit and wait), every SM")
        for n, by_groups in rt["n"].items():
            for g, r in by_groups.items():
                print(f"  N={n:3s} {g} group(s) per SM: {r['fma_per_clock']:6.1f} FMA per clock per SM, {r['tflops']:5.1f} TFLOP/s")
        m512 = lm[512]
        blocks, per_block = 128, 4 * (64 * 512 + 512 * 32)            # 64 x 32 tiles at 512: A panel + B panel, bytes
        kloop = float(np.mean(k_loops))  # step 07's two K loops at 512, from its timeline in the lab note on chapter 8 (same tile shape)
        glue("ch8_lim_bytes", f"{blocks * per_block / 1e6:.1f}")
        glue("ch8_lim_tbs", f"{blocks * per_block / (kloop * 1e-6) / 1e12:.0f}")
        glue("ch8_lim_copies", f"{m512['08'] - m512['08 no copies']:.1f}")
        glue("ch8_lim_copies_big", f"{100 * (1 - lm[2048]['08 no copies'] / lm[2048]['08']):.1f}")
        for key, name in (("split", "no split"), ("afrag", "no A fragments"), ("only", "only the wgmmas")):
            glue(f"ch8_lim_{key}", f"{m512['08'] - m512['08 ' + name]:.1f}")
        glue("ch8_lim_only_body", f"{m512['08 only the wgmmas'] - m512['08 returns at once']:.1f}")
        glue("ch8_lim_fences", f"{m512['08'] - m512['08 no map fences']:.1f}")
        glue("ch8_lim_prefetch", f"{m512['08'] - m512['08 maps prefetched']:.1f}")
        mc = {(n, c, s): 100 * (lm[n][f"multicast {c} {s}"] / lm[n]["08"] - 1)
              for n in lm for c in (2, 4) for s in ("cluster", "cta") if f"multicast {c} {s}" in lm[n]}
        fit4 = lim["clusters"]["4"]  # clusters of 4 that fit at once (cuOccupancyMaxActiveClusters)
        glue("ch8_lim_fit4", f"{fit4}")
        glue("ch8_lim_fit4_blocks", f"{4 * fit4}")
        glue("ch8_lim_tiles", f"{blocks}")
        glue("ch8_lim_fit4_wait", f"{blocks - 4 * fit4}")
        glue("ch8_lim_mc512", f"{mc[(512, 2, 'cluster')]:+.0f}% with clusters of 2 and {mc[(512, 4, 'cluster')]:+.0f}% with clusters of 4")
        glue("ch8_lim_mc2048", f"{mc[(2048, 2, 'cluster')]:+.0f}%")
        glue("ch8_lim_mccta", f"{mc[(512, 2, 'cta')]:+.0f}% and {mc[(512, 4, 'cta')]:+.0f}% at 512, {mc[(2048, 2, 'cta')]:+.1f}% at 2048")
        r32 = rt["n"]["32"]["3"]
        wg_us = 16 * 12 * 64 * 32 * 8 / (r32["tflops"] * 1e12 / 2 / 132) * 1e6   # a phase's wgmmas on one SM
        glue("ch8_lim_rate32", f"{r32['fma_per_clock']:.0f}")
        glue("ch8_lim_rate64", f"{rt['n']['64']['3']['fma_per_clock']:.0f}")
        glue("ch8_lim_ktile_clocks", f"{12 * 64 * 32 * 8 / r32['fma_per_clock']:.0f}")  # a K tile's 12 m64n32k8 wgmmas, clocks
        glue("ch8_lim_wg", f"{wg_us:.1f}")
        glue("ch8_lim_kloop", f"{kloop:.1f}")
        glue("ch8_lim_kshare", f"{100 * wg_us / kloop:.0f}")
        # 3x of a @ b @ c timed in this same run (one truth per number: the need, the call and the floor from one run)
        need, room = m512["torch a@b@c"] / 3, m512["torch a@b@c"] / 3 - m512["08 returns at once"]
        body = m512["08"] - m512["08 returns at once"]
        glue("ch8_lim_lane", f"{lane_base:.1f}")
        glue("ch8_lim_base", f"{m512['torch a@b@c']:.1f}")
        glue("ch8_lim_ratio", f"{m512['torch a@b@c'] / m512['08']:.2f}")
        glue("ch8_lim_need", f"{need:.1f}")
        glue("ch8_lim_call", f"{m512['08']:.1f}")
        glue("ch8_lim_floor", f"{m512['08 returns at once']:.1f}")
        glue("ch8_lim_room", f"{room:.1f}")
        glue("ch8_lim_body", f"{body:.1f}")
        only_body = m512["08 only the wgmmas"] - m512["08 returns at once"]
        glue("ch8_lim_verdict",
             "The kernel's work fits in that room in this run" if body <= room else
             "The kernel's work does not fit: closing the gap needs a K tile with less work around its `wgmma`s, not "
             "fewer bytes" if only_body <= room else
             f"The kernel's work does not fit, and would not without the copies, the split and the A fragments either "
             f"({only_body:.1f} µs, the last variant above): the `wgmma`s with the barriers and waits around them, the "
             f"first tiles, the wait for T and the stores take more than the room by themselves. Closing the gap needs "
             f"shorter waits as well as less work around the `wgmma`s, and fewer bytes do neither")
    else:
        for key in ("bytes", "tbs", "copies", "copies_big", "split", "afrag", "only", "only_body", "fences", "prefetch", "mc512", "mc2048", "mccta", "rate32", "rate64", "ktile_clocks",
                    "wg", "kloop", "kshare", "fit4", "fit4_blocks", "tiles", "fit4_wait", "lane", "base", "ratio", "need", "call", "floor", "room", "body", "verdict"):
            glue(f"ch8_lim_{key}", "(the runs of `limits.py` appear here once they are recorded)")


def operand() -> None:
    """`operand.py`: the right operand from registers, and two K tiles in flight, against step 08."""
    tm = runs()
    op = tm.get("operand", {}).get("NVIDIA H200")
    if op:
        om = {int(n): medians(calls) for n, calls in op["us"].items()}
        print(f"NVIDIA H200, {op['log']}: median event time over three rounds, us (change against step 08)")
        pct = {}
        for n in sorted(om):
            base08 = next(v for k, v in om[n].items() if k.startswith("08 ") and not k.endswith("graph"))
            for name, us in om[n].items():
                change = "" if name == "torch a@b@c" or (name.startswith("08 ") and not name.endswith("graph")) else \
                    f"  {100 * (us / base08 - 1):+6.1f}%"
                print(f"{n:5d} {name:40s} {us:7.1f}{change}")
                if not name.endswith("graph"):
                    pct[(n, re.sub(r"( [mnks]\d+)+$", "", name))] = 100 * (us / base08 - 1)
            pct[(n, "saved")] = base08 - next(v for k, v in om[n].items() if k.startswith("register operand no loads"))
        errors = dict(re.findall(r"^config n=512 (\S+).*error ([\d.e+-]+)$", (results.EXPERIMENTS / "fusion-tma" / op["log"]).read_text(), re.M))
        sizes = sorted(om)
        each = lambda key: ", ".join(f"{pct[(n, key)]:+.0f}% at {n}" for n in sizes)  # noqa: E731
        glue("ch8_op_reg", each("register operand"))
        glue("ch8_op_noloads", f"{pct[(512, 'saved')]:.1f}")
        glue("ch8_op_noloads_pct", each("register operand no loads"))
        glue("ch8_op_inflight", each("inflight"))
        glue("ch8_op_err08", errors["08"])
        glue("ch8_op_errin", errors["inflight"])
    else:
        for key in ("ch8_op_reg", "ch8_op_noloads", "ch8_op_noloads_pct", "ch8_op_inflight", "ch8_op_err08", "ch8_op_errin"):
            glue(key, "(the runs of `operand.py` appear here once they are recorded)")


def handover() -> None:
    """`limits.py handover`: the wait for T, each phase alone, the split, and a warp group that splits."""
    tm = runs()
    ho = tm.get("handover", {}).get("NVIDIA H200")
    if ho:
        hm = medians(ho["us"]["512"])
        direct_graph_table(ho, hm)
        diff = lambda a, b, g="": hm[a + g] - hm[b + g]  # noqa: E731
        split_tile = tm["ring"]["NVIDIA H200"]["parts"]["as it is"]["split of B"]  # us a K tile, step 07's ring
        glue("ch8_ho_wait", f"{diff('08 no wait', '08'):+.2f}")
        glue("ch8_ho_wait_graph", f"{diff('08 no wait', '08', ' graph'):+.2f}")
        glue("ch8_ho_body", f"{diff('08', '08 returns at once'):.1f}")
        glue("ch8_ho_p1", f"{diff('08 phase 1 alone', '08 returns at once'):.1f}")
        glue("ch8_ho_p2", f"{diff('08 phase 2 alone', '08 returns at once'):.1f}")
        glue("ch8_ho_nosplit", f"{diff('08', '08 no split'):.1f}")
        glue("ch8_ho_nosplit_graph", f"{diff('08', '08 no split', ' graph'):.1f}")
        glue("ch8_ho_nosplit_p1", f"{diff('08', '08 no split in phase 1'):.1f}")
        glue("ch8_ho_nosplit_p2", f"{diff('08', '08 no split in phase 2'):.1f}")
        glue("ch8_ho_nosplit_p2_graph", f"{diff('08', '08 no split in phase 2', ' graph'):.1f}")
        glue("ch8_ho_k3", f"{diff('splitter k3', '08'):+.1f}")
        glue("ch8_ho_k2", f"{diff('splitter k2', '08'):+.1f}")
        glue("ch8_ho_nowork", f"{diff('splitter k3 no split', '08'):+.1f}")
        glue("ch8_ho_split_tile", f"{split_tile:.2f}")
        glue("ch8_ho_split_phase", f"{512 // 32 * split_tile:.1f}")
    else:
        for key in ("ch8_ho_wait", "ch8_ho_wait_graph", "ch8_ho_body", "ch8_ho_p1", "ch8_ho_p2", "ch8_ho_nosplit",
                    "ch8_ho_nosplit_graph", "ch8_ho_nosplit_p1", "ch8_ho_nosplit_p2",
                    "ch8_ho_nosplit_p2_graph", "ch8_ho_k3", "ch8_ho_k2", "ch8_ho_nowork", "ch8_ho_split_tile", "ch8_ho_split_phase"):
            glue(key, "(the runs of `limits.py handover` appear here once they are recorded)")


def fp16() -> None:
    """`limits.py fp16`: step 08's wgmmas in fp16 (timed only), and the baseline's spread between hosts."""
    tm = runs()
    fp = tm.get("fp16", {}).get("NVIDIA H200")
    if fp:
        fm = medians(fp["us"]["512"])
        direct_graph_table(fp, fm)
        for kind, rates in (("TF32", fp["n"]["32"]), ("fp16", fp["fp16"]["32"])):
            print(f"  {kind} wgmmas alone, N = 32: " + ", ".join(f"{r['fma_per_clock']:.0f} FMA/clk/SM with {g} group(s)"
                                                              for g, r in rates.items()))
        fp16_minus_tf32 = lambda v, g="": fm[f"08 {v} fp16{g}"] - fm[(f"08 {v}" if v != "as it is" else "08") + g]  # noqa: E731
        glue("ch8_fp_rate", f"{fp['fp16']['32']['3']['fma_per_clock'] / fp['n']['32']['3']['fma_per_clock']:.2f}")
        for key, v in (("asis", "as it is"), ("nosplit", "no split"), ("only", "only the wgmmas")):
            glue(f"ch8_fp_{key}", f"{fp16_minus_tf32(v):+.1f}")
            glue(f"ch8_fp_{key}_graph", f"{fp16_minus_tf32(v, ' graph'):+.1f}")
        glue("ch8_fp_empty", f"{fm['empty kernel']:.1f}")
        glue("ch8_fp_returns", f"{fm['08 returns at once']:.1f}")
        ho_m = medians(tm["handover"]["NVIDIA H200"]["us"]["512"])
        for key, m in (("", fm), ("_ho", ho_m)):
            glue(f"ch8_fp_torch{key}", f"{m['torch a@b@c']:.1f}")
            glue(f"ch8_fp_08{key}", f"{m['08']:.1f}")
            glue(f"ch8_fp_speedup{key}", f"{m['torch a@b@c'] / m['08']:.2f}")
    else:
        for key in ("rate", "asis", "asis_graph", "nosplit", "nosplit_graph", "only", "only_graph", "empty", "returns",
                    "torch", "08", "speedup", "torch_ho", "08_ho", "speedup_ho"):
            glue(f"ch8_fp_{key}", "(the runs of `limits.py fp16` appear here once they are recorded)")


def ordered() -> None:
    """`limits.py ordered`: the consumer groups taking turns at the tensor pipe, and the ring's marks."""
    tm = runs()
    od = tm.get("ordered", {}).get("NVIDIA H200")
    if od:
        om = {n: medians(calls) for n, calls in od["us"].items()}
        print(f"NVIDIA H200, {od['log']}: per K tile of a group at 512 (08's tiles, median over blocks and launches), us")
        for variant, parts in od["parts"].items():
            lag, period = od["stagger"][variant]
            print(f"  {variant:8s} " + ", ".join(f"{k} {v:.3f}" for k, v in parts.items()))
            print(f"  {'':8s} consecutive groups' splits {lag:.3f} apart; one K tile to the next {period:.3f}")
        print("median event time over three rounds, us (direct / from a CUDA graph)")
        for n, m in om.items():
            for tag in (k[3:] for k in m if k.startswith("08 ") and not k.endswith(" graph")):
                print(f"  N = {n:4s} {tag:12s} 08 {m['08 ' + tag]:7.2f} / {m['08 ' + tag + ' graph']:7.2f}   "
                      f"taking turns {m['ordered ' + tag]:7.2f} / {m['ordered ' + tag + ' graph']:7.2f}")
        turn = lambda n, tag, g="": om[n]["ordered " + tag + g] - om[n]["08 " + tag + g]  # noqa: E731
        (lag, period), (_, period_o) = od["stagger"]["08"], od["stagger"]["ordered"]
        p08, pord = od["parts"]["08"], od["parts"]["ordered"]
        glue("ch8_ord_lag", f"{lag:.3f}")
        glue("ch8_ord_period", f"{period:.3f}")
        glue("ch8_ord_period_o", f"{period_o:.3f}")
        glue("ch8_ord_split", f"{p08['split of B']:.3f}")
        glue("ch8_ord_split_o", f"{pord['split of B']:.3f}")
        glue("ch8_ord_issue", f"{p08['wgmmas issued']:.3f}")
        glue("ch8_ord_issue_o", f"{pord['wgmmas issued']:.3f}")
        glue("ch8_ord_parts", f"{p08['tile, in all']:.3f}")
        glue("ch8_ord_gap", f"{period - p08['tile, in all']:.2f}")
        for key, (n, tag) in (("k3", ("512", "n32 k3 s12")), ("k2", ("512", "n32 k2 s12")), ("k4", ("512", "n32 k4 s12")),
                              ("1024", ("1024", "n64 k2 s8")), ("2048", ("2048", "n64 k2 s8"))):
            glue(f"ch8_ord_{key}", f"{turn(n, tag):+.1f}")
            glue(f"ch8_ord_{key}_graph", f"{turn(n, tag, ' graph'):+.1f}")
        glue("ch8_ord_2048_pct", f"{100 * turn('2048', 'n64 k2 s8') / om['2048']['08 n64 k2 s8']:+.1f}")
    else:
        for key in ("lag", "period", "period_o", "split", "split_o", "issue", "issue_o", "parts", "gap", "k3",
                    "k3_graph", "k2", "k2_graph", "k4", "k4_graph", "1024", "1024_graph", "2048", "2048_graph", "2048_pct"):
            glue(f"ch8_ord_{key}", "(the runs of `limits.py ordered` appear here once they are recorded)")


def waits() -> None:
    """`limits.py waits`, `producers`, `early` and `wide`: where the gap in each K tile goes."""
    tm = runs()
    wt = tm.get("waits", {}).get("NVIDIA H200")
    if wt:
        wm = medians(wt["us"]["512"])
        w = wt["waits"]
        shown = ("a group's K tile, one to the next", "wgmmas done to the loop's top", "wait for a full stage",
                 "copies issued before the consumer came", "producer, one K tile to the next")
        print(f"NVIDIA H200, {wt['log']}: at 512, 08's tiles; us, phase 1 / phase 2 medians over blocks, launches, K tiles")
        for variant, figures in w.items():
            print(f"  {variant}")
            for what in shown:
                p1, _, p2, _ = figures[what]
                print(f"    {what:40s} {p1:7.3f} / {p2:7.3f}")
        print("median event time over three rounds, us (direct / from a CUDA graph)")
        for name in (k for k in wm if not k.endswith(" graph")):
            print(f"  {name:34s} {wm[name]:7.2f}" + (f" / {wm[name + ' graph']:7.2f}" if name + " graph" in wm else ""))
        f08, nc = w["08"], w["no copies"]
        top, wait = f08["wgmmas done to the loop's top"], f08["wait for a full stage"]
        ahead, landed = f08["copies issued before the consumer came"], f08["copies issued to the consumer past its wait"]
        issue, group = f08["producer's issue"], f08["a group's K tile, one to the next"]
        ring = lambda g="": wm["08 only the wgmmas, no hand-over" + g] - wm["08 only the wgmmas, no ring" + g]  # noqa: E731
        glue("ch8_wt_top1", f"{top[0]:.3f}")
        glue("ch8_wt_top2", f"{top[2]:.3f}")
        glue("ch8_wt_wait1", f"{wait[0]:.3f}")
        glue("ch8_wt_wait2", f"{wait[2]:.3f}")
        glue("ch8_wt_wait2_mean", f"{wait[3]:.3f}")
        glue("ch8_wt_nc_wait", f"{nc['wait for a full stage'][0]:.3f}")
        glue("ch8_wt_nc_ahead", f"{min(nc['copies issued before the consumer came'][::2]):.1f}")
        glue("ch8_wt_floor", f"{w['only the wgmmas, no ring']['wait for a full stage'][0]:.3f}")
        glue("ch8_wt_ring", f"{ring():.1f}")
        glue("ch8_wt_ring_graph", f"{ring(' graph'):.1f}")
        glue("ch8_wt_ahead1", f"{ahead[0]:.3f}")
        glue("ch8_wt_ahead2", f"{ahead[2]:.3f}")
        glue("ch8_wt_land2", f"{landed[2]:.3f}")
        glue("ch8_wt_prod", f"{f08['producer, one K tile to the next'][1]:.3f}")
        glue("ch8_wt_issue", f"{issue[0]:.3f}")
        glue("ch8_wt_cons", f"{group[1] / 3:.3f}")
        for ns in (50, 100, 200):
            glue(f"ch8_wt_sleep{ns}", f"{wm[f'producer sleeps {ns}'] - wm['08']:.1f}")
        late = [-w[f"producer sleeps {ns}"]["copies issued before the consumer came"][0] for ns in (50, 200)]
        glue("ch8_wt_late", f"{min(late):.1f}-{max(late):.1f}")
    else:
        for key in ("top1", "top2", "wait1", "wait2", "wait2_mean", "nc_wait", "nc_ahead", "floor", "ring", "ring_graph",
                    "ahead1", "ahead2", "land2", "prod", "issue", "cons", "sleep50", "sleep100", "sleep200", "late"):
            glue(f"ch8_wt_{key}", "(the runs of `limits.py waits` appear here once they are recorded)")

    pr = tm.get("producers", {}).get("NVIDIA H200")
    if pr:
        pm = {n: medians(calls) for n, calls in pr["us"].items()}
        two = lambda n, tag, g="": pm[n]["producers " + tag + g] - pm[n]["08 " + tag + g]  # noqa: E731
        print(f"{pr['log']}: a producer warp per operand, change against step 08 (direct / graph), us")
        for n, calls in pm.items():
            for tag in (k[3:] for k in calls if k.startswith("08 ") and not k.endswith(" graph")):
                print(f"  N = {n:4s} {tag:12s} {two(n, tag):+6.1f} / {two(n, tag, ' graph'):+6.1f}")
        print(f"  the ring's marks at 512: K tile {pr['stagger']['producers'][1]:.3f} us "
              f"(step 08: {pr['stagger']['08'][1]:.3f})")
        same = pr["parts"]["producers"] == pr["parts"]["08"] and pr["stagger"]["producers"] == pr["stagger"]["08"]
        glue("ch8_pr_same", "the same as" if same else "different from")
        glue("ch8_pr_512", f"{two('512', 'n32 k3 s12'):+.1f}")
        glue("ch8_pr_512_graph", f"{two('512', 'n32 k3 s12', ' graph'):+.1f}")
        glue("ch8_pr_4096_pct", f"{100 * two('4096', 'n64 k2 s8') / pm['4096']['08 n64 k2 s8']:+.1f}")
    else:
        for key in ("same", "512", "512_graph", "4096_pct"):
            glue(f"ch8_pr_{key}", "(the runs of `limits.py producers` appear here once they are recorded)")

    ea = tm.get("early", {}).get("NVIDIA H200")
    if ea:
        em = medians(ea["us"]["512"])
        moved = em["early n32 k3 s12"] - em["08 n32 k3 s12"]
        print(f"{ea['log']}: the next stage awaited while the wgmmas run, at 512: K tile {ea['stagger']['early'][1]:.3f} us "
              f"(step 08: {ea['stagger']['08'][1]:.3f}); wgmmas done {ea['parts']['early']['wgmmas done']:.3f} us "
              f"(step 08: {ea['parts']['08']['wgmmas done']:.3f}); call {moved:+.1f} us")
        glue("ch8_ea_done", f"{ea['parts']['08']['wgmmas done']:.3f}")
        glue("ch8_ea_done_e", f"{ea['parts']['early']['wgmmas done']:.3f}")
        glue("ch8_ea_period_e", f"{ea['stagger']['early'][1]:.3f}")
        glue("ch8_ea_512", f"{moved:+.1f}")
    else:
        for key in ("done", "done_e", "period_e", "512"):
            glue(f"ch8_ea_{key}", "(the runs of `limits.py early` appear here once they are recorded)")

    wd = tm.get("wide", {}).get("NVIDIA H200")
    if wd:
        dm = medians(wd["us"]["512"])
        wide_saved = lambda what="", g="": (dm[f"phase 1 K512 n32 k3 s12{what}{g}"]  # noqa: E731
                                            - dm[f"phase 1 K256 n64 k2 s8{what}{g}"])
        print(f"{wd['log']}: phase 1 alone, us (direct / graph)")
        for name in (k for k in dm if not k.endswith(" graph")):
            print(f"  {name:42s} {dm[name]:7.2f} / {dm[name + ' graph']:7.2f}")
        lim_08 = float(np.median(tm["limits"]["NVIDIA H200"]["us"]["512"]["08"]))  # the limits run's call
        glue("ch8_wd_saved", f"{wide_saved():.1f}")
        glue("ch8_wd_saved_graph", f"{wide_saved(g=' graph'):.1f}")
        glue("ch8_wd_only", f"{wide_saved(' only the wgmmas'):.1f}")
        glue("ch8_wd_k3", f"{dm['phase 1 K256 n64 k3 s8'] - dm['phase 1 K512 n32 k3 s12']:.1f}")
        glue("ch8_wd_both", f"{2 * wide_saved():.1f}")
        glue("ch8_wd_after", f"{lim_08 - 2 * wide_saved():.1f}")
    else:
        for key in ("saved", "saved_graph", "only", "k3", "both", "after"):
            glue(f"ch8_wd_{key}", "(the runs of `limits.py wide` appear here once they are recorded)")


def presplit() -> None:
    """`limits.py presplit`: B and C split once, up front, and its marks."""
    tm = runs()
    ps = tm.get("presplit", {}).get("NVIDIA H200")
    if ps:
        pm = {int(n): medians(calls) for n, calls in ps["us"].items()}
        print(f"NVIDIA H200, {ps['log']}: median event time over three rounds, us (direct / from a CUDA graph)")
        for n, calls in pm.items():
            print(f"  N = {n}")
            for name in (k for k in calls if not k.endswith(" graph")):
                graph = f"{calls[name + ' graph']:9.2f}" if name + " graph" in calls else "        -"
                print(f"    {name:40s} {calls[name]:9.2f} / {graph}")
        print("marks, us from the first block's start (min / median / max over blocks, each a median over launches):")
        for variant, marks_of in ps["marks"].items():
            for what, (lo, med, hi) in marks_of.items():
                print(f"  {variant:14s} {what:13s} {lo:6.2f} {med:6.2f} {hi:6.2f}")
        m5, mk = pm[512], ps["marks"]
        against = lambda v, ref="presplit raw": m5[v] - m5[ref]  # noqa: E731
        first_data = tm["timeline"]["NVIDIA H200"]["marks"]["as it is"]["p1 first data"][1]  # step 07's, chapter 8
        glue("ch8_ps_c", f"{against('presplit', '08 s11'):.1f}")
        glue("ch8_ps_bc", f"{against('presplit B and C', '08 s11'):.1f}")
        glue("ch8_ps_raw", f"{against('presplit raw', '08 s11'):.1f}")
        glue("ch8_ps_read", f"{against('presplit read, unsplit'):+.2f}")
        glue("ch8_ps_bytes", f"{against('presplit raw, twice the bytes'):.1f}")
        glue("ch8_ps_early", f"{m5['presplit read, unsplit, released early'] - m5['presplit read, unsplit']:+.1f}")
        glue("ch8_ps_split", f"{against('presplit split, unread'):.1f}")
        glue("ch8_ps_split_done", f"{mk['as it is']['split done'][1]:.1f}")
        glue("ch8_ps_first_data", f"{first_data:.1f}")
        glue("ch8_ps_p1_late", f"{mk['as it is']['phase 1 done'][1] - mk['08']['phase 1 done'][1]:.1f}")
        glue("ch8_ps_end_late", f"{mk['as it is']['end'][1] - mk['08']['end'][1]:.1f}")
        for n in (1024, 2048, 4096):
            glue(f"ch8_ps_{n}", f"{100 * (pm[n]['presplit n64 k2 s6'] / pm[n]['08 n64 k2 s6'] - 1):+.1f}")
    else:
        for key in ("c", "bc", "raw", "read", "bytes", "early", "split", "split_done", "first_data", "p1_late", "end_late",
                    "1024", "2048", "4096"):
            glue(f"ch8_ps_{key}", "(the runs of `limits.py presplit` appear here once they are recorded)")


def readsplit() -> None:
    """`limits.py readsplit`: phase 2 at 512 with C read split, per K tile of a group."""
    tm = runs()
    rs = tm.get("readsplit", {}).get("NVIDIA H200")
    RS_COLUMNS = {"08": "step 08", "08, no split in phase 2": "08, no split", "raw": "patch, raw", "read, unsplit": "patch, read"}
    RS_FIGURES = {"wait": "wait for a full stage", "period": "a group's K tile, one to the next",
                  "issue": "producer's issue", "fetch": "producer, one K tile to the next",
                  "loop": "K loops, first full stage to last wgmmas"}
    if rs:
        rw, rc = rs["waits"], medians(rs["us"]["512"])
        own = lambda v: rs["parts"][f"{v} phase 2"]["tile, in all"]  # noqa: E731  (median)
        p2 = lambda v, key: rw[v][RS_FIGURES[key]][3]  # noqa: E731  (phase 2, mean over blocks, launches, K tiles)
        rows = [("a group's own work on a K tile (median)", own),
                ("its wait for a full stage", lambda v: p2(v, "wait")),
                ("a group's K tile, one to the next", lambda v: p2(v, "period")),
                ("the producer's issue of a K tile", lambda v: p2(v, "issue")),
                ("the producer, one K tile to the next", lambda v: p2(v, "fetch")),
                ("  the same, times three groups", lambda v: 3 * p2(v, "fetch")),
                ("K loops, first full stage to last wgmmas", lambda v: p2(v, "loop")),
                ("phase 1's K loops (the control)", lambda v: rw[v][RS_FIGURES["loop"]][1])]
        print(f"NVIDIA H200, {rs['log']}: phase 2 at 512 (BLOCK_N 32, SPLIT_K 3), us; means over blocks, launches and each")
        print("phase's K tiles after its first three ('read': C read split, nothing split up front, timed only)")
        print(f"{'':42s}" + "".join(f"{c:>14s}" for c in RS_COLUMNS.values()))
        for what, f in rows:
            print(f"{what:42s}" + "".join(f"{f(v):14.3f}" for v in RS_COLUMNS))
        print(f"{'the call, direct (median of three rounds)':42s}" + "".join(
            f"{rc[name]:14.2f}" for name in ("08", "08 no split in phase 2", "presplit raw", "presplit read, unsplit")))
        for key, v in (("raw", "raw"), ("read", "read, unsplit"), ("nosplit", "08, no split in phase 2")):
            glue(f"ch8_rs_own_{key}", f"{own(v):.2f}")
            for name in RS_FIGURES:
                glue(f"ch8_rs_{name}_{key}", f"{p2(v, name):.3f}" if name in ("issue", "fetch") else f"{p2(v, name):.2f}")
            glue(f"ch8_rs_fetch3_{key}", f"{3 * p2(v, 'fetch'):.2f}")
        p1 = [rw[v][RS_FIGURES["loop"]][1] for v in RS_COLUMNS]
        glue("ch8_rs_p1", f"{min(p1):.2f} to {max(p1):.2f}")
        glue("ch8_rs_call_read", f"{rc['presplit read, unsplit'] - rc['presplit raw']:+.2f}")
        glue("ch8_rs_call_nosplit", f"{rc['08 no split in phase 2'] - rc['08']:+.2f}")
    else:
        for key in [f"{w}_{k}" for w in ("own", *RS_FIGURES, "fetch3") for k in ("raw", "read", "nosplit")] + [
                "p1", "call_read", "call_nosplit"]:
            glue(f"ch8_rs_{key}", "(the run of `limits.py readsplit` appears here once it is recorded)")


def overlap() -> None:
    """`steps.py overlap`: a group's split of the next K tile while its wgmmas run."""
    tm = runs()
    # chapter 8's ring of step 07 at 512 (steps.py ring): a consumer group's split of a B tile, us
    glue("ch8_ring_split_after", f"{tm['ring'][GPU]['parts']['as it is']['split of B']:.2f}")
    ov = tm.get("overlap", {}).get("NVIDIA H200")
    if ov:
        ovm = {int(n): medians(calls) for n, calls in ov["us"].items()}
        print(f"NVIDIA H200, {ov['log']}: median event time over three rounds, us")
        print(f"{'N':>5s} {'tiles':11s} {'08':>8s} {'overlap':>8s} {'change':>7s} {'08 no split':>12s} {'overlap no split':>17s}"
              f" {'no fence':>9s}")
        ov_change, ov_split = {}, {}
        for n in sorted(ovm):
            for t in sorted(k[3:] for k in ovm[n] if re.fullmatch(r"08 n\d+ k\d+ s\d+", k)):
                t8, to, z8, zo, nf = (ovm[n][f"{s} {t}"] for s in ("08", "overlap", "08 no split", "overlap no split",
                                                                     "overlap no fence"))
                ov_change[(n, t)] = 100 * (to / t8 - 1)
                ov_split[(n, t)] = (t8 - z8, to - zo)  # what the split costs the call, without and with the overlap
                print(f"{n:5d} {t:11s} {t8:8.1f} {to:8.1f} {ov_change[(n, t)]:+6.1f}% {z8:12.1f} {zo:17.1f} {nf:9.1f}")
        glue("ch8_sp_range", f"{min(ov_change.values()):+.0f}% to {max(ov_change.values()):+.0f}%")
        one = {k: v for k, v in ov_change.items() if " k1 " in k[1] + " "}
        glue("ch8_sp_k1", ", ".join(f"{v:+.0f}% at {n}" for (n, _), v in sorted(one.items())))
        s8, so = ov_split[(1024, "n64 k1 s4")]
        glue("ch8_sp_split08", f"{s8:.1f}")
        glue("ch8_sp_splitov", f"{so:.1f}")
        glue("ch8_sp_ratio", f"{so / s8:.1f}")
        nos = [100 * (ovm[n][f"overlap no split {t}"] / ovm[n][f"08 no split {t}"] - 1) for n, t in ov_change]
        glue("ch8_sp_nosplit", f"{min(nos):+.0f}% to {max(nos):+.0f}%")
    else:
        for key in ("ch8_sp_range", "ch8_sp_k1", "ch8_sp_split08", "ch8_sp_splitov", "ch8_sp_ratio", "ch8_sp_nosplit"):
            glue(key, "(the runs of `steps.py overlap` appear here once they are recorded)")


def profiler() -> None:
    """`lab/fusion-kernel-time/profiler.py`: the seed's measure (kernel time under the profiler) beside event time."""
    records, _, step08 = lane_records()
    kt = results.experiment("fusion-kernel-time")
    pf = kt.get("profiler", {}).get("NVIDIA H200")
    PF_BASE, PF_STEPS = ("torch a@b@c", "cupy a@b@c"), ("07", "08")
    graph_base = results.lookup_fused(records, "torch graph a@b@c", 512)
    glue("ch8_pf_expect", f"{graph_base['median_s'] / step08['graph_median_s']:.1f}" if graph_base and step08
         else "(the lane's graph replays)")
    if pf:
        med = lambda rounds: float(np.median(rounds))  # noqa: E731  (over the rounds, each a median over calls)
        ks = {int(n): {name: med(k["sum_us"]) for name, k in calls.items()} for n, calls in pf["kernels"].items()}
        ev = {int(n): {name: med(us) for name, us in calls.items()} for n, calls in pf["us"].items()}
        k_ratio = {n: min(k[b] for b in PF_BASE) / min(k[s] for s in PF_STEPS) for n, k in ks.items()}
        e_ratio = {n: min(e[b] for b in PF_BASE) / min(e[s] for s in PF_STEPS) for n, e in ev.items()}
        print(f"NVIDIA H200, {pf['log']} (torch {pf['torch']}): us, medians of three rounds")
        print(f"{'':5s} | {'kernel time under the profiler, per call':^43s} | {'event time of the call':^40s}")
        print(f"{'N':>5s} | {'torch':>8s} {'cupy':>8s} {'07':>8s} {'08':>8s} {'ratio':>7s} | "
              f"{'torch':>8s} {'graph':>7s} {'08':>7s} {'graph':>7s} {'ratio':>7s}")
        for n in sorted(ks):
            k, e = ks[n], ev[n]
            print(f"{n:5d} | {k['torch a@b@c']:8.2f} {k['cupy a@b@c']:8.2f} {k['07']:8.2f} {k['08']:8.2f} {k_ratio[n]:6.2f}x | "
                  f"{e['torch a@b@c']:8.1f} {e['torch graph a@b@c']:7.1f} {e['08']:7.1f} {e['08 graph']:7.1f} {e_ratio[n]:6.2f}x")
        print("graph: the call before it replayed from a CUDA graph; ratio: the faster of torch and cupy over the faster")
        print("of steps 07 and 08 (launched directly)")
        print("kernels of torch a@b@c per call:")
        for n in sorted(ks):
            names = pf["names"][str(n)]["torch a@b@c"]
            reductions = sum("split_k" in name for name in names)
            print(f"  N={n:4d}: {len(names)}, {reductions} of them split-K reductions; {names[0][:70]}")
        span = med(pf["kernels"]["512"]["torch a@b@c"]["span_us"])
        glue("ch8_pf_ratio_512", f"{k_ratio[512]:.2f}")
        glue("ch8_pf_where", f"NVIDIA H200 (recorded, {pf['date']})")
        glue("ch8_pf_base_512", f"{min(ks[512][b] for b in PF_BASE):.1f}")
        glue("ch8_pf_fused_512", f"{min(ks[512][s] for s in PF_STEPS):.1f}")
        glue("ch8_pf_need_512", f"{min(ks[512][b] for b in PF_BASE) / 3:.1f}")
        glue("ch8_pf_range", f"{min(k_ratio[n] for n in ks if n >= 1024):.2f} to {max(k_ratio[n] for n in ks if n >= 1024):.2f}")
        glue("ch8_pf_256", f"{k_ratio[256]:.2f}")
        glue("ch8_pf_ev_ratio_512", f"{e_ratio[512]:.2f}")
        glue("ch8_pf_ev_base_512", f"{ev[512]['torch a@b@c']:.1f}")
        glue("ch8_pf_ev_08_512", f"{ev[512]['08']:.1f}")
        glue("ch8_pf_span_512", f"{span:.1f}")
        glue("ch8_pf_kernels_512", f"{len(pf['names']['512']['torch a@b@c'])}")
    else:
        print("No profiler run recorded yet: run lab/fusion-kernel-time/profiler.py on a GPU")
        for key in ("ratio_512", "base_512", "fused_512", "need_512", "range", "256", "ev_ratio_512", "ev_base_512",
                    "ev_08_512", "span_512", "kernels_512"):
            glue(f"ch8_pf_{key}", "(the profiler's run appears here once it is recorded)")


# (label, experiment, variant, step 08 in the same run[, times]): "wide" timed phase 1 alone, so both phases count twice
CHECKED = [("overlap the split with the wgmmas", "overlap", "overlap n32 k3 s8", "08 n32 k3 s8"),
           ("TMA multicast, clusters of 2", "limits", "multicast 2 cluster", "08"),
           ("tensor maps prefetched", "limits", "08 maps prefetched", "08"),
           ("right operand from registers", "operand", "register operand m32 k3 s12", "08 n32 k3 s12"),
           ("two K tiles in flight", "operand", "inflight n32 k3 s12", "08 n32 k3 s12"),
           ("a warp group that splits", "handover", "splitter k3", "08"),
           ("groups take turns", "ordered", "ordered n32 k3 s12", "08 n32 k3 s12"),
           ("a producer per operand", "producers", "producers n32 k3 s12", "08 n32 k3 s12"),
           ("wait for the next stage early", "early", "early n32 k3 s12", "08 n32 k3 s12"),
           ("C split once, up front", "presplit", "presplit", "08 s11"),
           ("B and C split once, up front", "presplit", "presplit B and C", "08 s11")]
TIMED_ONLY = [("no copies", "limits", "08 no copies", "08"),
              ("no A fragments", "limits", "08 no A fragments", "08"),
              ("no split", "limits", "08 no split", "08"),
              ("phase 2 not waiting for T", "handover", "08 no wait", "08"),
              ("C read split, nothing split up front", "presplit", "presplit read, unsplit", "08 s11"),
              ("fp16 wgmmas", "fp16", "08 as it is fp16", "08"),
              ("tiles twice as wide (phase 1 alone, twice)", "wide", "phase 1 K256 n64 k2 s8", "phase 1 K512 n32 k3 s12", 2),
              ("no ring and no hand-over (only the wgmmas left)", "waits", "08 only the wgmmas, no ring", "08 only the wgmmas"),
              ("only the wgmmas", "limits", "08 only the wgmmas", "08")]


def change(experiment: str, variant: str, reference: str, times: int = 1) -> float | None:
    """The variant's median call at 512 less step 08's in the same run, us (None if the run is not recorded)."""
    calls = runs().get(experiment, {}).get(GPU, {}).get("us", {}).get("512")
    if calls is None:
        return None
    missing = [name for name in (variant, reference) if name not in calls]
    if missing:  # a recorded run without the call this figure names: the list above is out of date
        raise KeyError(f"results.json[{experiment!r}] has no call {missing} at 512: update the figure's list")
    return times * float(np.median(calls[variant]) - np.median(calls[reference]))


def changes() -> list[tuple[str, float, str]]:
    """(label, change of step 08's call at 512 in µs within its run, "checked" or "timed only") per change tried."""
    rows = [(label, change(*where), kind) for kind, table in (("checked", CHECKED), ("timed only", TIMED_ONLY))
            for label, *where in table]
    return [r for r in rows if r[1] is not None]


def changes_figure() -> plt.Figure | None:
    """Every change tried on step 08 at 512 as a bar (µs against step 08 in the same run), with what the seed's 3x
    asks of step 08 within the limits run (a third of that run's `a @ b @ c` less that run's step 08)."""
    tm, rows, need = runs(), changes(), limits_need()
    if not rows or need is None:
        print("The figure appears once the experiment's runs are recorded (results/experiments/fusion-tma).")
        return None
    needed, _, log = need
    run = re.search(r"\d{4}-\d\d-\d\d", log)[0]
    logs = {tm[e][GPU]["log"] for _, e, *_ in CHECKED + TIMED_ONLY if GPU in tm.get(e, {})}
    dates = ", ".join(sorted({re.search(r"\d{4}-\d\d-\d\d", lg)[0] for lg in logs}))
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(rows) + 1.2))
    colour = {"checked": "tab:blue", "timed only": "0.6"}
    ax.barh(range(len(rows)), [r[1] for r in rows], color=[colour[r[2]] for r in rows])
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0, color="0.3", lw=0.8)
    ax.axvline(needed, color="tab:red", ls="--", lw=1,
               label=f"what 3x needs: {needed:.1f} µs\n(the limits run of {run}: a third of\nits a @ b @ c less its step 08)")
    for kind, c in colour.items():
        ax.bar(0, 0, color=c, label=kind)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_xlabel("change of step 08's call at 512, µs (same run; negative is faster)")
    ax.set_title(f"{GPU}, runs of {dates}: changes tried on step 08 at 512, against what the seed's 3x needs",
                 fontsize=9)
    fig.tight_layout()
    return fig
