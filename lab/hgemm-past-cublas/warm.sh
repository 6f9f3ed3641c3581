#!/bin/bash
# What a warm launch costs at 4096 (attempt 4's question), in one call on an H100 or H200: context.py for steps 10
# and 11 (fixed, rotated, cold L2, other inputs, alone; clocks and power), and fixed_clock.py under Nsight Compute
# at the base clock with the L2 left warm, at 4096 and 8192.
#
# Usage (repository root on the GPU machine): bash lab/hgemm-past-cublas/warm.sh [OUT_DIR]
# Output: OUT_DIR/summary.txt and OUT_DIR/warm-run.tar.gz (the logs and ncu CSVs).
out=${1:-${OUT:-warm-out}}
mkdir -p "$out"
work=$(mktemp -d)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
command -v ncu > /dev/null || export PATH=$PATH:/usr/local/cuda/bin
summary="$work/summary.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > "$work/gpu.txt" 2>&1
git rev-parse HEAD >> "$work/gpu.txt" 2>&1
for n in 4096 8192; do
  timeout 120 ncu --clock-control base --cache-control none --metrics gpu__time_duration.sum --csv \
    python3 lab/hgemm-past-cublas/fixed_clock.py run $n > "$work/fixed-clock-$n.csv" 2> "$work/fixed-clock-$n.err"
  echo "fixed-clock $n: exit $?" >> "$summary"
done
(cd "$work" && python3 "$OLDPWD"/lab/hgemm-past-cublas/fixed_clock.py table fixed-clock-4096.csv fixed-clock-8192.csv) >> "$summary" 2>&1
timeout 300 python3 lab/hgemm-past-cublas/context.py 3 hgemm/10_tma_store hgemm/11_mma_in_flight > "$work/context.log" 2>&1
echo "context: exit $?" >> "$summary"
cat "$work/context.log" >> "$summary"
echo "total ${SECONDS} s" >> "$summary"
tar czf "$out/warm-run.tar.gz" -C "$work" .
cp "$summary" "$out/summary.txt"
cat "$summary"
