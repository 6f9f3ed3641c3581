"""Step 05 (3xTF32) variants: what the accuracy fix and the split cost, measured in the same run.

    python lab/fusion-tf32x3/variants.py run [SIZES]   # on a GPU: one line per variant
    python lab/fusion-tf32x3/variants.py record        # the logs -> results.json

Each variant is a patch against the step (<name>.patch here, applied by gemmlab.experiments.patched to the
step's text at the commit its first line records); the logs and results.json are in results/experiments/fusion-tf32x3/.
Names that start with '!' on the command line are diagnostics that compute a wrong E on purpose
(timed, not checked):
  step             kernels/fused/05_tf32x3.cu as it is
  one_accumulator  every mma adds into the running sum (no per-K-tile chunk)
  cvt_guard        the split with cvt.rna.tf32.f32 for both parts and an isfinite guard on small
  cvt              the same without the guard
  !trunc           big = x with its low 13 bits cleared (two instructions; fails the fp32 check)
  !nosplit         big = small = x: the three mmas with no split at all (the split's cost)
  !1x              one TF32 mma per product (TF32 accuracy: the small terms' cost)
  interleave       each of the three terms over every mma tile before the next term (the same sums,
                   in the same order per element: consecutive mmas independent)
  timeline         (GPU only, `variants.py timeline N CONFIG`) each block's globaltimer at its start, the
                   end of phase 1, the barrier's exit and the end of phase 2, written over E
  tile_timeline    (GPU only, `variants.py tile_timeline N CONFIG`) inside the block's tile of each phase:
                   operands of round 0 ready, the K loop, the reduction across groups, the stores
timeline-2026-11-23.log: `variants.py timeline N CONFIG` (median of 20 launches); tile-timeline-2026-11-23.log:
`variants.py tile_timeline N CONFIG` (the same, inside the tile); peaks-2026-11-23.json: the
instruction ceilings (gemmlab.hardware.measure_peaks, which has a TF32 mma probe since this experiment).
ncu-<variant>-<N>-<config>.csv.gz: one launch under `ncu --set full --csv --page raw` (cvt_guard: the
kernel of commit 401c5e9, the cvt split with its guard; step: the step as landed), in results.json's "ncu".
Every line: size, tile configuration, variant, device time, TFLOP/s, speed-up over the faster of
torch and cupy a @ b @ c measured just before, max |E - E64| / max |E64|, registers.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent  # lab/<name>: this experiment's scripts and patches
ROOT = HERE.parents[1]
DATA = ROOT / "results" / "experiments" / HERE.name  # its logs and results.json
sys.path.insert(0, str(ROOT))

VARIANTS = ("step", "one_accumulator", "cvt_guard", "cvt", "!trunc", "!nosplit", "!1x", "interleave")
CONFIGS = {  # name -> template parameters (defaults for the rest)
    "s32": {},
    "s32k4": dict(SPLIT_K=4, BLOCK_K=16),
    "best512": dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=32, WARP_M=16, WARP_N=32, SPLIT_K=4, NUM_STAGES=3),
    "best512k16": dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=16, WARP_M=16, WARP_N=32, SPLIT_K=4, NUM_STAGES=4),
    "best512k64": dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=64, WARP_M=16, WARP_N=32, SPLIT_K=4, NUM_STAGES=2),
    "k8w32": dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=16, WARP_M=32, WARP_N=32, SPLIT_K=8, NUM_STAGES=3),
    "k8w64": dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=16, WARP_M=32, WARP_N=64, SPLIT_K=8, NUM_STAGES=3),
    "best2048": dict(BLOCK_M=128, BLOCK_N=64, BLOCK_K=32, WARP_M=64, WARP_N=32, SPLIT_K=1, NUM_STAGES=3),
    "best4096": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, WARP_M=64, WARP_N=32, SPLIT_K=1, NUM_STAGES=4),
    "s64": dict(BLOCK_M=64, BLOCK_N=64, WARP_M=32, WARP_N=32, SPLIT_K=1, NUM_STAGES=3),
    "s64k2": dict(BLOCK_M=64, BLOCK_N=64, WARP_M=32, WARP_N=32, SPLIT_K=2, NUM_STAGES=2),
    "b128": dict(BLOCK_M=128, BLOCK_N=128, WARP_M=64, WARP_N=32, SPLIT_K=1, NUM_STAGES=3),
    "b128w32": dict(BLOCK_M=128, BLOCK_N=128, WARP_M=32, WARP_N=32, SPLIT_K=1, NUM_STAGES=3),
}
LINE = re.compile(r"^\s*(\d+) (\S+)\s+(\S+)\s+([\d.]+) us\s+([\d.]+) TF x([\d.]+)\s+err ([\d.e+-]+)\s+regs (\d+)")
BASE = re.compile(r"^\s*(\d+) ((?:torch|cupy)(?: graph)? a@b(?:@c)?)\s+([\d.]+) us")
TILE_TIMELINE = re.compile(r"^tile_timeline (\d+) (\S+) phase (\d) (.+?)\s+([\d.]+) us$")
TIMELINE = re.compile(r"^timeline (\d+) (\S+) (.+?)\s+([\d.]+) us$")
ERR = re.compile(r"^\s*(\d+) torch a@b@c error ([\d.e+-]+)")
LOGS = {  # log -> the source its variants were applied to
    "variants-split-cvt.log": "05 with the cvt.rna split and its isfinite guard (commit 401c5e9's kernel); "
                              "'chunk' = that kernel, 'old' = one accumulator, 'noguard' = cvt without the guard",
    "variants-split-3op.log": "05 as landed (three-instruction split, chunked sums); 'cur' = that kernel",
    "variants-interleave.log": "05 as landed ('step') against 'interleave' (the mma order), BLOCK_K 16 / 32 / 64 "
                               "at 512 and the sweep's winners at 1024-4096",
    "variants-splitk8.log": "05 as landed at 512: the sweep's winner against SPLIT_K = 8 with 32 x 32 and 32 x 64 "
                            "warp tiles (1024 threads of 16 x 32 warps do not fit the register file)",
}


def source(variant: str) -> str | None:
    """The variant's kernel source (None: the step itself)."""
    from gemmlab import fusion
    from lab import experiments
    return experiments.variant_source(HERE, fusion.get("fused/05_tf32x3"), variant.lstrip("!"))


