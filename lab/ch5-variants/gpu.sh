#!/bin/bash
# Chapter 5's two fixes of step 07's 2-way transposed sA store, padded rows (padded.patch) and an XOR swizzle
# (swizzled.patch), timed against step 07 itself and cuBLAS (TF32 off) in one process, launch by launch in turn,
# three rounds at 4096 and 8192 (lab/run.py checks each against float64 first). The chapter counts the variants'
# wavefronts but has no timing of them; this script makes one. Not run yet: the team lead runs GPU scripts.
# Usage (repository root on the GPU machine): bash lab/ch5-variants/gpu.sh OUT_DIR -> OUT_DIR/bench.log, gpu.txt
out=${1:-${OUT:-ch5-variants-out}}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1
{ date -u +%F; git rev-parse HEAD; } >> "$out/gpu.txt" 2>&1
timeout 400 python3 lab/run.py ch5-variants bench sgemm/07_warptiling "step padded swizzled" "4096 8192" 3 \
  2>&1 | tee "$out/bench.log"
echo "exit ${PIPESTATUS[0]}" >> "$out/bench.log"
