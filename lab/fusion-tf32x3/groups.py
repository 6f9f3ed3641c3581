"""Step 05 at 512 with each round's barrier over its own thread group: do more groups (SPLIT_K = 8) pay now?

    python lab/fusion-tf32x3/groups.py time > results/experiments/fusion-tf32x3/groups-<gpu>-<date>.log   # on a GPU
    python lab/fusion-tf32x3/groups.py record    # the logs -> results.json["groups"]

Before the per-group barrier, SPLIT_K = 8 was no faster than the sweep's SPLIT_K = 4 winner
(variants-splitk8.log): every round's __syncthreads made eight groups wait for the slowest. With a
barrier per group they no longer do. The step itself (no patch), the configurations below, each checked,
launched in turn with torch `a @ b @ c` (packed launchers), three rounds of 300.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent  # lab/<name>: this experiment's scripts and patches
DATA = HERE.parents[1] / "results" / "experiments" / HERE.name  # its logs and results.json
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))
import variants  # noqa: E402  (this folder's configurations)

CONFIGS = {
    "k4 best512": variants.CONFIGS["best512"],
    "k4 64x32": dict(BLOCK_M=64, BLOCK_N=32, BLOCK_K=32, WARP_M=16, WARP_N=32, SPLIT_K=4, NUM_STAGES=3),
    "k8 w32x32 bk16": variants.CONFIGS["k8w32"],
    "k8 w16x64 bk32": dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=32, WARP_M=16, WARP_N=64, SPLIT_K=8, NUM_STAGES=2),
    "k8 w16x64 bk16": dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=16, WARP_M=16, WARP_N=64, SPLIT_K=8, NUM_STAGES=3),
    "k8 32x32 w16x32 bk16": dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, WARP_M=16, WARP_N=32, SPLIT_K=8, NUM_STAGES=3),
}


def record() -> dict:
    """results.json["groups"]: per GPU, the newest log's event times per configuration and round (us)."""
    from lab import experiments

    out = {}
    for gpu, log, text in experiments.gpu_logs(DATA, "groups-*.log"):
        out[gpu] = {"log": log.name, "configs": CONFIGS,
                    "us": {name: us for (_, name), us in experiments.rounds_of(text).items()}}
    return out


def main(n: int = 512) -> None:
    from gemmlab import fusion, gpu
    from lab import experiments

    print(f"gpu: {gpu.device()['name']}")
    a, b, c, want, calls = experiments.fusion_problem(n)
    for name, params in CONFIGS.items():
        k = fusion.step("fused/05_tf32x3", **params)
        fusion.check(k)
        calls[name], err = fusion.checked_launcher(k, a, b, c, want)
        print(f"config {name}: {json.dumps(params)} grid {k.launch_config((n,) * 4).grid[0]} x "
              f"{k.step.threads(k.params)} threads, {k.module.function.num_regs} registers, error {err:.2e}")
    experiments.time_rounds(calls, n, 300)


if __name__ == "__main__":
    if sys.argv[1] == "record":
        from lab import experiments

        groups_record = record()
        experiments.save_record(DATA, "groups", groups_record)
        for g, r in groups_record.items():
            print(g, {k: round(statistics.median(v), 2) for k, v in r["us"].items()})
    else:
        main()
