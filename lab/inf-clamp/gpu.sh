#!/bin/bash
# One device call after the Inf clamp and the reliability work (issues 43, 44): the clamp's cost (ab.py), the
# changed steps against float64 on the GPU (Inf cases included), sgemm/12's benchmark records, the exercises'
# checks on the GPU, and the GPU-side tests. Everything lands in $OUT/inf-clamp-run.tar.gz and $OUT/summary.txt.
out=${1:-${OUT:-inf-clamp-out}}
work=/tmp/inf-clamp-run
mkdir -p "$work" "$out"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > "$work/pip.log" 2>&1
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-} PATH=/tmp/site/bin:$PATH
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 MPLBACKEND=Agg
summary="$work/summary.txt"
: > "$summary"
run() {  # run NAME TIMEOUT CMD...
  local name=$1 limit=$2; shift 2
  if (( SECONDS + limit > 540 )); then echo "$name: skipped at ${SECONDS} s (the call's 10 minutes)" >> "$summary"; return; fi
  local t0=$SECONDS
  timeout "$limit" "$@" > "$work/$name.log" 2>&1
  echo "$name: exit $?, $((SECONDS - t0)) s" >> "$summary"
  tail -n 4 "$work/$name.log" | sed 's/^/    /' >> "$summary"
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader >> "$summary"
run verify-12 90 python3 -m gemmlab verify sgemm/12_tf32x3 --backend gpu
run fused-check 150 python3 -m gemmlab verify fused/01_naive_row fused/02_row_panel fused/03_two_phase fused/04_split_k \
  fused/05_tf32x3 fused/06_wgmma_tf32x3 fused/07_tma_tf32x3 fused/08_tile_flags --backend gpu
run ab 200 bash -c "python3 lab/inf-clamp/ab.py 3 > $work/ab.json"
run bench-12 120 python3 -m gemmlab bench sgemm/12_tf32x3 --size 1024 --size 2048 --size 4096 --size 8192
run exercises 150 bash -c 'for e in $(python3 -m gemmlab exercise list | cut -d" " -f1); do
  python3 -m gemmlab exercise check $e --solution --backend gpu; echo "== $e solution: exit $?";
  python3 -m gemmlab exercise check $e --backend gpu > /dev/null; echo "== $e as shipped: exit $?"; done'
run pytest-gpu 200 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_agreement.py tests/test_reliability.py tests/test_t4.py tests/test_exercises.py
grep -h "" "$work/ab.log" >> "$summary"
grep -h "==" "$work/exercises.log" >> "$summary"
cp results/nvidia-h100-80gb-hbm3.json results/nvidia-h200.json "$work/" 2>/dev/null
cp "$summary" "$out/summary.txt"
tar czf "$out/inf-clamp-run.tar.gz" -C "$work" .
cat "$summary"
