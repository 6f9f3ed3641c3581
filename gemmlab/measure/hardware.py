"""What a GPU can do: spec-sheet peaks, the reader's live device, and measured copy / cuBLAS rates.

Three kinds of number live here, and every one carries its kind:

- ``spec``: peaks from NVIDIA's public data sheets (constants in :data:`SPECS`); never reached.
- ``measured``: achievable rates someone measured and published (:data:`REFERENCE_MEASURED`).
- ``live`` / ``recorded``: what :func:`measure_copy_bandwidth` and :func:`measure_cublas` measured
  on this GPU just now, or read back from ``results/<gpu-slug>.hardware.json`` without a GPU.
"""
from __future__ import annotations

import datetime as _dt
import json
import re
import statistics
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ..runtime import optional
from ..runtime import gpu, settings
from ..runtime.backends import backend
from ..runtime.source import assemble
from ..runtime.arch import SPECS, GpuSpec, balance_point  # noqa: F401 (hardware.SPECS, the spec sheets, live in arch)
from .results import RESULTS as RESULTS_DIR
from .results import locked, write_json
from .results import slug as gpu_slug
from .document_figures import t4_reference

HARDWARE_SUFFIX = ".hardware.json"
NO_DATA = "no recorded data for this GPU yet"


# Achievable rates measured by others (not by this course) for the T4, quoted in seed 001
# (Alex Armbruster's HGEMM worklog): cuBLAS HGEMM (HMMA.1688) and SGEMM (FFMA) throughput from his
# benchmarks; DRAM and shared-memory bandwidth from Jia et al., "Dissecting the NVIDIA Turing T4
# GPU via Microbenchmarking" (arXiv:1903.07486). The figures live in gemmlab.documents (the one place for every
# seed's figures), with his HGEMM ladder ("hgemm_ladder": kernel 1's % of cuBLAS, the copies' and the swizzle's
# gains, kernel 3's %).
REFERENCE_MEASURED: dict[str, dict[str, Any]] = {
    "t4": t4_reference(),
}


def gemm_flops(m: int, n: int, k: int) -> int:
    """Floating-point operations of C = A @ B: one multiply and one add per (i, j, k)."""
    return 2 * m * n * k


def gemm_intensity(m: int, n: int, k: int, bytes_per_element: int = 4) -> float:
    """FLOP per byte if A and B are read once and C written once (the best any kernel can do)."""
    traffic = bytes_per_element * (m * k + k * n + m * n)
    return gemm_flops(m, n, k) / traffic


# E = A B C (chapter 8): its work, its best-case traffic, its intensity, its roofline time
def abc_flops(n: int) -> int:
    """FLOPs of E = A B C for N x N matrices: two products of N^3 multiply-adds each."""
    return 4 * n ** 3


def abc_traffic_bytes(n: int, fused: bool = True) -> int:
    """DRAM bytes at best: fused reads A, B, C and writes E; two GEMMs also write and re-read T."""
    return 4 * n * n * (4 if fused else 6)


def abc_intensity(n: int, fused: bool = True) -> float:
    """FLOP per byte of the best-case traffic: N/4 fused, N/6 as two GEMMs."""
    return abc_flops(n) / abc_traffic_bytes(n, fused)


def document_intensity(n: int) -> float:
    """The seed's count: N^3 + N^2 + N - 2 operations over 4 N^2 floats x 4 bytes, about N/16."""
    return (n ** 3 + n ** 2 + n - 2) / (16 * n * n)


def abc_ideal_time_s(n: int, tflops: float, gbps: float, fused: bool = True) -> float:
    """The roofline's lower bound on the time: the slower of the arithmetic and the traffic."""
    return max(abc_flops(n) / (tflops * 1e12), abc_traffic_bytes(n, fused) / (gbps * 1e9))


def spec_for(gpu: str | GpuSpec | None) -> GpuSpec | None:
    """The spec-sheet entry for a key ('t4') or a device name ('Tesla T4', 'NVIDIA H200'), or None."""
    if isinstance(gpu, GpuSpec):
        return gpu
    if not gpu:
        return None
    text = gpu.lower()
    if text in SPECS:
        return SPECS[text]
    if re.search(r"\bt4\b", text):
        return SPECS["t4"]
    if "h200" in text:
        return SPECS["h200"]
    if "h100" in text and "pcie" not in text:
        return SPECS["h100-sxm"]
    return None


