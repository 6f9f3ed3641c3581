"""Chapter 6, async prefetch on the FP32 kernel (sgemm/08 to 11): latency hiding, its picture and model, the
predictions from the profiler's stalls, and the chapter's records, figures and tables.

The notebook (book/06_async_prefetch.ipynb) calls one function per figure or table. Timings come from
results/<gpu>.json (live on a GPU); the warp-state counters of steps 07 to 10 from the H100's profiler record
(results/nvidia-h100-80gb-hbm3.ncu.json), step 11's from the lab note's experiment (sgemm-vs-cublas).
"""
from __future__ import annotations

import math
import re

import matplotlib.pyplot as plt
import numpy as np

import gemmlab
from gemmlab import explore, hardware, nvrtc, pipeline, profile, sitecontrols
from gemmlab.chapters import ch04_register_tiling as ch4
from gemmlab.chapters import ch05_bank_conflicts as ch5
from gemmlab.chapters import swizzle as sw
from gemmlab.chapters import plots, tiling
from gemmlab.chapters.glue import glue
from gemmlab.runtime.source import REPO
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch, Rectangle

STEPS = ["sgemm/07_warptiling", "sgemm/08_register_prefetch", "sgemm/09_double_buffer", "sgemm/10_cp_async",
         "sgemm/11_fragment_prefetch"]
SIZES = [1024, 2048, 4096, 8192]
SIZE = 4096
COUNTERS_GPU = "NVIDIA H100 80GB HBM3"
SCHEDULERS_PER_SM = 4
MAX_WARPS_PER_SM = 64  # sm_80 and sm_90
async_prefetch_twin = sitecontrols.async_prefetch_twin
explorer = explore.explorer
blocks_per_sm = explore.blocks_per_sm


def _v(step: str) -> int:
    return int(step.split("/")[1][:2])


def where_we_are(records: list) -> None:
    """Glue each step's % of cuBLAS and TFLOP/s at 4096, its gain over the step before, the GPU; print the starting
    point only (step 07 and cuBLAS at every size): the chapter's own steps are shown where it measures them."""
    at = {(r["step"], r["m"]): r for r in records}
    for step in STEPS:
        if (step, SIZE) in at:
            glue(f"ch6_v{_v(step)}_pct", at[(step, SIZE)]["pct_of_baseline"])
            glue(f"ch6_v{_v(step)}_tflops", at[(step, SIZE)]["tflops"])
    for before, step in [(STEPS[0], STEPS[1]), (STEPS[1], STEPS[2]), (STEPS[2], STEPS[3]), (STEPS[2], STEPS[4])]:
        if (step, SIZE) in at and (before, SIZE) in at:
            glue(f"ch6_gain{_v(step)}", at[(step, SIZE)]["tflops"] / at[(before, SIZE)]["tflops"])
    if (STEPS[0], SIZE) in at:
        glue("ch6_gpu", at[(STEPS[0], SIZE)]["gpu"])
        glue("ch6_date", at[(STEPS[-1], SIZE)]["date"] if (STEPS[-1], SIZE) in at else at[(STEPS[0], SIZE)]["date"])
        glue("ch6_cublas_tflops", at[(STEPS[0], SIZE)]["baseline_tflops"])
    print(gemmlab.bench.table([r for r in records if r["step"] == STEPS[0]]))


# ------------------------------------------------------------------------------------------- latency hiding
def warp_schedule(warps: int, work: int, latency: int, cycles: int) -> np.ndarray:
    """One scheduler's issue slots, cycle by cycle: the warp that issues (or -1, an idle slot).

    Each warp issues `work` instructions, one per cycle when the scheduler picks it, then waits `latency` cycles
    for a load those instructions started, and starts over. The scheduler keeps issuing from the warp it issued
    from last while that warp is ready, else from the ready warp that has waited longest (greedy, then oldest)."""
    if warps < 1 or work < 1 or latency < 0:
        raise ValueError("warps and work must be at least 1, latency at least 0")
    left = [work] * warps        # instructions a warp still issues before its wait
    ready_at = [0] * warps       # the cycle from which it may issue again
    slots = np.full(cycles, -1)
    last = 0
    for cycle in range(cycles):
        ready = [w for w in range(warps) if ready_at[w] <= cycle]
        if not ready:
            continue
        w = last if last in ready else min(ready, key=lambda r: (ready_at[r], r))
        slots[cycle], last = w, w
        left[w] -= 1
        if left[w] == 0:
            left[w], ready_at[w] = work, cycle + 1 + latency
    return slots


def busy_fraction(warps: int, work: int, latency: int) -> float:
    """The model's share of cycles in which a scheduler issues: each warp is ready `work` of every
    `work + latency` cycles, so `warps` of them fill at most warps * work / (work + latency) of the slots."""
    return min(1.0, warps * work / (work + latency))


def warps_needed(work: int, latency: int) -> int:
    """The fewest warps per scheduler that keep it issuing every cycle."""
    return math.ceil((work + latency) / work)


