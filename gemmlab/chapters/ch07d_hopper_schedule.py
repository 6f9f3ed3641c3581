"""Chapter 7d, the Hopper schedule: hgemm/09 to 12 (persistent grid, TMA-store epilogue, mma in flight, stream-K).

The chapter's record wrangling, glue() calls, figures, models and tables, one function per figure; the notebook
(book/07d_hopper_schedule.ipynb) calls each once. Every timing comes from one run on an H200 (chapter 7c's
one_run: results/nvidia-h200.json, dated RUN_DATE), the warp states from results/nvidia-h200.ncu.json, the board's
clock and the fixed-clock timings from the lab's run on the same GPU model (results/experiments/hgemm-past-cublas).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

import gemmlab
from gemmlab import hardware, profile
from gemmlab.chapters import ch07c_hopper_wgmma as ch7c
from gemmlab.chapters import plots
from gemmlab.chapters.glue import glue
import contextlib
import io
from matplotlib.patches import Rectangle
import gzip

STEPS = ["hgemm/08_wgmma", "hgemm/09_persistent", "hgemm/10_tma_store", "hgemm/11_mma_in_flight", "hgemm/12_stream_k"]
SIZES = (4096, 8192)
GPU = ch7c.GPU
BLOCK_M, BLOCK_N, BLOCK_K, BOX = 128, 256, 64, 64  # the block tile, its k tile, and the TMA store's box of C


def _key(step: str) -> str:
    return f"v{int(step.split('/')[1][:2])}"


def records() -> dict:
    """Steps 08 to 12 against cuBLAS at 4096 and 8192 from the one run (ch7c.one_run: one GPU, one date), by
    (step, size); glues the GPU, the run's date, and each step's TFLOP/s, % of cuBLAS and cuBLAS's own rate."""
    at = {(r["step"], r["m"]): r for r in ch7c.one_run(STEPS, SIZES)}
    for (step, n), r in at.items():
        glue(f"ch7d_{_key(step)}_{n}", r["pct_of_baseline"])
        glue(f"ch7d_{_key(step)}_{n}_tflops", r["tflops"])
        glue(f"ch7d_{_key(step)}_{n}_cublas", r["baseline_tflops"])
    for (step, n), r in at.items():  # each step against the one before, in TFLOP/s, and cuBLAS beside each
        prev = at.get((STEPS[STEPS.index(step) - 1], n)) if step != STEPS[0] else None
        if prev:
            glue(f"ch7d_{_key(step)}_{n}_gain", 100 * (r["tflops"] / prev["tflops"] - 1))
            glue(f"ch7d_{_key(step)}_{n}_cgain", 100 * (r["baseline_tflops"] / prev["baseline_tflops"] - 1))
    glue("ch7d_gpu", next(iter(at.values()))["gpu"] if at else hardware.NO_DATA)
    clk = ch7c.board_clock()
    glue("ch7d_clk_lo", clk["mhz_lo"]); glue("ch7d_clk_hi", clk["mhz_hi"]); glue("ch7d_clk_watts", clk["watts"])
    glue("ch7d_clk_mhz", clk["mhz"])
    glue_profiled_clock()
    glue("ch7d_run_date", ch7c.RUN_DATE)
    for n in SIZES:  # the ladder's band: the cuBLAS calls timed beside this chapter's steps (one range, one source)
        lohi = cublas_band(at, n)
        if lohi:
            glue(f"ch7d_cublas{n}_lo", lohi[0]); glue(f"ch7d_cublas{n}_hi", lohi[1])
            glue(f"ch7d_cublas{n}_drift", 100 * (lohi[1] / lohi[0] - 1))  # cuBLAS's spread over the run, %
        r = at.get((STEPS[-1], n))
        glue(f"ch7d_v12_{n}_us", 2.0 * n ** 3 / (r["tflops"] * 1e12) * 1e6 if r else float("nan"))
    r9, r8 = at.get((STEPS[1], 8192)), at.get((STEPS[0], 8192))
    if r9 and r8:  # step 09 at 8192: the model's gain less the run's, in points (set against cuBLAS's drift)
        glue("ch7d_v9_8192_gap", tile_model(8192, at)["fill_pct"] - 100 * (r9["tflops"] / r8["tflops"] - 1))
    with contextlib.redirect_stdout(io.StringIO()):  # the models and profiles the prose quotes before their tables
        predictions(at); profile_table(STEPS); step12(at, stream_k_model())
    return at


