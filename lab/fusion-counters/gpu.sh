#!/bin/bash
# Nsight Compute of fused steps 03, 04 and 05 at N = 512, default tiles, one launch each (repository root on the
# GPU machine): the warp states (the top stall each step starts from in chapter 8), the pipes' utilisation and the
# issue slots used. Usage: bash lab/fusion-counters/gpu.sh OUT_DIR -> OUT_DIR/ncu-*.csv.gz, ncu.log, gpu.txt
out=${1:-${OUT:-fusion-counters-out}}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
command -v ncu > /dev/null || export PATH=$PATH:/usr/local/cuda/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1
date -u +%F >> "$out/gpu.txt"
run() {  # label, step, --param ...: one launch of the step at 512 under ncu --set full
  local label=$1; shift
  local t0=$SECONDS
  timeout 240 ncu --clock-control none --set full --csv --page raw -k regex:fused --launch-count 1 \
    python3 -m gemmlab run "$@" --size 512 > "$out/ncu-$label-512.csv" 2>> "$out/ncu.log"
  echo "$label: exit $?, $((SECONDS - t0)) s" | tee -a "$out/ncu.log"
  gzip -f "$out/ncu-$label-512.csv"
}
run 03-default fused/03_two_phase
run 03-32x32 fused/03_two_phase --param BLOCK_M=32 --param BLOCK_N=32
run 04-default fused/04_split_k
run 05-default fused/05_tf32x3
cat "$out/gpu.txt"
