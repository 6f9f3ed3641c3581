#!/bin/bash
# The measurements chapters 3, 5 and 8 say are missing, in one run on the H200 (about 5 minutes, at most 9):
#   ch3: sgemm/03_smem_tiling at BLOCK = 8, 16, 31, 32, benchmarked at 4096 against cuBLAS in ONE process (each
#        beside cuBLAS on the same inputs; records to results/<gpu>.json), and Nsight Compute of each at 4096;
#   ch5: Nsight Compute of sgemm/07_warptiling and its two lab variants (lab/ch5-variants padded.patch and
#        swizzled.patch, applied by lab/run.py) at 4096;
#   ch8: Nsight Compute of fused/01_naive_row and fused/02_row_panel at N = 512.
# Every profile: one launch (--launch-count 1, -k the step's kernel), the sections and metrics of
# lab/sgemm-counters plus the scheduler's, saved to results/<gpu>.ncu.json (profile.save) under a key that names
# what was profiled: STEP<NAME=VALUE> for a parameter, STEP<variant> for a lab variant, STEP@N for a size other
# than 4096 (lab/gaps/README.md). The recorded keys without <...> or @ are left as they are.
# Usage (repository root on the GPU machine): bash lab/gaps/gpu.sh OUT_DIR
#   -> OUT_DIR/summary.txt, gaps.tar.gz (logs, raw CSVs), nvidia-h200.json, nvidia-h200.ncu.json
# GAPS_HELPERS=DIR bash lab/gaps/gpu.sh: only write the two Python helpers to DIR (to test them without a GPU).

write_helpers() {  # DIR: save.py (GPU KEY CSV: parse, save, one line) and summary.py (GPU KEY...: the key numbers)
  mkdir -p "$1"
  cat > "$1/save.py" <<'PY'
import sys
from gemmlab import profile
gpu, key, csv = sys.argv[1:4]
metrics = profile.parse_raw_csv(open(csv).read())
profile.save(gpu, key, metrics)
print(f"{key}: {len(metrics)} metrics saved; stalls {profile.stall_reasons(profile.load(gpu)[key], 3)}")
PY
  cat > "$1/summary.py" <<'PY'
import math
import sys
from gemmlab import profile

rec = profile.load(sys.argv[1])
nan = float("nan")
print(f"{'key':36s} {'ms':>7s} {'inst M':>8s} {'issue%':>6s} {'warps/SM':>8s} {'L1 hit':>6s} {'L2 hit':>6s}"
      f" {'DRAM rd MB':>10s} {'wr MB':>7s} {'L2 MB':>8s}  shared (wavefronts/instr, conflicts M)  top stalls")
for key in sys.argv[2:]:
    m = rec.get(key)
    if not m:
        print(f"{key:36s} no record")
        continue
    g = lambda name, scale=1.0: m.get(name, nan) * scale  # noqa: E731
    shared = "; ".join(f"{kind} {v['per_request']:.2f} ({v['conflicts'] / 1e6:.1f})"
                       for kind, v in profile.shared_per_request(m).items()) or "-"
    stalls = ", ".join(f"{r} {v:.2f}" for r, v in profile.stall_reasons(m, 3))
    inst = g("smsp__inst_executed.sum", 1e-6)
    print(f"{key:36s} {g('gpu__time_duration.sum', 1e-6):7.3f} {inst:8.1f}"
          f" {g('smsp__issue_active.avg.pct_of_peak_sustained_active'):6.1f}"
          f" {g('sm__warps_active.avg.per_cycle_active'):8.1f} {g('l1tex__t_sector_hit_rate.pct'):6.1f}"
          f" {g('lts__t_sector_hit_rate.pct'):6.1f} {g('dram__bytes_read.sum', 1e-6):10.1f}"
          f" {g('dram__bytes_write.sum', 1e-6):7.1f} {g('lts__t_bytes.sum', 1e-6):8.1f}  {shared}  {stalls}"
          + ("" if not math.isnan(inst) else "  (no instruction count)"))
PY
}
if [[ -n "${GAPS_HELPERS:-}" ]]; then write_helpers "$GAPS_HELPERS"; exit 0; fi

source lab/hgemm-past-cublas/lib.sh
setup "${1:-}" gaps-out
export PYTHONUNBUFFERED=1 BUDGET=${BUDGET:-470}
write_helpers "$work"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
{ date -u +%F; echo "gpu for the records: $gpu"; } >> "$work/gpu.txt"

if [[ ${PART:-main} == main ]]; then
# ch3: the four tile edges in one process, each timed beside cuBLAS on the same inputs (benchmark_cublas)
run bench-ch3 150 python3 -c "
from gemmlab.measure.bench import benchmark, make_step, table
recs = benchmark([make_step('sgemm/03_smem_tiling', BLOCK=b) for b in (8, 16, 31, 32)], sizes=[4096])
print(table(recs))"
fi

