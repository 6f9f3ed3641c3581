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
out=${1:-${OUT:-hgemm-past-cublas-out}}
mkdir -p "$out"
work=$(mktemp -d)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
command -v compute-sanitizer > /dev/null || export PATH=$PATH:/usr/local/cuda/bin
summary="$work/summary.txt"
: > "$summary"
BUDGET=360   # seconds; with a command's own time limit, nothing may start that could end after BUDGET + 60
NEW="hgemm/10_tma_store"
OLD="hgemm/09_persistent"

# run NAME TIMEOUT_S CMD...: log to $work/NAME.log, append "NAME: exit CODE, N s" and the log's tail to the summary
run() {
  local name=$1 limit=$2
  shift 2
  if (( SECONDS + limit > BUDGET + 60 )); then
    echo "$name: skipped (at ${SECONDS} s, with up to ${limit} s to go it could pass the 7-minute mark)" >> "$summary"
    return
  fi
  local t0=$SECONDS
  timeout "$limit" "$@" > "$work/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc, $((SECONDS - t0)) s" >> "$summary"
  tail -n 3 "$work/$name.log" | sed 's/^/    /' >> "$summary"
}

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$work/gpu.txt" 2>&1
python3 -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)" >> "$work/gpu.txt" 2>&1
git rev-parse HEAD >> "$work/gpu.txt" 2>&1

# 1. correctness first: float64 reference on the verify shapes (off the tile grid)
run verify 90 python3 -m gemmlab verify $NEW --backend gpu
run verify-bufs4-stages3 60 python3 -m gemmlab verify $NEW --backend gpu --param STORE_BUFS=4 --param NUM_STAGES=3

# 2. the measurement the step is for: 09 and 10 against cuBLAS, interleaved launch by launch
run bench 120 python3 -m gemmlab bench $OLD $NEW --size 4096 --size 8192

# 3. the sanitizers at the verify shapes (small)
export GEMMLAB_NO_POOL=1
run memcheck 90 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m gemmlab verify $NEW --backend gpu
run racecheck 90 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m gemmlab verify $NEW --backend gpu
run synccheck 60 compute-sanitizer --tool synccheck --error-exitcode 9 python3 -m gemmlab verify $NEW --backend gpu
unset GEMMLAB_NO_POOL

# 4. the benchmark again, steps in the other order: the run-to-run spread beside the differences
run bench-again 120 python3 -m gemmlab bench $NEW $OLD --size 8192 --size 4096

# 5. step 10's options: the staging ring x the ring of stages (NUM_STAGES=4 with STORE_BUFS=4 does not fit: skipped)
run sweep-4096 60 python3 -m gemmlab sweep $NEW --vary STORE_BUFS=1,2,4 --vary NUM_STAGES=3,4 --size 4096
run sweep-8192 60 python3 -m gemmlab sweep $NEW --vary STORE_BUFS=1,2,4 --vary NUM_STAGES=3,4 --size 8192

# 6. Nsight Compute, one launch each, profile.sh's sections: step 10, then 09 in the same call
command -v ncu > /dev/null || export PATH=$PATH:/usr/local/cuda/bin
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy --section SchedulerStats"
for s in $NEW $OLD; do
  for n in 4096 8192; do
    name="ncu-$(basename $s)-$n"
    run "$name" 45 bash -c "ncu --clock-control none $SECTIONS --csv --page raw -k regex:hgemm --launch-count 1 \
      python3 -m gemmlab run $s --size $n > '$work/$name.csv' && gzip -f '$work/$name.csv'"
  done
done

# the benchmark records that bench and sweep appended to results/<gpu>.json
mkdir -p "$work/results"
git status --short results/ > "$work/results-changed.txt" 2>&1
changed=$(git status --short results/ 2>/dev/null | awk '{print $2}' | grep '\.json$')
cp ${changed:-results/*.json} "$work/results/" 2>/dev/null  # without git: every record file
{
  echo
  echo "== benchmark (TFLOP/s, % of the faster cuBLAS call in the same run)"
  grep -hE "TFLOP/s" "$work"/bench.log "$work"/bench-again.log 2>/dev/null
  echo "== sweeps"
  grep -hE "TFLOP/s|skip" "$work"/sweep-*.log 2>/dev/null
  echo "== sanitizers"
  grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL" "$work"/memcheck.log "$work"/racecheck.log "$work"/synccheck.log 2>/dev/null
  echo "== ncu"
  profiles=$(ls "$work"/ncu-*.csv.gz 2>/dev/null)
  [ -n "$profiles" ] && (cd "$work" && python3 "$OLDPWD"/lab/hgemm-past-cublas/ncu_cmp.py $(basename -a $profiles) 2>&1 | cut -c1-200)
  echo "total ${SECONDS} s"
} >> "$summary"
tar czf "$out/hgemm-past-cublas-run.tar.gz" -C "$work" .
cp "$summary" "$out/summary.txt"
cat "$summary"
