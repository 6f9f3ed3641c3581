#!/bin/bash
# One run on the H200 for chapters 7c, 7d, 8 and 9 (issue 52, "one truth per number"): the Hopper chain
# (hgemm/07, hopper/01-03, hgemm/08-12) benchmarked at 4096 and 8192 against cuBLAS in the same process, the
# profiler's warp states of hgemm/09-12 at 4096, and every fused step with its baselines (a @ b @ c eager, and
# as a CUDA graph) at 256..4096 in one process. Records go to results/<gpu>.json, .ncu.json, .fusion.json.
# Usage (repository root on the GPU machine): bash lab/one-run/gpu.sh OUT_DIR
source lab/hgemm-past-cublas/lib.sh
setup "${1:-}" one-run-out
export PYTHONUNBUFFERED=1 BUDGET=${BUDGET:-520}
CHAIN="hgemm/07_cp_async hopper/01_wgmma hopper/02_tma hopper/03_tma_ring hgemm/08_wgmma hgemm/09_persistent
  hgemm/10_tma_store hgemm/11_mma_in_flight hgemm/12_stream_k"
run bench-chain 240 python3 -m gemmlab bench $CHAIN --size 4096 --size 8192
run bench-fused 200 python3 -m gemmlab bench $(python3 -m gemmlab steps --names | grep "^fused/")
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
for s in hgemm/09_persistent hgemm/10_tma_store hgemm/11_mma_in_flight hgemm/12_stream_k; do
  name="ncu-$(basename "$s")"
  run "$name" 45 bash -c "ncu --clock-control none --section WarpStateStats --section Occupancy --section LaunchStats \
    --section ComputeWorkloadAnalysis --csv --page raw -k regex:'hgemm' --launch-count 1 \
    python3 -m gemmlab run $s --size 4096 > '$work/$name.csv' && python3 -c \"from gemmlab import profile; \
profile.save('$gpu', '$s', profile.parse_raw_csv(open('$work/$name.csv').read())); \
print(profile.stall_reasons(profile.load('$gpu')['$s']))\""
done
cp results/nvidia-h200.json results/nvidia-h200.ncu.json results/nvidia-h200.fusion.json "$out/" 2>/dev/null
{
  echo
  report benchmark "bench-*.log" "TFLOP/s|µs|us "
  report stalls "ncu-*.log" "\("
} >> "$summary"
finish one-run.tar.gz
