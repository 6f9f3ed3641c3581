"""Nsight Compute records: read the raw CSV of `ncu --csv --page raw`, keep what the chapters use.

The profiler runs only on a GPU machine that allows it (not on Colab); its output is recorded in
results/<gpu>.ncu.json, {step: {metric: value}}, and the chapters read that file.
"""
from __future__ import annotations

import csv
import io
import re

from .results import RESULTS, locked, read_json, slug, write_json

STALL = re.compile(r"smsp__average_warps?_(?:latency_)?issue_stalled_([a-z_]+?)_per_(?:issue|warp)_active\.ratio$")
KEEP = ("sm__warps_active.avg.pct_of_peak_sustained_active", "launch__registers_per_thread",
        "launch__occupancy_limit_registers", "sm__maximum_warps_per_active_cycle_pct",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "smsp__inst_executed_op_shared_ld.sum",
        "gpu__time_duration.sum", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
        "smsp__issue_active.avg.pct_of_peak_sustained_active",
        # shared memory per instruction kind (chapter 5): ld = LDS and LDSM together, st = STS
        "smsp__inst_executed_op_ldsm.sum", "smsp__inst_executed_op_shared_st.sum",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
        # global memory through the caches (chapters 2 and 3: why a step gains more or less than its sectors say)
        "l1tex__t_sector_hit_rate.pct", "lts__t_sector_hit_rate.pct", "dram__bytes_read.sum", "dram__bytes_write.sum",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
        "smsp__inst_executed_op_global_ld.sum", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
        "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__cycles_elapsed.avg.per_second", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        # instructions, achieved warps and L2 traffic (lab/gaps: chapters 3, 5 and 8)
        "smsp__inst_executed.sum", "smsp__inst_issued.sum", "sm__warps_active.avg.per_cycle_active",
        "lts__t_bytes.sum", "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_warps",
        "launch__occupancy_limit_blocks", "launch__waves_per_multiprocessor", "launch__grid_size",
        "launch__block_size")


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def raw_csv_rows(text: str) -> list[dict[str, str]]:
    """Every profiled kernel of a raw-page CSV (`ncu --csv --page raw`: a header, a row of units, one row per
    kernel) as {column: value as printed}; the lines ncu and the program print around the table are skipped."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 3:
        raise ValueError("no profiled kernel in this ncu output")
    return [dict(zip(rows[0], row)) for row in rows[2:]]


# A live run prints base units (nsecond, byte, cycle/second); a report read back with `ncu -i` scales them for
# reading (ms, Gbyte, Ghz). The records keep base units: nanoseconds, bytes, hertz.
TO_BASE = {"nsecond": 1, "ns": 1, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9,
           "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
           "hz": 1, "Khz": 1e3, "Mhz": 1e6, "Ghz": 1e9, "cycle/second": 1, "cycle/usecond": 1e6, "cycle/nsecond": 1e9}


def launches(text: str) -> list[dict[str, float]]:
    """Every profiled kernel of a raw-page CSV, in launch order: the warp stalls and KEEP's, as numbers in base
    units (the CSV's second row names each column's unit)."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    units = dict(zip(*list(csv.reader(io.StringIO("\n".join(lines[:2])))))) if len(lines) > 1 else {}
    out = []
    for row in raw_csv_rows(text):
        kept = {}
        for name, value in row.items():
            number = _number(value)
            if number is not None and (STALL.match(name) or name in KEEP):
                kept[name] = number * TO_BASE.get(units.get(name, ""), 1)
        out.append(kept)
    return out


def parse_raw_csv(text: str) -> dict[str, float]:
    """The metrics of the last profiled kernel in a raw-page CSV (launches)."""
    return launches(text)[-1]


def stall_reasons(metrics: dict[str, float], top: int = 5) -> list[tuple[str, float]]:
    """(reason, warps stalled per issued instruction), largest first."""
    found = [(m.group(1), v) for name, v in metrics.items() if (m := STALL.match(name))]
    return sorted(found, key=lambda kv: -kv[1])[:top]


def save(gpu: str, step: str, metrics: dict[str, float]) -> None:
    path = RESULTS / f"{slug(gpu)}.ncu.json"
    with locked(RESULTS):  # read, merge and replace whole (results.write_json), one process at a time
        data = read_json(path, "profiler metrics") if path.exists() else {}
        data[step] = metrics
        write_json(path, data, "profiler metrics", sort_keys=True)


def load(gpu: str | None = None) -> dict[str, dict[str, float]]:
    """Recorded profiler metrics per step, for one GPU (or the first recorded one)."""
    files = [RESULTS / f"{slug(gpu)}.ncu.json"] if gpu else sorted(RESULTS.glob("*.ncu.json"))
    for path in files:
        if path.exists():
            return read_json(path, "profiler metrics")
    return {}


NCU_CSV = RESULTS / "gpu-lane" / "ncu"


def load_csv(step: str) -> dict[str, float]:
    """The recorded raw CSVs of `step`, parsed and merged; {} if none: results/gpu-lane/ncu/<track>-<name>.csv
    (the GPU lane's sections) and, overriding it, shared-<track>-<name>.csv (chapter 5's shared-memory metrics)."""
    out: dict[str, float] = {}
    for prefix in ("", "shared-"):
        path = NCU_CSV / f"{prefix}{step.replace('/', '-')}.csv"
        if path.exists():
            out.update(parse_raw_csv(path.read_text()))
    return out


def shared_per_request(metrics: dict[str, float]) -> dict[str, dict[str, float]]:
    """Shared-memory wavefronts per warp instruction, by kind, from Nsight Compute's kernel-wide sums.

    Nsight Compute counts wavefronts per *kind of operation*, not per instruction: its `op_ld` wavefronts
    and bank conflicts cover LDS and LDSM (ldmatrix) together. So 'load' is reported only when the kernel
    has no LDSM, 'ldmatrix' only when it has no LDS, 'loads' (both) otherwise; 'store' when the record
    has STS metrics. Each entry: instructions, wavefronts, per_request, conflicts (excess wavefronts,
    ncu's own count) and ideal_per_request (wavefronts minus conflicts, per instruction)."""
    out: dict[str, dict[str, float]] = {}
    lds = metrics.get("smsp__inst_executed_op_shared_ld.sum")
    ldsm = metrics.get("smsp__inst_executed_op_ldsm.sum", 0.0)
    sides = [("ld", (lds or 0.0) + ldsm, "ldmatrix" if ldsm and not lds else "load" if not ldsm else "loads"),
             ("st", metrics.get("smsp__inst_executed_op_shared_st.sum"), "store")]
    for op, inst, kind in sides:
        waves = metrics.get(f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum")
        if not inst or waves is None:
            continue
        conflicts = metrics.get(f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum", float("nan"))
        out[kind] = {"instructions": inst, "wavefronts": waves, "per_request": waves / inst,
                     "conflicts": conflicts, "ideal_per_request": (waves - conflicts) / inst}
    return out