def spec_table() -> list[dict[str, Any]]:
    """The spec sheets as rows (one per GPU), with the two fp32 and fp16 balance points added."""
    rows = []
    for spec in SPECS.values():
        row = asdict(spec)
        row["balance_fp32"] = balance_point(spec.fp32_tflops, spec.dram_gbps)
        row["balance_fp16_tensor"] = balance_point(spec.fp16_tensor_tflops, spec.dram_gbps)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# The live device


def _cupy():
    """CuPy if it imports and sees at least one GPU, else None."""
    if not gpu.available():
        return None
    cupy = optional.module("cupy")  # optional: CuPy, present once a GPU is found
    return cupy


def gpu_available() -> bool:
    """True when CuPy sees a GPU and the active gemmlab backend (if set) is the GPU one."""
    if _cupy() is None:
        return False
    return backend() == "gpu"


def _version(code: int) -> str:
    """CUDA's integer version (12040) as text ('12.4')."""
    return f"{code // 1000}.{(code % 1000) // 10}"


def device_info(device: int = 0) -> dict[str, Any] | None:
    """Properties of the reader's GPU, queried live through CuPy; None when there is no GPU."""
    cupy = _cupy()
    if cupy is None:
        return None
    dev = cupy.cuda.Device(device)
    props = cupy.cuda.runtime.getDeviceProperties(device)
    attrs = dev.attributes
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    major, minor = props["major"], props["minor"]
    info: dict[str, Any] = {
        "name": name,
        "compute_capability": f"{major}.{minor}",
        "arch": f"sm_{major}{minor}",
        "sms": attrs.get("MultiProcessorCount"),
        "warp_size": attrs.get("WarpSize", 32),
        "max_threads_per_block": attrs.get("MaxThreadsPerBlock"),
        "max_threads_per_sm": attrs.get("MaxThreadsPerMultiProcessor"),
        "regs_per_sm": attrs.get("MaxRegistersPerMultiprocessor"),
        "smem_per_block_kb": attrs.get("MaxSharedMemoryPerBlock", 0) / 1024,
        "smem_per_block_optin_kb": attrs.get("MaxSharedMemoryPerBlockOptin", 0) / 1024,
        "smem_per_sm_kb": attrs.get("MaxSharedMemoryPerMultiprocessor", 0) / 1024,
        "l2_mb": attrs.get("L2CacheSize", 0) / 2**20,
        "memory_gb": dev.mem_info[1] / 1e9,
        "clock_mhz": (attrs.get("ClockRate") or 0) / 1000 or None,
        "dram_gbps_theoretical": None,
    }
    mem_khz, bus_bits = attrs.get("MemoryClockRate"), attrs.get("GlobalMemoryBusWidth")
    if mem_khz and bus_bits:   # double data rate: two transfers per clock
        info["dram_gbps_theoretical"] = 2 * mem_khz * 1e3 * bus_bits / 8 / 1e9
    info.update(_environment(cupy, name))
    return info


def _environment(cupy, name: str) -> dict[str, Any]:
    """Who measured: GPU name, CUDA driver / runtime and CuPy versions, today's date."""
    return {
        "gpu": name,
        "cuda_driver": _version(cupy.cuda.runtime.driverGetVersion()),
        "cuda_runtime": _version(cupy.cuda.runtime.runtimeGetVersion()),
        "cupy": cupy.__version__,
        "date": _dt.date.today().isoformat(),
    }


# ---------------------------------------------------------------------------------------------
# Recorded measurements: results/<gpu-slug>.hardware.json


def hardware_path(gpu: str, results_dir: Path | None = None) -> Path:
    """Where the hardware measurements of GPU `gpu` are recorded."""
    return Path(results_dir or RESULTS_DIR) / f"{gpu_slug(gpu)}{HARDWARE_SUFFIX}"


def recorded_gpus(results_dir: Path | None = None) -> list[str]:
    """Names of the GPUs with recorded hardware measurements (empty when none)."""
    names = []
    for path in sorted(Path(results_dir or RESULTS_DIR).glob(f"*{HARDWARE_SUFFIX}")):
        try:
            names.append(json.loads(path.read_text())["gpu"])
        except (OSError, ValueError, KeyError):
            continue   # a damaged file is skipped, not fatal
    return names


