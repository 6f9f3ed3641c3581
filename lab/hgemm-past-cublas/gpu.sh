#!/bin/bash
# Step 10 (the epilogue through shared memory and TMA stores) against step 09 and cuBLAS, in one call on an
# H100 or H200: verify against float64 (default and one other staging ring), compute-sanitizer memcheck,
# racecheck and synccheck at the verify shapes, the interleaved benchmark of 09 and 10 at 4096 and 8192,
# a sweep of step 10's options at both sizes, the benchmark again in the other order, and Nsight Compute
# (profile.sh's sections, one launch each) of 10 and 09 at 4096 and 8192.
# Every command's exit code is logged; one that fails does not stop the rest. A command that could run
# past the 7-minute mark is skipped (said in the summary).
#
# Usage (repository root on the GPU machine): bash lab/hgemm-past-cublas/gpu.sh [OUT_DIR]
# Output, two files (the device returns at most 8): OUT_DIR/summary.txt (exit codes, times, the figures)
# and OUT_DIR/hgemm-past-cublas-run.tar.gz (one log per command, the summary, gpu.txt, the ncu CSVs
# gzipped, the benchmark records that changed in results/).
source lab/hgemm-past-cublas/lib.sh
setup "${1:-}" hgemm-past-cublas-out
python3 -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)" >> "$work/gpu.txt" 2>&1
BUDGET=360   # seconds: nothing starts that could end after BUDGET + 60 (run skips it and says so)
NEW="hgemm/10_tma_store"
OLD="hgemm/09_persistent"

# 1. correctness first: float64 reference on the verify shapes (off the tile grid)
run verify 90 python3 -m gemmlab verify $NEW --backend gpu
run verify-bufs4-stages3 60 python3 -m gemmlab verify $NEW --backend gpu --param STORE_BUFS=4 --param NUM_STAGES=3
# 2. the measurement the step is for: 09 and 10 against cuBLAS, interleaved launch by launch
run bench 120 python3 -m gemmlab bench $OLD $NEW --size 4096 --size 8192
# 3. the sanitizers at the verify shapes (small)
sanitize $NEW
# 4. the benchmark again, steps in the other order: the run-to-run spread beside the differences
run bench-again 120 python3 -m gemmlab bench $NEW $OLD --size 8192 --size 4096
# 5. step 10's options: the staging ring x the ring of stages (NUM_STAGES=4 with STORE_BUFS=4 does not fit: skipped)
run sweep-4096 60 python3 -m gemmlab sweep $NEW --vary STORE_BUFS=1,2,4 --vary NUM_STAGES=3,4 --size 4096
run sweep-8192 60 python3 -m gemmlab sweep $NEW --vary STORE_BUFS=1,2,4 --vary NUM_STAGES=3,4 --size 8192
# 6. Nsight Compute, one launch each, profile.sh's sections: step 10, then 09 in the same call
profile $NEW $OLD
copy_records
{
  echo
  report "benchmark (TFLOP/s, % of the faster cuBLAS call in the same run)" "bench*.log" "TFLOP/s"
  report sweeps "sweep-*.log" "TFLOP/s|skip"
  report sanitizers "*check.log" "ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL"
  compare_profiles
} >> "$summary"
finish hgemm-past-cublas-run.tar.gz
