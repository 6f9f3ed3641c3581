"""Fusion at N = 512: what one launch costs the host, by the path it takes to the driver.

    python lab/fusion-kernel-time/paths.py time > results/experiments/fusion-kernel-time/paths-<gpu>-<date>.log
    python lab/fusion-kernel-time/paths.py record     # the logs -> results.json["paths"]

Two kernels, each launched two ways: an empty kernel of one warp, and step 07 at 512 (BLOCK_N 32,
SPLIT_K 3, NUM_STAGES 8, checked against float64 first):
  direct   FusedKernel.launcher / gpu.packed_launcher: arguments packed once, one cuLaunchKernel per call
  graph    gpu.graph_launcher: that launch captured once in a CUDA graph, replayed on the current stream
For each: the host time of one call (2000 calls in a row, the queue never full: the empty kernel runs
faster than the calls come), and its event time launched in turn with torch `a @ b @ c` eager and from
a CUDA graph (bench.time_interleaved, the course's protocol: three rounds of 300).
"""
from __future__ import annotations

import re
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent  # lab/<name>: this experiment's scripts and patches
DATA = HERE.parents[1] / "results" / "experiments" / HERE.name  # its logs and results.json
sys.path.insert(0, str(HERE.parents[1]))
STEP07_512 = dict(BLOCK_N=32, SPLIT_K=3, NUM_STAGES=8)


def main(n: int = 512) -> None:
    import datetime

    import cupy
    import torch

    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}\ndate: {datetime.date.today().isoformat()}")
    a, b, c, want, calls = experiments.fusion_problem(n)
    empty = cupy.RawModule(code='extern "C" __global__ void empty() {}').get_function("empty")
    calls["empty direct"] = gpu.packed_launcher(empty, "empty", (1, 1, 1), (32, 1, 1), [])
    calls["empty graph"] = gpu.graph_launcher(empty, "empty", (1, 1, 1), (32, 1, 1), [])
    k = fusion.step("fused/07_tma_tf32x3", **STEP07_512)
    calls["07 direct"], err = fusion.checked_launcher(k, a, b, c, want)
    calls["07 graph"], err2 = fusion.checked_launcher(k, a, b, c, want, graph=True)
    print(f"step 07 {STEP07_512}: error {max(err, err2):.2e}")
    ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
    calls["torch graph a@b@c"] = fusion.torch_graph_abc(ta, tb, tc)
    for name in ("empty direct", "empty graph", "07 direct", "07 graph"):
        f, per_call = calls[name], []
        repeats = 2000 if name.startswith("empty") else 200  # 200 x 07 stays ahead of the host
        for _ in range(5):
            cupy.cuda.Device().synchronize()
            start = time.perf_counter()
            for _ in range(repeats):
                f()
            per_call.append((time.perf_counter() - start) / repeats * 1e6)
            cupy.cuda.Device().synchronize()
        print(f"host {name}: {statistics.median(per_call):.2f} us per call")
    experiments.time_rounds(calls, n, 300)


def record() -> dict:
    """results.json["paths"][gpu]: host us per call, and per call the event time of each round (us)."""
    from lab import experiments

    out = {}
    for gpu, log, text in experiments.gpu_logs(DATA, "paths-*.log"):
        out[gpu] = {"log": log.name, "date": re.search(r"^date: (.+)$", text, re.M).group(1),
                    "host_us": {m.group(1): float(m.group(2))
                                for m in re.finditer(r"^host (.+?): ([\d.]+) us per call$", text, re.M)},
                    "us": {name: us for (_, name), us in experiments.rounds_of(text).items()}}
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["record"]:
        from lab import experiments

        rec = record()
        experiments.save_record(DATA, "paths", rec)
        for g, r in rec.items():
            print(g, r["host_us"], {k: round(statistics.median(v), 2) for k, v in r["us"].items()})
    else:
        main()
