#!/bin/bash
# Attempt 6, step 12 (the last round's tiles shared out by k tiles, stream-K) against step 11 and cuBLAS on an
# H100 or H200, in two calls of under ten minutes:
#   part 1: verify against float64 (three configurations; the default cases include two shapes with a last
#           round shared on this GPU), the benchmark of 11 and 12 at 4096 and 8192 (rotated, and each alone),
#           fixed_clock.py (base clock, L2 warm: 10, 11, 12 and cuBLAS at 4096 and 8192), timeline.py
#   part 2: compute-sanitizer memcheck, racecheck and synccheck, a sweep of MAX_SPLIT (1 is step 11's schedule)
#           and MIN_GAIN (1: always share), context.py for 11, 12 and 12 sharing at any gain (fixed, rotated,
#           cold, other, alone; clocks and power)
#   part 3: Nsight Compute of 12 and 11 at 4096 and 8192 (one launch each; lib.sh's profile, which failed in part 2
#           of the first run), the GPU-facing test files (wheels from .whl/ when present), `gemmlab run` of 12
#
# Usage (repository root on the GPU machine): bash lab/hgemm-past-cublas/stream_k.sh OUT_DIR 1|2|3
# Output: OUT_DIR/summary.txt and OUT_DIR/stream-k-<part>.tar.gz.
source lab/hgemm-past-cublas/lib.sh
setup "${1:-}" stream-k-out
PART=${2:-1}
BUDGET=${BUDGET:-540}
NEW="hgemm/12_stream_k"
OLD="hgemm/11_mma_in_flight"
if [[ $PART == 1 ]]; then
  run verify 90 python3 -m gemmlab verify $NEW --backend gpu
  run verify-n128-s6 60 python3 -m gemmlab verify $NEW --backend gpu --param BLOCK_N=128 --param NUM_STAGES=6 --param STORE_BUFS=1
  run verify-split8-s2 60 python3 -m gemmlab verify $NEW --backend gpu --param MAX_SPLIT=8 --param NUM_STAGES=2
  run verify-gain1-n128 60 python3 -m gemmlab verify $NEW --backend gpu --param MIN_GAIN=1 --param BLOCK_N=128
  run bench 150 python3 -m gemmlab bench $OLD $NEW --size 4096 --size 8192 --alone
  for n in 4096 8192; do
    run fixed-clock-$n 100 bash -c "ncu --clock-control base --cache-control none --metrics gpu__time_duration.sum \
      --csv python3 lab/hgemm-past-cublas/fixed_clock.py run $n > '$work/fixed-clock-$n.csv'"
  done
  run timeline 90 python3 lab/hgemm-past-cublas/timeline.py
  copy_records
  {
    echo
    report "benchmark (rotated; alone)" "bench*.log" "TFLOP/s"
    echo "== fixed clock"
    (cd "$work" && python3 "$OLDPWD"/lab/hgemm-past-cublas/fixed_clock.py table fixed-clock-*.csv 2>&1)
    echo "== timeline"
    cat "$work"/timeline.log
  } >> "$summary"
elif [[ $PART == 3 ]]; then
  source tools/wheels.sh
  profile $NEW $OLD
  run pytest-gpu 330 python3 -m pytest -q -p no:cacheprovider -x tests/test_gpu_agreement.py tests/test_stream_k.py \
    tests/test_mma_in_flight.py tests/test_tma_store.py tests/test_runtime.py tests/test_reliability.py
  run gemmlab-run 60 python3 -m gemmlab run $NEW --size 8192
  compare_profiles >> "$summary"
else
  sanitize $NEW
  run context 200 python3 lab/hgemm-past-cublas/context.py 3 $OLD $NEW "$NEW:MIN_GAIN=1"
  for n in 4096 8192; do
    run sweep-$n 90 python3 -m gemmlab sweep $NEW --vary MAX_SPLIT=1,2,4,8 --vary MIN_GAIN=1,16 --size $n
  done
  profile $NEW $OLD
  {
    echo
    report sanitizers "*check.log" "ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL"
    report sweep "sweep-*.log" "TFLOP/s|skip"
    echo "== context"
    cat "$work"/context.log
    compare_profiles
  } >> "$summary"
fi
finish stream-k-$PART.tar.gz
