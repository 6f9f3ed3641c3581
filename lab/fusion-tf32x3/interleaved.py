"""Step 05's fastest recorded tiles at each size, re-timed launch by launch in turn with the baselines
(bench.time_interleaved: torch and cupy a @ b @ c and the fused step, CUDA events around each launch),
to confirm the chapter's speed-ups under the protocol the course adopted on 2026-11-24. GPU only:

    python lab/fusion-tf32x3/interleaved.py [SIZES]   (default 512 1024 2048 4096)

Prints one line per size and round; writes nothing else (its log is kept in results/experiments/fusion-tf32x3/).
"""
import sys

import cupy

from gemmlab import bench, fusion

sizes = [int(s) for s in sys.argv[1:]] or [512, 1024, 2048, 4096]
records = fusion.load()
for n in sizes:
    top = fusion.best([r for r in records if "pct_of_baseline" in r], "fused/05_tf32x3", n)
    kern = fusion.step("fused/05_tf32x3", backend="gpu", **top["params"])
    a, b, c = fusion.random_inputs(n)
    e = cupy.empty((n, n), dtype=cupy.float32)
    calls = {"cupy a@b@c": lambda: cupy.matmul(cupy.matmul(a, b), c)}
    try:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
        calls["torch a@b@c"] = lambda: ta @ tb @ tc
    except ImportError:
        pass
    calls["fused/05"] = kern.launcher(a, b, c, e)
    reps = fusion.repeats_for(n)
    for rnd in range(3):
        t = bench.time_interleaved(calls, reps, 10)
        best = min(v["median_s"] for k, v in t.items() if k != "fused/05")
        print(f"n={n} round {rnd} params {top['params']}: fused {t['fused/05']['median_s'] * 1e6:8.1f} us, "
              + ", ".join(f"{k} {v['median_s'] * 1e6:8.1f} us" for k, v in t.items() if k != "fused/05")
              + f"  speed-up {best / t['fused/05']['median_s']:.2f}x", flush=True)
