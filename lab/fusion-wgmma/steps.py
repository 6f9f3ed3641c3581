"""Fused step 06 (wgmma, 3xTF32) against step 05 and `a @ b @ c`, launched in turn.

    python lab/fusion-wgmma/steps.py time > results/experiments/fusion-wgmma/steps-<gpu>-<date>.log   # on an H100 / H200
    python lab/fusion-wgmma/steps.py timeline 512 > results/experiments/fusion-wgmma/timeline-<gpu>-<date>.log
    python lab/fusion-wgmma/steps.py variants 512 > results/experiments/fusion-wgmma/variants-<gpu>-<date>.log
    python lab/fusion-wgmma/steps.py record    # the logs -> results.json

At each size: torch and cupy `a @ b @ c`, step 05 at its fastest recorded tiles for this GPU, and
step 06 at each configuration below; every kernel checked against float64 at full size first
(fusion.checked_launcher), then all launched in turn with CUDA events around each launch (packed
launchers), three rounds.
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

CONFIGS = {  # step 06's tiles: (name, parameters) per size
    512: {"n32 k4 s3": dict(BLOCK_N=32, SPLIT_K=4, NUM_STAGES=3), "n32 k4 s2": dict(BLOCK_N=32, SPLIT_K=4, NUM_STAGES=2),
          "n32 k2 s3": dict(BLOCK_N=32, SPLIT_K=2, NUM_STAGES=3), "n64 k2 s3": dict(BLOCK_N=64, SPLIT_K=2, NUM_STAGES=3)},
    1024: {"n32 k4 s3": dict(BLOCK_N=32, SPLIT_K=4, NUM_STAGES=3), "n32 k2 s3": dict(BLOCK_N=32, SPLIT_K=2, NUM_STAGES=3),
           "n64 k2 s3": dict(BLOCK_N=64, SPLIT_K=2, NUM_STAGES=3), "n64 k1 s4": dict(BLOCK_N=64, SPLIT_K=1, NUM_STAGES=4)},
    2048: {"n64 k1 s4": dict(BLOCK_N=64, SPLIT_K=1, NUM_STAGES=4), "n64 k2 s3": dict(BLOCK_N=64, SPLIT_K=2, NUM_STAGES=3),
           "n32 k1 s4": dict(BLOCK_N=32, SPLIT_K=1, NUM_STAGES=4)},
    4096: {"n64 k1 s4": dict(BLOCK_N=64, SPLIT_K=1, NUM_STAGES=4), "n64 k2 s3": dict(BLOCK_N=64, SPLIT_K=2, NUM_STAGES=3)},
}
REPEATS = {512: 300, 1024: 200, 2048: 50, 4096: 10}


def record() -> dict:
    """results.json["steps"] / ["timeline"] / ["variants"]: per GPU, the newest log of each kind (us)."""
    from lab import experiments

    out: dict = {"steps": {}, "timeline": {}, "variants": {}}
    for gpu, log, text in experiments.gpu_logs(DATA, "steps-*.log"):
        step05 = {m.group(1): json.loads(m.group(2)) for m in re.finditer(r"^step 05 n=(\d+): (\{.*\})$", text, re.M)}
        us: dict = {}
        for (n, name), v in experiments.rounds_of(text).items():
            us.setdefault(str(n), {})[name] = v
        out["steps"][gpu] = {"log": log.name, "configs": {str(n): c for n, c in CONFIGS.items()}, "step05": step05,
                             "us": us}
    for gpu, log, text in experiments.gpu_logs(DATA, "timeline-*.log"):
        parts: dict = {}
        for m in TIMELINE_LINE.finditer(text):
            parts.setdefault(f"{m.group(1)} {m.group(2)}", {}).setdefault(f"phase {m.group(3)}", {})[m.group(4).strip()] = \
                {"cycles": float(m.group(5)), "us": float(m.group(6))}
        out["timeline"][gpu] = {"log": log.name, "parts": parts}
    for gpu, log, text in experiments.gpu_logs(DATA, "variants-*.log"):
        out["variants"][gpu] = {"log": log.name, "us": {name: v for (_, name), v in experiments.rounds_of(text).items()}}
    return out


TIMELINE_LINE = re.compile(r"^timeline (\d+) (n\d+ k\d+ s\d+) phase (\d) (.+?)\s+([\d.]+) cycles\s+([\d.]+) us$", re.M)


def main(sizes) -> None:
    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    for n in sizes:
        a, b, c, want, calls = experiments.fusion_problem(n)
        calls["cupy a@b@c"] = lambda: a @ b @ c
        p05, calls["05 best"] = experiments.recorded_best("fused/05_tf32x3", n, a, b, c, want)
        print(f"step 05 n={n}: {json.dumps(p05)}")
        for cname, params in CONFIGS[n].items():
            k = fusion.step("fused/06_wgmma_tf32x3", **params)
            calls["06 " + cname], err = fusion.checked_launcher(k, a, b, c, want)
            print(f"config n={n} {cname}: {json.dumps(params)} grid {k.launch_config((n,) * 4).grid[0]} x "
                  f"{k.step.threads(k.params)} threads, {k.module.function.num_regs} registers, error {err:.2e}")
        experiments.time_rounds(calls, n, REPEATS[n])


PARTS = ("waiting for the round's tiles", "the split of B", "issuing the next loads", "the second barrier",
         "the A fragments", "the wgmmas and the chunk's add", "the reduction", "the stores", "the whole tile")


def timeline(n: int = 512, launches: int = 20) -> None:
    """Inside the tiles (round_timeline.patch: thread 0's clock64 cycles, summed over rounds and tiles):
    the median over blocks and launches of each part, per phase, in cycles and in us at the SM clock."""
    import cupy
    import numpy as np

    from gemmlab import fusion, gpu
    from lab import experiments

    clock_hz = cupy.cuda.runtime.getDeviceProperties(0)["clockRate"] * 1e3
    print(f"gpu: {gpu.device()['name']}")
    source = experiments.variant_source(HERE, fusion.get("fused/06_wgmma_tf32x3"), "round_timeline")
    a, b, c = fusion.random_inputs(n)
    for cname, params in CONFIGS[n].items():
        k = fusion.step("fused/06_wgmma_tf32x3", source=source, **params)
        e = cupy.empty((n, n), dtype=cupy.float32)
        grid = k.launch_config((n,) * 4).grid[0]
        runs = []
        for _ in range(launches):
            k.run(a, b, c, e)
            runs.append(cupy.asnumpy(e).view(np.int64).ravel()[: grid * 18].reshape(grid, 2, 9))
        cyc = np.median(np.stack(runs), axis=(0, 1))  # (phase, part)
        for p in range(2):
            for i, what in enumerate(PARTS):
                print(f"timeline {n} {cname} phase {p + 1} {what:34s} {cyc[p, i]:9.0f} cycles "
                      f"{cyc[p, i] / clock_hz * 1e6:7.2f} us", flush=True)


VARIANTS = ("loads_before_split", "!nofence")  # patches in this folder; '!': a diagnostic, not a correct kernel


def variants(n: int = 512, configs=("n32 k4 s3", "n32 k4 s2")) -> None:
    """The step against each patch of VARIANTS at the configurations named, launched in turn with torch
    `a @ b @ c`, three rounds (a '!' variant is timed only if it still matches float64 at full size)."""
    from gemmlab import errors, fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    a, b, c, want, calls = experiments.fusion_problem(n)
    st = fusion.get("fused/06_wgmma_tf32x3")
    for cname in configs:
        for v in ("step",) + VARIANTS:
            src = experiments.variant_source(HERE, st, v.lstrip("!"))
            k = fusion.step(st.name, source=src, **CONFIGS[n][cname])
            try:
                calls[f"{v} {cname}"], err = fusion.checked_launcher(k, a, b, c, want)
            except errors.VerificationError as e:
                print(f"variant {v} {cname}: {e}")
                continue
            print(f"variant {v} {cname}: {k.module.function.num_regs} registers, error {err:.2e}")
    experiments.time_rounds(calls, n, REPEATS[n])


if __name__ == "__main__":
    if sys.argv[1] in ("timeline", "variants"):
        {"timeline": timeline, "variants": variants}[sys.argv[1]](*[int(x) for x in sys.argv[2:]])
    elif sys.argv[1] == "record":
        from lab import experiments

        rec = record()
        for key, value in rec.items():
            experiments.save_record(DATA, key, value)
        for g, r in rec["steps"].items():
            for n, calls in r["us"].items():
                print(g, n, {k: round(statistics.median(v), 2) for k, v in calls.items()})
    else:
        main([int(x) for x in sys.argv[2:]] or sorted(CONFIGS))
