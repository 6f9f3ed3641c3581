#!/bin/bash
# Attempt 5, in one call on an H100 or H200: the lab kernel hgemm-past-cublas/clusters11 (step 11 in clusters
# that share B by TMA multicast) verified against float64 (CLUSTER_M 2, 1 and 4), compute-sanitizer memcheck,
# racecheck and synccheck, context.py with step 11 and clusters11 (CLUSTER_M 2 and 4) at 4096 and 8192, and
# Nsight Compute of clusters11 and 11 (one launch each, profile.sh's sections).
#
# Usage (repository root on the GPU machine): bash lab/hgemm-past-cublas/clusters11.sh [OUT_DIR]
# Output: OUT_DIR/summary.txt and OUT_DIR/clusters11-run.tar.gz.
source lab/hgemm-past-cublas/lib.sh
setup "${1:-}" clusters11-out
NEW="hgemm-past-cublas/clusters11"
OLD="hgemm/11_mma_in_flight"
run verify 90 python3 -m gemmlab verify $NEW --backend gpu
run verify-c1 60 python3 -m gemmlab verify $NEW --backend gpu --param CLUSTER_M=1
run verify-c4 60 python3 -m gemmlab verify $NEW --backend gpu --param CLUSTER_M=4 --param NUM_STAGES=3
sanitize $NEW
run context 240 python3 lab/hgemm-past-cublas/context.py 3 $OLD $NEW "$NEW:CLUSTER_M=4"
profile $NEW $OLD
{
  echo
  report sanitizers "*check.log" "ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL"
  echo "== context"
  cat "$work"/context.log
  compare_profiles
} >> "$summary"
finish clusters11-run.tar.gz
