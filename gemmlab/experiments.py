"""Recorded experiments as tables for the chapters: what a variant changed, what we expected, what happened.

An experiment lives in results/experiments/<name>/ (its variants' .cu files, the raw logs, and
results.json, read through results.experiment). It is run on a GPU with results/experiments/run.py;
everything here only reads the record, so the tables are the same with or without a GPU.
"""
from __future__ import annotations

from pathlib import Path

from . import results
from .source import apply_patch, kernel_path

# (label, key in the ncu record, format) for the side-by-side counter table
COUNTERS = (
    ("threads per block x blocks", None, None),
    ("registers per thread", "registers", "{:.0f}"),
    ("shared memory per block (KB)", None, None),
    ("instructions executed (millions)", "instructions", None),
    ("issue slots used (%)", "issue_active_pct", "{:.1f}"),
    ("FMA pipe busy (%)", "fma_pipe_pct", "{:.1f}"),
    ("eligible warps per scheduler per cycle", "eligible_warps_per_cycle", "{:.2f}"),
    ("shared-store bank conflicts (millions)", "shared_store_bank_conflicts", None),
    ("kernel time under ncu (ms)", "duration_ns", None),
)
STALLS = ("no_instruction", "dispatch_stall", "short_scoreboard", "wait", "barrier", "mio_throttle")


def _cell(rec: dict, key: str | None, fmt: str | None, label: str) -> str:
    if label.startswith("threads per block"):
        return f"{rec['threads']:.0f} x {rec['blocks']:.0f}"
    if label.startswith("shared memory"):
        return f"{(rec['static_smem_bytes'] + rec['dynamic_smem_bytes']) / 1024:.1f}"
    value = rec[key]
    if key in ("instructions", "shared_store_bank_conflicts"):
        return f"{value / 1e6:.1f}"
    if key == "duration_ns":
        return f"{value / 1e6:.3f}"
    return fmt.format(value)


def counters(columns: dict[str, dict]) -> str:
    """Nsight Compute records side by side: {column title: ncu record from an experiment}."""
    titles = list(columns)
    width = max(max(len(t) for t in titles), 12) + 2
    lines = [f"{'':40s}" + "".join(f"{t:>{width}s}" for t in titles)]
    for label, key, fmt in COUNTERS:
        lines.append(f"{label:40s}" + "".join(f"{_cell(columns[t], key, fmt, label):>{width}s}" for t in titles))
    lines.append("stalls per issued instruction:")
    for reason in STALLS:
        lines.append(f"  {reason:38s}" + "".join(
            f"{columns[t]['stalls_per_issue'].get(reason, 0.0):>{width}.2f}" for t in titles))
    return "\n".join(lines)


def variants(exp: dict, size: int | None = None) -> str:
    """One line per variant: what changed, the prediction, and the measured % of cuBLAS (each round)."""
    lines = []
    for v in exp["variants"]:
        measured = " / ".join(f"{r['pct']:.1f}" for r in v["runs"])
        measured = f"{measured} % of cuBLAS" if measured else "profiled only"
        ncu = v.get("ncu")
        issue = f"; issue slots used {ncu['issue_active_pct']:.1f}%" if ncu else ""
        lines.append(f"- {v['name']} ({', '.join(f'{k}={x}' for k, x in v['params'].items())}): {measured}{issue}")
        lines.append(f"    changed:  {v['idea']}")
        if v.get("prediction"):
            lines.append(f"    expected: {v['prediction']}")
    return "\n".join(lines)


def runs_table(experiment: dict, size: int | None = None) -> str:
    """The % of cuBLAS of each variant of one experiment group (rounds separated by '/')."""
    lines = []
    for spec, rs in experiment["runs"].items():
        rs = [r for r in rs if size is None or r["size"] == size]
        if rs:
            tag = " (diagnostic)" if spec.split(":")[0] in experiment.get("diagnostic", []) else ""
            lines.append(f"  {spec + tag:62s} " + " / ".join(f"{r['pct']:5.1f}% ({r['tflops']:.0f} TF)" for r in rs))
    return "\n".join(lines)


def group(exp: dict, name: str) -> dict:
    """The experiment group called `name` in a multi-part experiment (hgemm-diagnosis)."""
    for e in exp["experiments"]:
        if e["name"] == name:
            return e
    raise KeyError(f"no group {name!r}: {[e['name'] for e in exp['experiments']]}")


def pct(exp_group: dict, spec: str, size: int | None = None) -> float:
    """Median recorded % of cuBLAS of one variant in a group."""
    return results.median_pct(exp_group["runs"][spec], size)


# Shared memory: 32 banks, each 32 bits wide per clock (CUDA C++ Programming Guide, "Shared Memory"
# in the compute-capability sections), so an SM moves at most 128 bytes through it per clock.
SMEM_BYTES_PER_CLOCK = 128


def mma_tile_budget(block_m: int, block_n: int, block_k: int, warp_m: int, warp_n: int,
                    mma_tflops: float, sms: int, clock_hz: float) -> dict:
    """Shared-memory cycles against tensor-core cycles for one block tile of an mma.sync GEMM that
    fills shared memory with cp.async and reads every fragment back with ldmatrix (fp16, 2 bytes)."""
    warps = (block_m // warp_m) * (block_n // warp_n)
    ldmatrix_bytes = warps * (warp_m * block_k + block_k * warp_n) * 2  # each warp reads its A and B slices
    copy_bytes = (block_m + block_n) * block_k * 2                        # the tile written once
    smem_cycles = (ldmatrix_bytes + copy_bytes) / SMEM_BYTES_PER_CLOCK
    flops = 2 * block_m * block_n * block_k
    mma_cycles = flops / (mma_tflops * 1e12 / sms / clock_hz)
    return {"warps": warps, "ldmatrix_bytes": ldmatrix_bytes, "copy_bytes": copy_bytes,
            "smem_cycles": smem_cycles, "flops": flops, "mma_cycles": mma_cycles,
            "smem_share": smem_cycles / mma_cycles}


def variant_source(folder: str | Path, step, name: str) -> str | None:
    """A variant's kernel source: the step's .cu with <folder>/<name>.patch applied (a unified diff;
    the variant keeps the step's kernel name and template parameters). None for the step itself
    (`name` 'step' or '*_base'). `folder` is a path, or a name under results/experiments/."""
    if name == "step" or name.endswith("_base"):
        return None
    folder = Path(folder)
    if not folder.is_absolute() and not folder.exists():
        folder = results.EXPERIMENTS / folder
    return apply_patch(kernel_path(step.file).read_text(), (folder / f"{name}.patch").read_text(),
                       label=f"{folder.name}/{name}.patch")
