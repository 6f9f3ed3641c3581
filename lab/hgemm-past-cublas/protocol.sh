#!/bin/bash
# The benchmark with the rotating order (2026-11-28), in one call on an H100 or H200: step 10 verified against
# float64, 09 and 10 benchmarked against cuBLAS at 4096 and 8192 in the rotated protocol and each alone (twice,
# the steps in both orders), step 10's tile width and stages at 4096, and context.py (fixed order, rotated,
# cold L2, alone; clocks and power per call).
#
# Usage (repository root on the GPU machine): bash lab/hgemm-past-cublas/protocol.sh [OUT_DIR]
# Output: OUT_DIR/summary.txt and OUT_DIR/protocol-run.tar.gz (one log per command, the records bench wrote).
out=${1:-${OUT:-protocol-out}}
mkdir -p "$out"
work=$(mktemp -d)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
summary="$work/summary.txt"
: > "$summary"
NEW="hgemm/10_tma_store"
OLD="hgemm/09_persistent"

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
run bench 150 python3 -m gemmlab bench $OLD $NEW --size 4096 --size 8192 --alone
run bench-again 150 python3 -m gemmlab bench $NEW $OLD --size 8192 --size 4096 --alone
run sweep-4096 90 python3 -m gemmlab sweep $NEW --vary BLOCK_N=128,256 --vary GROUP_M=8,16,32 --size 4096
run context 150 python3 lab/hgemm-past-cublas/context.py 3
mkdir -p "$work/results"
changed=$(git status --short results/ 2>/dev/null | awk '{print $2}' | grep '\.json$')
cp ${changed:-results/*.json} "$work/results/" 2>/dev/null
{
  echo
  echo "== benchmark (rotated; alone)"
  grep -hE "TFLOP/s" "$work"/bench.log "$work"/bench-again.log 2>/dev/null
  echo "== sweep"
  grep -hE "TFLOP/s|skip" "$work"/sweep-4096.log 2>/dev/null
  echo "== context"
  cat "$work"/context.log
  echo "total ${SECONDS} s"
} >> "$summary"
tar czf "$out/protocol-run.tar.gz" -C "$work" .
cp "$summary" "$out/summary.txt"
cat "$summary"
