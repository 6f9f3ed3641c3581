"""Nsight Compute CSVs (profile.sh, gzipped) side by side: time, tensor pipe, issue, L2, launch, warp stalls.
Usage: python3 lab/hgemm-past-cublas/ncu_cmp.py FILE.csv.gz ... (results/experiments/hgemm-past-cublas/ncu-*/compare.txt)"""
import csv, gzip, io, sys
def rec(path):
    txt = gzip.open(path, 'rt').read()
    lines = [l for l in txt.splitlines() if l.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    return dict(zip(rows[0], rows[2]))
files = sys.argv[1:]
R = [rec(f) for f in files]
keys = ["gpu__time_duration.sum","sm__cycles_elapsed.avg.per_second","sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
 "sm__pipe_tensor_cycles_active.max.pct_of_peak_sustained_elapsed","sm__pipe_tensor_cycles_active.min.pct_of_peak_sustained_elapsed",
 "smsp__issue_active.avg.pct_of_peak_sustained_active","lts__t_sector_hit_rate.pct","lts__throughput.avg.pct_of_peak_sustained_elapsed",
 "dram__throughput.avg.pct_of_peak_sustained_elapsed","dram__bytes_read.sum","launch__grid_size","launch__block_size","launch__cluster_dim_x","launch__cluster_dim_y",
 "launch__registers_per_thread","launch__shared_mem_per_block_dynamic","smsp__warps_active.avg.per_cycle_active","l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
 "smsp__inst_executed.sum","lts__t_sectors_srcunit_tex_op_write.sum","l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum"]
print(f"{'metric':62s}" + "".join(f"{f.split('/')[-1][4:-7]:>24s}" for f in files))
for k in keys:
    print(f"{k:62s}" + "".join(f"{r.get(k,'-'):>24s}" for r in R))
stalls = sorted({k for r in R for k in r if k.startswith("smsp__average_warp_latency_issue_stalled") and k.endswith(".ratio")} |
                {k for r in R for k in r if k.startswith("smsp__average_warps_issue_stalled_") and k.endswith("_per_issue_active.ratio")})
for k in stalls:
    vals=[r.get(k,'-') for r in R]
    try:
        if max(float(v.replace(',','')) for v in vals if v!='-') < 0.05: continue
    except ValueError: pass
    print(f"{k.replace('smsp__average_warps_issue_stalled_','stall ')[:62]:62s}" + "".join(f"{v:>24s}" for v in vals))
print([r['Kernel Name'][:80] for r in R])
