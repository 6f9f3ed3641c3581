"""Chapter 7d, the Hopper schedule: hgemm/09 to 12 (persistent grid, TMA-store epilogue, mma in flight, stream-K).

The chapter's record wrangling, glue() calls, figures and tables, one function per figure; the notebook
(book/07d_hopper_schedule.ipynb) calls each once. Every number comes from results/ (live on a GPU).
"""
from __future__ import annotations

import gzip

import matplotlib.pyplot as plt
import numpy as np

import gemmlab
from gemmlab import hardware, profile
from gemmlab.chapters import plots
from gemmlab.chapters.glue import glue

STEPS = ["hgemm/08_wgmma", "hgemm/09_persistent", "hgemm/10_tma_store", "hgemm/11_mma_in_flight", "hgemm/12_stream_k"]
SIZES = [1024, 2048, 4096, 8192, 16384]


def records() -> dict:
    """The chapter's records (live on a GPU): steps 08 to 12 against cuBLAS; glues each step's % and the GPU."""
    sizes = gemmlab.bench.live_sizes(SIZES, steps=STEPS, dtype="float16")
    recs = gemmlab.benchmark(STEPS, sizes=sizes, verbose=False)
    at = {(r["step"], r["m"]): r for r in recs}
    for name in STEPS:
        if (name, 8192) in at:
            glue(f"ch7d_v{int(name.split('/')[1][:2])}_pct", at[(name, 8192)]["pct_of_baseline"])
            glue(f"ch7d_v{int(name.split('/')[1][:2])}_tflops", at[(name, 8192)]["tflops"])
            glue(f"ch7d_v{int(name.split('/')[1][:2])}_cublas", at[(name, 8192)]["baseline_tflops"])
    glue("ch7d_gpu", recs[0]["gpu"] if recs else hardware.NO_DATA)
    return at


def tile_owners(tiles_m: int, tiles_n: int, blocks: int, group_m: int = 0) -> np.ndarray:
    """Which block of a persistent grid computes each output tile, in the order the blocks walk them.

    Tile t (row-major, or banded by `group_m` rows if given) goes to block t % blocks in wave t // blocks:
    block b walks tiles b, b + blocks, b + 2 * blocks, ... Returns an int array (tiles_m, tiles_n) of owners.
    """
    if min(tiles_m, tiles_n, blocks) < 1:
        raise ValueError("tiles_m, tiles_n and blocks must be at least 1")
    owners = np.empty((tiles_m, tiles_n), dtype=int)
    for t in range(tiles_m * tiles_n):
        if group_m:
            band, r = divmod(t, group_m * tiles_n)
            rows = min(group_m, tiles_m - band * group_m)
            i, j = band * group_m + r % rows, r // rows
        else:
            i, j = divmod(t, tiles_n)
        owners[i, j] = t % blocks
    return owners