def run(sizes: list[int], configs: list[str] | None = None, variants: list[str] | None = None) -> None:
    import cupy
    from gemmlab import fusion
    for n in sizes:
        a, b, c = fusion.random_inputs(n)
        reps = fusion.repeats_for(n)
        base = fusion.time_baselines(a, b, c, reps)
        want = cupy.matmul(cupy.matmul(a.astype(cupy.float64), b.astype(cupy.float64)), c.astype(cupy.float64))
        best = min(base[k]["median_s"] for k in fusion.BASELINES if k in base)
        for impl, t in base.items():
            print(f"{n:5d} {impl:24s} {t['median_s'] * 1e6:9.1f} us", flush=True)
        for cfg, p in CONFIGS.items():
            if configs is not None and cfg not in configs:
                continue
            if configs is None and ((n <= 1024) != cfg.startswith("s") or (n > 1024 and cfg.startswith("s32"))):
                continue
            for variant in variants or VARIANTS:
                k = fusion.step("fused/05_tf32x3", source=source(variant), **p)
                if not variant.startswith("!"):
                    fusion.check(k)
                e = cupy.empty((n, n), cupy.float32)
                t = fusion.time_call(k.launcher(a, b, c, e), reps)
                err = float(cupy.abs(e - want).max() / cupy.abs(want).max())
                print(f"{n:5d} {cfg:8s} {variant:9s} {t['median_s'] * 1e6:9.1f} us {fusion.flops(n) / t['median_s'] / 1e12:6.1f} TF "
                      f"x{best / t['median_s']:.2f}  err {err:.2e}  regs {k.resources().registers}", flush=True)
        import torch
        ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
        got = cupy.asarray(ta @ tb @ tc)
        print(f"{n:5d} torch a@b@c error {float(cupy.abs(got - want).max() / cupy.abs(want).max()):.2e}", flush=True)