def draw_latency_hiding(work: int = 4, latency: int = 12, warps=(1, 2, 4), cycles: int = 48):
    """One panel per warp count: each warp's row shows the cycles it issues (coloured) and waits (grey line);
    the bottom row, the scheduler's idle slots (black). Returns the axes."""
    fig, axes = plt.subplots(len(warps), 1, figsize=(9, 1.1 + 0.45 * sum(warps)), sharex=True,
                             gridspec_kw={"height_ratios": [w + 1 for w in warps]})
    colours = plt.get_cmap("tab10")
    for ax, n in zip(np.atleast_1d(axes), warps):
        slots = warp_schedule(n, work, latency, cycles)
        for w in range(n):
            ax.broken_barh([(c, 1) for c in np.nonzero(slots == w)[0]], (n - w - 0.4, 0.8), color=colours(w))
            ax.plot([0, cycles], [n - w, n - w], color="0.85", lw=1, zorder=0)
        ax.broken_barh([(c, 1) for c in np.nonzero(slots < 0)[0]], (-0.4, 0.8), color="black")
        ax.set_yticks(range(n + 1), ["idle"] + [f"warp {w}" for w in reversed(range(n))], fontsize=7)
        ax.set_title(f"{n} warp{'s' if n > 1 else ''}: the scheduler issues in {100 * (slots >= 0).mean():.0f}% of the cycles "
                     f"(model {100 * busy_fraction(n, work, latency):.0f}%)", fontsize=8)
    np.atleast_1d(axes)[-1].set_xlabel(f"cycle (a warp issues {work} instructions, then waits {latency} cycles "
                                       "for its load)", fontsize=8)
    fig.tight_layout()
    return axes


def latency_picture(work: int = 4, latency: int = 12) -> None:
    draw_latency_hiding(work, latency)
    plt.show()


# ------------------------------------------------------------------------------------ cp.async commit groups
GROUP_STATES = ["not issued", "in flight", "computed now", "done, stage free"]
GROUP_COLOURS = ["white", "#f28e2b", "#4e79a7", "0.85"]


def cp_async_groups(stages: int, tiles: int) -> np.ndarray:
    """Step 10's commit groups, as its loop moves them: row 0 is the prologue (groups 0 .. stages - 2 committed),
    row t + 1 the loop's iteration t after `cp_async_wait_group<stages - 2>()` and the commit of group
    t + stages - 1 (group g holds tile g's copies; an empty group past the last tile). Entry [row, g]: an index into
    GROUP_STATES. wait_group<N> returns when at most N of the thread's committed groups are still in flight, and
    groups complete in commit order, so after it the oldest committed - N groups are done: tile t's."""
    if stages < 2 or tiles < 1:
        raise ValueError("cp.async needs at least 2 stages and 1 tile")
    groups = tiles + stages - 1
    state = np.zeros((tiles + 1, groups), dtype=int)
    state[0, :stages - 1] = 1
    committed = stages - 1
    for t in range(tiles):
        done = committed - (stages - 2)          # wait_group<stages - 2>: groups 0 .. done - 1 are complete
        assert done == t + 1, "tile t must be complete when iteration t computes it"
        committed += 1                           # commit group t + stages - 1
        row = state[t + 1]
        row[:t] = 3
        row[t] = 2
        row[t + 1:committed] = 1
    return state


