#!/bin/bash
# Nsight Compute of the FP32 steps 01-07 at 4096, one launch each (repository root on the GPU machine):
# the L1 and L2 hit rates, sectors and DRAM bytes that explain chapter 2's gap between the sector model and
# the measured speed-up, and chapter 3's small gain; shared wavefronts, stalls and occupancy for chapters 3-5.
# Usage: bash lab/sgemm-counters/gpu.sh OUT_DIR   -> OUT_DIR/sgemm-counters.tgz (raw CSVs) and summary.txt
out=${1:-${OUT:-sgemm-counters-out}}
mkdir -p "$out"; work=$(mktemp -d)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
command -v ncu > /dev/null || export PATH=$PATH:/usr/local/cuda/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$work/gpu.txt" 2>&1
source lab/ncu-metrics.sh  # the sections and metrics the profile records read
for s in sgemm/01_naive sgemm/02_coalesced sgemm/03_smem_tiling sgemm/04_1d_blocktiling sgemm/05_2d_blocktiling \
         sgemm/06_vectorized sgemm/07_warptiling; do
  name=$(basename $s)
  t0=$SECONDS
  timeout 120 ncu --clock-control none $SECTIONS --metrics $METRICS --csv --page raw -k regex:sgemm --launch-count 1 \
    python3 -m gemmlab run $s --size 4096 > "$work/ncu-$name.csv" 2> "$work/ncu-$name.err"
  echo "$s: exit $?, $((SECONDS - t0)) s" >> "$work/summary.txt"
done
(cd "$work" && tar czf "$out/sgemm-counters.tgz" .)
cp "$work/summary.txt" "$out/"; cat "$work/summary.txt"; cat "$work/gpu.txt"
