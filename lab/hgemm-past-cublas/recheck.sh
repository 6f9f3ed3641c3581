#!/bin/bash
# Step 12 re-checked after a change that keeps its schedule and measurements' meaning (2026-11-28: the finishing
# warp group waits for a part's flag with common.cuh's wait_counters instead of a helper of its own): verify
# (two configurations, the default cases include a shared last wave), memcheck, racecheck and synccheck, the
# benchmark at 4096 and 8192 without saving, fixed_clock.py at 8192, and the GPU-facing test files.
# Usage (repository root on the GPU machine): bash lab/hgemm-past-cublas/recheck.sh OUT_DIR
source lab/hgemm-past-cublas/lib.sh
setup "${1:-}" recheck-out
source tools/wheels.sh
NEW="hgemm/12_stream_k"
run verify 90 python3 -m gemmlab verify $NEW --backend gpu
run verify-gain1-n128 60 python3 -m gemmlab verify $NEW --backend gpu --param MIN_GAIN=1 --param BLOCK_N=128
sanitize $NEW
run bench 150 python3 -m gemmlab bench hgemm/11_mma_in_flight $NEW --size 4096 --size 8192 --alone --no-save
run fixed-clock-8192 100 bash -c "ncu --clock-control base --cache-control none --metrics gpu__time_duration.sum \
  --csv python3 lab/hgemm-past-cublas/fixed_clock.py run 8192 > '$work/fixed-clock-8192.csv'"
run pytest-gpu 240 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_agreement.py tests/test_stream_k.py \
  tests/test_mma_in_flight.py tests/test_tma_store.py tests/test_clusters.py
{
  echo
  report sanitizers "*check.log" "ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL"
  report "benchmark (rotated; alone; not saved)" "bench.log" "TFLOP/s"
  echo "== fixed clock"
  (cd "$work" && python3 "$OLDPWD"/lab/hgemm-past-cublas/fixed_clock.py table fixed-clock-8192.csv 2>&1)
} >> "$summary"
finish recheck.tar.gz