NCU = {  # label -> Nsight Compute metric (one launch, --set full)
    "kernel_us": "gpu__time_duration.sum",
    "issue_active_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "alu_pipe_pct": "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",
    "fma_pipe_pct": "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
    "tensor_pipe_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "lsu_pipe_pct": "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
    "warps_active_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "registers": "launch__registers_per_thread",
}


def ncu_record(path: Path) -> dict:
    """The NCU metrics of one `ncu --csv --page raw` launch (a gzipped CSV here)."""
    import csv
    import gzip
    rows = list(csv.reader(gzip.open(path, "rt")))
    head = next(i for i, r in enumerate(rows) if "ID" in r[:3])
    values = dict(zip(rows[head], rows[head + 2]))
    out = {label: float(values[m].replace(",", "")) for label, m in NCU.items()}
    out["kernel_us"] /= 1e3  # ns
    stalls = {k[len("smsp__average_warps_issue_stalled_"):-len("_per_issue_active.ratio")]: float(v)
              for k, v in values.items() if k.startswith("smsp__average_warps_issue_stalled_")
              and k.endswith("_per_issue_active.ratio") and v not in ("", "n/a")}
    out["stalls_per_issue"] = dict(sorted(stalls.items(), key=lambda kv: -kv[1])[:6])
    return out


def timeline(n: int, config: str, launches: int = 20) -> None:
    """Where one launch's time goes, from the timeline variant's stamps (median over launches, us)."""
    import statistics
    import cupy
    from gemmlab import fusion
    k = fusion.step("fused/05_tf32x3", source=source("timeline"), **CONFIGS[config])
    a, b, c = fusion.random_inputs(n)
    e = cupy.empty((n, n), cupy.float32)
    grid = k.launch_config((n, n, n, n)).grid[0]
    parts = {"launch ramp (last block start - first)": [], "phase 1 (median block)": [], "phase 1 (slowest block)": [],
             "barrier (last arrival -> last release)": [], "phase 2 (median block)": [], "phase 2 (slowest block)": [],
             "first start -> last phase-2 end": []}
    for _ in range(launches):
        k.run(a, b, c, e)
        cupy.cuda.Device().synchronize()
        s = cupy.asnumpy(e.view(cupy.uint64).ravel()[: grid * 4]).reshape(grid, 4).astype("int64")
        t0 = s[:, 0].min()
        parts["launch ramp (last block start - first)"].append((s[:, 0].max() - t0) / 1e3)
        parts["phase 1 (median block)"].append(statistics.median(s[:, 1] - s[:, 0]) / 1e3)
        parts["phase 1 (slowest block)"].append((s[:, 1] - s[:, 0]).max() / 1e3)
        parts["barrier (last arrival -> last release)"].append((s[:, 2].max() - s[:, 1].max()) / 1e3)
        parts["phase 2 (median block)"].append(statistics.median(s[:, 3] - s[:, 2]) / 1e3)
        parts["phase 2 (slowest block)"].append((s[:, 3] - s[:, 2]).max() / 1e3)
        parts["first start -> last phase-2 end"].append((s[:, 3].max() - t0) / 1e3)
    for what, values in parts.items():
        print(f"timeline {n} {config} {what:42s} {statistics.median(values):8.2f} us", flush=True)


