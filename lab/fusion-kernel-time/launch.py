"""Fusion at N = 512: what the launch path and the grid barrier cost step 05, measured in one run.

    python lab/fusion-kernel-time/launch.py time [N ...] > results/experiments/fusion-kernel-time/launch-<gpu>-<date>.log
    python lab/fusion-kernel-time/launch.py record     # the logs -> results.json["launch"]

Everything below is launched in turn with torch and cupy `a @ b @ c` (bench.time_interleaved: CUDA
events around each call, the course's protocol), three rounds of 300 calls, at each N:
  05 packed        step 05 (its fastest recorded tiles at N) through FusedKernel.launcher: the
                   arguments packed once, one cuLaunchKernel per call (gpu.GpuModule.packed_launcher)
  05 rawkernel     the same kernel through CuPy's RawKernel call, which converts the ten arguments on
                   every call (the launcher the course used before)
  05 graph         the same launch captured once in a CUDA graph and replayed
  prefetch_c       step 05 with the copies of C's first tiles issued before the grid barrier (C does
                   not depend on T), so that after it only T's are waited for (patch here)
  old_barrier      step 05 with the grid barrier as it was: a count and a generation word, full
                   fences, the last block resets the count (patch here)
  empty rawkernel / empty packed   an empty kernel of one warp, both ways: the floor of a call
Before timing, every kernel is checked against float64 (fusion.check on odd shapes) and at N.
"""
from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent  # lab/<name>: this experiment's scripts and patches
DATA = HERE.parents[1] / "results" / "experiments" / HERE.name  # its logs and results.json
sys.path.insert(0, str(HERE.parents[1]))

STEP = "fused/05_tf32x3"
VARIANTS = ("prefetch_c", "old_barrier")
# The fastest step-05 tiles the H100 lane recorded (sweep of 2026-11-23), per size: fixed here so that
# another GPU's run times the same configurations.
CONFIGS = {
    512: dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=32, WARP_M=16, WARP_N=32, SPLIT_K=4, NUM_STAGES=3),
    1024: dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, WARP_M=32, WARP_N=32, SPLIT_K=2, NUM_STAGES=2),
}


def record() -> dict:
    """results.json["launch"][gpu]: per N and call, the median event time of each round (us)."""
    from lab import experiments

    out = {}
    for gpu, log, text in experiments.gpu_logs(DATA, "launch-*.log"):
        rec = out.setdefault(gpu, {"log": log.name, "date": re.search(r"^date: (.+)$", text, re.M).group(1),
                                   "config": {}, "us": {}, "max_rel_error": {}})
        for m in re.finditer(r"^config n=(\d+): (.+)$", text, re.M):
            rec["config"][m.group(1)] = json.loads(m.group(2))
        for m in re.finditer(r"^error n=(\d+) (.+?)\s+([\d.e+-]+)$", text, re.M):
            rec["max_rel_error"].setdefault(m.group(1), {})[m.group(2)] = float(m.group(3))
        for (n, name), us in experiments.rounds_of(text).items():
            rec["us"].setdefault(str(n), {}).setdefault(name, []).extend(us)
    return out


def summary(rec: dict, n: int) -> dict[str, float]:
    """Median over rounds of each call's event time at n (us), for one GPU's record."""
    return {name: statistics.median(v) for name, v in rec["us"][str(n)].items()}


def main(sizes: list[int]) -> None:
    import datetime

    import cupy
    import torch

    from gemmlab import fusion, gpu
    from lab import experiments

    torch.backends.cuda.matmul.allow_tf32 = False
    st = fusion.get(STEP)
    print(f"gpu: {gpu.device()['name']}")
    print(f"date: {datetime.date.today().isoformat()}")
    print(f"torch {torch.__version__}, cupy {cupy.__version__}")
    empty = cupy.RawKernel(r'extern "C" __global__ void empty_kernel() {}', "empty_kernel")
    empty_packed = gpu.packed_launcher(empty, "empty_kernel", (1, 1, 1), (32, 1, 1), ())
    for n in sizes:
        params = CONFIGS[n]
        print(f"config n={n}: {json.dumps(params)}")
        a, b, c = fusion.random_inputs(n)
        want = fusion.reference_gpu(a, b, c)
        kernels = {"05": fusion.step(STEP, **params)}
        for v in VARIANTS:
            kernels[v] = fusion.step(STEP, source=experiments.variant_source(HERE, st, v), **params)
        calls = {}
        for name, k in kernels.items():
            fusion.check(k)  # raises before anything is timed
            calls[f"{name} packed"], err = fusion.checked_launcher(k, a, b, c, want)
            print(f"error n={n} {name} {err:.3e}")
        # step 05 again through CuPy's RawKernel call, and replayed from a CUDA graph
        k = kernels["05"]
        cfg, args = k.launch_args(a, b, c, cupy.empty((n, n), cupy.float32))
        calls["05 rawkernel"] = lambda: k.module.function(tuple(cfg.grid), tuple(cfg.block), tuple(args),
                                                          shared_mem=cfg.shared_bytes)
        side = cupy.cuda.Stream(non_blocking=True)
        with side:
            launch = k.module.packed_launcher(cfg.grid, cfg.block, args, cfg.shared_bytes)
            launch()
            side.synchronize()
            side.begin_capture()
            launch()
            calls["05 graph"] = side.end_capture().launch
        ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
        calls = {"torch a@b@c": lambda: ta @ tb @ tc, "cupy a@b@c": lambda: cupy.matmul(cupy.matmul(a, b), c),
                 "torch graph a@b@c": fusion.torch_graph_abc(ta, tb, tc), **calls,
                 "empty rawkernel": lambda: empty((1,), (32,), ()), "empty packed": empty_packed}
        experiments.time_rounds(calls, n, 300)


if __name__ == "__main__":
    if sys.argv[1] == "record":
        from lab import experiments

        launch_record = record()
        experiments.save_record(DATA, "launch", launch_record)
        for g, r in launch_record.items():
            for n in r["us"]:
                print(g, n, {k: round(v, 2) for k, v in summary(r, int(n)).items()})
    else:
        main([int(x) for x in sys.argv[2:]] or [512])
