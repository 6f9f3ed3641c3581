"""The seed's own yardstick: the kernels' time under PyTorch's profiler, next to the course's event time.

    python lab/fusion-kernel-time/profiler.py time 256 512 1024 2048 4096 > results/experiments/fusion-kernel-time/profiler-<gpu>-<date>.log
    python lab/fusion-kernel-time/profiler.py record     # the logs -> results.json["profiler"]

Seed 003 measured `a @ b @ c` with torch.profiler (CUDA activity, kernels sorted by cuda_time_total): the
time its two cuBLAS kernels ran, without the host's share of the call. The course's speed-ups are event
times of whole calls (bench.time_interleaved). This script measures both, in one run, for torch and cupy
`a @ b @ c` and for steps 07 and 08 at their fastest tiles recorded at each N on this GPU (checked against
float64 at full size first):

  kernels  per implementation, rounds of calls under torch.profiler (CUDA activity only, as the seed),
           a synchronize after each call so that no two calls overlap. From the exported trace: each call's
           kernels (the trace's "kernel" events in order, the same number per call), their durations
           summed (the seed's measure) and the span from the first one's start to the last one's end
           (the gaps between cuBLAS's kernels included). Median over the calls of a round.
  events   the same calls (and both graphs) launched in turn, CUDA events around each (time_rounds).

CuPy launches its kernels through the driver; the profiler (CUPTI) records every kernel of the process, so
the fused steps and cupy's GEMMs are in the trace too.
"""
from __future__ import annotations

import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent  # lab/<name>: this experiment's scripts and patches
DATA = HERE.parents[1] / "results" / "experiments" / HERE.name  # its logs and results.json
sys.path.insert(0, str(HERE.parents[1]))
STEPS = {"07": "fused/07_tma_tf32x3", "08": "fused/08_tile_flags"}
ROUNDS = 3
KERNEL_LINE = re.compile(r"^kernels n=(\d+) round (\d) (.+?): (\d+) per call, sum ([\d.]+) us, span ([\d.]+) us$")
NAMES_LINE = re.compile(r"^names n=(\d+) (.+?): (.+)$")
PARAMS_LINE = re.compile(r"^n=(\d+) (\S+) (\{.*\}): error (\S+)$")


def calls_per_profile(n: int) -> int:
    return 100 if n <= 1024 else 30 if n <= 2048 else 10


def kernel_calls(fn, repeats: int) -> list[list[dict]]:
    """`fn` called `repeats` times under torch.profiler, a synchronize after each: each call's kernels
    ({"name", "ts", "dur"} in us, in start order). Fails unless every call ran as many kernels."""
    import cupy
    from torch.profiler import ProfilerActivity, profile

    cupy.cuda.Device().synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            fn()
            cupy.cuda.Device().synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    per_call, left = divmod(len(kernels), repeats)
    if per_call == 0 or left:
        raise RuntimeError(f"{len(kernels)} kernels in the trace of {repeats} calls: not the same number per call")
    return [[{k: e[k] for k in ("name", "ts", "dur")} for e in kernels[i:i + per_call]]
            for i in range(0, len(kernels), per_call)]


def short(name: str) -> str:
    """A kernel's name without its template arguments and parameter list."""
    return re.sub(r"\(.*$", "", re.sub(r"<.*>", "<...>", name)).removeprefix("void ")


def main(sizes: list[int]) -> None:
    import datetime

    import cupy
    import torch

    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}\ndate: {datetime.date.today().isoformat()}\ntorch: {torch.__version__}")
    for n in sizes:
        a, b, c, want, calls = experiments.fusion_problem(n)
        calls["cupy a@b@c"] = lambda: cupy.matmul(cupy.matmul(a, b), c)
        ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
        calls["torch graph a@b@c"] = fusion.torch_graph_abc(ta, tb, tc)
        for short_name, step in STEPS.items():
            kern = experiments.recorded_best_kernel(step, n)
            err = experiments.add_launchers(calls, short_name, kern, a, b, c, want)
            print(f"n={n} {short_name} {json.dumps(kern.params)}: error {err:.2e}", flush=True)
        for fn in calls.values():  # warm-up: cuBLAS's heuristics, the graphs, the caches
            for _ in range(10):
                fn()
        profiled = [name for name in calls if "graph" not in name]
        repeats = calls_per_profile(n)
        kernel_calls(calls["torch a@b@c"], 5)  # the profiler's first session sets CUPTI up: not measured
        for rnd in range(ROUNDS):
            for name in profiled:
                per_call = kernel_calls(calls[name], repeats)
                total = statistics.median(sum(k["dur"] for k in ks) for ks in per_call)
                span = statistics.median(ks[-1]["ts"] + ks[-1]["dur"] - ks[0]["ts"] for ks in per_call)
                print(f"kernels n={n} round {rnd} {name}: {len(per_call[0])} per call, sum {total:.3f} us, "
                      f"span {span:.3f} us", flush=True)
                if rnd == 0:
                    print(f"names n={n} {name}: " + " | ".join(short(k["name"]) for k in per_call[0]))
        experiments.time_rounds(calls, n, fusion.repeats_for(n))


def record() -> dict:
    """results.json["profiler"][gpu]: the tiles and errors of the steps, the kernels of each call (names,
    how many, their summed durations and span per round, us) and the event times per round (us), by N."""
    from lab import experiments

    out = {}
    for gpu, log, text in experiments.gpu_logs(DATA, "profiler-*.log"):
        rec = {"log": log.name, "date": re.search(r"^date: (.+)$", text, re.M).group(1),
               "torch": re.search(r"^torch: (.+)$", text, re.M).group(1),
               "steps": {}, "kernels": {}, "names": {}, "us": {}}
        for line in text.splitlines():
            if m := PARAMS_LINE.match(line):
                rec["steps"].setdefault(m.group(1), {})[m.group(2)] = {"params": json.loads(m.group(3)),
                                                                       "max_rel_error": float(m.group(4))}
            elif m := KERNEL_LINE.match(line):
                k = rec["kernels"].setdefault(m.group(1), {}).setdefault(
                    m.group(3), {"per_call": int(m.group(4)), "sum_us": [], "span_us": []})
                k["sum_us"].append(float(m.group(5)))
                k["span_us"].append(float(m.group(6)))
            elif m := NAMES_LINE.match(line):
                rec["names"].setdefault(m.group(1), {})[m.group(2)] = m.group(3).split(" | ")
        for (n, name), us in experiments.rounds_of(text).items():
            rec["us"].setdefault(str(n), {})[name] = us
        out[gpu] = rec
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["record"]:
        from lab import experiments

        rec = record()
        experiments.save_record(DATA, "profiler", rec)
        for g, r in rec.items():
            for n, ks in r["kernels"].items():
                print(g, n, {name: round(statistics.median(k["sum_us"]), 2) for name, k in ks.items()})
    elif sys.argv[1:2] == ["time"]:
        main([int(s) for s in sys.argv[2:]] or [512])
    else:
        sys.exit(__doc__)
