"""Chapters 8 and 9's figure and sentences over the fusion lane's records (results/<gpu>.fusion.json).

Both chapters show the same lane: chapter 8 its steps 01 to 05, chapter 9 the Hopper steps 06 to 08 with them.
Each sentence names its GPU and reads the records; none holds a typed number.
"""
from __future__ import annotations

from ..measure import fusion
import statistics
import matplotlib.pyplot as plt

BASELINES = ["torch a@b@c", "cupy a@b@c", "torch graph a@b@c", "cupy graph a@b@c", "torch a@b"]


def params_text(p: dict) -> str:
    """A step's tile parameters as 'BLOCK_M 64, BLOCK_N 32'."""
    return ", ".join(f"{k} {v}" for k, v in p.items())


def fastest(records: list[dict], impl: str, gpu_name: str | None) -> dict[int, dict]:
    """The fastest recorded configuration of `impl` at each size (benchmark, sweep or tuned) with a speed-up."""
    recorded = fusion.load(gpu_name) if gpu_name else []
    rows = [r for r in records + recorded if r["step"] == impl and "pct_of_baseline" in r]
    return {n: fusion.best(rows, impl, n) for n in sorted({r["m"] for r in rows})}


def speed_sentence(records: list[dict], impl: str, gpu_name: str | None) -> str:
    """A step's speed-up over `a @ b @ c` at every recorded size, and its call at 512, in a sentence."""
    at = fastest(records, impl, gpu_name)
    if not at:
        return ("The measured speed-ups appear here once the GPU lane has run; until then this chapter claims "
                "only what the emulator checks.")
    parts = [f"{fusion.speedup(at[n]):.2f}x at {n}" for n in sorted(at)]
    text = (f"On the {gpu_name}, step {impl.split('/')[1][:2]}'s speed-up over `a @ b @ c` measured in the same run "
            "(device time; the faster of PyTorch's and CuPy's where both were timed; the fastest tile configuration at "
            "each size) is " + ", ".join(parts) + ".")
    if 512 in at:
        r = at[512]
        text += (f" At 512 that is {r['median_s'] * 1e6:.1f} µs against {r['baseline_median_s'] * 1e6:.1f} µs "
                 f"({r['baseline']}), with {params_text(r['params'])}, {r['grid']} blocks.")
    return text


def verdict(records: list[dict], fused: list[str], gpu_name: str | None) -> str:
    """The `fused` steps at 512 against the seed's 3x: the lane's benchmark run, where every step and both baselines
    were timed together (one baseline for all), then the sweeps' best ratios, and from 1024 on."""
    bench = [r for r in (fusion.lookup(records, n, 512) for n in fused) if r]
    base = fusion.baseline(records, 512)
    graph = fusion.lookup(records, "torch graph a@b@c", 512)
    if not bench or not base:
        return "The verdict on the seed's 3x appears once the GPU lane has run."
    best = min(bench, key=lambda r: r["median_s"])
    ratio = base["median_s"] / best["median_s"]
    text = (f"So against the seed's claim: in the lane's benchmark run on the {gpu_name}, where every step and "
            f"`a @ b @ c` were timed together at 512, the fastest of these fused kernels, {best['step']}, took "
            f"{best['median_s'] * 1e6:.1f} µs against {base['median_s'] * 1e6:.1f} µs ({base['step']}): {ratio:.2f}x, "
            + ("short of" if ratio < 3 else "reaching") + " the 3x the post reports")
    if graph:
        text += (f"; against the same two cuBLAS GEMMs replayed from a CUDA graph ({graph['median_s'] * 1e6:.1f} µs), "
                 f"{graph['median_s'] / best['median_s']:.2f}x")
    swept = [r for r in (fastest(records, n, gpu_name).get(512) for n in fused) if r]
    if swept:
        top = max(swept, key=fusion.speedup)
        lo, hi = (f(r["baseline_median_s"] for r in swept) * 1e6 for f in (min, max))
        text += (f". The tile sweeps, each a run of its own, reach at most {fusion.speedup(top):.2f}x (step "
                 f"{top['step'].split('/')[1][:2]} at its best tiles), against an `a @ b @ c` that took {lo:.1f} to "
                 f"{hi:.1f} µs across those runs")
    big = {}  # from 1024 on: the fastest fused step at each size, at its fastest recorded tiles
    for s in fused:
        for n, r in fastest(records, s, gpu_name).items():
            if n >= 1024 and (n not in big or r["median_s"] < big[n]["median_s"]):
                big[n] = r
    if big:
        slower = [n for n, r in big.items() if fusion.speedup(r) < 1]
        steps = sorted({r["step"].split("/")[1][:2] for r in big.values()})
        text += (". From 1024 on, where steps 03 and 04 at best break even with cuBLAS (and lose from 2048), "
                 "the fastest of them (step " + " and ".join(steps) + ") is "
                 + ("not slower than `a @ b @ c` at any measured size" if not slower else
                    "slower than `a @ b @ c` at " + ", ".join(map(str, slower)))
                 + " (" + ", ".join(f"{fusion.speedup(r):.2f}x at {n}" for n, r in sorted(big.items())) + ")")
    return text + "."


