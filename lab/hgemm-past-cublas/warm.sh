#!/bin/bash
# What a warm launch costs at 4096 (attempt 4's question), in one call on an H100 or H200: context.py for steps 10
# and 11 (fixed, rotated, cold L2, other inputs, alone; clocks and power), and fixed_clock.py under Nsight Compute
# at the base clock with the L2 left warm, at 4096 and 8192.
#
# Usage (repository root on the GPU machine): bash lab/hgemm-past-cublas/warm.sh [OUT_DIR]
# Output: OUT_DIR/summary.txt and OUT_DIR/warm-run.tar.gz (the logs and ncu CSVs).
source lab/hgemm-past-cublas/lib.sh
setup "${1:-}" warm-out
for n in 4096 8192; do
  run fixed-clock-$n 120 bash -c "ncu --clock-control base --cache-control none --metrics gpu__time_duration.sum \
    --csv python3 lab/hgemm-past-cublas/fixed_clock.py run $n > '$work/fixed-clock-$n.csv'"
done
(cd "$work" && python3 "$OLDPWD"/lab/hgemm-past-cublas/fixed_clock.py table fixed-clock-4096.csv fixed-clock-8192.csv) >> "$summary" 2>&1
run context 300 python3 lab/hgemm-past-cublas/context.py 3 hgemm/10_tma_store hgemm/11_mma_in_flight
cat "$work/context.log" >> "$summary"
finish warm-run.tar.gz
