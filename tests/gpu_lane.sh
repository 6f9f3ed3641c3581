#!/usr/bin/env bash
# The GPU lane, in one command, on a machine with an NVIDIA GPU (CuPy, compute-sanitizer):
#   1. the whole test suite (unit tests + CPU/GPU agreement of every step + nbval over book/),
#   2. the benchmark of every step against cuBLAS (records written to results/),
#   3. compute-sanitizer memcheck, racecheck and synccheck over every step.
# Usage: bash tests/gpu_lane.sh [OUT_DIR] [--execute-notebooks]
# Wheels in .whl/ (see shared GPU.md) are installed first when present (machines without a registry).
set -uo pipefail
out=${1:-${OUT:-gpu-lane-out}}
mkdir -p "$out"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-} PATH=/tmp/site/bin:$PATH
fi
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
summary="$out/summary.txt"
: > "$summary"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/gpu: /' | tee -a "$summary"

if [[ " $* " == *" --execute-notebooks "* ]]; then
  # store the GPU run's outputs in the notebooks (the site shows them)
  for nb in book/*.ipynb; do
    python3 -m jupyter execute --inplace "$nb" > "$out/execute-$(basename "$nb" .ipynb).log" 2>&1 \
      && echo "executed $nb" | tee -a "$summary" || echo "FAILED to execute $nb" | tee -a "$summary"
  done
fi

python3 -m pytest -q -rs --nbval-lax --nbval-current-env book/ tests/ 2>&1 | tee "$out/pytest.log"
echo "pytest: $(tail -n 1 "$out/pytest.log")" >> "$summary"
python3 -m pytest -q -s tests/test_gpu_agreement.py 2>&1 | grep -E "bit-identical" >> "$summary"

steps=$(python3 -m gemmlab steps --names)
python3 -m gemmlab bench $steps --size 1024 --size 2048 --size 4096 2>&1 | tee "$out/bench.log"
grep -E "% of" "$out/bench.log" | sed 's/^/bench: /' >> "$summary"

export GEMMLAB_NO_POOL=1  # one cudaMalloc per array, so memcheck sees each array's exact bounds
for tool in memcheck racecheck synccheck initcheck; do
  log="$out/sanitizer-$tool.log"
  compute-sanitizer --tool "$tool" --error-exitcode 9 python3 -m gemmlab verify $steps --backend gpu > "$log" 2>&1
  echo "sanitizer $tool over $(echo $steps | wc -w) steps: exit $? $(grep -cE '^PASS' "$log") PASS; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)" >> "$summary"
done
cp results/*.json "$out/" 2>/dev/null
cat "$summary"