source lab/ncu-metrics.sh  # the sections and metrics the profile records read
SECTIONS+=" --section SchedulerStats"
METRICS+=",smsp__inst_executed.sum,smsp__inst_issued.sum"
METRICS+=",sm__warps_active.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum"

# PART=ch7 bash lab/gaps/gpu.sh OUT: chapter 7's part only (hgemm/01-03 at 2048 and 4096), a second call
# prof NAME KEY KERNEL CMD: one launch of KERNEL (a regex) under ncu -> $work/NAME.csv.gz, saved under KEY
prof() {
  local name=$1 key=$2 kernel=$3 cmd=$4
  KEYS+=("$key")
  run "$name" 50 bash -c "ncu --clock-control none $SECTIONS --metrics $METRICS --csv --page raw \
    -k regex:'$kernel' --launch-count 1 $cmd > '$work/$name.csv' \
    && python3 '$work/save.py' '$gpu' '$key' '$work/$name.csv'; rc=\$?; gzip -f '$work/$name.csv'; exit \$rc"
}
KEYS=()
if [[ ${PART:-main} == main ]]; then
for b in 8 16 31 32; do
  prof "ncu-03-block$b" "sgemm/03_smem_tiling<BLOCK=$b>" sgemm_smem_tiling \
    "python3 -m gemmlab run sgemm/03_smem_tiling --param BLOCK=$b --size 4096"
done
for v in step padded swizzled; do  # lab/run.py's 'step' is step 07 itself; key <base> for it
  prof "ncu-07-$v" "sgemm/07_warptiling<${v/step/base}>" sgemm_warptiling \
    "python3 lab/run.py ch5-variants run sgemm/07_warptiling $v"
done
prof ncu-fused01-512 "fused/01_naive_row@512" fused_naive_row "python3 -m gemmlab run fused/01_naive_row --size 512"
prof ncu-fused02-512 "fused/02_row_panel@512" fused_row_panel "python3 -m gemmlab run fused/02_row_panel --size 512"
elif [[ $PART == ch7 ]]; then  # chapter 7's first tensor-core steps at 2048 (A and B fit in L2) and 4096 (they do not)
for s in 01_mma_tiling 02_vectorized_copy 03_swizzled; do
  for n in 2048 4096; do
    prof "ncu-h$s-$n" "hgemm/$s@$n" "hgemm_${s#0?_}" "python3 -m gemmlab run hgemm/$s --size $n"
  done
done
elif [[ $PART == tiles ]]; then  # PART=tiles: the gaps of chapters 4, 7 and 7b (session 35), one call
METRICS+=",sm__cycles_elapsed.avg.per_second"  # the SM clock of each profiled launch
# ch4: steps 04 and 05 at the tile of the step before them, beside their own defaults, one process (tile vs idea)
run bench-ch4 200 python3 -c "
from gemmlab.measure.bench import benchmark, make_step, table
recs = benchmark([make_step('sgemm/03_smem_tiling'),
                  make_step('sgemm/04_1d_blocktiling', BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, THREAD_M=8),
                  make_step('sgemm/04_1d_blocktiling'),
                  make_step('sgemm/05_2d_blocktiling', BLOCK_M=64, BLOCK_N=64, BLOCK_K=8, THREAD_M=8, THREAD_N=8),
                  make_step('sgemm/05_2d_blocktiling')], sizes=[4096])
print(table(recs))"
# ch7: the fp16-accumulate variant and step 01 in one run, then a profile of the variant
run bench-ch7-f16 150 python3 -c "
from gemmlab.chapters import tensorcores as tc
from gemmlab.measure.bench import benchmark, make_step, table
print(table(benchmark([tc.f16_accumulate(), make_step('hgemm/01_mma_tiling')], sizes=[4096, 8192])))"
prof ncu-f16-4096 "demo/01_f16_accumulate@4096" hgemm_f16_accumulate "python3 lab/gaps/launch.py f16_accumulate 4096 1"
# 7b: steps 04 to 07 at 8192 on one GPU (the H100's records hold 04 and 07 only): which stall grew from 04 to 05
for s in 04_register_prefetch 05_tuned_tiles 06_double_buffer 07_cp_async; do
  prof "ncu-h$s-8192" "hgemm/$s@8192" "hgemm_" "python3 -m gemmlab run hgemm/$s --size 8192"
