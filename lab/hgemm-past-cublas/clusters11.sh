#!/bin/bash
# Attempt 5, in one call on an H100 or H200: the lab kernel hgemm-past-cublas/clusters11 (step 11 in clusters
# that share B by TMA multicast) verified against float64 (CLUSTER_M 2, 1 and 4), compute-sanitizer memcheck,
# racecheck and synccheck, context.py with step 11 and clusters11 (CLUSTER_M 2 and 4) at 4096 and 8192, and
# Nsight Compute of clusters11 and 11 (one launch each, profile.sh's sections).
#
# Usage (repository root on the GPU machine): bash lab/hgemm-past-cublas/clusters11.sh [OUT_DIR]
# Output: OUT_DIR/summary.txt and OUT_DIR/clusters11-run.tar.gz.
out=${1:-${OUT:-clusters11-out}}
mkdir -p "$out"
work=$(mktemp -d)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
command -v compute-sanitizer > /dev/null || export PATH=$PATH:/usr/local/cuda/bin
summary="$work/summary.txt"
: > "$summary"
NEW="hgemm-past-cublas/clusters11"
OLD="hgemm/11_mma_in_flight"

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
run verify-c1 60 python3 -m gemmlab verify $NEW --backend gpu --param CLUSTER_M=1
run verify-c4 60 python3 -m gemmlab verify $NEW --backend gpu --param CLUSTER_M=4 --param NUM_STAGES=3
export GEMMLAB_NO_POOL=1
run memcheck 90 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m gemmlab verify $NEW --backend gpu
run racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m gemmlab verify $NEW --backend gpu
run synccheck 90 compute-sanitizer --tool synccheck --error-exitcode 9 python3 -m gemmlab verify $NEW --backend gpu
unset GEMMLAB_NO_POOL
run context 240 python3 lab/hgemm-past-cublas/context.py 3 $OLD $NEW "$NEW:CLUSTER_M=4"
command -v ncu > /dev/null || export PATH=$PATH:/usr/local/cuda/bin
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy --section SchedulerStats"
for s in $NEW $OLD; do
  for n in 4096 8192; do
    name="ncu-$(basename $s)-$n"
    run "$name" 45 bash -c "ncu --clock-control none $SECTIONS --csv --page raw -k regex:hgemm --launch-count 1 \
      python3 -m gemmlab run $s --size $n > '$work/$name.csv' && gzip -f '$work/$name.csv'"
  done
done
{
  echo
  echo "== sanitizers"
  grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL" "$work"/memcheck.log "$work"/racecheck.log "$work"/synccheck.log 2>/dev/null
  echo "== context"
  cat "$work"/context.log
  echo "== ncu"
  profiles=$(ls "$work"/ncu-*.csv.gz 2>/dev/null)
  [ -n "$profiles" ] && (cd "$work" && python3 "$OLDPWD"/lab/hgemm-past-cublas/ncu_cmp.py $(basename -a $profiles) 2>&1 | cut -c1-200)
  echo "total ${SECONDS} s"
} >> "$summary"
tar czf "$out/clusters11-run.tar.gz" -C "$work" .
cp "$summary" "$out/summary.txt"
cat "$summary"
