"""results/experiments/fusion-counters/results.json from the Nsight Compute CSVs that gpu.sh wrote (one launch of
each fused step at N = 512, default tiles, `ncu --set full --csv --page raw`):

    python lab/fusion-counters/summary.py
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from gemmlab.measure import profile

DATA = Path(__file__).resolve().parents[2] / "results" / "experiments" / "fusion-counters"
NCU = {  # label -> Nsight Compute metric (the same labels as fusion-tf32x3's)
    "kernel_us": "gpu__time_duration.sum",
    "issue_active_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "alu_pipe_pct": "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",
    "fma_pipe_pct": "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
    "tensor_pipe_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "lsu_pipe_pct": "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
    "warps_active_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "registers": "launch__registers_per_thread",
    "grid": "launch__grid_size",
    "block": "launch__block_size",
}
PER_ISSUE = "_per_issue_active.ratio"  # profile.STALL also matches the per-warp ratios: keep one kind


def record(path: Path) -> dict:
    """The metrics of one launch; stalls_per_issue: every warp state, cycles per issued instruction, largest first."""
    values = profile.raw_csv_rows(gzip.open(path, "rt").read())[-1]
    out = {label: float(values[m].replace(",", "")) for label, m in NCU.items()}
    out["kernel_us"] /= 1e3  # ns
    out["kernel"] = values["Kernel Name"]
    stalls = {m.group(1): float(v) for k, v in values.items()
              if (m := profile.STALL.match(k)) and k.endswith(PER_ISSUE) and v not in ("", "n/a")}
    out["stalls_per_issue"] = dict(sorted(stalls.items(), key=lambda kv: -kv[1]))
    return out


def main() -> None:
    gpu_txt = next(DATA.glob("gpu-*.txt")).read_text().splitlines()
    name, driver = (s.strip() for s in gpu_txt[1].split(",")[:2])
    out = {
        "gpu": name, "driver": driver, "date": gpu_txt[2].strip(), "code": gpu_txt[3].strip(),
        "question": "Where do fused steps 03, 04 and 05 stall at N = 512, with the default tiles chapter 8's lane "
                    "run timed: the top stall each step starts from",
        "protocol": "gpu.sh: `ncu --clock-control none --set full --csv --page raw -k regex:fused --launch-count 1 "
                    "python3 -m gemmlab run STEP --size 512` (one launch on random inputs; ncu replays it per pass, "
                    "restoring memory, so the grid barrier's self-resetting word starts each pass at rest)",
        "prediction": "03: few warps per SM (4 at 512 with 64 x 32 tiles), so its warps wait on shared-memory "
                      "loads with no other warp to issue; 04: SPLIT_K = 4 groups give 4x the warps and more issue "
                      "slots used; 05: the FMA pipe's work moves to the tensor pipe",
        "ncu": {p.name.split(".")[0]: record(p) for p in sorted(DATA.glob("ncu-*.csv.gz"))},
    }
    (DATA / "results.json").write_text(json.dumps(out, indent=1) + "\n")
    for label, r in out["ncu"].items():
        top = list(r["stalls_per_issue"].items())[:4]
        print(f"{label}: {r['kernel_us']:.1f} us, issue {r['issue_active_pct']:.0f}%, "
              f"warps {r['warps_active_pct']:.0f}%, "
              f"fma {r['fma_pipe_pct']:.0f}%, tensor {r['tensor_pipe_pct']:.0f}%, top stalls {top}")


if __name__ == "__main__":
    main()
