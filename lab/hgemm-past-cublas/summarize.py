"""results/experiments/hgemm-past-cublas/results.json from the runs' logs: every line of context.py and overlap.py
(mode, size, round, cuBLAS's rate, each kernel's time in us and % of the faster cuBLAS call) and every power line,
each with the run it came from. The chapter (7b) reads this file; the logs stay beside it.

    python lab/hgemm-past-cublas/summarize.py
"""
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from fixed_clock import launches  # noqa: E402  (this folder's script, not a package)

HERE = Path(__file__).resolve().parents[2] / "results" / "experiments" / "hgemm-past-cublas"
RUNS = {  # log -> (run, the kernels' names in that log -> step)
    "gpu-run-2026-11-28-protocol/context.log": ("protocol", {"09": "hgemm/09_persistent", "10": "hgemm/10_tma_store"}),
    "overlap-h200-2026-11-28.log": ("overlap", {"10": "hgemm/10_tma_store", "overlap": "hgemm/11_mma_in_flight"}),
    "gpu-run-2026-11-28-step11/context.log": ("step11", {"10": "hgemm/10_tma_store", "11": "hgemm/11_mma_in_flight"}),
    "gpu-run-2026-11-28-warm/context.log": ("warm", {"10": "hgemm/10_tma_store", "11": "hgemm/11_mma_in_flight"}),
    "gpu-run-2026-11-28-clusters11/context.log": ("clusters11", {
        "11": "hgemm/11_mma_in_flight", "clusters11": "hgemm-past-cublas/clusters11",
        "clusters11 CLUSTER_M=4": "hgemm-past-cublas/clusters11:CLUSTER_M=4"}),
    "gpu-run-2026-11-28-stream-k/part2/context.log": ("stream-k", {
        "11": "hgemm/11_mma_in_flight", "12": "hgemm/12_stream_k", "12 MIN_GAIN=1": "hgemm/12_stream_k:MIN_GAIN=1"}),
}
FIXED_CLOCK = {  # fixed_clock.py under Nsight Compute: key -> its CSVs
    "fixed_clock": "gpu-run-2026-11-28-warm/fixed-clock-{n}.csv",
    "fixed_clock_stream_k": "gpu-run-2026-11-28-stream-k/fixed-clock-{n}.csv",  # step 12 with MIN_GAIN 16
    "fixed_clock_stream_k_any_gain": "gpu-run-2026-11-28-stream-k-first/fixed-clock-{n}.csv",  # before MIN_GAIN
}
TIMELINES = {"stream-k": "gpu-run-2026-11-28-stream-k/timeline.log",
             "stream-k-first": "gpu-run-2026-11-28-stream-k-first/timeline.log"}
TIMED = re.compile(r"^(\w+)\s+(\d+) r(\d+)\s+cuBLAS\s+([\d.]+) TFLOP/s.*\(us: (.*)\)$")
POWER = re.compile(r"^power\s+(\d+) (\S+(?: [A-Z_]+=\d+)?)\s+SM clock\s+(\d+) MHz\s+power\s+([\d.]+) W")
TIMELINE_HEAD = re.compile(r"^(\d+) MAX_SPLIT=(\d+).*: (\d+) blocks, launch ([\d.]+) us")
TIMELINE_EVENT = re.compile(r"^\s+(\w+)\s+n=\s*(\d+)\s+min\s+([\d.]+)\s+median\s+([\d.]+)\s+max\s+([\d.]+)")
TIMELINE_WAIT = re.compile(r"wait for partial sums: median ([\d.]+) us, max ([\d.]+) us")


def timelines() -> list[dict]:
    """timeline.py's logs: per run, size and MAX_SPLIT, the launch's span and each event's min/median/max (us)."""
    out = []
    for run, log in TIMELINES.items():
        for line in (HERE / log).read_text().splitlines():
            if m := TIMELINE_HEAD.match(line):
                n, split, blocks, span = m.groups()
                out.append({"run": run, "n": int(n), "max_split": int(split), "blocks": int(blocks),
                            "launch_us": float(span), "events": {}})
            elif (m := TIMELINE_EVENT.match(line)) and out:
                name, count, lo, med, hi = m.groups()
                out[-1]["events"][name] = {"n": int(count), "min": float(lo), "median": float(med), "max": float(hi)}
            elif (m := TIMELINE_WAIT.search(line)) and out:
                out[-1]["wait_us"] = {"median": float(m.group(1)), "max": float(m.group(2))}
    return out


def main() -> None:
    timed, power = [], []
    for log, (run, names) in RUNS.items():
        for line in (HERE / log).read_text().splitlines():
            if m := TIMED.match(line):
                mode, n, rnd, cublas, us = m.groups()
                us = {k: float(v) for k, v in (item.rsplit(" ", 1) for item in us.split(", "))}
                base = min(us["cupy.matmul"], us["torch.matmul"])
                timed.append({"run": run, "mode": mode, "n": int(n), "round": int(rnd), "cublas_tflops": float(cublas),
                              "us": {names.get(k, k): v for k, v in us.items()},
                              "pct": {names[k]: 100 * base / v for k, v in us.items() if k in names}})
            elif m := POWER.match(line):
                n, who, clock, watts = m.groups()
                power.append({"run": run, "n": int(n), "call": names.get(who, who), "sm_clock_mhz": float(clock),
                              "power_w": float(watts)})
    fixed = {}
    for key, pattern in FIXED_CLOCK.items():
        fixed[key] = {}
        for n in (4096, 8192):
            times = launches(str(HERE / pattern.format(n=n)))
            fixed[key][str(n)] = {who: {"median_us": statistics.median(t), "launches": len(t)} for who, t in times.items()}
    out = {"question": "Do steps 11 (one wgmma group in flight) and 12 (the last round shared out by k tiles) "
                       "gain on the step before, and what does the benchmark's context (order, L2 state, clocks) do "
                       "to them against cuBLAS?",
           "protocol": "context.py and overlap.py: both steps and cupy.matmul and torch.matmul in one loop, launch by "
                       "launch (CUDA events), 30 turns per round after 3 of warm-up, median per call; modes: fixed "
                       "order, rotated order, cold (a 256 MB read before every launch), other inputs, alone (each "
                       "call's launches back to back); pct is of the faster cuBLAS call in the same round",
           "gpu": "NVIDIA H200", "date": "2026-11-28", "logs": sorted(RUNS), "timed": timed, "power": power,
           **fixed, "timeline": timelines()}
    (HERE / "results.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(timed)} timed lines, {len(power)} power lines -> {HERE / 'results.json'}")


if __name__ == "__main__":
    main()
