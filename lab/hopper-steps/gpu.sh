#!/bin/bash
# Chapter 7c's steps on a Hopper GPU in one call (issue 51): verify hopper/01-03 and hgemm/08 against float64
# (the hidden-shape style cases), the benchmark at 4096 and 8192 against cuBLAS in the same run (saved to
# results/<gpu>.json), Nsight Compute's warp states of each step at 4096 (results/<gpu>.ncu.json), then
# compute-sanitizer memcheck, racecheck and synccheck on the new steps' verify (small shapes).
# Usage (repository root on the GPU machine): bash lab/hopper-steps/gpu.sh OUT_DIR
source lab/hgemm-past-cublas/lib.sh
setup "${1:-}" hopper-steps-out
export PYTHONUNBUFFERED=1 BUDGET=${BUDGET:-500}
NEW="hopper/01_wgmma hopper/02_tma hopper/03_tma_ring"
run verify 150 python3 -m gemmlab verify $NEW hgemm/08_wgmma --backend gpu
run verify-n128-s2 90 python3 -m gemmlab verify hopper/03_tma_ring hgemm/08_wgmma --backend gpu \
  --param BLOCK_N=128 --param NUM_STAGES=2
run bench 200 python3 -m gemmlab bench hgemm/07_cp_async $NEW hgemm/08_wgmma --size 4096 --size 8192
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
for s in $NEW hgemm/08_wgmma; do
  name="ncu-$(basename "$s")"
  run "$name" 60 bash -c "ncu --clock-control none --section WarpStateStats --section Occupancy --section LaunchStats \
    --section ComputeWorkloadAnalysis --csv --page raw -k regex:'hopper|hgemm' --launch-count 1 \
    python3 -m gemmlab run $s --size 4096 > '$work/$name.csv' && python3 -c \"from gemmlab import profile; \
profile.save('$gpu', '$s', profile.parse_raw_csv(open('$work/$name.csv').read())); \
print(profile.stall_reasons(profile.load('$gpu')['$s']))\""
done
for tool in memcheck:90 synccheck:90 racecheck:150; do
  run "${tool%%:*}" "${tool##*:}" env GEMMLAB_NO_POOL=1 compute-sanitizer --tool "${tool%%:*}" --error-exitcode 9 \
    python3 -m gemmlab verify $NEW --backend gpu
done
mkdir -p "$work/results"; cp results/*.json "$work/results/"; cp results/nvidia-h200.json results/nvidia-h200.ncu.json "$out/" 2>/dev/null
{
  echo
  report verify "verify*.log" "PASS|FAIL|rror"
  report sanitizers "*check.log" "ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL"
  report benchmark "bench.log" "TFLOP/s"
  report stalls "ncu-*.log" "\("
} >> "$summary"
finish hopper-steps.tar.gz