def profiled_clock(steps=STEPS) -> dict:
    """The SM clock of the profiled launch (the first of a fresh process at 4096), from chapter 7c's repeat of the
    protocol in another process (ch7c.first_launches): per step, MHz, its time (µs) beside this chapter's profiler's
    time, % above the board's sustained clock; and over `steps`, the lowest and highest MHz and their spread (%)."""
    first = {f["step"]: f for f in ch7c.first_launches(steps)}
    mhz = [f["mhz"] for f in first.values()]
    return {"steps": first, "mhz_lo": min(mhz, default=float("nan")), "mhz_hi": max(mhz, default=float("nan")),
            "spread_pct": 100 * (max(mhz) / min(mhz) - 1) if mhz else float("nan")}


def glue_profiled_clock() -> None:
    """profiled_clock's figures for step 08 and over steps 08-12; where step 08's barrier samples sit (chapter 7c's
    source page), quoted before step 11."""
    pc = profiled_clock()
    v8 = pc["steps"].get(STEPS[0])
    if v8:
        glue("ch7d_first_v8_mhz", v8["mhz"]); glue("ch7d_first_v8_over", v8["over_board_pct"])
        glue("ch7d_first_v8_us", v8["us"])
        glue("ch7d_first_lo", pc["mhz_lo"]); glue("ch7d_first_hi", pc["mhz_hi"])
        glue("ch7d_first_spread", pc["spread_pct"]); glue("ch7d_places_date", ch7c.PLACES_DATE)
    p = ch7c.barrier_places(STEPS[0])
    if p:
        glue("ch7d_v8_src_depbar_pct", p["depbar_pct"])
    p = ch7c.barrier_places(STEPS[3])
    if p:  # step 11's source page: its warps still wait at a DEPBAR, now wgmma_wait<1>'s, and mio_throttle at the HGMMAs
        glue("ch7d_v11_src_barrier_pct", p["barrier_pct"])
        glue("ch7d_v11_src_wait1_pct", p["depbar_kinds"].get("gsb0, 0x1", 0.0))
        glue("ch7d_v11_src_wait0_pct", p["depbar_kinds"].get("gsb0, 0x0", 0.0))
        mio = ch7c.stall_places(STEPS[3], "mio")
        glue("ch7d_v11_src_mio_pct", mio["pct_of_all"]); glue("ch7d_v11_src_mio_hgmma", mio["by_opcode"].get("HGMMA", 0.0))
    drift = ch7c.cublas_drift(8192)
    if drift:  # step 08 against the run's median cuBLAS at 8192 (chapter 7c's caveat)
        glue("ch7d_v8_8192_pct_med", drift["pct_of_median"].get(STEPS[0], float("nan")))


def two_tiles_check() -> str:
    """Step 09 in the emulator at 2000 x 2000 (256 tiles of 128 x 128 on 132 blocks: most blocks carry the ring into a
    second tile) with a ring of 2 stages, against float64 within the fp32 bound."""
    a, b = (np.random.default_rng(9).uniform(-1, 1, s).astype(np.float16) for s in ((2000, 520), (520, 2000)))
    got = gemmlab.step(STEPS[1], backend="cpu", BLOCK_N=128, NUM_STAGES=2)(a, b)
    ok = not gemmlab.check.compare(got, a, b, "float32")[0].any()
    return f"two tiles per block, ring of 2 stages: matches float64 within the fp32 bound: {ok}"


def cublas_band(at: dict, size: int) -> tuple[float, float] | None:
    """The lowest and highest cuBLAS rate (TFLOP/s) over the cuBLAS calls timed beside steps 08 to 12 at `size` in
    the one run: the band the ladder draws (plots.ladder takes it from the same records)."""
    rates = [r["baseline_tflops"] for (s, n), r in at.items() if n == size and r.get("baseline_tflops")]
    return (min(rates), max(rates)) if rates else None


def table(at: dict, steps) -> None:
    """The run's records of `steps`: TFLOP/s, % of cuBLAS and cuBLAS's own rate beside each, at 4096 and 8192."""
    print(gemmlab.bench.table([r for (s, _), r in sorted(at.items(), key=lambda kv: (kv[0][1], STEPS.index(kv[0][0])))
                               if s in steps]))


def stalls(step: str) -> dict | None:
    """Nsight Compute, one launch at 4096 (--clock-control none: the board's own clock, as in the run): time
    (gpu__time_duration) and the rate it implies, tensor pipe busy, top stalls."""
    m = profile.load(GPU).get(step)
    if not m:
        return None
    return {"us": m["gpu__time_duration.sum"] / 1e3, "tflops": 2.0 * 4096 ** 3 / m["gpu__time_duration.sum"] / 1e3,
            "tensor": m[ch7c.TENSOR_BUSY],
            "stalls": profile.stall_reasons(m, top=4)}


