#!/bin/bash
# Step 11 (one k tile's wgmma group in flight) against step 10 and cuBLAS, in one call on an H100 or H200:
# verify against float64 (three configurations), the benchmark of 10 and 11 at 4096 and 8192 (rotated order,
# and each alone), twice in both orders (the sweep between them, so the
# records kept are the last run's), compute-sanitizer memcheck, racecheck and synccheck, a sweep of
# NUM_STAGES x GROUP_M at 4096, context.py for 10 and 11 (fixed, rotated, cold L2, alone; clocks and power),
# and Nsight Compute of 11 and 10 at 4096 and 8192 (one launch each, profile.sh's sections).
#
# Usage (repository root on the GPU machine): bash lab/hgemm-past-cublas/step11.sh [OUT_DIR]
# Output: OUT_DIR/summary.txt and OUT_DIR/step11-run.tar.gz (one log per command, ncu CSVs, the records).
source lab/hgemm-past-cublas/lib.sh
setup "${1:-}" step11-out
NEW="hgemm/11_mma_in_flight"
OLD="hgemm/10_tma_store"
run verify 90 python3 -m gemmlab verify $NEW --backend gpu
run verify-n128-s6 60 python3 -m gemmlab verify $NEW --backend gpu --param BLOCK_N=128 --param NUM_STAGES=6 --param STORE_BUFS=1
run verify-s2 60 python3 -m gemmlab verify $NEW --backend gpu --param NUM_STAGES=2
run bench 150 python3 -m gemmlab bench $OLD $NEW --size 4096 --size 8192 --alone
sanitize $NEW
run sweep-4096 90 python3 -m gemmlab sweep $NEW --vary NUM_STAGES=3,4 --vary GROUP_M=8,16,32 --size 4096
run bench-again 150 python3 -m gemmlab bench $NEW $OLD --size 8192 --size 4096 --alone
run context 150 python3 lab/hgemm-past-cublas/context.py 3 $OLD $NEW
profile $NEW $OLD
copy_records
{
  echo
  report "benchmark (rotated; alone)" "bench*.log" "TFLOP/s"
  report sweep "sweep-4096.log" "TFLOP/s|skip"
  report sanitizers "*check.log" "ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL"
  echo "== context"
  cat "$work"/context.log
  compare_profiles
} >> "$summary"
finish step11-run.tar.gz
