#!/bin/bash
# Step 10 (clusters + TMA multicast) against step 09 and cuBLAS, in one call on an H100 or H200:
# verify against float64, the sanitizers at the verify shapes, the interleaved benchmark at 4096 and
# 8192, a sweep of step 10's options, and the same benchmark again (how far one run is from the next).
# Every command's exit code is logged; one that fails does not stop the rest. Whatever comes after the
# 7-minute mark is skipped (said in the log), so the whole run stays under 8 minutes.
#
# Usage (repository root on the GPU machine): bash lab/hgemm-past-cublas/gpu.sh [OUT_DIR]
# Output: OUT_DIR (default $OUT, else hgemm-past-cublas-out): one log per command, summary.txt, and the
# benchmark records (results/<gpu>.json) copied to OUT_DIR/results/.
out=${1:-${OUT:-hgemm-past-cublas-out}}
mkdir -p "$out/results"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
command -v compute-sanitizer > /dev/null || export PATH=$PATH:/usr/local/cuda/bin
summary="$out/summary.txt"
: > "$summary"
BUDGET=420   # seconds after which optional commands are skipped
NEW="hgemm/10_clusters"

# run NAME TIMEOUT_S CMD...: log to $out/NAME.log, append "NAME: exit CODE, N s" to the summary
run() {
  local name=$1 limit=$2
  shift 2
  if (( SECONDS + limit > BUDGET + 60 )); then
    echo "$name: skipped (at ${SECONDS} s, with up to ${limit} s to go it could pass the 8-minute mark)" >> "$summary"
    return
  fi
  local t0=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc, $((SECONDS - t0)) s" >> "$summary"
  tail -n 3 "$out/$name.log" | sed 's/^/    /' >> "$summary"
}

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$out/gpu.txt" 2>&1
python3 -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)" >> "$out/gpu.txt" 2>&1

# 1. correctness first: float64 reference on the verify shapes (off the tile grid), every cluster size
run verify 90 python3 -m gemmlab verify $NEW --backend gpu
run verify-cluster1 60 python3 -m gemmlab verify $NEW --backend gpu --param CLUSTER_M=1
run verify-cluster4 60 python3 -m gemmlab verify $NEW --backend gpu --param CLUSTER_M=4 --param GROUP_M=16
run clusters-resident 60 bash -c "for c in 1 2 4; do python3 lab/hgemm-past-cublas/clusters.py CLUSTER_M=\$c; done"

# 2. the measurement the lab is for: 09 and 10 against cuBLAS, interleaved launch by launch
run bench 150 python3 -m gemmlab bench hgemm/09_persistent $NEW --size 4096 --size 8192

# 3. the sanitizer, once per new step, at the verify shapes (small)
export GEMMLAB_NO_POOL=1
run memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m gemmlab verify $NEW --backend gpu
unset GEMMLAB_NO_POOL

# 4. step 10's options at 8192: cluster size x ring depth, then the band height, then 4096
run sweep-cluster-stages-8192 120 python3 -m gemmlab sweep $NEW --vary CLUSTER_M=1,2,4 --vary NUM_STAGES=3,4 --size 8192
run sweep-group-8192 70 python3 -m gemmlab sweep $NEW --vary GROUP_M=4,8,32 --size 8192
run sweep-cluster-4096 50 python3 -m gemmlab sweep $NEW --vary CLUSTER_M=1,2,4 --size 4096

# 5. what the issue also asks of a kept step, while time remains: racecheck and synccheck
export GEMMLAB_NO_POOL=1
run racecheck 90 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m gemmlab verify $NEW --backend gpu
run synccheck 60 compute-sanitizer --tool synccheck --error-exitcode 9 python3 -m gemmlab verify $NEW --backend gpu
unset GEMMLAB_NO_POOL

# 6. the benchmark again, steps in the other order: the run-to-run spread beside the differences
run bench-again 150 python3 -m gemmlab bench $NEW hgemm/09_persistent --size 8192 --size 4096

cp results/*.json "$out/results/" 2>/dev/null
git status --short results/ > "$out/results-changed.txt" 2>&1
{
  echo
  echo "== benchmark (TFLOP/s, % of the faster cuBLAS call in the same run)"
  grep -hE "TFLOP/s" "$out"/bench.log "$out"/bench-again.log 2>/dev/null
  echo "== sweeps"
  grep -hE "TFLOP/s|skip" "$out"/sweep-*.log 2>/dev/null
  echo "== sanitizers"
  grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL" "$out"/memcheck.log "$out"/racecheck.log "$out"/synccheck.log 2>/dev/null
  echo "== clusters resident"
  cat "$out"/clusters-resident.log 2>/dev/null
  echo "total ${SECONDS} s"
} >> "$summary"
cat "$summary"
