"""Step 05's K loop: two changes to what each round costs, timed against each other in the same run.

    python lab/fusion-tf32x3/loop.py time [N ...] > results/experiments/fusion-tf32x3/loop-<gpu>-<date>.log   # on a GPU
    python lab/fusion-tf32x3/loop.py record      # the logs -> results.json["loop"]

  step         kernels/fused/05_tf32x3.cu as it is: the A fragment by one ldmatrix.x4, the barrier of each
               round over the thread group only (bar.sync 1 + group)
  a32_loads    the A fragment by four 32-bit loads (the step before this experiment)
  block_bar    the barrier of each round over the whole block (__syncthreads, the step before)
  before       both: the step as it was before this experiment
Each is checked against float64 (fusion.check, and at N), then launched in turn with torch `a @ b @ c`
(bench.time_interleaved, packed launchers), three rounds, with the configurations below.
loop-nvidia-h200-2026-11-24.log was run before the two changes entered the step, with the patches
then the other way round: there 'step' is today's 'before', 'ldsm_a' today's 'block_bar', 'group_bar'
today's 'a32_loads' and 'ldsm_group' today's step (record() labels both logs alike). The b log is the
same comparison on another machine, after the changes entered the step.
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent  # lab/<name>: this experiment's scripts and patches
DATA = HERE.parents[1] / "results" / "experiments" / HERE.name  # its logs and results.json
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))
import variants  # noqa: E402  (this folder's configurations)

VARIANTS = ("a32_loads", "block_bar", "before")
# the fastest recorded tiles per size (the H100 and H200 sweeps): variants.py's configurations and one more
CONFIGS = {
    512: {"best512": variants.CONFIGS["best512"],
          "w32x16": dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=32, WARP_M=32, WARP_N=16, SPLIT_K=4, NUM_STAGES=3)},
    1024: {"s64k2": variants.CONFIGS["s64k2"]},
    2048: {"best2048": variants.CONFIGS["best2048"]},
    4096: {"b128": variants.CONFIGS["b128"]},
}
REPS = {512: 300, 1024: 100, 2048: 40, 4096: 15}


# What each variant is, in the record: the first log (run before the two changes entered the step) named
# them after the patches of that day, which were the other way round.
LABELS = {"step": "both (step 05)", "a32_loads": "group barrier only", "block_bar": "ldmatrix A only", "before": "before",
          "torch_a@b@c": "torch a@b@c"}
LABELS_FIRST = {"step": "before", "ldsm_a": "ldmatrix A only", "group_bar": "group barrier only",
                "ldsm_group": "both (step 05)", "torch_a@b@c": "torch a@b@c"}


def record() -> dict:
    """results.json["loop"]: per GPU, one entry per log: {log, us: {"N config": {label: [us per round]}}}."""
    from lab import experiments

    out = {}
    for gpu, log, text in experiments.gpu_logs(DATA, "loop-*.log"):
        labels = LABELS_FIRST if " ldsm_group " in text else LABELS
        rec = {"log": log.name, "us": {}}
        out.setdefault(gpu, []).append(rec)
        for (n, name), us in experiments.rounds_of(text).items():
            config, variant = name.split(" ", 1)
            rec["us"].setdefault(f"{n} {config}", {})[labels[variant]] = us
    return out


def main(sizes: list[int]) -> None:
    import torch

    from gemmlab import fusion, gpu
    from lab import experiments

    torch.backends.cuda.matmul.allow_tf32 = False
    st = fusion.get("fused/05_tf32x3")
    print(f"gpu: {gpu.device()['name']}")
    for n in sizes:
        a, b, c = fusion.random_inputs(n)
        want = fusion.reference_gpu(a, b, c)
        ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
        for cfg_name, params in CONFIGS[n].items():
            calls = {"torch_a@b@c": lambda: ta @ tb @ tc}
            for v in ("step",) + VARIANTS:
                k = fusion.step(st.name, source=experiments.variant_source(HERE, st, v), **params)
                fusion.check(k)
                calls[v], err = fusion.checked_launcher(k, a, b, c, want)
                print(f"error n={n} {cfg_name} {v} {err:.3e} regs {k.module.function.num_regs}")
            experiments.time_rounds(calls, n, REPS[n], n_warmup=10, prefix=f"{cfg_name} ")


if __name__ == "__main__":
    if sys.argv[1] == "record":
        from lab import experiments

        loop_record = record()
        experiments.save_record(DATA, "loop", loop_record)
        for g, runs in loop_record.items():
            for r in runs:
                for key, calls in r["us"].items():
                    print(g, r["log"], key, {k: round(statistics.median(v), 2) for k, v in calls.items()})
    else:
        main([int(x) for x in sys.argv[2:]] or [512])