done
elif [[ $PART == places || $PART == more ]]; then  # PART=places: where warps wait, per instruction, and launch-to-launch spread
METRICS+=",sm__cycles_elapsed.avg.per_second"
# srcprof NAME KEY KERNEL CMD: one launch profiled with the source counters too; the raw page saved under KEY,
# the per-instruction page (stall samples, instructions executed per SASS line) as $work/src-NAME.csv.gz
srcprof() {
  local name=$1 key=$2 kernel=$3 cmd=$4
  KEYS+=("$key")
  run "$name" 90 bash -c "ncu --clock-control none $SECTIONS --section SourceCounters --metrics $METRICS \
    -k regex:'$kernel' --launch-count 1 -o '$work/$name' $cmd \
    && ncu -i '$work/$name.ncu-rep' --csv --page raw > '$work/$name.csv' \
    && ncu -i '$work/$name.ncu-rep' --csv --page source --print-source sass | gzip > '$work/src-$name.csv.gz' \
    && python3 '$work/save.py' '$gpu' '$key' '$work/$name.csv'; rc=\$?; gzip -f '$work/$name.csv'; exit \$rc"
}
# launches NAME WHAT SIZE SKIP COUNT KERNEL NCU_FLAGS: launches SKIP+1 .. SKIP+COUNT of KERNEL (a regex) in one
# process (lab/gaps/launch.py), the time and SM clock of each
launches() {
  run "$1" 60 bash -c "ncu --clock-control none $7 -k regex:'$6' --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__t_sector_hit_rate.pct \
    --launch-skip $4 --launch-count $5 --csv --page raw python3 lab/gaps/launch.py '$2' $3 $(( $4 + $5 )) > '$work/$1.csv'"
  LAUNCHES+=("$work/$1.csv")
}
LAUNCHES=()
if [[ $PART == more ]]; then  # PART=more: the source pages of hopper/02 and hgemm/09, 11 (chapters 7c, 7d)
for s in hopper/02_tma hgemm/09_persistent hgemm/11_mma_in_flight; do
  srcprof "${s//\//-}-4096" "$s<source>" "hopper_|hgemm_" "python3 -m gemmlab run $s --size 4096"
done
else
srcprof s12-4096 "sgemm/12_tf32x3" sgemm_tf32x3 "python3 -m gemmlab run sgemm/12_tf32x3 --size 4096"
srcprof hopper03-4096 "hopper/03_tma_ring<source>" hopper_ "python3 -m gemmlab run hopper/03_tma_ring --size 4096"
srcprof h08-4096 "hgemm/08_wgmma<source>" hgemm_ "python3 -m gemmlab run hgemm/08_wgmma --size 4096"
srcprof f06-4096 "fused/06_wgmma_tf32x3" fused_ "python3 -m gemmlab run fused/06_wgmma_tf32x3 --size 4096"
srcprof f06-512 "fused/06_wgmma_tf32x3@512" fused_ "python3 -m gemmlab run fused/06_wgmma_tf32x3 --size 512"
# ch4: steps 04 and 05 at the tile of the step before them (PART=tiles timed them), one launch each
prof ncu-04-tile03 "sgemm/04_1d_blocktiling<BLOCK_M=32,BLOCK_N=32,BLOCK_K=32>" sgemm_1d_blocktiling \
  "python3 -m gemmlab run sgemm/04_1d_blocktiling --param BLOCK_M=32 --param BLOCK_N=32 --param BLOCK_K=32"
prof ncu-05-tile04 "sgemm/05_2d_blocktiling<BLOCK_M=64,BLOCK_N=64>" sgemm_2d_blocktiling \
  "python3 -m gemmlab run sgemm/05_2d_blocktiling --param BLOCK_M=64 --param BLOCK_N=64"
# ch8: step 05's kernel alone at 512, warm (L2 not flushed), launches 11-20 of one process
launches warm-f05-512 fused/05_tf32x3 512 10 10 fused_tf32x3 "--cache-control none"
# ch5: eight launches of step 07 and each variant, L2 flushed as in the recorded profiles: the spread
for v in step padded swizzled; do
  launches "spread-07-$v" "ch5-variants/$v@sgemm/07_warptiling" 4096 2 8 sgemm_warptiling ""
done
# 7c, 7d: the first launch of a fresh process, as the recorded profiles took it: its time and SM clock
for s in hopper/01_wgmma hopper/02_tma hopper/03_tma_ring hgemm/08_wgmma hgemm/09_persistent hgemm/10_tma_store \
         hgemm/11_mma_in_flight hgemm/12_stream_k; do
  launches "first-${s//\//-}" "$s" 4096 0 1 "hopper_|hgemm_" ""
done
fi
fi

cp results/nvidia-h200.json results/nvidia-h200.ncu.json "$out/" 2>/dev/null
copy_records
{
  echo
  report "benchmarks (one process each)" "bench-*.log" "TFLOP/s|%|^step"
  echo "== Nsight Compute, one launch each (results/<gpu>.ncu.json)"
  timeout 60 python3 "$work/summary.py" "$gpu" "${KEYS[@]}" 2>&1
  if (( ${#LAUNCHES[@]} )); then
    echo "== launch by launch (lab/gaps/launches.py): time and SM clock of each profiled launch"
    timeout 60 python3 lab/gaps/launches.py "${LAUNCHES[@]}" 2>&1
  fi
  if [[ ${PART:-main} == places || ${PART:-main} == more ]]; then
    echo "== per instruction (lab/gaps/places.py)"
    timeout 120 python3 lab/gaps/places.py "$work"/src-*.csv.gz 2>&1 | head -150
  fi
} >> "$summary"
finish gaps.tar.gz
