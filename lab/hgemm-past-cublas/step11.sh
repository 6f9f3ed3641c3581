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
out=${1:-${OUT:-step11-out}}
mkdir -p "$out"
work=$(mktemp -d)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
command -v compute-sanitizer > /dev/null || export PATH=$PATH:/usr/local/cuda/bin
summary="$work/summary.txt"
: > "$summary"
NEW="hgemm/11_mma_in_flight"
OLD="hgemm/10_tma_store"

run() {  # run NAME TIMEOUT_S CMD...: log to $work/NAME.log; exit code, time and the log's tail to the summary
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$work/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc, $((SECONDS - t0)) s" >> "$summary"
  tail -n 3 "$work/$name.log" | sed 's/^/    /' >> "$summary"
}

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > "$work/gpu.txt" 2>&1
git rev-parse HEAD >> "$work/gpu.txt" 2>&1
run verify 90 python3 -m gemmlab verify $NEW --backend gpu
run verify-n128-s6 60 python3 -m gemmlab verify $NEW --backend gpu --param BLOCK_N=128 --param NUM_STAGES=6 --param STORE_BUFS=1
run verify-s2 60 python3 -m gemmlab verify $NEW --backend gpu --param NUM_STAGES=2
run bench 150 python3 -m gemmlab bench $OLD $NEW --size 4096 --size 8192 --alone
export GEMMLAB_NO_POOL=1
run memcheck 90 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m gemmlab verify $NEW --backend gpu
run racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m gemmlab verify $NEW --backend gpu
run synccheck 90 compute-sanitizer --tool synccheck --error-exitcode 9 python3 -m gemmlab verify $NEW --backend gpu
unset GEMMLAB_NO_POOL
run sweep-4096 90 python3 -m gemmlab sweep $NEW --vary NUM_STAGES=3,4 --vary GROUP_M=8,16,32 --size 4096
run bench-again 150 python3 -m gemmlab bench $NEW $OLD --size 8192 --size 4096 --alone
run context 150 python3 lab/hgemm-past-cublas/context.py 3 $OLD $NEW
command -v ncu > /dev/null || export PATH=$PATH:/usr/local/cuda/bin
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy --section SchedulerStats"
for s in $NEW $OLD; do
  for n in 4096 8192; do
    name="ncu-$(basename $s)-$n"
    run "$name" 45 bash -c "ncu --clock-control none $SECTIONS --csv --page raw -k regex:hgemm --launch-count 1 \
      python3 -m gemmlab run $s --size $n > '$work/$name.csv' && gzip -f '$work/$name.csv'"
  done
done
mkdir -p "$work/results"
changed=$(git status --short results/ 2>/dev/null | awk '{print $2}' | grep '\.json$')
cp ${changed:-results/*.json} "$work/results/" 2>/dev/null
{
  echo
  echo "== benchmark (rotated; alone)"
  grep -hE "TFLOP/s" "$work"/bench.log "$work"/bench-again.log 2>/dev/null
  echo "== sweep"
  grep -hE "TFLOP/s|skip" "$work"/sweep-4096.log 2>/dev/null
  echo "== sanitizers"
  grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL" "$work"/memcheck.log "$work"/racecheck.log "$work"/synccheck.log 2>/dev/null
  echo "== context"
  cat "$work"/context.log
  echo "== ncu"
  profiles=$(ls "$work"/ncu-*.csv.gz 2>/dev/null)
  [ -n "$profiles" ] && (cd "$work" && python3 "$OLDPWD"/lab/hgemm-past-cublas/ncu_cmp.py $(basename -a $profiles) 2>&1 | cut -c1-200)
  echo "total ${SECONDS} s"
} >> "$summary"
tar czf "$out/step11-run.tar.gz" -C "$work" .
cp "$summary" "$out/summary.txt"
cat "$summary"