def tile_timeline(n: int, config: str, launches: int = 20) -> None:
    """Inside a tile (the tile_timeline variant: the block's last tile of each phase), median over blocks
    and then over launches, us: until round 0's operands are in shared memory, the K loop, the
    reduction across SPLIT_K groups, the stores."""
    import statistics
    import cupy
    from gemmlab import fusion
    k = fusion.step("fused/05_tf32x3", source=source("tile_timeline"), **CONFIGS[config])
    a, b, c = fusion.random_inputs(n)
    e = cupy.empty((n, n), cupy.float32)
    grid = k.launch_config((n, n, n, n)).grid[0]
    names = ("first operands ready", "K loop", "reduction across groups", "stores")
    parts = {(p, w): [] for p in (1, 2) for w in names}
    for _ in range(launches):
        k.run(a, b, c, e)
        cupy.cuda.Device().synchronize()
        s = cupy.asnumpy(e.view(cupy.uint64).ravel()[: grid * 10]).reshape(grid, 2, 5).astype("int64")
        for p in (1, 2):
            for i, w in enumerate(names):
                parts[(p, w)].append(statistics.median(s[:, p - 1, i + 1] - s[:, p - 1, i]) / 1e3)
    for (p, w), values in parts.items():
        print(f"tile_timeline {n} {config} phase {p} {w:36s} {statistics.median(values):8.2f} us", flush=True)


def record() -> dict:
    out = {"gpu": "NVIDIA H100 80GB HBM3", "date": "2026-11-23",
           "question": "What do fused step 05's accuracy (one accumulator or a chunk per K tile) and its "
                       "speed (how each operand is split into two TF32 parts) depend on?",
           "protocol": "variants.py run: each variant checked against float64 (diagnostics excepted), timed with "
                       "gemmlab.fusion's event protocol right after torch and cupy a @ b @ c on the same inputs; "
                       "error = max |E - E64| / max |E64|; ncu: one launch, --set full",
           "logs": {},
           "ncu": {p.name.split(".")[0]: ncu_record(p) for p in sorted(DATA.glob("ncu-*.csv.gz"))}}
    for log, what in LOGS.items():
        rows, baselines, torch_error = [], {}, {}
        for line in (DATA / log).read_text().splitlines():
            if m := LINE.match(line):
                n, cfg, variant, us, tf, x, err, regs = m.groups()
                rows.append({"n": int(n), "config": cfg, "variant": variant, "us": float(us), "tflops": float(tf),
                             "speedup": float(x), "max_rel_error": float(err), "registers": int(regs)})
            elif m := ERR.match(line):
                torch_error[m.group(1)] = float(m.group(2))
            elif m := BASE.match(line):
                baselines.setdefault(m.group(1), {})[m.group(2)] = float(m.group(3))
        out["logs"][log] = {"kernel": what, "rows": rows, "baselines_us": baselines, "torch_max_rel_error": torch_error}
    timeline: dict = {}
    for line in (DATA / "timeline-2026-11-23.log").read_text().splitlines():
        if m := TIMELINE.match(line):
            timeline.setdefault(f"{m.group(1)} {m.group(2)}", {})[m.group(3).strip()] = float(m.group(4))
    out["timeline_us"] = timeline
    inside: dict = {}
    for line in (DATA / "tile-timeline-2026-11-23.log").read_text().splitlines():
        if m := TILE_TIMELINE.match(line):
            inside.setdefault(f"{m.group(1)} {m.group(2)}", {}).setdefault(f"phase {m.group(3)}", {})[
                m.group(4).strip()] = float(m.group(5))
    out["tile_timeline_us"] = inside
    # the instruction ceilings measured the same day (gemmlab.hardware.measure_peaks, with the TF32 probe)
    out["peaks"] = json.loads((DATA / "peaks-2026-11-23.json").read_text())
    (DATA / "results.json").write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "record":
        rec = record()
        print({k: len(v["rows"]) for k, v in rec["logs"].items()})
    elif len(sys.argv) > 3 and sys.argv[1] == "tile_timeline":
        tile_timeline(int(sys.argv[2]), sys.argv[3])
    elif len(sys.argv) > 3 and sys.argv[1] == "timeline":
        timeline(int(sys.argv[2]), sys.argv[3])
    elif len(sys.argv) > 1 and sys.argv[1] == "run":  # run [SIZES] [--configs a,b] [--variants x,y]
        args, opts = [], {}
        it = iter(sys.argv[2:])
        for a in it:
            if a.startswith("--"):
                opts[a[2:]] = next(it).split(",")
            else:
                args.append(int(a))
        run(args or [512, 1024, 2048, 4096], opts.get("configs"), opts.get("variants"))
    else:
        raise SystemExit(__doc__)