def load_hardware(gpu: str | None = None, results_dir: Path | None = None) -> dict | None:
    """Recorded measurements for `gpu` (a name or slug); without one, the T4's, else the newest."""
    folder = Path(results_dir or RESULTS_DIR)
    records = []
    for path in sorted(folder.glob(f"*{HARDWARE_SUFFIX}")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    records = [r for r in records if isinstance(r, dict) and r.get("gpu")]
    if not records:
        return None
    if gpu:
        wanted = gpu_slug(gpu)
        matches = [r for r in records if gpu_slug(r["gpu"]) == wanted]
        return matches[0] if matches else None
    t4 = [r for r in records if spec_for(r["gpu"]) is SPECS["t4"]]
    if t4:
        return t4[0]
    return max(records, key=lambda r: r.get("date", ""))


def save_hardware(measurement: dict, results_dir: Path | None = None) -> Path:
    """Merge one measurement (copy_bandwidth or cublas) into its GPU's hardware file."""
    path = hardware_path(measurement["gpu"], results_dir)
    record: dict[str, Any] = {}
    if path.exists():
        try:
            record = json.loads(path.read_text())
        except ValueError:
            record = {}
    for key in ("gpu", "cuda_driver", "cuda_runtime", "cupy", "date"):
        record[key] = measurement[key]
    stored = {k: v for k, v in measurement.items() if k != "source"}
    record[measurement["kind"]] = stored
    with locked(path.parent):  # replaced whole or not at all (results.write_json)
        write_json(path, record, "hardware measurements", indent=2, sort_keys=True)
    return path


_EMPTY = {"copy_bandwidth": {"gbps": None}, "cublas": {"fp32": None, "fp16": None},
          "peaks": {"ffma": None, "mma_m16n8k8": None, "mma_m16n8k16": None, "mma_m16n8k8_tf32": None}}


def _recorded(kind: str, gpu: str | None, results_dir: Path | None) -> dict:
    """The recorded measurement of `kind`, labelled source='recorded', or a 'none' placeholder."""
    record = load_hardware(gpu, results_dir)
    if record and kind in record:
        return {**record[kind], "source": "recorded"}
    return {"kind": kind, **_EMPTY[kind], "source": "none", "gpu": gpu, "date": None,
            "note": NO_DATA}


def _median_seconds(cupy, func, args: tuple, n_repeat: int, n_warmup: int) -> float:
    """Median GPU time of func(*args) in seconds, timed with cupyx.profiler.benchmark."""
    benchmark = optional.module("cupyx.profiler").benchmark
    result = benchmark(func, args, n_repeat=n_repeat, n_warmup=n_warmup)
    return float(statistics.median(result.gpu_times[0]))


def measure_copy_bandwidth(nbytes: int = 1 << 28, n_repeat: int = 20, *, gpu: str | None = None,
                           save: bool = True, results_dir: Path | None = None) -> dict:
    """Device-to-device copy bandwidth in GB/s (bytes read + bytes written per second).

    On a GPU it is measured now (median of `n_repeat`) and recorded; without one the recorded
    value for `gpu` (default: the T4, else the newest) comes back with source 'recorded', or a
    placeholder with source 'none' and gbps None when nothing is recorded.
    """
    if not gpu_available():
        return _recorded("copy_bandwidth", gpu, results_dir)
    cupy = _cupy()
    n = nbytes // 4
    src = cupy.ones(n, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    seconds = _median_seconds(cupy, cupy.copyto, (dst, src), n_repeat, 3)
    info = _environment(cupy, device_info()["name"])
    out = {"kind": "copy_bandwidth", "gbps": 2 * n * 4 / seconds / 1e9, "nbytes": n * 4,
           "median_s": seconds, "n_repeat": n_repeat, **info, "source": "live"}
    if save:
        save_hardware(out, results_dir)
    return out


def measure_cublas(n: int = 4096, n_repeat: int = 20, *, gpu: str | None = None,
                   save: bool = True, results_dir: Path | None = None) -> dict:
    """cuBLAS (cupy.matmul) throughput on n x n x n: fp32 with TF32 off, and fp16 (tensor cores).

    Same contract as :func:`measure_copy_bandwidth`: live on a GPU (and recorded), else recorded.
    """
    if not gpu_available():
        return _recorded("cublas", gpu, results_dir)
    cupy = _cupy()
    tf32 = settings.cupy_tf32()
    out: dict[str, Any] = {"kind": "cublas", "n": n, "n_repeat": n_repeat}
    rng = cupy.random.default_rng(0)
    for label, dtype in (("fp32", cupy.float32), ("fp16", cupy.float16)):
        a = rng.standard_normal((n, n), dtype=cupy.float32).astype(dtype)
        b = rng.standard_normal((n, n), dtype=cupy.float32).astype(dtype)
        seconds = _median_seconds(cupy, cupy.matmul, (a, b), n_repeat, 3)
        out[label] = {"median_s": seconds, "tflops": gemm_flops(n, n, n) / seconds / 1e12}
    out["fp32"]["tf32"] = tf32
    out.update(_environment(cupy, device_info()["name"]), source="live")
    if save:
        save_hardware(out, results_dir)
    return out


PROBE_FILE = "kernels/probe/peak.cu"
# name expression, flops per thread per loop iteration (warp-level mma flops / 32), minimum arch
PROBES = {"ffma": ("ffma_peak<8>", 2 * 8 * 16, 0),
          "mma_m16n8k8": ("mma_peak<false>", 8 * 2 * 16 * 8 * 8 // 32, 75),
          "mma_m16n8k16": ("mma_peak<true>", 8 * 2 * 16 * 8 * 16 // 32, 80),
          "mma_m16n8k8_tf32": ("mma_tf32_peak<8>", 8 * 2 * 16 * 8 * 8 // 32, 80)}


def measure_peaks(iters: int = 4096, n_repeat: int = 10, *, gpu: str | None = None, save: bool = True,
                  results_dir: Path | None = None) -> dict:
    """Instruction-throughput ceilings in TFLOP/s: FFMA (fp32), mma.sync m16n8k8 / m16n8k16
    (fp16 in, fp32 accumulate) and m16n8k8 with TF32 inputs, from register-only probe kernels (kernels/probe/peak.cu) that fill
    every SM. On a GPU measured now (median of `n_repeat`) and recorded; else the recorded values.
    An instruction the GPU lacks (m16n8k16 before sm_80) gets None.
    """
    if not gpu_available():
        return _recorded("peaks", gpu, results_dir)
    cupy = _cupy()
    info = device_info()
    sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    grid, block = sms * 4, 256  # 32 warps per SM: enough to cover any pipe's latency
    out_buf = cupy.zeros(block, dtype=cupy.float32)
    source = assemble(PROBE_FILE)
    out: dict[str, Any] = {"kind": "peaks", "iters": iters, "grid": grid, "block": block, "n_repeat": n_repeat}
    cc = int(gpu.arch()[3:])
    for name, (expr, flops_per_iter, min_arch) in PROBES.items():
        if cc < min_arch:
            out[name] = None
            continue
        fn = gpu.GpuModule(source, expr, f"probe {expr}").function
        args = ((np.int32(iters), np.float32(0.999), np.float32(0.001), out_buf) if name == "ffma"
                else (np.int32(iters), out_buf))
        seconds = _median_seconds(cupy, lambda: fn((grid,), (block,), args), (), n_repeat, 2)
        out[name] = {"tflops": grid * block * iters * flops_per_iter / seconds / 1e12, "median_s": seconds}
    out.update(_environment(cupy, info["name"]), source="live")
    if save:
        save_hardware(out, results_dir)
    return out


def achievable(gpu: str | GpuSpec | None = None, results_dir: Path | None = None) -> dict | None:
    """Measured ceilings for a GPU: dram_gbps, fp32_tflops, fp16_tensor_tflops, label.

    This course's recorded measurements for that GPU win; else the published ones
    (:data:`REFERENCE_MEASURED`); else None.
    """
    spec = spec_for(gpu)
    name = spec.name if isinstance(gpu, GpuSpec) else gpu
    record = load_hardware(name, results_dir) if name else None
    if record is None and spec is not None:
        for candidate in recorded_gpus(results_dir):
            if spec_for(candidate) is spec:
                record = load_hardware(candidate, results_dir)
                break
    if record and "copy_bandwidth" in record and "cublas" in record:
        return {
            "dram_gbps": record["copy_bandwidth"]["gbps"],
            "fp32_tflops": record["cublas"]["fp32"]["tflops"],
            "fp16_tensor_tflops": record["cublas"]["fp16"]["tflops"],
            "label": f"{record['gpu']}, recorded {record['date']}",
        }
    if spec is not None and spec.key in REFERENCE_MEASURED:
        ref = REFERENCE_MEASURED[spec.key]
        return {**{k: ref[k] for k in ("dram_gbps", "fp32_tflops", "fp16_tensor_tflops")},
                "label": ref["source"]}
    return None