def profile_table(steps) -> None:
    """The profiler's view of `steps` at 4096: one launch each, time, tensor pipe busy and the top stalls (warps
    stalled per issued instruction); glues each step's time (and the rate it implies), busy share and top stalls.
    A lone launch is the first of its process (python -m gemmlab run STEP under ncu), after the GPU idled while the
    process started; its MHz: the SM clock of that launch in a repeat of the protocol in another process
    (profiled_clock), above the clock the run's loop holds at the board's power limit."""
    print(f"Nsight Compute at 4096, {GPU}, one launch, clock not locked (its MHz: a repeat's, {ch7c.PLACES_DATE}):\n"
          f"{'':26s} time (us)  TFLOP/s  its MHz  tensor pipe busy  top stalls per issued instruction")
    clock = profiled_clock(steps)["steps"]
    for step in steps:
        st = stalls(step)
        if st is None:
            print(f"  {step:24s} recorded data missing")
            continue
        mhz = f"{clock[step]['mhz']:7.0f}" if step in clock else "      -"
        print(f"  {step:24s} {st['us']:8.1f} {st['tflops']:8.0f}  {mhz}  {st['tensor']:15.1f}%   "
              + ", ".join(f"{k} {v:.2f}" for k, v in st["stalls"]))
        k = _key(step)
        glue(f"ch7d_n{k}_us", st["us"]); glue(f"ch7d_n{k}_tensor", st["tensor"]); glue(f"ch7d_n{k}_tflops", st["tflops"])
        for i, (name, v) in enumerate(st["stalls"][:3]):
            glue(f"ch7d_n{k}_stall{i}", name); glue(f"ch7d_n{k}_stall{i}_v", v)
        glue(f"ch7d_n{k}_lg", dict(st["stalls"]).get("lg_throttle", 0.0))
        glue(f"ch7d_n{k}_mio", dict(st["stalls"]).get("mio_throttle", 0.0))
        prev = stalls(STEPS[STEPS.index(step) - 1]) if step != STEPS[0] else None
        if prev:
            glue(f"ch7d_n{k}_gain", 100 * (prev["us"] / st["us"] - 1))


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


