#!/bin/bash
# Chapter 6's steps that make more than one change, taken apart in one run per step against cuBLAS (TF32 off),
# launch by launch in turn, three rounds at 4096 (lab/run.py checks each variant against float64 first):
#   step 08 = register prefetch (the idea) + BLOCK_K 16 + a __launch_bounds__ register cap (2 blocks per SM):
#     step 07 at BLOCK_K 8 and 16; step 08 as it is, at BLOCK_K 8, without the cap (no_cap.patch), both;
#   step 11 = fragment prefetch (the idea) + an 8 x 16 thread tile: step 09 with 11's tiles, 11 with 09's tiles.
# The records quoted in chapter 6 for these pairs come from the sweep of 2026-11-22 (before the interleaved
# timing); this run re-measures them interleaved. Not run yet: the team lead runs GPU scripts.
# Usage (repository root on the GPU machine): bash lab/ch6-parts/gpu.sh OUT_DIR -> OUT_DIR/*.log, gpu.txt
out=${1:-${OUT:-ch6-parts-out}}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1
{ date -u +%F; git rev-parse HEAD; } >> "$out/gpu.txt" 2>&1
bench() {  # name step "specs"
  timeout 300 python3 lab/run.py ch6-parts bench "$2" "$3" 4096 3 > "$out/$1.log" 2>&1
  echo "$1: exit $?" | tee -a "$out/summary.txt"; tail -n 12 "$out/$1.log" | tee -a "$out/summary.txt"
}
bench step07 sgemm/07_warptiling "step step:BLOCK_K=16"
bench step08 sgemm/08_register_prefetch "step step:BLOCK_K=8 no_cap no_cap:BLOCK_K=8"
bench step09 sgemm/09_double_buffer "step step:BLOCK_N=256,WARP_N=64,THREAD_N=16"
bench step11 sgemm/11_fragment_prefetch "step step:BLOCK_N=128,WARP_N=32,THREAD_N=8"