def persistent_picture(tiles_m: int = 6, tiles_n: int = 8, blocks: int = 10, group_m: int = 2):
    """Step 08 (one block per tile) beside step 09 (one block per SM, walking tiles): who computes which tile."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
    one_each = np.arange(tiles_m * tiles_n).reshape(tiles_m, tiles_n)
    walk = tile_owners(tiles_m, tiles_n, blocks, group_m)
    order = np.empty_like(walk)
    for t in range(tiles_m * tiles_n):
        order[np.unravel_index(t, walk.shape)] = t
    for ax, owners, title in ((axes[0], one_each, f"step 08: {tiles_m * tiles_n} blocks, one tile each"),
                              (axes[1], walk, f"step 09: {blocks} blocks (one per SM), each walks its tiles")):
        ax.imshow(owners % 20, cmap="tab20", vmin=0, vmax=19)
        for (i, j), b in np.ndenumerate(owners):
            wave = "" if owners is one_each else f"\nwave {list(zip(*np.nonzero(walk == b))).index((i, j))}"
            ax.text(j, i, f"b{b}{wave}", ha="center", va="center", fontsize=7)
        ax.set_title(title, fontsize=10); ax.set_xticks([]); ax.set_yticks([])
    plt.tight_layout(); plt.show()


def waves(at: dict) -> int:
    """The model before step 09: step 08's blocks (one per tile) in waves over the SMs; returns the SMs."""
    sms = hardware.spec_for(at[("hgemm/08_wgmma", 4096)]["gpu"]).sms if ("hgemm/08_wgmma", 4096) in at \
        else hardware.SPECS["h100-sxm"].sms
    print(f"{sms} SMs (the records' GPU); step 08 launches one block per 128 x 256 tile:")
    for n in (1024, 2048, 4096, 8192):
        tiles = int(np.prod(gemmlab.step("hgemm/08_wgmma", backend="cpu").launch_config(n, n, n).grid))
        print(f"  {n:5d}: {tiles:5d} tiles = {tiles / sms:5.2f} waves, {tiles // sms + (tiles % sms > 0)} tile"
              f" boundaries (ring fill + epilogue) per SM, each tile {n // 64} k tiles long")
        if n == 4096:
            glue("ch7d_tiles_4096", tiles); glue("ch7d_sms", sms)
            glue("ch7d_last_wave_pct", 100 * (tiles % sms or sms) / sms)
    return sms


def step09(at: dict) -> None:
    """Step 08 against 09 by size, and Nsight Compute at 4096 (time, clock, tensor pipe, L2)."""
    for name in ("hgemm/08_wgmma", "hgemm/09_persistent"):
        print(f"{name:20s} " + "  ".join(f"{n}: {at[(name, n)]['pct_of_baseline']:5.1f}%" for n in (1024, 2048, 4096, 8192, 16384)
                                           if (name, n) in at))
    wg = gemmlab.results.experiment("hgemm-wgmma")
    n8, n9 = wg["ncu"].get("step 08 at 4096"), wg["ncu"].get("step 09 at 4096")
    if n8 and n9:
        print("\nNsight Compute, one launch at 4096:   time (ms)  SM clock (GHz)  tensor pipe  L2 hit  L2 busy")
        for label, r in (("step 08", n8), ("step 09", n9)):
            print(f"  {label:34s} {r['duration_ms']:6.3f}  {r['sm_clock_ghz']:10.2f}  {r['tensor_pipe_pct']:10.0f}%  "
                  f"{r['l2_hit_pct']:5.0f}%  {r['l2_busy_pct']:6.0f}%")
        glue("ch7d_n8_tensor", n8["tensor_pipe_pct"]); glue("ch7d_n9_tensor", n9["tensor_pipe_pct"])
        glue("ch7d_n8_ms", n8["duration_ms"]); glue("ch7d_n9_ms", n9["duration_ms"])
    for name, key in (("hgemm/08_wgmma", "v8"), ("hgemm/09_persistent", "v9")):
        for n in (1024, 2048, 4096, 8192):
            if (name, n) in at:
                glue(f"ch7d_{key}_{n}", at[(name, n)]["pct_of_baseline"])


