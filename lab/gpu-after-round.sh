#!/bin/bash
# After a round of changes (issues 53, 54, 55): the GPU-facing checks on a GPU machine: every step verified, each
# exercise's solution passes and its template as shipped fails, the GPU-facing tests.
# Usage (repository root): bash lab/gpu-after-round.sh OUT_DIR
out=${1:-${OUT:-gpu-after-round}}; mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 MPLBACKEND=Agg
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/summary.txt"
steps=$(python3 -m gemmlab steps --names)
timeout 240 python3 -m gemmlab verify $steps --backend gpu > "$out/verify.log" 2>&1
echo "verify every step (GEMM and fused) on the GPU: exit $?, $(grep -c '^PASS' "$out/verify.log") PASS, $(grep -c '^FAIL' "$out/verify.log") FAIL" >> "$out/summary.txt"
for ex in $(python3 -m gemmlab exercise list 2>/dev/null | awk '$1 ~ /\// {print $1}'); do
  timeout 120 python3 -m gemmlab exercise check "$ex" --solution > "$out/ex-${ex//\//_}.log" 2>&1
  echo "exercise $ex --solution on the GPU: exit $?, $(grep -m1 -oE '(PASS|FAIL|PARTIAL)[^ ]*' "$out/ex-${ex//\//_}.log" | head -1)" >> "$out/summary.txt"
  timeout 120 python3 -m gemmlab exercise check "$ex" > "$out/ex-${ex//\//_}-template.log" 2>&1
  echo "exercise $ex template as shipped on the GPU: exit $?, $(grep -m1 -oE '(PASS|FAIL|PARTIAL)[^ ]*' "$out/ex-${ex//\//_}-template.log" | head -1)" >> "$out/summary.txt"
done
timeout 330 python3 -m pytest -q -p no:cacheprovider -n 8 --continue-on-collection-errors tests/test_gpu_agreement.py \
  tests/test_reliability_runtime.py tests/test_reliability_emulator.py tests/test_reliability.py tests/test_hopper_steps.py \
  tests/test_runtime.py tests/test_bad_inputs.py tests/test_exercises.py tests/test_fusion.py > "$out/pytest.log" 2>&1
echo "pytest (GPU-facing tests): $(tail -n 1 "$out/pytest.log")" >> "$out/summary.txt"
grep -E "^(FAILED|ERROR)" "$out/pytest.log" | head -20 >> "$out/summary.txt"
cat "$out/summary.txt"