def kernel_time_ratios(kernel_time: dict, gpu: str = "NVIDIA H200") -> tuple[dict[int, float], str]:
    """The seed's own measure (lab fusion-kernel-time, profiler.py): at each N, the faster baseline's kernels' time
    under PyTorch's profiler over the faster of steps 07 and 08, medians of the recorded rounds; and the run's date."""
    pf = kernel_time.get("profiler", {}).get(gpu)
    if not pf:
        return {}, ""
    sums = {int(n): {name: statistics.median(k["sum_us"]) for name, k in calls.items()}
            for n, calls in pf["kernels"].items()}
    return ({n: min(k["torch a@b@c"], k["cupy a@b@c"]) / min(k["07"], k["08"]) for n, k in sums.items()},
            pf["date"])


def plot_lane(records: list[dict], impls: list[str], gpu_name: str | None) -> None:
    """Device time against N (default tiles) and the speed-up at the fastest tiles, for the baselines and `impls`."""
    if not records:
        print("The timing figure appears once the GPU lane has run (python -m gemmlab fusion-lane).")
        return
    recorded = fusion.load(gpu_name)  # benchmark, sweep and tuned records of this GPU
    sizes = sorted({r["m"] for r in records})
    # One style per call, the same in both panels: the cuBLAS baselines black and grey, dashed (dotted from a
    # CUDA graph); the fused steps in order along one colour map, so that later steps are lighter.
    fused = [impl for impl in fusion.DEFAULT_STEPS if impl in impls]
    style = {impl: dict(color=plt.cm.viridis(0.9 * j / max(1, len(fusion.DEFAULT_STEPS) - 1)), ls="-")
             for j, impl in enumerate(fusion.DEFAULT_STEPS)}
    style.update({"torch a@b@c": dict(color="0.0", ls="--"), "cupy a@b@c": dict(color="0.55", ls="--"),
                  "torch graph a@b@c": dict(color="0.0", ls=":"), "cupy graph a@b@c": dict(color="0.55", ls=":"),
                  "torch a@b": dict(color="0.75", ls="-.")})
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    for impl in BASELINES + fused:
        rows = sorted((r for r in records if r["step"] == impl and r["kind"] == "benchmark"), key=lambda r: r["m"])
        if rows:
            ax.plot([r["m"] for r in rows], [r["median_s"] * 1e6 for r in rows], marker="o", ms=3, label=impl,
                    **style[impl])
        if impl.startswith("fused") or "graph" in impl:  # the fastest recorded configuration at each size
            best = [fusion.best([r for r in records + recorded if "pct_of_baseline" in r], impl, n) for n in sizes]
            best = [r for r in best if r]
            if best:
                ax2.plot([r["m"] for r in best], [fusion.speedup(r) for r in best], marker="o", ms=3, **style[impl])
    ax.set_ylabel("device time (µs), default tiles"); ax2.set_ylabel("speed-up, fastest tiles")
    for a_ in (ax, ax2):
        a_.set_xscale("log", base=2); a_.set_xlabel("N")
    ax.set_yscale("log"); ax2.axhline(1, color="0.5", lw=0.8)
    ax2.axhline(3, color="tab:red", lw=0.8, ls=":")
    ax2.text(sizes[-1], 3, "seed 003's 3x", color="tab:red", fontsize=7, ha="right", va="bottom")
    ax2.set_title("over the faster of torch / cupy a@b@c, same run", fontsize=8)
    fig.suptitle(f"{gpu_name} ({records[0].get('source', 'live')}, {records[0]['date']})", fontsize=9)
    fig.legend(*ax.get_legend_handles_labels(), loc="center left", bbox_to_anchor=(0.8, 0.5), fontsize=7)
    plt.tight_layout(rect=(0, 0, 0.8, 1)); plt.show()
