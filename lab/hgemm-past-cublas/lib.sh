# Sourced by this folder's GPU scripts (gpu.sh, protocol.sh, step11.sh, warm.sh, clusters11.sh), from the
# repository root on the GPU machine. After `setup OUT_DIR DEFAULT_NAME`: $out (the folder the device returns),
# $work (everything of the run, tarred at the end), $summary; the repository on PYTHONPATH, CUDA's tools on PATH.

setup() {
  out=${1:-${OUT:-$2}}
  mkdir -p "$out"
  work=$(mktemp -d)
  summary="$work/summary.txt"
  : > "$summary"
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  command -v ncu > /dev/null || export PATH=$PATH:/usr/local/cuda/bin
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv \
    > "$work/gpu.txt" 2>&1
  git rev-parse HEAD >> "$work/gpu.txt" 2>&1
}

# run NAME TIMEOUT_S CMD...: log to $work/NAME.log; its exit code, time and last lines to the summary. With BUDGET
# set (seconds), a command that could end after BUDGET + 60 is skipped instead, and the summary says so.
run() {
  local name=$1 limit=$2
  shift 2
  if [[ -n "${BUDGET:-}" ]] && (( SECONDS + limit > BUDGET + 60 )); then
    echo "$name: skipped (at ${SECONDS} s, with up to ${limit} s to go it could pass the $(( (BUDGET + 60) / 60 ))-minute mark)" >> "$summary"
    return
  fi
  local t0=$SECONDS
  timeout "$limit" "$@" > "$work/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc, $((SECONDS - t0)) s" >> "$summary"
  tail -n 3 "$work/$name.log" | sed 's/^/    /' >> "$summary"
}

# sanitize STEP: compute-sanitizer memcheck, racecheck and synccheck on `gemmlab verify STEP` (one allocation each)
sanitize() {
  local tool limits=(memcheck:90 racecheck:120 synccheck:90)
  for tool in "${limits[@]}"; do
    run "${tool%%:*}" "${tool##*:}" env GEMMLAB_NO_POOL=1 compute-sanitizer --tool "${tool%%:*}" --error-exitcode 9 \
      python3 -m gemmlab verify "$1" --backend gpu
  done
}

# profile STEP...: Nsight Compute of each step at 4096 and 8192, one launch each, the sections profile.sh takes;
# $work/ncu-<step>-<size>.csv.gz
profile() {
  local s n name sections
  sections="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
  sections+=" --section WarpStateStats --section LaunchStats --section Occupancy --section SchedulerStats"
  for s in "$@"; do
    for n in 4096 8192; do
      name="ncu-$(basename "$s")-$n"
      run "$name" 45 bash -c "ncu --clock-control none $sections --csv --page raw -k regex:hgemm --launch-count 1 \
        python3 -m gemmlab run $s --size $n > '$work/$name.csv' && gzip -f '$work/$name.csv'"
    done
  done
}

# copy_records: the record files that bench and sweep changed in results/ (every one without git) to $work/results
copy_records() {
  mkdir -p "$work/results"
  local changed
  changed=$(git status --short results/ 2>/dev/null | awk '{print $2}' | grep '\.json$')
  cp ${changed:-results/*.json} "$work/results/" 2>/dev/null
}

# report TITLE LOG_GLOB PATTERN: a section of the summary, the lines of those logs that match
report() {
  echo "== $1"
  grep -hE "$3" $work/$2 2>/dev/null
}

# compare_profiles: the ncu CSVs of this run side by side (ncu_cmp.py)
compare_profiles() {
  echo "== ncu"
  local profiles
  profiles=$(ls "$work"/ncu-*.csv.gz 2>/dev/null)
  [ -n "$profiles" ] && (cd "$work" && python3 "$OLDPWD"/lab/hgemm-past-cublas/ncu_cmp.py $(basename -a $profiles) 2>&1 | cut -c1-200)
}

# finish TARBALL: the run's total time to the summary; the summary and $work as OUT/TARBALL; the summary printed
finish() {
  echo "total ${SECONDS} s" >> "$summary"
  tar czf "$out/$1" -C "$work" .
  cp "$summary" "$out/summary.txt"
  cat "$summary"
}
