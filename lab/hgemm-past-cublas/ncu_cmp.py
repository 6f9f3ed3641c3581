"""Nsight Compute CSVs (profile.sh's or the GPU scripts', gzipped) side by side: time, tensor pipe, issue, L2, launch,
and the warp stalls that reach 0.05 per issue in any of them.

    python3 lab/hgemm-past-cublas/ncu_cmp.py FILE.csv.gz ...     (e.g. results/experiments/hgemm-past-cublas/ncu-*/)
"""
import gzip
import sys

from gemmlab import profile

METRICS = ["gpu__time_duration.sum", "sm__cycles_elapsed.avg.per_second",
           "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
           "sm__pipe_tensor_cycles_active.max.pct_of_peak_sustained_elapsed",
           "sm__pipe_tensor_cycles_active.min.pct_of_peak_sustained_elapsed",
           "smsp__issue_active.avg.pct_of_peak_sustained_active", "lts__t_sector_hit_rate.pct",
           "lts__throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
           "dram__bytes_read.sum", "launch__grid_size", "launch__block_size", "launch__cluster_dim_x",
           "launch__cluster_dim_y", "launch__registers_per_thread", "launch__shared_mem_per_block_dynamic",
           "smsp__warps_active.avg.per_cycle_active", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
           "smsp__inst_executed.sum", "lts__t_sectors_srcunit_tex_op_write.sum",
           "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum"]
STALL = "smsp__average_warps_issue_stalled_"


def number(value: str) -> float:
    try:
        return float(value.replace(",", ""))
    except ValueError:
        return 0.0


files = sys.argv[1:]
kernels = [profile.raw_csv_rows(gzip.open(path, "rt").read())[0] for path in files]
print(f"{'metric':62s}" + "".join(f"{path.split('/')[-1][4:-7]:>24s}" for path in files))
for key in METRICS:
    print(f"{key:62s}" + "".join(f"{k.get(key, '-'):>24s}" for k in kernels))
stalls = sorted({key for k in kernels for key in k if key.startswith(STALL) and key.endswith("_per_issue_active.ratio")})
for key in stalls:
    values = [k.get(key, "-") for k in kernels]
    if max(number(v) for v in values) >= 0.05:
        print(f"{key.replace(STALL, 'stall ')[:62]:62s}" + "".join(f"{v:>24s}" for v in values))
print([k["Kernel Name"][:80] for k in kernels])