def draw_cp_async_groups(stages: int = 3, tiles: int = 6, ax=None):
    """The picture of cp_async_groups: one row per moment (prologue, then each iteration), one column per commit
    group (= tile); each in-flight or computed group labelled with the shared-memory stage it fills. Returns ax."""
    state = cp_async_groups(stages, tiles)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.45 * (tiles + 1) + 1.2))
    ax.imshow(state, cmap=ListedColormap(GROUP_COLOURS), vmin=-0.5, vmax=3.5, aspect="auto")
    for (r, g), v in np.ndenumerate(state):
        if v in (1, 2):
            ax.text(g, r, f"stage {g % stages}" if g < tiles else "empty", ha="center", va="center", fontsize=7,
                    color="white")
    ax.set_xticks(range(state.shape[1]), [f"group {g}" for g in range(state.shape[1])], fontsize=7)
    ax.set_yticks(range(tiles + 1), ["prologue: commit 0.." + str(stages - 2)] +
                  [f"t={t}: wait_group<{stages - 2}>, commit {t + stages - 1}" for t in range(tiles)], fontsize=7)
    ax.set_xticks(np.arange(-0.5, state.shape[1]), minor=True)
    ax.set_yticks(np.arange(-0.5, tiles + 1), minor=True)
    ax.grid(which="minor", color="white", lw=2)
    ax.tick_params(which="minor", length=0)
    ax.legend(handles=[Patch(color=c, label=n) for c, n in zip(GROUP_COLOURS[1:], GROUP_STATES[1:])],
              loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
    ax.set_title(f"NUM_STAGES = {stages}: {stages - 1} groups in flight while one tile is computed", fontsize=9)
    return ax


def groups_picture(stages: int = 3, tiles: int = 6) -> None:
    draw_cp_async_groups(stages, tiles)
    plt.tight_layout()
    plt.show()


# ------------------------------------------------------------------------------------------ profiler records
def record(step: str) -> dict:
    """A step's warp states at 4096 from the recorded profiles: stalls per issued instruction by reason, cycles per
    issued instruction (their sum, `cpi`), warps per scheduler, registers; {} when none is recorded."""
    m = profile.load(COUNTERS_GPU).get(step)
    if m:
        stalls = dict(profile.stall_reasons(m, top=100))
        warps = m["sm__warps_active.avg.pct_of_peak_sustained_active"] / 100 * MAX_WARPS_PER_SM / SCHEDULERS_PER_SM
        return {"stalls": stalls, "cpi": sum(stalls.values()), "warps": warps, "gpu": COUNTERS_GPU,
                "registers": m.get("launch__registers_per_thread"), "time_ns": m.get("gpu__time_duration.sum"),
                "occupancy": m["sm__warps_active.avg.pct_of_peak_sustained_active"],
                "shared_loads": m.get("smsp__inst_executed_op_shared_ld.sum")}
    if step == "sgemm/11_fragment_prefetch":  # the lab note's experiment: step 11 as committed
        exp = gemmlab.results.experiment("sgemm-vs-cublas")
        ncu = next(v["ncu"] for v in exp["variants"] if v["source"] == "step")
        stalls = ncu["stalls_per_issue"]
        return {"stalls": stalls, "cpi": sum(stalls.values()), "warps": ncu["active_warps_per_scheduler"],
                "gpu": exp["gpu"], "registers": ncu["registers"], "time_ns": ncu["duration_ns"],
                "occupancy": 100 * ncu["active_warps_per_scheduler"] * SCHEDULERS_PER_SM / MAX_WARPS_PER_SM,
                "instructions": ncu["instructions"]}
    return {}


def issue_rate(rec: dict) -> float:
    """Instructions a scheduler issues per cycle: its warps divided by each warp's cycles per issued instruction."""
    return rec["warps"] / rec["cpi"]


QUOTED = ("long_scoreboard", "short_scoreboard", "barrier")  # stalls the chapter quotes, printed beyond the top four


def stalls(steps: list | None = None) -> None:
    """The recorded warp states at 4096 of `steps` (default: steps 07 to 11): occupancy, warps per scheduler, cycles
    per issued instruction, the issue rate they give, the top four stall reasons and, after them, the others the
    chapter quotes (QUOTED). The chapter shows step 07's row first and each later step's after its measurement."""
    for step in steps or STEPS:
        rec = record(step)
        if not rec:
            print(f"{step}: no profiler record")
            continue
        ranked = [r for r, _ in sorted(rec["stalls"].items(), key=lambda kv: -kv[1])]
        shown = ranked[:4] + [r for r in QUOTED if r in rec["stalls"] and r not in ranked[:4]]  # what the prose quotes
        top = ", ".join(f"{r} {rec['stalls'][r]:.2f}" for r in shown)
        print(f"{step:27s} occupancy {rec['occupancy']:4.1f}% ({rec['warps']:.1f} warps/scheduler), "
              f"{rec['cpi']:.2f} cycles per instruction -> issues {issue_rate(rec):.2f}/cycle | {top}")
        glue(f"ch6_rate{_v(step)}", issue_rate(rec)); glue(f"ch6_cpi{_v(step)}", rec["cpi"])
        glue(f"ch6_occ{_v(step)}", rec["occupancy"]); glue(f"ch6_warps{_v(step)}", rec["warps"])
        for reason in ("long_scoreboard", "barrier", "short_scoreboard", "dispatch_stall", "not_selected"):
            glue(f"ch6_{reason}{_v(step)}", rec["stalls"].get(reason, 0.0))
    lab = "sgemm/11_fragment_prefetch" in (steps or STEPS)
    print(f"(Nsight Compute on the {COUNTERS_GPU}" + ("; step 11: the lab note's profile, same GPU)" if lab else ")"))
    r9, r10, r11 = record("sgemm/09_double_buffer"), record("sgemm/10_cp_async"), record("sgemm/11_fragment_prefetch")
    if r9 and r10:
        glue("ch6_lds10_over9", 100 * (r10["shared_loads"] / r9["shared_loads"] - 1))
        p = gemmlab.instance("sgemm/10_cp_async").params
        warp_tiles = (SIZE // p["BLOCK_M"]) * (SIZE // p["BLOCK_N"]) * (SIZE // p["BLOCK_K"]) * \
            (p["BLOCK_M"] // p["WARP_M"]) * (p["BLOCK_N"] // p["WARP_N"])
        glue("ch6_lds10_extra_per_tile", (r10["shared_loads"] - r9["shared_loads"]) / warp_tiles)
        if "sgemm/10_cp_async" in (steps or STEPS):
            null_loads_per_copy()  # where those extra shared loads come from (the SASS)
    if r9 and r11:  # instructions executed are proportional to duration x issue rate (same clock, same SMs)
        glue("ch6_inst11_over9", 100 * (1 - (r11["time_ns"] * issue_rate(r11)) / (r9["time_ns"] * issue_rate(r9))))


def null_loads_per_copy(step: str = "sgemm/10_cp_async", arch: str = "sm_90") -> dict:
    """In `step`'s SASS, the never-executed shared loads the compiler puts before each cp.async (`@!PT LDS RZ, [RZ]`:
    predicate always false, yet issued, so the profiler counts them) per LDGSTS, and the copies per thread and K tile
    (A's and B's float4s); glued for the prose. Returns both with their product."""
    text = gemmlab.instance(step).sass(arch)
    null = sum(1 for line in text.splitlines() if re.search(r"@!PT\s+LDS\b", line))
    copies = nvrtc.count_instructions(text, ["LDGSTS"])["LDGSTS"]
    p = gemmlab.instance(step).params
    threads = (p["BLOCK_M"] // p["WARP_M"]) * (p["BLOCK_N"] // p["WARP_N"]) * 32
    per_tile = math.ceil(p["BLOCK_M"] * p["BLOCK_K"] / 4 / threads) + math.ceil(p["BLOCK_K"] * p["BLOCK_N"] / 4 / threads)
    out = {"per_copy": null / copies, "copies_per_tile": per_tile, "per_tile": null / copies * per_tile}
    glue("ch6_null_lds_per_copy", out["per_copy"]); glue("ch6_copies10_per_tile", per_tile)
    glue("ch6_null_lds_per_tile", out["per_tile"])
    return out


def hide_bound(rec: dict, hidden: float, warps: float | None = None) -> float:
    """The model's largest speed-up from hiding `hidden` stall cycles per issued instruction: each warp then waits
    `cpi - hidden` cycles between instructions, and `warps` of them (default: as many as now) issue at most one
    instruction per cycle per scheduler. Assumes the same instructions: a bound on the issue rate's gain."""
    after = min(1.0, (warps or rec["warps"]) / (rec["cpi"] - hidden))
    return after / issue_rate(rec)


PREDICTIONS = {  # step: (the step it extends, the stall it hides, the share of it, warps per scheduler after)
    "sgemm/08_register_prefetch": ("sgemm/07_warptiling", "long_scoreboard", 1.0, 4.0),
    "sgemm/09_double_buffer": ("sgemm/08_register_prefetch", "barrier", 0.5, None),
    "sgemm/10_cp_async": ("sgemm/09_double_buffer", "long_scoreboard", 1.0, None),
    "sgemm/11_fragment_prefetch": ("sgemm/09_double_buffer", "short_scoreboard", 1.0, 2.0),  # one block per SM
}


def predict(step: str) -> None:
    """What `step`'s idea can hide, from the recorded stalls of the step it extends: the speed-up bound with the
    same warps and, for step 08 (two blocks per SM under its register cap), with twice the warps; for step 11 (one
    block per SM) with half of them."""
    before, reason, share, warps = PREDICTIONS[step]
    rec = record(before)
    hidden = share * rec["stalls"].get(reason, 0.0)
    same = hide_bound(rec, hidden)
    v = _v(step)
    glue(f"ch6_pred{v}", same); glue(f"ch6_pred{v}_hidden", hidden); glue(f"ch6_pred{v}_reason", reason.replace("_", " "))
    line = (f"{before} ({rec['gpu']}): {rec['cpi']:.2f} cycles per issued instruction, of which {reason} "
            f"{rec['stalls'].get(reason, 0.0):.2f}; {step} hides {hidden:.2f} -> at most {same:.2f}x")
    if warps:
        more = hide_bound(rec, hidden, warps)
        glue(f"ch6_pred{v}_more", more)
        line += f" with {rec['warps']:.0f} warps per scheduler, {more:.2f}x with {warps:.0f}"
    print(line)


def registers() -> None:
    """Registers and blocks per SM of steps 07 to 09: on sm_75 (a T4) this machine's compile; on sm_90 the compile
    the GPU ran (the profiler's record: its registers, the blocks per SM they allow, the occupancy it measured),
    with this machine's register count beside it (another NVRTC release: no blocks are derived from it)."""
    for step in STEPS[:3]:
        inst = gemmlab.instance(step)
        threads = inst.step.launch(SIZE, SIZE, SIZE, inst.params).threads
        r = inst.resources("sm_75")
        blocks, limiter = blocks_per_sm(r.registers, threads, r.shared_bytes, 75)
        print(f"{step} sm_75: {r.registers} registers, {r.spill_stores} B spilled, "
              f"{blocks} block(s) of {threads} threads per SM ({limiter})")
        here = inst.resources("sm_90")
        gpu = record(step).get("registers")
        if gpu:
            blocks = blocks_per_sm(int(gpu), threads, here.shared_bytes, 90)[0]
            glue(f"ch6_gpu_regs{_v(step)}", gpu); glue(f"ch6_gpu_blocks{_v(step)}", blocks)
            glue(f"ch6_occ{_v(step)}", record(step)["occupancy"])
            print(f"{step} sm_90, GPU run (profiler): {gpu:.0f} registers, {blocks} block(s) per SM, occupancy "
                  f"{record(step)['occupancy']:.1f}% (here: {here.registers} registers, {here.spill_stores} B spilled)")
    print("NVRTC", nvrtc.version())
    notes = gemmlab.registry.get("sgemm/09_double_buffer").compiler_notes("sm_75", nvrtc.version())
    print("sgemm/09_double_buffer on sm_75 with other NVRTC releases (measured):", "; ".join(notes) or "the same")


def barriers(size: int = 256) -> None:
    """The barriers one block of steps 07 to 09 executes, counted by the emulator."""
    for step in STEPS[:3]:
        k = gemmlab.step(step)
        counts = gemmlab.step(step, backend="cpu").counters(size, size, size, max_blocks=1)
        print(f"{step}: {counts.totals['barriers']} barriers for {size // k.params['BLOCK_K']} K tiles of {k.params['BLOCK_K']}")


def memory_order() -> None:
    """Steps 07 to 09's global loads, shared stores, barriers and shared loads in SASS program order (sm_90)."""
    for step in STEPS[:3]:
        print(f"{step:27s} {nvrtc.memory_order(gemmlab.instance(step).sass('sm_90'))}")


TIMELINE_CASES = ((2, 3), (3, 2))  # (load, compute) model units: look-ahead hides the loads; it does not
# The schedules' names in the picture: it comes before the chapter teaches cp.async, so "an asynchronous copy"
TIMELINE_NAMES = {"serial": "serial", "register_prefetch": "register prefetch", "cp_async": "async copy"}


def load_rows(intervals: list) -> dict[int, int]:
    """For the load intervals of one schedule, the line each is drawn on: the first line free at its start, so that
    loads in flight at the same time (cp.async's) sit on separate lines instead of on top of each other."""
    ends: list[float] = []
    rows = {}
    for iv in sorted((iv for iv in intervals if iv.lane == "load"), key=lambda iv: (iv.start, iv.tile)):
        row = next((i for i, end in enumerate(ends) if end <= iv.start), len(ends))
        if row < len(ends):
            ends[row] = iv.end
        else:
            ends.append(iv.end)
        rows[iv.tile] = row
    return rows


def draw_timelines(tiles: int = 5, cases=TIMELINE_CASES, stages: int = 3, axes=None):
    """One panel per (load, compute) case: per strategy (pipeline.STRATEGIES) its loads (blue; loads in flight
    together on separate lines, see load_rows) above its compute (orange), each bar labelled with its tile.
    Every load takes the same `load` units. Returns the axes."""
    if axes is None:
        _, axes = plt.subplots(1, len(cases), figsize=(12, 3.9), sharey=False)
    axes = np.atleast_1d(axes)
    colours = {"load": "tab:blue", "compute": "tab:orange"}
    for ax, (load, compute) in zip(axes, cases):
        y, ticks = 0.0, []
        for strategy in reversed(pipeline.STRATEGIES):
            ivs = pipeline.timeline(strategy, tiles, load, compute, stages)
            rows = load_rows(ivs)
            n = max(rows.values()) + 1
            ticks.append((y, f"{TIMELINE_NAMES[strategy]}: compute"))
            for iv in ivs:
                if iv.lane == "compute":
                    yy, h = y, 0.8
                else:
                    h = 0.8 / n
                    yy = y + 1 - 0.4 + h * (n - 1 - rows[iv.tile]) + h / 2
                ax.barh(yy, iv.end - iv.start, left=iv.start, height=h * 0.92, color=colours[iv.lane],
                        edgecolor="white")
                ax.text((iv.start + iv.end) / 2, yy, str(iv.tile), ha="center", va="center", fontsize=7,
                        color="white")
            ticks.append((y + 1, f"{TIMELINE_NAMES[strategy]}: load" + (f" ({n} in flight)" if n > 1 else "")))
            total = pipeline.total_time(strategy, tiles=tiles, load=load, compute=compute, stages=stages)
            ax.text(total + 0.2, y, f"{total:g}", va="center", fontsize=7)
            y += 2.4
        ax.set_yticks([t for t, _ in ticks], [lbl for _, lbl in ticks], fontsize=7)
        hides = "one tile ahead hides the loads" if compute >= load else "one tile ahead is not enough, two are"
        ax.set_title(f"load {load:g}, compute {compute:g}:\n{hides}", fontsize=9)
        ax.set_xlabel("time (model units; the number at a row's end: its total)", fontsize=8)
    axes[0].figure.tight_layout()
    return axes


def timelines() -> None:
    """The pipeline model's three schedules (serial, register prefetch, an asynchronous copy: cp.async) for a load shorter than a tile's
    compute and for one longer, and their total times."""
    draw_timelines()
    plt.show()
    for load, compute in TIMELINE_CASES:
        print(f"load {load}, compute {compute}: " + ", ".join(
            f"{TIMELINE_NAMES[s]} {pipeline.total_time(s, tiles=5, load=load, compute=compute, stages=3):g}"
            for s in pipeline.STRATEGIES) + " model units")


# ---------------------------------------------------------------------------------------------- pictures
def tile_hierarchy(steps=("sgemm/09_double_buffer", "sgemm/11_fragment_prefetch")):
    """Who computes what in step 09's and step 11's block tiles, with chapter 4's ownership picture (ch4.ownership:
    colour = warp, black = thread 0; right, thread 0's warp by lane), one row per step. Returns the axes."""
    fig, axes = plt.subplots(len(steps), 2, figsize=(11, 4.4 * len(steps)))
    for (ax_block, ax_warp), step in zip(axes, steps):
        ch4.ownership(step, ax_block, ax_warp)
    fig.tight_layout()
    return axes


def hierarchy_picture() -> None:
    """tile_hierarchy(), then each step's block, warp and thread tiles and the shared loads per FMA they give."""
    tile_hierarchy()
    plt.show()
    for step in ("sgemm/09_double_buffer", "sgemm/11_fragment_prefetch"):
        p = gemmlab.instance(step).params
        tm, tn = p["THREAD_M"], p["THREAD_N"]
        print(f"{step}: block {p['BLOCK_M']}x{p['BLOCK_N']}, warp {p['WARP_M']}x{p['WARP_N']}, thread {tm}x{tn}; "
              f"per k, {tm + tn} shared floats for {tm * tn} FMAs ({(tm + tn) / (tm * tn):.3f} per FMA)")


def warp_owners(step: str) -> np.ndarray:
    """Which lane computes each element of warp 0's WARP_M x WARP_N tile of C in `step` (09 or 10), from the kernels'
    index arithmetic. Step 09 (as 07): lane l owns 4 x 4 pieces, rows warp_row + l / LANES_N * 4 + i * WARP_SUB_M + r.
    Step 10: lane l owns single rows warp_row + l / LANES_N + i * LANES_M (i < THREAD_M), the same columns, in 1 x 4
    pieces (the header's "Lane l" line), so that a warp's float4 reads of sA[m][k] fall on LANES_M consecutive rows."""
    if not step.endswith("10_cp_async"):
        p = gemmlab.instance(step).params
        return tiling.owners(step, p)[:p["WARP_M"], :p["WARP_N"]] % 32
    p = gemmlab.instance(step).params
    wm, wn, tm, tn = p["WARP_M"], p["WARP_N"], p["THREAD_M"], p["THREAD_N"]
    lanes_n, lanes_m, sub_n = wn // tn, wm // tm, wn // (tn // 4)
    own = np.full((wm, wn), -1, dtype=int)
    for lane in range(32):
        for i in range(tm):
            for j in range(tn // 4):
                c = lane % lanes_n * 4 + j * sub_n
                own[lane // lanes_n + i * lanes_m, c:c + 4] = lane
    return own


def draw_row_ownership(steps=("sgemm/09_double_buffer", "sgemm/10_cp_async"), axes=None):
    """Warp 0's tile by lane in each step (colour and number: lane; black: lane 0): 4 x 4 pieces in 09, single
    interleaved rows (1 x 4 pieces) in 10. Returns the axes."""
    if axes is None:
        _, axes = plt.subplots(1, len(steps), figsize=(10, 5.2))
    for ax, step in zip(np.atleast_1d(axes), steps):
        own = warp_owners(step)
        ax.imshow(own, cmap="hsv", vmin=0, vmax=32, interpolation="nearest", aspect="auto")
        ax.imshow(np.ma.masked_where(own != 0, np.ones_like(own)), cmap=ListedColormap(["black"]),
                  interpolation="nearest", aspect="auto")
        tall = own[1, 0] == own[0, 0]  # pieces taller than one row get their lane's number
        for (r, c), lane in np.ndenumerate(own):  # the lane's number on the first cell of each of its pieces
            if tall and (c == 0 or own[r, c - 1] != lane) and (r == 0 or own[r - 1, c] != lane):
                ax.text(c, r, str(lane), fontsize=4.5, ha="left", va="center",
                        color="white" if lane == 0 else "black")
        rows = sorted(set(np.nonzero(own == 0)[0].tolist()))
        ax.set_title(f"{step.split('/')[1]}: warp 0's {own.shape[0]} x {own.shape[1]} tile by lane\n"
                     f"lane 0 (black) owns rows {', '.join(map(str, rows))}", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0].figure.tight_layout()
    return axes


def row_ownership_picture() -> None:
    """draw_row_ownership() for steps 09 and 10."""
    draw_row_ownership()
    plt.show()


def sa_reads(step: str = "sgemm/10_cp_async", pitch: int | None = None, k4: int = 0) -> list[int]:
    """Byte addresses in one stage's sA of the LDS.128 a warp issues for the first of its THREAD_M rows at k = k4:
    lane l reads the float4 sA[l / LANES_N][k4..k4 + 3] (step 10's listing); `pitch` floats per row (default the
    kernel's BLOCK_K + 4)."""
    p = gemmlab.instance(step).params
    pitch = p["BLOCK_K"] + 4 if pitch is None else pitch
    lanes_n = p["WARP_N"] // p["THREAD_N"]
    return [((lane // lanes_n) * pitch + k4) * 4 for lane in range(32)]


def words_per_bank(addresses: list[int], access_bytes: int = 16) -> int:
    """The most distinct 4-byte words the warp's distinct accesses put in one bank (1: every bank holds at most one
    word of the request, no conflict; a float4 read by several lanes counts once, a broadcast)."""
    banks: dict[int, set[int]] = {}
    for a in set(addresses):
        for w in range(a // sw.WORD, (a + access_bytes) // sw.WORD):
            banks.setdefault(w % sw.BANKS, set()).add(w)
    return max(len(v) for v in banks.values())


def draw_sa_banks(step: str = "sgemm/10_cp_async", rows: int = 8, axes=None):
    """Step 10's sA as stored (sA[m][k]: one row per m, k contiguous), coloured and numbered by bank, padded to
    BLOCK_K + 4 floats a row (left) and unpadded (right); the cells one warp's LDS.128 reads are outlined, the
    padding hatched. Each title says how many of the read words share a bank (words_per_bank). Returns the axes."""
    p = gemmlab.instance(step).params
    bk = p["BLOCK_K"]
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(12, 3.3), gridspec_kw={"width_ratios": [bk + 4, bk]})
    for ax, pitch in zip(axes, (bk + 4, bk)):
        banks = np.array([[(r * pitch + c) % sw.BANKS for c in range(pitch)] for r in range(rows)])
        cmap = plt.get_cmap("twilight")
        ax.imshow(banks, cmap=cmap, vmin=0, vmax=sw.BANKS - 1, interpolation="nearest", aspect="auto")
        read = {(a // 4) // pitch: (a // 4) % pitch for a in sa_reads(step, pitch)}
        for r in range(rows):
            for c in range(pitch):
                pad = c >= bk
                rgb = cmap(banks[r, c] / (sw.BANKS - 1))[:3]
                dark = 0.3 * rgb[0] + 0.59 * rgb[1] + 0.11 * rgb[2] < 0.5
                ax.text(c, r, str(banks[r, c]), ha="center", va="center", fontsize=6,
                        color="0.5" if pad else ("white" if dark else "black"))
                if pad:
                    ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, facecolor="white", edgecolor="0.6",
                                           hatch="///", lw=0.3))
            if r in read:
                ax.add_patch(Rectangle((read[r] - 0.5, r - 0.5), 4, 1, fill=False, edgecolor="black", lw=2))
        most = words_per_bank(sa_reads(step, pitch))
        ax.set_title(f"rows of {pitch} floats{' (BLOCK_K + 4)' if pitch > bk else ' (no padding)'}:\nthe warp's 8 "
                     f"float4s (outlined) put {most} word{'s' if most > 1 else ''} in a bank at most", fontsize=9)
        ax.set_xticks(range(0, pitch, 4), [f"k={c}" for c in range(0, pitch, 4)], fontsize=7)
        ax.set_yticks(range(rows), [f"m={r}" for r in range(rows)], fontsize=7)
    axes[0].figure.tight_layout()
    return axes


def sa_bank_picture() -> None:
    """draw_sa_banks(), the words per bank of that LDS.128 with and without the padding, and the profiler's record
    of step 10's shared-load bank conflicts (the padded kernel; the unpadded one was never recorded)."""
    draw_sa_banks()
    plt.show()
    bk = gemmlab.instance("sgemm/10_cp_async").params["BLOCK_K"]
    for pitch in (bk + 4, bk):
        print(f"row pitch {pitch} floats: the warp's 8 distinct float4s put at most "
              f"{words_per_bank(sa_reads(pitch=pitch))} word(s) in one bank")
    m = profile.load(COUNTERS_GPU).get("sgemm/10_cp_async", {})
    if m:
        conflicts = m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"]
        loads = m["smsp__inst_executed_op_shared_ld.sum"]
        glue("ch6_conflicts10_per_load", conflicts / loads)
        print(f"recorded ({COUNTERS_GPU}, 4096): {conflicts:,.0f} bank conflicts in {loads:,.0f} shared loads "
              f"({conflicts / loads:.5f} per load)")


def arch_check(step: str = "sgemm/10_cp_async", arch: str = "sm_75") -> None:
    """What compiling `step` for `arch` says (its ArchError's first line, or its resources), then `verify` in the
    emulator."""
    try:
        print(gemmlab.instance(step).resources(arch))
    except gemmlab.errors.ArchError as e:
        print("ArchError:", re.sub(r"<[^>]*>", "", str(e).splitlines()[0]))  # without the template parameters
    print(gemmlab.verify(gemmlab.step(step, backend="cpu")))


# ------------------------------------------------------------------------------------------------- measure
def measure(records: list, steps: list | None = None, table: list | None = None) -> None:
    """`steps` (default 07 to 11) at 4096 in TFLOP/s (plots.ladder, cuBLAS's band) and their % of cuBLAS at every
    size, from one run; then the records of `table` (default: `steps`) at every size, with cuBLAS's own TFLOP/s."""
    steps = steps or STEPS
    fig, (bars, ax) = plt.subplots(1, 2, figsize=(12, 3.8))
    plots.ladder(records, steps, ax=bars, size=SIZE)
    for step in steps:
        rows = sorted((r for r in records if r["step"] == step), key=lambda r: r["m"])
        ax.plot([r["m"] for r in rows], [r["pct_of_baseline"] for r in rows], "o-", label=step.split("/")[1])
    ax.set_xscale("log", base=2); ax.set_xlabel("M = N = K"); ax.set_ylabel("% of cuBLAS"); ax.set_ylim(0, 110)
    ax.legend(fontsize=7)
    fig.tight_layout()
    plt.show()
    shown = table or steps
    print(gemmlab.bench.table([r for r in records if r["step"] in shown]))


def sweep(step: str, top: int = 8, mark: dict | None = None) -> None:
    """The recorded sweep of `step` at 4096, best first (each point verified before it was timed); with `mark` (tile
    parameters changed from the defaults), that record too, wherever it ranks, with its shared memory and blocks per SM
    on sm_90 (glued as ch6_mark<v>_pct, ch6_mark<v>_blocks)."""
    recs = sorted(gemmlab.results.one_gpu([r for r in gemmlab.results.load() if r["step"] == step and r["m"] == SIZE]),
                  key=lambda r: -r["pct_of_baseline"])
    if recs:
        print(f"recorded sweep of {step} at {SIZE} on the {recs[0]['gpu']}, % of cuBLAS:")
    for r in recs[:top]:
        p = r["params"]
        stages = f"  NUM_STAGES {p['NUM_STAGES']}" if "NUM_STAGES" in p else ""
        print(f"{r['pct_of_baseline']:5.1f}%  BLOCK {p['BLOCK_M']}x{p['BLOCK_N']}x{p['BLOCK_K']}  WARP {p['WARP_M']}x"
              f"{p['WARP_N']}  THREAD {p['THREAD_M']}x{p['THREAD_N']}{stages}  ({r['date']})")
    if mark:
        r = sweep_record(step, **mark)
        if r:
            p = r["params"]
            inst = gemmlab.instance(step, **p)
            res = inst.resources("sm_90")
            launch = inst.step.launch(SIZE, SIZE, SIZE, inst.params)
            shared = res.shared_bytes + launch.shared_bytes
            blocks, limiter = blocks_per_sm(res.registers, launch.threads, shared, 90)
            rank = 1 + sum(q["pct_of_baseline"] > r["pct_of_baseline"] for q in recs)
            print(f"and rank {rank} of {len(recs)}:\n{r['pct_of_baseline']:5.1f}%  BLOCK {p['BLOCK_M']}x{p['BLOCK_N']}x"
                  f"{p['BLOCK_K']}  WARP {p['WARP_M']}x{p['WARP_N']}  THREAD {p['THREAD_M']}x{p['THREAD_N']}  NUM_STAGES "
                  f"{p.get('NUM_STAGES')}  ({r['date']}): {shared // 1024} KiB of shared memory a block, {blocks} "
                  f"block(s) per SM on sm_90 ({limiter})")
            glue(f"ch6_mark{_v(step)}_pct", r["pct_of_baseline"]); glue(f"ch6_mark{_v(step)}_blocks", blocks)
    print(gemmlab.results.timing_note(recs))


# --------------------------------------------------------------------------- what each change of a step brings
def sweep_record(step: str, **params) -> dict | None:
    """The recorded run of `step` at 4096 with its default tiles changed by `params` (one GPU), or None."""
    want = {**gemmlab.registry.get(step).resolve({}), **params}
    recs = gemmlab.results.one_gpu([r for r in gemmlab.results.load() if r["step"] == step and r["m"] == SIZE])
    return next((r for r in recs if all(r["params"].get(k) == v for k, v in want.items())), None)


def _tiles(p: dict) -> str:
    return (f"BLOCK {p['BLOCK_M']}x{p['BLOCK_N']}x{p['BLOCK_K']} WARP {p['WARP_M']}x{p['WARP_N']} "
            f"THREAD {p['THREAD_M']}x{p['THREAD_N']}")


def _line(label: str, r: dict | None) -> str:
    if not r:
        return f"  {label:37s} no record"
    old = "" if r["date"] >= gemmlab.results.INTERLEAVED_SINCE else ", cuBLAS timed first"
    return f"  {label:37s} {r['pct_of_baseline']:5.1f}% of cuBLAS  {_tiles(r['params'])}  ({r['date']}{old})"


def explain() -> None:
    """Registers, blocks per SM and thread tile of steps 09 and 11 (this machine's compile, sm_90)."""
    for step in ("sgemm/09_double_buffer", "sgemm/11_fragment_prefetch"):
        inst = gemmlab.instance(step)
        r = inst.resources("sm_90")
        threads = inst.step.launch(SIZE, SIZE, SIZE, inst.params).threads
        blocks, limiter = blocks_per_sm(r.registers, threads, r.shared_bytes, 90)
        print(f"{step}: {r.registers} registers, {blocks} block(s) of {threads} threads per SM ({limiter}), "
              f"{inst.params['THREAD_M']}x{inst.params['THREAD_N']} outputs per thread")


def claim() -> None:
    """Every step of the chapter against float64 in the emulator."""
    for step in STEPS:
        print(f"{step}: {gemmlab.verify(gemmlab.step(step, backend='cpu'))} (emulator)")


ONE_RUN_COUNTERS, ONE_RUN_STEP07 = "nvidia-h200", "sgemm/07_warptiling<base>"  # the run's GPU's profile of step 07
ONE_RUN = REPO / "results" / "experiments" / "ch6-parts"  # the checkout, or the installed copy (Colab)
ONE_RUN_LOGS = {  # the step whose changes a table takes apart: (log, {variant in the log: label})
    "sgemm/08_register_prefetch": [
        ("step07", {"step": "step 07", "step:BLOCK_K=16": "step 07, BLOCK_K=16"}),
        ("step08", {"step": "step 08", "step:BLOCK_K=8": "step 08, BLOCK_K=8", "no_cap": "step 08 without the cap",
                    "no_cap:BLOCK_K=8": "step 08 without the cap, BLOCK_K=8"}),
    ],
    "sgemm/11_fragment_prefetch": [
        ("step09", {"step": "step 09", "step:BLOCK_N=256,WARP_N=64,THREAD_N=16": "step 09 with 11's tiles"}),
        ("step11", {"step": "step 11", "step:BLOCK_N=128,WARP_N=32,THREAD_N=8": "step 11 with 09's tiles"}),
    ],
}


def one_run_rows(step: str) -> dict[str, dict]:
    """lab/ch6-parts/gpu.sh's interleaved run (results/experiments/ch6-parts, one GPU): per label, its rounds."""
    rows = {}
    for log, names in ONE_RUN_LOGS[step]:
        runs = ch5.cublas_runs((ONE_RUN / f"{log}.log").read_text())
        rows.update({names[v]: r for (v, _n), r in runs.items() if v in names})
    return rows


def one_run(step: str) -> None:
    """The table of one_run_rows(step): mean % of cuBLAS (spread of the rounds), TFLOP/s, cuBLAS's, and the GPU."""
    gpu = (ONE_RUN / "gpu.txt").read_text().splitlines()
    rows = one_run_rows(step)
    print(f"{gpu[1].split(',')[0]}, {gpu[2]}, {SIZE}, three interleaved rounds against cuBLAS (TF32 off):")
    print(ch5.cublas_runs_table({(k, SIZE): r for k, r in rows.items()}))


def parts(step: str) -> None:
    """Step 08's or 11's changes taken apart in one interleaved run (one_run's table); glues the % of cuBLAS the
    chapter quotes (means of the rounds), the run's GPU and date."""
    one_run(step)
    pct = {k: sum(r["pct"]) / len(r["pct"]) for k, r in one_run_rows(step).items()}
    keys = {"step 07": "s7", "step 07, BLOCK_K=16": "s7k16", "step 08": "s8", "step 08, BLOCK_K=8": "s8k8",
            "step 08 without the cap": "nocap", "step 08 without the cap, BLOCK_K=8": "nocapk8", "step 09": "s9",
            "step 09 with 11's tiles": "s9t11", "step 11": "s11", "step 11 with 09's tiles": "s11t9"}
    v = _v(step)
    for label, value in pct.items():
        glue(f"ch6_one{v}_{keys[label]}", value)
    if v == 8:
        for k in ("s7k16", "s8k8", "nocapk8"):
            glue(f"ch6_one8_{k}_x", pct[[lbl for lbl, kk in keys.items() if kk == k][0]] / pct["step 07"])
        # step 08's prediction from the H200's own profile of step 07 (the run's GPU; the chapter's is the H100's)
        m = profile.load(ONE_RUN_COUNTERS).get(ONE_RUN_STEP07)
        if m:
            st = dict(profile.stall_reasons(m, top=100))
            rec = {"stalls": st, "cpi": sum(st.values()),
                   "warps": m["sm__warps_active.avg.pct_of_peak_sustained_active"] / 100 * MAX_WARPS_PER_SM
                   / SCHEDULERS_PER_SM}
            hidden = st.get("long_scoreboard", 0.0)
            glue("ch6_pred8_h200", hide_bound(rec, hidden)); glue("ch6_pred8_more_h200", hide_bound(rec, hidden, 4.0))


def glue_small(records: list, size: int = 1024, steps=("sgemm/07_warptiling", "sgemm/09_double_buffer",
                                                      "sgemm/11_fragment_prefetch")) -> dict:
    """At a small size: each step's TFLOP/s, its block tile (the registry's defaults) and how many blocks cut C,
    against the records' GPU's SMs; glues ch6_small_*: why step 11's larger tile loses at 1024."""
    at = {(r["step"], r["m"]): r for r in records}
    out = {}
    for step in steps:
        if (step, size) not in at:
            continue
        p = gemmlab.instance(step).params
        blocks = -(-size // p["BLOCK_M"]) * -(-size // p["BLOCK_N"])
        out[step] = {"tflops": at[(step, size)]["tflops"], "blocks": blocks, "tile": f"{p['BLOCK_M']} x {p['BLOCK_N']}"}
        v = _v(step)
        glue(f"ch6_small{v}_tflops", out[step]["tflops"]); glue(f"ch6_small{v}_blocks", blocks)
        glue(f"ch6_small{v}_tile", out[step]["tile"])
        spec = hardware.spec_for(at[(step, size)]["gpu"])
        if spec:
            glue("ch6_small_sms", spec.sms)
    glue("ch6_small_n", size)
    return out
