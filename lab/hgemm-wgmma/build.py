"""Builds results.json of the hgemm-wgmma experiment from its raw records in results/experiments/hgemm-wgmma/
(run from anywhere):

- stages-*.json, tile-order-*.json: gemmlab.benchmark records of step 08 configurations at 4096 and
  8192, each against cuBLAS (the faster of cupy.matmul and torch.matmul) in the same process
  (.gpu scripts in the session log: bench.benchmark(..., n_repeat=50, save=False)).
- variants-*.log: lab/run.py over lab/hgemm-wgmma's patches (s08_wait1) and parameter
  changes of the step; "interleaved" logs time cuBLAS and each variant launch by launch in turn
  (bench.time_interleaved), the others time cuBLAS once per round first (superseded: the GPU slowed
  down during a round, see appendix "Recorded results").
- ncu-*.csv.gz: Nsight Compute (--clock-control none, sections SpeedOfLight, MemoryWorkloadAnalysis,
  ComputeWorkloadAnalysis, --page raw) of one launch at 8192:
  `ncu ... -k regex:hgemm_wgmma python3 -m gemmlab run hgemm/08_wgmma --size 8192 --param ...`.
"""
import csv
import glob
import gzip
import io
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))  # lab/hgemm-wgmma: this script and the patches
DATA = os.path.join(os.path.dirname(os.path.dirname(HERE)), "results", "experiments", "hgemm-wgmma")  # the records
NCU = {  # label: (file, what was varied)
    "NUM_STAGES=3, GROUP_M=1": "ncu-s3-g1-2026-11-24.csv.gz",
    "NUM_STAGES=4, GROUP_M=1": "ncu-s4-g1-2026-11-24.csv.gz",
    "NUM_STAGES=4, GROUP_M=16": "ncu-s4-g16-2026-11-24.csv.gz",
    "step 08 at 4096": "ncu-08-4096-2026-11-24.csv.gz",         # default parameters, one launch at 4096
    "step 09 at 4096": "ncu-09-4096-2026-11-24.csv.gz",
}
METRICS = {
    "duration_ms": ("gpu__time_duration.sum", 1e-6),
    "sm_clock_ghz": ("gpc__cycles_elapsed.max.per_second", 1e-9),
    "tensor_pipe_pct": ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 1),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct", 1),
    "l2_busy_pct": ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 1),
    "smem_read_pct": ("l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed", 1),
}


def ncu_record(path):
    rows = list(csv.reader(io.StringIO(gzip.open(path, "rt").read())))
    head = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
    row = dict(zip(rows[head], rows[-1]))
    return {k: round(float(row[m].replace(",", "")) * scale, 4) for k, (m, scale) in METRICS.items()}


def spec(params):
    p = {"GROUP_M": 1, **params}  # the stage runs predate GROUP_M: row-major order
    return ",".join(f"{k}={p[k]}" for k in ("BLOCK_N", "NUM_STAGES", "GROUP_M"))


def runs(pattern):
    out = {}
    for path in sorted(glob.glob(os.path.join(DATA, pattern))):
        for r in json.load(open(path)):
            out.setdefault(spec(r["params"]), []).append(
                {"size": r["m"], "tflops": round(r["tflops"], 2), "pct": round(r["pct_of_baseline"], 1),
                 "cublas_tflops": round(r["baseline_tflops"], 1), "baseline": r["baseline"]})
    return out


ROUND = re.compile(r"round (\d+) n=(\d+) (\S+)\s+([\d.]+) TF\s+([\d.]+)% of cuBLAS \(([\d.]+)\)")


def log_runs(pattern):
    out = {}
    for path in sorted(glob.glob(os.path.join(DATA, pattern))):
        for line in open(path):
            m = ROUND.match(line.strip())
            if m:
                _, size, spec_, tf, pct, cublas = m.groups()
                out.setdefault(spec_, []).append({"size": int(size), "tflops": float(tf), "pct": float(pct),
                                                  "cublas_tflops": float(cublas)})
    return out


def main():
    first = json.load(open(sorted(glob.glob(os.path.join(DATA, "stages-*.json")))[0]))[0]
    ncu = {label: ncu_record(os.path.join(DATA, f)) for label, f in NCU.items() if os.path.exists(os.path.join(DATA, f))}
    result = {
        "gpu": first["gpu"], "date": first["date"], "step": "hgemm/08_wgmma", "size": 8192, "dtype": "float16",
        "question": "What limits step 08 (TMA + wgmma, warp-specialized) at 8192, and which of its choices "
                    "(ring depth, tile order, wgmma groups in flight) matter?",
        "protocol": "gemmlab.benchmark: each configuration verified against float64, then timed (median of 50, "
                    "CUDA events) next to cupy.matmul and torch.matmul on the same inputs in the same process; "
                    "pct is against the faster. Each list holds the repeats of one configuration, in run order.",
        "experiments": [
            {"name": "stages", "question": "How deep a ring of stages, in row-major tile order?",
             "prediction": "deeper is better or equal: more tiles in flight hide more latency",
             "runs": runs("stages-*.json")},
            {"name": "tile order", "question": "Hand tiles out in bands of GROUP_M block rows?",
             "prediction": "L2 is busy 96-100% with half its reads missing in row-major order; bands "
                           "re-read less of B, so the tensor pipe should get busier",
             "runs": runs("tile-order-*.json")},
            {"name": "interleaved", "question": "The same choices, and one wgmma group kept in flight (s08_wait1), "
                                                "timed launch by launch next to cuBLAS",
             "prediction": "GROUP_M = 1 clearly slower at 8192; wait<1> a few points faster (the tensor pipe idles "
                           "while each consumer drains its group)",
             "runs": log_runs("variants-interleaved-*.log")},
        ],
        "ncu": ncu,
    }
    with open(os.path.join(DATA, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