def step10(at: dict, sms: int) -> None:
    """Steps 09 and 10 against cuBLAS, and Nsight Compute's tensor pipe and lg_throttle stalls."""
    for name in ("hgemm/09_persistent", "hgemm/10_tma_store"):
        print(f"{name:20s} " + "  ".join(f"{n}: {at[(name, n)]['pct_of_baseline']:5.1f}% of cuBLAS "
                                           f"({at[(name, n)]['baseline_tflops']:.0f} TFLOP/s)" for n in (4096, 8192) if (name, n) in at))
    past = gemmlab.results.EXPERIMENTS / "hgemm-past-cublas"
    runs = {("step 09", n): past / f"gpu-run-2026-11-26-tma-store/ncu-09_persistent-{n}.csv.gz" for n in (4096, 8192)}
    runs.update({("step 10", n): past / f"gpu-run-2026-11-26-tma-store/ncu-10_tma_store-{n}.csv.gz" for n in (4096, 8192)})
    runs.update({("cuBLAS", n): past / f"ncu-2026-11-26/ncu-cublas-{n}.csv.gz" for n in (4096, 8192)})
    ncu = {key: profile.parse_raw_csv(gzip.open(path, "rt").read()) for key, path in runs.items() if path.exists()}
    print("\nNsight Compute, one launch each (H100, 2026-11-26):   time (us)  tensor pipe busy  lg_throttle per issue")
    for (who, n), m in sorted(ncu.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"  {who:8s} at {n}   {m['gpu__time_duration.sum'] / 1e3:10.1f}  {m['sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed']:15.1f}%"
              f"  {m.get('smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio', 0):12.2f}")
    for n in (4096, 8192):
        for who, key in (("step 09", "n9"), ("step 10", "n10"), ("cuBLAS", "nc")):
            glue(f"ch7d_{key}_tensor_{n}", ncu[(who, n)]["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"])
            glue(f"ch7d_{key}_us_{n}", ncu[(who, n)]["gpu__time_duration.sum"] / 1e3)
        glue(f"ch7d_n9_lg_{n}", ncu[("step 09", n)]["smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio"])
        for name, key in (("hgemm/10_tma_store", "v10"),):
            if (name, n) in at:
                glue(f"ch7d_{key}_{n}", at[(name, n)]["pct_of_baseline"])
                glue(f"ch7d_{key}_cublas_{n}", at[(name, n)]["baseline_tflops"])
    tiles10 = (4096 // 128) * (4096 // 256)  # step 10's 128 x 256 block tiles at 4096 (its grid is persistent)
    glue("ch7d_tiles10_4096", tiles10); glue("ch7d_waves10_4096", tiles10 / sms)
    rates = [r["cublas_tflops"] for r in gemmlab.results.experiment("hgemm-past-cublas")["timed"] if r["n"] == 4096]
    glue("ch7d_cublas4096_lo", min(rates)); glue("ch7d_cublas4096_hi", max(rates))


def _h200_pair(*steps: str) -> list[dict]:
    """Two steps' records against cuBLAS on an H200 at 4096 and 8192 (live on a GPU), printed as a table with each
    record's alone-timed share; returns the records."""
    h200 = gemmlab.benchmark(list(steps), sizes=[4096, 8192], gpu="NVIDIA H200", verbose=False)
    print(gemmlab.bench.table(h200))
    for r in h200:
        if "pct_of_baseline_alone" in r:
            print(f"  alone, back to back: {r['step']} at {r['m']}: {r['pct_of_baseline_alone']:.1f}% of cuBLAS")
    return h200


def step11() -> dict:
    """Steps 10 and 11 on an H200 (records, the lab's rounds, clocks, fixed clock, Nsight Compute); returns the lab's results."""
    # Steps 10 and 11 against cuBLAS on an H200 (the records; live on a GPU): rotated order, and each alone
    _h200_pair("hgemm/10_tma_store", "hgemm/11_mma_in_flight")
    # The lab's runs of both steps in one loop with cuBLAS, several rounds per way of timing (results.json)
    past = gemmlab.results.experiment("hgemm-past-cublas")
    s10, s11 = "hgemm/10_tma_store", "hgemm/11_mma_in_flight"
    print(f"\n{past['gpu']}, {past['date']}: % of the faster cuBLAS call in the same loop, lowest to highest round")
    for mode in ("rotated", "fixed", "other", "cold", "alone"):
        for n in (4096, 8192):
            rows = [r for r in past["timed"] if r["mode"] == mode and r["n"] == n and {s10, s11} <= set(r["pct"])]
            v10, v11 = [r["pct"][s10] for r in rows], [r["pct"][s11] for r in rows]
            gain = [b - a for a, b in zip(v10, v11)]
            cublas = [r["cublas_tflops"] for r in rows]
            print(f"  {mode:8s} {n}  step 10 {min(v10):5.1f} to {max(v10):5.1f}%   step 11 {min(v11):5.1f} to {max(v11):5.1f}%"
                  f"   11 - 10: {min(gain):+.1f} to {max(gain):+.1f} points   cuBLAS {min(cublas):.0f} to {max(cublas):.0f} TFLOP/s"
                  f"   ({len(rows)} rounds)")
            for key, vals in (("v11", v11), ("gain11", gain), ("cublas11", cublas)):
                glue(f"ch7d_{key}_{mode}_{n}_lo", min(vals)); glue(f"ch7d_{key}_{mode}_{n}_hi", max(vals))
    calls = (s10, s11, "cupy.matmul", "torch.matmul")
    clocks = [p["sm_clock_mhz"] for p in past["power"] if p["n"] == 4096 and p["call"] in calls]
    watts = [p["power_w"] for p in past["power"] if p["n"] == 4096 and p["call"] in calls]
    print(f"\nEach call alone for 2 s at 4096 (nvidia-smi, every run): SM clock {min(clocks):.0f} to {max(clocks):.0f} MHz, "
          f"{min(watts):.0f} to {max(watts):.0f} W")
    glue("ch7d_clock11_lo", min(clocks)); glue("ch7d_clock11_hi", max(clocks))
    fixed = past["fixed_clock"]["4096"]
    print("At the base clock under Nsight Compute, L2 left warm, 4096: " + ", ".join(
        f"{who} {v['median_us']:.1f} us" for who, v in sorted(fixed.items())) + " (median of 20 launches each)")
    glue("ch7d_fixed11_us", fixed["step 11"]["median_us"]); glue("ch7d_fixedcublas_us", fixed["cuBLAS"]["median_us"])
    run11 = gemmlab.results.EXPERIMENTS / "hgemm-past-cublas" / "gpu-run-2026-11-28-step11"
    runs = {(who, n): run11 / f"ncu-{who}-{n}.csv.gz" for who in ("10_tma_store", "11_mma_in_flight") for n in (4096, 8192)}
    ncu11 = {key: profile.parse_raw_csv(gzip.open(path, "rt").read()) for key, path in runs.items() if path.exists()}
    stall = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
    print("\nNsight Compute, one launch each (H200, 2026-11-28):  time (us)  tensor pipe busy  stalls per issue: barrier  mio_throttle")
    for (who, n), m in sorted(ncu11.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"  step {who[:2]} at {n}   {m['gpu__time_duration.sum'] / 1e3:10.1f}  {m['sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed']:15.1f}%"
              f"  {m.get(stall.format('barrier'), 0):24.2f}  {m.get(stall.format('mio_throttle'), 0):12.2f}")
        glue(f"ch7d_n{who[:2]}h_tensor_{n}", m["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"])
        glue(f"ch7d_n{who[:2]}h_barrier_{n}", m.get(stall.format("barrier"), 0))
    return past


def stream_k_picture() -> int:
    """Each SM's work in the last two waves at 8192 (whole tiles, then shared); glues the model's saving."""
    # Each SM's work in the last two waves at 8192 on an H200's 132 SMs: tiles of 128 x 256
    sms = 132
    for n in (4096, 8192):
        tiles, k_tiles = (n // 128) * (n // 256), n // 64
        glue(f"ch7d_sk_tiles_{n}", tiles); glue(f"ch7d_sk_rounds_{n}", tiles // sms); glue(f"ch7d_sk_last_{n}", tiles % sms)
        saving = k_tiles * (sms - tiles % sms) / sms  # idle k tiles per block that sharing removes
        glue(f"ch7d_sk_saving_{n}", saving)
        whole = k_tiles * (tiles // sms + 1)  # k tiles of time per SM with whole tiles
        glue(f"ch7d_sk_pred_{n}", 100 * (whole / (whole - saving) - 1))  # predicted gain, %, if sharing were free
        print(f"{n}: {tiles} tiles on {sms} SMs, last wave {tiles % sms}: sharing saves {saving:.1f} of {whole} k tiles"
              f" per SM, a gain of {100 * (whole / (whole - saving) - 1):.1f}% if it cost nothing")
    glue("ch7d_sms_h200", sms)
    glue("ch7d_min_gain", gemmlab.registry.get("hgemm/12_stream_k").params["MIN_GAIN"].default)
    fig, axes = plt.subplots(1, 2, figsize=(11, 2.6), sharey=True)
    whole, last = divmod(8192 // 128 * 8192 // 256, sms)
    for ax, (title, busy) in zip(axes, [("step 11: whole tiles", [whole + (sm < last) for sm in range(sms)]),
                                        ("step 12: the last wave shared", [whole + last / sms] * sms)]):
        ax.barh(range(sms), [b - (whole - 1) for b in busy], left=whole - 1, height=1.0, color="tab:blue")
        ax.set_xlim(whole - 1, whole + 1.05); ax.set_title(title); ax.set_xlabel("time, in tiles")
    axes[0].set_ylabel("SM")
    plt.tight_layout(); plt.show()
    return sms


def step12(past: dict, sms: int) -> None:
    """Steps 11 and 12 on an H200: records, the lab's rounds, the fixed clock, the timeline, least busy SM."""
    # Steps 11 and 12 against cuBLAS on an H200 (the records of one run each; live on a GPU): rotated order, and alone
    h200 = _h200_pair("hgemm/11_mma_in_flight", "hgemm/12_stream_k")
    rates = [r["baseline_tflops"] for r in h200 if r["m"] == 4096]
    print(f"  (one run each: cuBLAS's own rate at 4096 moved from {min(rates):.0f} to {max(rates):.0f} TFLOP/s between them;"
          " the rounds below time all the calls in one loop)")
    # The lab's run of 11, 12 and 12 sharing at any gain (MIN_GAIN=1) in one loop with cuBLAS (results.json);
    # a round here is one pass of the timing loop
    s11, s12, any12 = "hgemm/11_mma_in_flight", "hgemm/12_stream_k", "hgemm/12_stream_k:MIN_GAIN=1"
    print(f"\n% of the faster cuBLAS call in the same loop, lowest to highest of three rounds ({past['gpu']})")
    for n in (4096, 8192):
        for mode in ("rotated", "cold", "alone"):
            rows = [r for r in past["timed"] if r["mode"] == mode and r["n"] == n and {s12, any12} <= set(r["pct"])]
            v12 = [r["pct"][s12] for r in rows]
            gain, gain_any = ([r["pct"][who] - r["pct"][s11] for r in rows] for who in (s12, any12))
            print(f"  {mode:8s} {n}  step 12 {min(v12):5.1f} to {max(v12):5.1f}%   12 - 11: {min(gain):+.1f} to "
                  f"{max(gain):+.1f} points   sharing at any gain - 11: {min(gain_any):+.1f} to {max(gain_any):+.1f}")
            for key, vals in (("v12", v12), ("gain12", gain), ("gainany12", gain_any)):
                glue(f"ch7d_{key}_{mode}_{n}_lo", min(vals)); glue(f"ch7d_{key}_{mode}_{n}_hi", max(vals))
    print("\nAt the base clock under Nsight Compute, L2 warm (median of 20 launches, us):")
    for key, what, tag in (("fixed_clock_stream_k", "MIN_GAIN=16", "k"), ("fixed_clock_stream_k_any_gain", "any gain", "any")):
        for n in ("4096", "8192"):
            t = past[key][n]
            print(f"  {n} ({what}): " + ", ".join(f"{who} {v['median_us']:.1f}" for who, v in sorted(t.items())))
            glue(f"ch7d_fixed12_{tag}_{n}_gain", 100 * (t["step 11"]["median_us"] / t["step 12"]["median_us"] - 1))
            glue(f"ch7d_fixed12_{tag}_{n}_pct", 100 * t["cuBLAS"]["median_us"] / t["step 12"]["median_us"])
    tl = {(t["run"], t["n"], t["max_split"]): t for t in past["timeline"]}
    print("\nTimeline, one launch, every tile of the last wave shared (us from the launch's start):")
    for n in (4096, 8192):
        shared, whole = tl[("stream-k", n, 4)], tl[("stream-k", n, 1)]
        e = shared["events"]
        print(f"  {n}: last round starts {e['range']['median']:.1f}, parts handed over by {e['handed']['median']:.1f}, "
              f"finishing blocks wait and load {shared['wait_us']['median']:.1f} (max {shared['wait_us']['max']:.1f}), "
              f"last block done {e['end']['median']:.1f} (median), launch {shared['launch_us']:.1f}; with whole tiles "
              f"{whole['launch_us']:.1f}")
        glue(f"ch7d_tl_wait_{n}", shared["wait_us"]["median"]); glue(f"ch7d_tl_shared_{n}", shared["launch_us"])
        glue(f"ch7d_tl_whole_{n}", whole["launch_us"])
        # what sharing costs a block, in k tiles of time: its last wave's span less the k tiles of its range
        rounds, k_tiles, tiles = n // 128 * n // 256 // sms, n // 64, n // 128 * n // 256
        per_k = e["range"]["median"] / (rounds * k_tiles)
        glue(f"ch7d_sk_cost_{n}", (e["end"]["median"] - e["range"]["median"]) / per_k - tiles % sms * k_tiles / sms)
    run12 = gemmlab.results.EXPERIMENTS / "hgemm-past-cublas" / "gpu-run-2026-11-28-stream-k" / "part3"
    busy = "sm__pipe_tensor_cycles_active.{}.pct_of_peak_sustained_elapsed"
    print("\nNsight Compute, one launch at 8192: tensor pipe busy, average and least busy SM")
    for who in ("11_mma_in_flight", "12_stream_k"):
        row = profile.raw_csv_rows(gzip.open(run12 / f"ncu-{who}-8192.csv.gz", "rt").read())[-1]
        m = {key: float(row[busy.format(key)]) for key in ("avg", "min")}
        print(f"  step {who[:2]}: {m['avg']:.1f}%, least {m['min']:.1f}%")
        glue(f"ch7d_n{who[:2]}k_min_8192", m["min"])



def ladder(at: dict, h200: list | None = None) -> None:
    """Steps 08 to 10 on the records' GPU and 10 to 12 on an H200, in TFLOP/s with cuBLAS's band."""
    h200 = h200 if h200 is not None else gemmlab.benchmark(STEPS[2:], sizes=[4096, 8192], gpu="NVIDIA H200",
                                                            verbose=False)
    fig, axes = plt.subplots(1, 2, figsize=(13, 3.8))
    plots.ladder(list(at.values()), STEPS[:3], ax=axes[0], size=8192)
    plots.ladder(h200, STEPS[2:], ax=axes[1], size=8192)
    plt.tight_layout(); plt.show()


def early_release() -> str:
    """Step 11 releasing the stage of the group it has just committed, before any wait: the emulator's hazard check.

    Returns the sentence the check gives (the emulator hashes a group's shared memory at issue and at its wait).
    """
    kern = gemmlab.kernel.edited("hgemm/11_mma_in_flight",
                                 "if (t > 0 && threadIdx.x % 128 == 0) mbarrier_arrive(&empty[(step - 1) % NUM_STAGES]);",
                                 "if (threadIdx.x % 128 == 0) mbarrier_arrive(&empty[s]);",
                                 backend="cpu", NUM_STAGES=2, BLOCK_N=128)
    a, b = (np.random.default_rng(11).uniform(-1, 1, s).astype(np.float16) for s in ((300, 520), (520, 264)))
    try:
        kern(a, b)
        return "the early release went unnoticed"
    except gemmlab.errors.InputError as e:
        return "released too early: " + str(e).split(": ", 1)[1]
