#!/usr/bin/env bash
# The GPU lane, in one command, on a machine with an NVIDIA GPU (CuPy, compute-sanitizer, ncu):
#   1. the whole test suite with nbval over book/ (includes the CPU/GPU agreement of every step),
#   2. the benchmark of every step against cuBLAS at 1024..8192 (records written to results/),
#   3. compute-sanitizer memcheck, racecheck, synccheck and initcheck over every step (and the first
#      three over chapter 8's fused steps),
#   4. Nsight Compute warp-state counters of the FP32 latency-hiding steps (results/<gpu>.ncu.json).
# Usage: bash tools/gpu_lane.sh [OUT_DIR] [--execute-notebooks] [--part tests|book|measure]
# --part runs one third, for device calls of 10 minutes: tests = 1 (tests/ and the agreement), book = 1 (nbval
# over book/), measure = 2 to 4 (benchmark, sanitizers, ncu). Without it, all three in turn. (An H200 on 2026-11-28
# ran 39% of tests/ in 280 s: tests alone may need most of a call.)
# Wheels in .whl/ are installed first when present, for machines without a registry: the test packages of
# requirements.txt that the machine lacks (nbval, ipykernel, ipywidgets, nbclient) with their dependencies,
# downloaded for its Python elsewhere (pip download --only-binary=:all: --python-version X.Y -d .whl ...).
set -uo pipefail
out=${1:-${OUT:-gpu-lane-out}}
part=""
args=("$@")
for i in "${!args[@]}"; do [[ "${args[$i]}" == "--part" ]] && part=${args[$((i + 1))]:-}; done
case "$part" in ""|tests|book|measure) ;; *) echo "--part must be tests, book or measure, not '$part'" >&2; exit 2;; esac
runs() { [[ -z "$part" || "$part" == "$1" ]]; }  # runs PART: whether this call runs that part
mkdir -p "$out" results/gpu-lane/sanitizer results/gpu-lane/ncu
source tools/wheels.sh || exit 1
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 MPLBACKEND=Agg
summary="$out/summary.txt"
: > "$summary"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/gpu: /' | tee -a "$summary"
steps=$(python3 -m gemmlab steps --names | grep -v "^fused/")  # the GEMM steps; chapter 8's fused steps:
fused=$(python3 -m gemmlab steps --names | grep "^fused/")

if [[ " $* " == *" --execute-notebooks "* ]]; then  # store the GPU run's outputs (the site shows them)
  python3 tools/execute_notebooks.py book/*.ipynb --log-dir "$out/execute" | tee -a "$summary"
fi

if runs tests; then
  python3 -m pytest -q -p no:cacheprovider tests/ > "$out/pytest-tests.log" 2>&1
  echo "pytest tests/: $(tail -n 1 "$out/pytest-tests.log")" >> "$summary"
  python3 -m pytest -q -s -p no:cacheprovider tests/test_gpu_agreement.py 2>&1 | grep -E "bit-identical" >> "$summary"
fi
if runs book; then
  python3 -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env book/ > "$out/pytest-book.log" 2>&1
  echo "pytest book/: $(tail -n 1 "$out/pytest-book.log")" >> "$summary"
fi
if ! runs measure; then
  cat "$summary"
  exit 0
fi

python3 -m gemmlab bench $(echo "$steps" | grep -v 01_naive) --size 1024 --size 2048 --size 4096 --size 8192 > "$out/bench.log" 2>&1
python3 -m gemmlab bench sgemm/01_naive --size 1024 --size 2048 --size 4096 >> "$out/bench.log" 2>&1
grep -E "% of" "$out/bench.log" | sed 's/^/bench: /' >> "$summary"

for tool in memcheck racecheck synccheck initcheck; do  # one cudaMalloc per array: exact bounds
  log="$out/sanitizer-$tool.log"
  GEMMLAB_NO_POOL=1 compute-sanitizer --tool "$tool" --error-exitcode 9 python3 -m gemmlab verify $steps --backend gpu > "$log" 2>&1
  echo "sanitizer $tool: exit $?, $(grep -c '^PASS' "$log") steps PASS, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)" >> "$summary"
  grep -E "PASS|SUMMARY" "$log" > "results/gpu-lane/sanitizer/$tool.txt"
done

for tool in memcheck racecheck synccheck; do  # chapter 8's fused steps (persistent grids, a grid barrier)
  log="$out/sanitizer-fused-$tool.log"
  GEMMLAB_NO_POOL=1 compute-sanitizer --tool "$tool" --error-exitcode 9 python3 -m gemmlab verify $fused --backend gpu > "$log" 2>&1
  echo "sanitizer fused $tool: exit $?, $(grep -c '^PASS' "$log") fused steps PASS, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)" >> "$summary"
  grep -E "PASS|SKIP|SUMMARY" "$log" > "results/gpu-lane/sanitizer/fused-$tool.txt"
done

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
for s in sgemm/07_warptiling sgemm/08_register_prefetch sgemm/09_double_buffer sgemm/10_cp_async; do
  csv="results/gpu-lane/ncu/$(echo "$s" | tr / -).csv"
  ncu --clock-control none --section WarpStateStats --section Occupancy --section LaunchStats --csv --page raw \
      -k regex:sgemm python3 -m gemmlab run "$s" --size 4096 > "$csv" 2> "$out/ncu.err" \
    && python3 -c "from gemmlab import profile; profile.save('$gpu', '$s', profile.parse_raw_csv(open('$csv').read()))" \
    && echo "ncu $s: recorded" >> "$summary" || echo "ncu $s: not available here (see $out/ncu.err)" >> "$summary"
done
cat "$summary"