def persistent_owners(tiles_m: int, tiles_n: int, blocks: int, group_m: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Both panels of the picture before step 09, from tile_owners in the same banded order: step 08's block per
    tile (one block per tile, block t on the t-th tile of the order) and step 09's (blocks walking the order)."""
    return (tile_owners(tiles_m, tiles_n, tiles_m * tiles_n, group_m), tile_owners(tiles_m, tiles_n, blocks, group_m))


def persistent_picture(tiles_m: int = 6, tiles_n: int = 8, blocks: int = 10, group_m: int = 2):
    """Step 08 (one block per tile) beside step 09 (one block per SM, walking tiles), both in the banded order of
    `group_m` rows the kernels use: who computes which tile. Returns the figure's two axes."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
    one_each, walk = persistent_owners(tiles_m, tiles_n, blocks, group_m)
    for ax, owners, title in ((axes[0], one_each, f"step 08: one tile per block, banded order ({tiles_m * tiles_n} blocks)"),
                              (axes[1], walk, f"step 09: {blocks} blocks (one per SM) walk the same order")):
        ax.imshow(owners % 20, cmap="tab20", vmin=0, vmax=19)
        for (i, j), b in np.ndenumerate(owners):
            wave = "" if owners is one_each else f"\nwave {list(zip(*np.nonzero(walk == b))).index((i, j))}"
            ax.text(j, i, f"b{b}{wave}", ha="center", va="center", fontsize=7)
        ax.set_title(title, fontsize=10); ax.set_xticks([]); ax.set_yticks([])
    plt.tight_layout(); plt.show()
    return axes


def tile_model(size: int, at: dict | None = None, sms: int | None = None) -> dict:
    """What a tile costs on one SM at `size`, from step 08's record: the tiles and waves, a tile's time (the run's
    rate shared out over the SMs' tiles), the ring's fill (one k tile's load, 7c's serial model) and the epilogue
    (64 KB of C at the SM's share of DRAM bandwidth), each as a share of a tile."""
    spec = hardware.spec_for(GPU)
    sms = sms or spec.sms
    tiles, k_tiles = (size // BLOCK_M) * (size // BLOCK_N), size // BLOCK_K
    r = (at or {}).get(("hgemm/08_wgmma", size))
    tflops = r["tflops"] if r else spec.fp16_tensor_tflops
    waves = tiles / sms
    tile_us = 2.0 * size ** 3 / (tflops * 1e12) / np.ceil(waves) * 1e6
    fill_us = ch7c.serial_prediction()["copy_us"]
    epi_us = BLOCK_M * BLOCK_N * 2 / (spec.dram_gbps * 1e9 / sms) * 1e6
    return {"tiles": tiles, "sms": sms, "waves": waves, "k_tiles": k_tiles, "last_wave_pct": 100 * (tiles % sms or sms) / sms,
            "tile_us": tile_us, "fill_us": fill_us, "epilogue_us": epi_us,
            "fill_pct": 100 * fill_us / tile_us, "epilogue_pct": 100 * epi_us / tile_us}


def predictions(at: dict) -> None:
    """The models before steps 09, 10 and 11, at 4096 and 8192: waves and the last wave's fill (09), the ring's fill
    per tile that a persistent grid hides (09), the epilogue that TMA stores hide (10), and the tensor pipe's idle
    share in step 10's profile, all that keeping a group in flight can win (11). Glues what the prose quotes."""
    print(f"{'size':>5s} {'tiles':>6s} {'waves':>6s} {'last wave':>9s} {'tile (us)':>9s} {'fill (us)':>9s}"
          f" {'09 wins':>8s} {'epilogue (us)':>13s} {'10 wins':>8s}")
    for n in SIZES:
        m = tile_model(n, at)
        print(f"{n:5d} {m['tiles']:6d} {m['waves']:6.2f} {m['last_wave_pct']:8.0f}% {m['tile_us']:9.1f} {m['fill_us']:9.2f}"
              f" {m['fill_pct']:7.1f}% {m['epilogue_us']:13.2f} {m['epilogue_pct']:7.1f}%")
        for k in ("tiles", "waves", "last_wave_pct", "tile_us", "fill_us", "fill_pct", "epilogue_us", "epilogue_pct"):
            glue(f"ch7d_m_{k}_{n}", m[k])
    glue("ch7d_sms", tile_model(4096)["sms"])
    st = stalls("hgemm/10_tma_store")
    if st:
        glue("ch7d_m11_idle", 100 - st["tensor"]); glue("ch7d_m11_gain", 100 * (100 / st["tensor"] - 1))
        print(f"11: at most the tensor pipe's idle share in step 10's profile, {100 - st['tensor']:.1f}% of the time"
              f" (+{100 * (100 / st['tensor'] - 1):.1f}% if it all went)")


def epilogue_boxes(block_m: int = BLOCK_M, block_n: int = BLOCK_N, box: int = BOX, bufs: int = 2) -> np.ndarray:
    """Step 10's epilogue: for each 64 x 64 box of the block tile, (consumer warp group, staging buffer, store
    order within the warp group). A warp group owns 64 rows; it writes its boxes left to right into a ring of
    `bufs` staging buffers, so box j reuses buffer j % bufs once box j - bufs has been stored."""
    rows, cols = block_m // box, block_n // box
    out = np.empty((rows, cols, 3), dtype=int)
    for i in range(rows):
        for j in range(cols):
            out[i, j] = (i // (64 // box) if box <= 64 else 0, j % bufs, j)
    return out


def draw_epilogue(bufs: int = 2):
    """The picture before step 10: the 128 x 256 tile of C as eight 64 x 64 boxes, each warp group's four boxes
    written in turn through a ring of `bufs` staging buffers and stored by TMA."""
    boxes = epilogue_boxes(bufs=bufs)
    fig, ax = plt.subplots(figsize=(9, 3.4))
    colours = ("tab:blue", "tab:orange")
    for (i, j), _ in np.ndenumerate(boxes[:, :, 0]):
        wg, buf, order = boxes[i, j]
        ax.add_patch(Rectangle((j * BOX, i * BOX), BOX, BOX, color=colours[wg], alpha=0.35 + 0.3 * buf, ec="white"))
        ax.text(j * BOX + BOX / 2, i * BOX + BOX / 2, f"warp group {wg + 1}\nbox {order}: staging buffer {buf}\n"
                f"then one TMA store", ha="center", va="center", fontsize=7)
    ax.set_xlim(0, BLOCK_N); ax.set_ylim(BLOCK_M, 0); ax.set_aspect("equal"); ax.axis("off")
    ax.set_title(f"Step 10's epilogue: {boxes.shape[0] * boxes.shape[1]} boxes of 64 x 64 per tile; each consumer warp "
                 f"group writes its {boxes.shape[1]} through a ring of {bufs} staging buffers", fontsize=8)
    return ax


def inflight_timeline(k_tiles: int, pending: int, issue: float = 1.0, run: float = 4.0) -> list[tuple]:
    """One consumer warp group's k tiles on the tensor pipe: (start, end, released) per group. A group's wgmmas are
    issued in `issue`, run for `run`; with wgmma_wait<pending> the warp group issues group t + 1 once at most
    `pending` groups are unfinished, and releases stage t at the wait that retires group t."""
    out, pipe_free, last_issue = [], 0.0, 0.0
    for t in range(k_tiles):
        start_issue = last_issue
        if pending == 0 and out:
            start_issue = max(start_issue, out[-1][1])  # waited for the previous group before issuing this one
        start = max(start_issue + issue, pipe_free)
        end = start + run
        pipe_free = end
        last_issue = start_issue + issue
        out.append((start, end, end))
    if pending:  # with one group pending, group t is released at the wait after issuing group t + 1
        out = [(s, e, max(e, out[i + 1][0] if i + 1 < len(out) else e)) for i, (s, e, _) in enumerate(out)]
    return out


def draw_inflight(k_tiles: int = 5):
    """The picture before step 11: one consumer warp group's groups on the tensor pipe with wgmma_wait<0> (step 10:
    a gap before each group, its issue) and with wgmma_wait<1> (step 11: the next group issued while one runs)."""
    fig, ax = plt.subplots(figsize=(9, 2.2))
    for y, pending, label in ((1, 0, "step 10: wgmma_wait<0>"), (0, 1, "step 11: wgmma_wait<1>")):
        for t, (s, e, rel) in enumerate(inflight_timeline(k_tiles, pending)):
            ax.barh(y, e - s, left=s, height=0.5, color="tab:orange")
            ax.text((s + e) / 2, y, f"k tile {t}", ha="center", va="center", fontsize=7)
            ax.plot([rel, rel], [y - 0.3, y + 0.3], color="k", lw=1)
        ax.text(-0.3, y, label, ha="right", va="center", fontsize=8)
    ax.set_yticks([]); ax.set_xticks([]); ax.set_xlabel("time (a group's issue takes a fifth of its run, for the picture)")
    ax.set_title("A consumer's wgmma groups on the tensor pipe; black tick: the stage goes back to the producer",
                 fontsize=8)
    ax.set_xlim(-9, None)
    return ax


def handover_cost(sms: int, n: int = 4096) -> dict:
    """What stream-K's hand-over costs a block, in k tiles, from the lab's timeline of one launch at n with every
    tile of the last wave shared (hgemm-past-cublas): the last round's time over one k tile's time (from the full
    waves before it), less the block's share of the work. Returns the events, one k tile's µs and the cost."""
    past = gemmlab.results.experiment("hgemm-past-cublas")
    shared = {(t["run"], t["n"], t["max_split"]): t for t in past["timeline"]}[("stream-k", n, 4)]
    e = shared["events"]
    rounds, k_tiles, tiles = n // BLOCK_M * n // BLOCK_N // sms, n // BLOCK_K, n // BLOCK_M * n // BLOCK_N
    per_k = e["range"]["median"] / (rounds * k_tiles)
    share = tiles % sms * k_tiles / sms
    return {"shared": shared, "events": e, "rounds": rounds, "k_tiles": k_tiles, "tiles": tiles, "per_k": per_k,
            "share": share, "cost": (e["end"]["median"] - e["range"]["median"]) / per_k - share}


def inflight_two(k_tiles: int, pending: int, issue: float = 1.0, run: float = 4.0, consumers: int = 2) -> list[list]:
    """Both consumer warp groups sharing one tensor pipe: per consumer, (start, end) of each of its k tiles' groups.
    A group is issued in `issue` and runs `run` once the pipe is free; with wgmma_wait<0> a consumer issues its next
    group after its last one ended, with wgmma_wait<1> once the group before its last one ended."""
    ready, groups, pipe_free = [0.0] * consumers, [[] for _ in range(consumers)], 0.0
    while any(len(g) < k_tiles for g in groups):
        c = min((c for c in range(consumers) if len(groups[c]) < k_tiles), key=lambda c: (ready[c], c))
        start = max(ready[c] + issue, pipe_free)
        end = pipe_free = start + run
        before = groups[c][-1][1] if groups[c] else 0.0
        groups[c].append((start, end))
        ready[c] = end if pending == 0 else max(ready[c] + issue, before)
    return groups


def pipe_idle(groups: list[list]) -> float:
    """The tensor pipe's idle share (%) from the first group's start to the last group's end."""
    spans = sorted(x for g in groups for x in g)
    busy = sum(e - s for s, e in spans)
    return 100 * (1 - busy / (spans[-1][1] - spans[0][0]))


def draw_inflight_two(k_tiles: int = 4, issue: float = 1.0, run: float = 4.0):
    """The picture before step 11: both consumer warp groups' k tiles on the one tensor pipe, with wgmma_wait<0>
    (step 10) and wgmma_wait<1> (step 11); each row's title gives the pipe's idle share. Returns the axes."""
    fig, ax = plt.subplots(figsize=(9, 2.8))
    colours, y = ("tab:blue", "tab:orange"), 3
    for pending, label in ((0, "step 10"), (1, "step 11")):
        groups = inflight_two(k_tiles, pending, issue, run)
        for c, g in enumerate(groups):
            for t, (s, e) in enumerate(g):
                ax.barh(y, e - s, left=s, height=0.6, color=colours[c], alpha=0.8)
                ax.text((s + e) / 2, y, f"k tile {t}", ha="center", va="center", fontsize=7)
            ax.text(-0.3, y, f"{label}, consumer {c + 1}", ha="right", va="center", fontsize=8)
            y -= 1
        ax.text(g[-1][1] + 0.3, y + 1.5, f"pipe idle {pipe_idle(groups):.0f}%", va="center", fontsize=8)
    ax.set_yticks([]); ax.set_xticks([]); ax.set_xlim(-12, None)
    ax.set_xlabel("time (a group's issue takes a quarter of its run, for the picture)")
    alone = pipe_idle(inflight_two(k_tiles, 0, issue, run, consumers=1))
    ax.set_title("Both consumers' wgmma groups on the one tensor pipe: while one issues, the other's group runs\n"
                 f"(one consumer alone with wgmma_wait<0>: pipe idle {alone:.0f}%)", fontsize=8)
    return ax


def stream_k_model() -> int:
    """The stream-K model: each size's waves, the last wave, the k tiles per block that sharing saves and the gain
    if the hand-over cost nothing; glues them and MIN_GAIN; returns the SMs."""
    sms = hardware.spec_for(GPU).sms  # the run's GPU; tiles of 128 x 256
    for n in (4096, 8192):
        tiles, k_tiles = (n // 128) * (n // 256), n // 64
        glue(f"ch7d_sk_tiles_{n}", tiles); glue(f"ch7d_sk_rounds_{n}", tiles // sms); glue(f"ch7d_sk_last_{n}", tiles % sms)
        saving = k_tiles * (sms - tiles % sms) / sms  # idle k tiles per block that sharing removes
        glue(f"ch7d_sk_saving_{n}", saving)
        whole = k_tiles * (tiles // sms + 1)  # k tiles of time per SM with whole tiles
        glue(f"ch7d_sk_pred_{n}", 100 * (whole / (whole - saving) - 1))  # predicted gain, %, if sharing were free
        cost = handover_cost(sms)["cost"]  # the hand-over's cost in k tiles, measured at 4096 (the timeline)
        glue(f"ch7d_sk_whole_{n}", whole)
        glue(f"ch7d_sk_net_{n}", 100 * (whole / (whole - (saving - cost)) - 1))  # the net gain, %, cost paid
        print(f"{n}: {tiles} tiles on {sms} SMs, last wave {tiles % sms}: sharing saves {saving:.1f} of {whole} k tiles"
              f" per SM, a gain of {100 * (whole / (whole - saving) - 1):.1f}% if it cost nothing")
    glue("ch7d_sms_h200", sms)
    params = gemmlab.registry.get("hgemm/12_stream_k").params
    glue("ch7d_min_gain", params["MIN_GAIN"].default); glue("ch7d_max_split", params["MAX_SPLIT"].default)
    return sms


def stream_k_picture() -> int:
    """Each SM's work in the last two waves at 8192 (whole tiles, then shared), after the model; returns the SMs."""
    sms = stream_k_model()
    fig, axes = plt.subplots(1, 2, figsize=(11, 2.6), sharey=True)
    whole, last = divmod(8192 // 128 * 8192 // 256, sms)
    for ax, (title, busy) in zip(axes, [("step 11: whole tiles", [whole + (sm < last) for sm in range(sms)]),
                                        ("step 12: the last wave shared", [whole + last / sms] * sms)]):
        ax.barh(range(sms), [b - (whole - 1) for b in busy], left=whole - 1, height=1.0, color="tab:blue")
        ax.set_xlim(whole - 1, whole + 1.05); ax.set_title(title); ax.set_xlabel("time, in tiles")
    axes[0].set_ylabel("SM")
    plt.tight_layout(); plt.show()
    return sms


def stream_k_owners(tiles: int, k_tiles: int, blocks: int, max_split: int = 4) -> np.ndarray:
    """Which block computes each k tile of stream-K's last wave, by step 12's own range formula (its range_start):
    the last wave's `tiles` tiles of `k_tiles` k tiles are numbered tile * k_tiles + t end to end and cut among
    split_blocks = min(blocks, tiles * MAX_SPLIT) blocks; block j holds numbers range_start(j) .. range_start(j + 1) - 1,
    range_start(j) = tiles * k_tiles * j // split_blocks. Returns an int array (tiles, k_tiles) of blocks."""
    if min(tiles, k_tiles, blocks, max_split) < 1:
        raise ValueError("tiles, k_tiles, blocks and max_split must be at least 1")
    split_blocks = min(blocks, tiles * max_split)
    start = [tiles * k_tiles * j // split_blocks for j in range(split_blocks + 1)]
    owners = np.empty(tiles * k_tiles, dtype=int)
    for j in range(split_blocks):
        owners[start[j]:start[j + 1]] = j
    return owners.reshape(tiles, k_tiles)


def stream_k_sharing(owners: np.ndarray) -> list[tuple[int, list[int]]]:
    """Per tile of the last wave: (the block that finishes it, the blocks that hand their partial sums over to it).
    The finisher holds the tile's last k tile; the others hold its earlier k tiles."""
    out = []
    for row in owners:
        holders = list(dict.fromkeys(int(b) for b in row))
        out.append((holders[-1], holders[:-1]))
    return out


def stream_k_ranges(tiles: int = 4, k_tiles: int = 8, blocks: int = 6, max_split: int = 4, size: int = 8192):
    """The picture before step 12: one row of k-tile cells per tile of the last wave, each cell coloured by the block
    that computes it (stream_k_owners), each tile's finishing block outlined, arrows for the hand-overs. Prints what
    the same formula gives at `size` on the run's GPU (ranges, blocks per tile, tiles per range); returns the axes."""
    sms = hardware.spec_for(GPU).sms
    n_tiles, n_k = (size // BLOCK_M) * (size // BLOCK_N), size // BLOCK_K
    big = stream_k_owners(n_tiles % sms, n_k, sms, max_split)
    lengths = np.bincount(big.ravel())
    per_tile = [len(set(row)) for row in big]
    spans = [len({t for t, row in enumerate(big) if b in row}) for b in range(lengths.size)]
    print(f"At {size} on {sms} SMs: a last wave of {n_tiles % sms} tiles of {n_k} k tiles; ranges of {lengths.min()} "
          f"to {lengths.max()} k tiles; {min(per_tile)} to {max(per_tile)} blocks per tile; a range touches at most "
          f"{max(spans)} tiles.")
    owners = stream_k_owners(tiles, k_tiles, blocks, max_split)
    sharing = stream_k_sharing(owners)
    fig, ax = plt.subplots(figsize=(10, 0.75 * tiles + 1.2))
    cmap = plt.get_cmap("tab10")
    for (i, t), b in np.ndenumerate(owners):
        ax.add_patch(Rectangle((t, i), 1, 1, facecolor=cmap(b % 10), alpha=0.45, edgecolor="white"))
        ax.text(t + 0.5, i + 0.62, f"b{b}", ha="center", va="center", fontsize=8)
    for i, (fin, handers) in enumerate(sharing):
        cols = np.nonzero(owners[i] == fin)[0]
        ax.add_patch(Rectangle((cols[0], i + 0.04), len(cols), 0.92, fill=False, edgecolor="k", lw=2.2))
        for h in handers:
            hc = np.nonzero(owners[i] == h)[0]
            ax.annotate("", xy=(cols[0] + 0.25, i + 0.2), xytext=((hc[0] + hc[-1] + 1) / 2, i + 0.2),
                        arrowprops=dict(arrowstyle="->", color="k", lw=1, connectionstyle="arc3,rad=0.3"))
        said = f"b{fin} finishes" + (f"; {', '.join(f'b{h}' for h in handers)} hand{'s' if len(handers) == 1 else ''}"
                                     " over" if handers else "")
        ax.text(k_tiles + 0.2, i + 0.5, f"tile {i}: {said}", va="center", fontsize=8)
    ax.set_xlim(0, k_tiles + 3.2); ax.set_ylim(tiles, -0.1); ax.set_aspect("equal"); ax.axis("off")
    ax.set_title(f"Stream-K's ranges: a last wave of {tiles} tiles x {k_tiles} k tiles on {blocks} blocks "
                 f"(range_start(j) = tiles x k_tiles x j // {min(blocks, tiles * max_split)}); outlined: the finishing "
                 "block, arrows: hand-overs", fontsize=8)
    return ax


def step12(at: dict, sms: int) -> None:
    """Steps 11 and 12: the run's records; at the base clock (the lab's run on this GPU model, Nsight Compute, 20
    launches each); the timeline of one launch with the last wave shared; the least busy SM's tensor pipe."""
    table(at, STEPS[3:])
    past = gemmlab.results.experiment("hgemm-past-cublas")
    print(f"\nThe lab's run at the base clock (Nsight Compute locks the SM clock there), L2 warm, median of 20 launches"
          f" ({past['gpu']}, {past['date']}):")
    glue("ch7d_fixed_date", past["date"])
    for n in ("4096", "8192"):
        t = past["fixed_clock_stream_k"][n]
        print(f"  {n}: " + ", ".join(f"{who} {v['median_us']:.1f} us" for who, v in sorted(t.items())))
        glue(f"ch7d_fixed12_{n}_gain", 100 * (t["step 11"]["median_us"] / t["step 12"]["median_us"] - 1))
        glue(f"ch7d_fixed11_{n}_us", t["step 11"]["median_us"]); glue(f"ch7d_fixed12_{n}_us", t["step 12"]["median_us"])
        glue(f"ch7d_fixedcublas_{n}_us", t["cuBLAS"]["median_us"]); glue(f"ch7d_fixed10_{n}_us", t["step 10"]["median_us"])
    print(f"\nTimeline of one launch at 4096 with every tile of the last wave shared (the lab's timeline.py, {past['gpu']}, {past['date']}:"
          "\n  %globaltimer stamps (the GPU's nanosecond clock, read by each block at each mark) in the last of 10 launches, at the board's own clock, not the base clock; us from its start):")
    n = 4096
    h = handover_cost(sms, n)
    shared, e = h["shared"], h["events"]
    print(f"  last round starts {e['range']['median']:.1f}, parts handed over by {e['handed']['median']:.1f}, finishing "
          f"blocks wait and load {shared['wait_us']['median']:.1f}, last block done {e['end']['median']:.1f} (medians)")
    rounds, k_tiles, tiles, per_k = h["rounds"], h["k_tiles"], h["tiles"], h["per_k"]
    glue("ch7d_sk_cost_4096", h["cost"])
    share, last_us = h["share"], e["end"]["median"] - e["range"]["median"]
    print(f"  one k tile: {e['range']['median']:.1f} us / ({rounds} full waves x {k_tiles} k tiles) = {per_k:.3f} us;"
          f" the last round: {last_us:.1f} us / {per_k:.3f} = {last_us / per_k:.1f} k tiles,\n  of which"
          f" {tiles % sms} x {k_tiles} / {sms} = {share:.1f} are each block's share of the work: the hand-over, wait"
          f" and loads cost {last_us / per_k - share:.1f} k tiles")
    glue("ch7d_sk_rounds_us_4096", e["range"]["median"]); glue("ch7d_sk_end_us_4096", e["end"]["median"])
    glue("ch7d_sk_launch_us_4096", shared["launch_us"])
    glue("ch7d_sk_per_k_us_4096", per_k); glue("ch7d_sk_rounds_k_4096", rounds * k_tiles)
    run12 = gemmlab.results.EXPERIMENTS / "hgemm-past-cublas" / "gpu-run-2026-11-28-stream-k" / "part3"
    busy = "sm__pipe_tensor_cycles_active.{}.pct_of_peak_sustained_elapsed"
    print(f"\nNsight Compute, one launch at 8192 ({past['gpu']}, {past['date']}): tensor pipe busy, average and least busy SM")
    for who in ("11_mma_in_flight", "12_stream_k"):
        row = profile.raw_csv_rows(gzip.open(run12 / f"ncu-{who}-8192.csv.gz", "rt").read())[-1]
        m = {key: float(row[busy.format(key)]) for key in ("avg", "min")}
        print(f"  step {who[:2]}: {m['avg']:.1f}%, least {m['min']:.1f}%")
        glue(f"ch7d_n{who[:2]}k_min_8192", m["min"])


def ladder(at: dict) -> None:
    """Steps 08 to 12 from the one run, at 4096 and 8192, in TFLOP/s with cuBLAS's band (its drift over the run)."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 3.8))
    for ax, n in zip(axes, SIZES):
        lo, hi = cublas_band(at, n)
        mid = float(np.median([r["baseline_tflops"] for (s, m), r in at.items() if m == n and s in STEPS]))
        r0 = at[(STEPS[0], n)]
        plots.ladder(list(at.values()), STEPS, ax=ax, size=n,
                     title=f"{r0['gpu']}, M = N = K = {n} ({r0.get('date', '')}): cuBLAS {lo:.0f}-{hi:.0f} TFLOP/s "
                           f"over the calls of this run (median {mid:.0f}, dashed)")
        label = ax.get_legend().get_texts()[0]
        label.set_text(label.get_text().replace("run-to-run", "the calls of this run"))
    plt.tight_layout(); plt.show()
    return axes


def early_release() -> str:
    """Step 11 releasing the stage of the group it has just committed, before any wait: the emulator's hazard check.

    Returns the sentence the check gives (the emulator hashes a group's shared memory at issue and at its wait).
    """
    kern = gemmlab.kernel.edited("hgemm/11_mma_in_flight",
                                 "if (t > 0 && threadIdx.x % 128 == 0) mbarrier_arrive(&empty[(ring_pos - 1) % NUM_STAGES]);",
                                 "if (threadIdx.x % 128 == 0) mbarrier_arrive(&empty[s]);",
                                 backend="cpu", NUM_STAGES=2, BLOCK_N=128)
    a, b = (np.random.default_rng(11).uniform(-1, 1, s).astype(np.float16) for s in ((300, 520), (520, 264)))
    try:
        kern(a, b)
        return "the early release went unnoticed"
    except gemmlab.errors.InputError as e:
        return "released too early: " + str(e).split(": ", 1)[1]
