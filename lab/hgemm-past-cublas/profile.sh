#!/bin/bash
# Nsight Compute, one launch each, of step 09, step 10 (10_tma_store; the clusters lab kernel was profiled as 10_clusters) and cuBLAS's fp16 GEMM (torch.matmul) at 4096 and 8192:
# what step 09 does less well than cuBLAS (tensor pipe, issue, warp stalls, L2 and DRAM), before the next idea.
# Usage (repository root on the GPU machine): bash lab/hgemm-past-cublas/profile.sh OUT_DIR
out=${1:-${OUT:-profile-out}}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
command -v ncu > /dev/null || export PATH=$PATH:/usr/local/cuda/bin
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy --section SchedulerStats"
for n in 4096 8192; do
  for s in hgemm/09_persistent hgemm/10_tma_store; do
    ncu --clock-control none $SECTIONS --csv --page raw -k regex:hgemm python3 -m gemmlab run $s --size $n \
      > "$out/ncu-$(basename $s)-$n.csv" 2> "$out/ncu-$(basename $s)-$n.err"
  done
  ncu --clock-control none $SECTIONS --csv --page raw -k regex:"nvjet|gemm|xmma|cutlass" --launch-skip 2 --launch-count 1 \
    python3 -c "
import torch
a = torch.randn($n, $n, device='cuda', dtype=torch.half); b = torch.randn($n, $n, device='cuda', dtype=torch.half)
for _ in range(3): c = a @ b
torch.cuda.synchronize()" > "$out/ncu-cublas-$n.csv" 2> "$out/ncu-cublas-$n.err"
done
gzip -f "$out"/*.csv
ls -la "$out"
