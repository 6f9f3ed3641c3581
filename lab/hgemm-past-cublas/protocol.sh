#!/bin/bash
# The benchmark with the rotating order (2026-11-28), in one call on an H100 or H200: step 10 verified against
# float64, 09 and 10 benchmarked against cuBLAS at 4096 and 8192 in the rotated protocol and each alone (twice,
# the steps in both orders), step 10's tile width and stages at 4096, and context.py (fixed order, rotated,
# cold L2, alone; clocks and power per call).
#
# Usage (repository root on the GPU machine): bash lab/hgemm-past-cublas/protocol.sh [OUT_DIR]
# Output: OUT_DIR/summary.txt and OUT_DIR/protocol-run.tar.gz (one log per command, the records bench wrote).
source lab/hgemm-past-cublas/lib.sh
setup "${1:-}" protocol-out
NEW="hgemm/10_tma_store"
OLD="hgemm/09_persistent"
run verify 90 python3 -m gemmlab verify $NEW --backend gpu
run bench 150 python3 -m gemmlab bench $OLD $NEW --size 4096 --size 8192 --alone
run bench-again 150 python3 -m gemmlab bench $NEW $OLD --size 8192 --size 4096 --alone
run sweep-4096 90 python3 -m gemmlab sweep $NEW --vary BLOCK_N=128,256 --vary GROUP_M=8,16,32 --size 4096
run context 150 python3 lab/hgemm-past-cublas/context.py 3
copy_records
{
  echo
  report "benchmark (rotated; alone)" "bench*.log" "TFLOP/s"
  report sweep "sweep-4096.log" "TFLOP/s|skip"
  echo "== context"
  cat "$work"/context.log
} >> "$summary"
finish protocol-run.tar.gz
