"""Chapter 1, GPU hardware and the roofline: the spec sheets, the T4's measured ceilings, the launch arithmetic,
the roofline's bounds (the prediction) and the measured copy and cuBLAS rates (the measurement).

The chapter's record wrangling, glue() calls, figures and tables, one function per figure or table; the notebook
(book/01_gpu_hardware.ipynb) calls each once. The spec sheets and the measurements live in gemmlab.hardware, the
roofline plot in gemmlab.chapters.plots, the static control in gemmlab.sitecontrols: this module re-exports them.
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from gemmlab import hardware, sitecontrols
from gemmlab.chapters import plots
from gemmlab.chapters.glue import glue

SIZE = 4096
roofline_twin = sitecontrols.roofline_twin
WARP = 32                      # threads per warp
SUBPARTITIONS = 4              # an SM's sub-partitions (warp schedulers), on every GPU of the table
FP32_LANES = {"sm_75": 16,     # FP32 lanes per sub-partition: a Turing SM has 64 (Turing whitepaper),
              "sm_90": 32}     # a Hopper SM 128 (Hopper whitepaper)
FLOP_PER_FFMA = 2              # a x b + c: a multiply and an add


def warp_ffma_per_cycle(arch: str = "sm_90") -> int:
    """Warp-wide FFMAs an SM completes per cycle: its sub-partitions' FP32 lanes over the 32 threads of a warp."""
    return SUBPARTITIONS * FP32_LANES[arch] // WARP


def fp32_peak(spec) -> float:
    """A GPU's FP32 peak in TFLOP/s from its SM facts: SMs x FP32 lanes per SM x 2 FLOP x boost clock."""
    return spec.sms * SUBPARTITIONS * FP32_LANES[spec.arch] * FLOP_PER_FFMA * spec.boost_mhz / 1e6


def sm_peak() -> None:
    """Each reference GPU's FP32 peak computed from its SM (sub-partitions, lanes, clock) beside its spec sheet's."""
    for spec in hardware.SPECS.values():
        lanes = SUBPARTITIONS * FP32_LANES[spec.arch]
        print(f"{spec.name}: {SUBPARTITIONS} sub-partitions x {FP32_LANES[spec.arch]} FP32 lanes = {lanes} per SM "
              f"({warp_ffma_per_cycle(spec.arch)} warp FFMAs per cycle); {spec.sms} SMs x {lanes} x {FLOP_PER_FFMA} "
              f"FLOP x {spec.boost_mhz} MHz = {fp32_peak(spec):.1f} TFLOP/s (spec sheet {spec.fp32_tflops:.1f})")


def chapter_gpu(info: dict | None) -> str:
    """The GPU whose measurements this page shows: this machine's, else the GPU of the newest recorded ones."""
    if info:
        return info["name"]
    record = hardware.load_hardware()
    return record["gpu"] if record else hardware.NO_DATA


def your_gpu() -> dict | None:
    """Print this machine's GPU (through CuPy) or say there is none, then the three reference GPUs' spec sheets;
    glue the GPU this page's measurements come from. Returns the device's facts, or None without a GPU."""
    info = hardware.device_info()
    if info:
        print(f"your GPU: {info['name']} ({info['arch']}), {info['sms']} SMs, {info['max_threads_per_sm']} threads "
              f"and {info['regs_per_sm']} registers per SM, {info['smem_per_sm_kb']:.0f} KB shared memory per SM, "
              f"L2 {info['l2_mb']:.0f} MB")
    else:
        print("No GPU here. The reference table below stands in for one.")
    for row in hardware.spec_table():
        print(f"{row['name']:10s} {row['arch']}  {row['sms']:3d} SMs  {row['fp32_tflops']:6.1f} TFLOP/s fp32  "
              f"{row['fp16_tensor_tflops']:6.1f} TFLOP/s fp16 tensor  {row['dram_gbps']:6.0f} GB/s DRAM  "
              f"L2 {row['l2_mb']:g} MB  (spec sheet)")
    print("sources (the Hopper tensor-core figures are dense: half their sheets' 'with sparsity'):")
    for spec in hardware.SPECS.values():
        print(f"  {spec.name}: {spec.source}")
    glue("ch1_gpu", chapter_gpu(info))
    return info


def t4_table() -> None:
    """The T4's spec sheet beside what others measured on it (cuBLAS, a microbenchmark study); glues the figures."""
    t4, t4m = hardware.SPECS["t4"], hardware.REFERENCE_MEASURED["t4"]
    rows = [("DRAM bandwidth (GB/s)", t4.dram_gbps, t4m["dram_gbps"]),
            ("fp32 FFMA (TFLOP/s)", t4.fp32_tflops, t4m["fp32_tflops"]),
            ("fp16 tensor cores (TFLOP/s)", t4.fp16_tensor_tflops, t4m["fp16_tensor_tflops"])]
    print(f"{t4.name:28s} {'spec sheet':>10s} {'measured':>9s}  measured/spec")
    for label, spec, meas in rows:
        print(f"{label:28s} {spec:10.1f} {meas:9.1f}  {meas / spec:8.0%}")
    print("measured:", t4m["source"])
    glue("t4_sms", f"{t4.sms}")
    glue("t4_dram_spec", f"{t4.dram_gbps:.0f}"); glue("t4_dram_meas", f"{t4m['dram_gbps']:.0f}")
    glue("t4_fp32_spec", f"{t4.fp32_tflops:.1f}"); glue("t4_ffma_meas", f"{t4m['fp32_tflops']:.1f}")
    glue("t4_fp16_spec", f"{t4.fp16_tensor_tflops:.0f}"); glue("t4_hmma_meas", f"{t4m['fp16_tensor_tflops']:.1f}")
    glue("t4_smem_meas", f"{t4m['smem_gbps']:.0f}")
    glue("t4_smem_ratio", f"{t4m['smem_gbps'] / t4m['dram_gbps']:.1f}")
    glue("t4_smem_kb", f"{t4.smem_per_sm_kb}")


def waves(m: int = SIZE, n: int = SIZE, block=(32, 8)) -> None:
    """An m x n C, one thread per element, in blocks of `block` threads: blocks, warps, and the waves each
    reference GPU deals them out in when threads per SM are the only limit (a last, partial wave counts as one)."""
    threads = block[0] * block[1]
    blocks = (n // block[0]) * (m // block[1])
    print(f"{blocks} blocks of {threads} threads = {blocks * threads // WARP} warps")
    fill = {}   # (waves, last, slots) -> the GPUs that deal the grid out so
    for row in hardware.spec_table():
        resident = row["max_threads_per_sm"] // threads     # blocks per SM if threads are the only limit
        slots = row["sms"] * resident
        n_waves = -(-blocks // slots)                # a last, partial wave counts as one
        last = blocks - (n_waves - 1) * slots         # the blocks of that last wave
        warps = resident * threads // WARP
        occupancy = warps / (row["max_threads_per_sm"] // WARP)
        print(f"{row['name']}: at most {resident} blocks per SM ({warps} warps, occupancy {occupancy:.0%}), "
              f"{slots} at once, {n_waves} waves, the last {last} of {slots}")
        fill.setdefault((n_waves, last, slots), []).append(row["name"])
    (n_waves, last, slots), gpus = list(fill.items())[-1]   # the table's last GPU and those that deal alike
    glue("ch1_wave_gpu", " and ".join(gpus)); glue("ch1_waves", f"{n_waves}")
    glue("ch1_wave_last", f"{last}"); glue("ch1_wave_slots", f"{slots}")


def wave_of(blocks: int, sms: int, per_sm: int = 1) -> list[list[int]]:
    """Blocks dealt out in waves: wave w holds the blocks w x sms x per_sm onwards, one SM slot each, in order;
    the last wave is partial when the slots do not divide the blocks. Returns the block numbers of each wave."""
    slots = sms * per_sm
    return [list(range(start, min(start + slots, blocks))) for start in range(0, blocks, slots)]


def draw_waves(blocks: int = 10, sms: int = 4):
    """A grid of `blocks` blocks on `sms` SMs that hold one block each: one column per SM, one row per wave, each
    block a numbered square, the empty slots of the last wave dashed. Returns the axes."""
    waves_ = wave_of(blocks, sms)
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * sms, 0.9 + 0.8 * len(waves_)))
    for w, wave in enumerate(waves_):
        for s in range(sms):
            y = len(waves_) - 1 - w
            if s < len(wave):
                ax.add_patch(plt.Rectangle((s + 0.05, y + 0.05), 0.9, 0.9, color=f"C{w}"))
                ax.text(s + 0.5, y + 0.5, f"block {wave[s]}", ha="center", va="center", fontsize=8, color="white")
            else:
                ax.add_patch(plt.Rectangle((s + 0.05, y + 0.05), 0.9, 0.9, fill=False, linestyle="--",
                                           edgecolor="grey"))
    ax.set_xlim(0, sms); ax.set_ylim(0, len(waves_))
    ax.set_xticks([s + 0.5 for s in range(sms)], [f"SM {s}" for s in range(sms)])
    ax.set_yticks([len(waves_) - 1 - w + 0.5 for w in range(len(waves_))],
                  [f"wave {w + 1}" for w in range(len(waves_))])
    ax.tick_params(length=0); ax.set_frame_on(False)
    ax.set_title(f"{blocks} blocks on {sms} SMs, one block per SM at a time: {len(waves_)} waves, the last "
                 f"{len(waves_[-1])} of {sms}", fontsize=9)
    fig.tight_layout()
    return ax


def show_waves(blocks: int = 10, sms: int = 4) -> None:
    """The waves picture (draw_waves), for the page."""
    draw_waves(blocks, sms)
    plt.show()


def balance() -> None:
    """Balance points of the reference GPUs and the intensity of a 4096^3 fp32 GEMM; glues the T4's for the prose."""
    for row in hardware.spec_table():
        print(f"{row['name']}: balance point {row['balance_fp32']:.0f} FLOP/byte for fp32 FFMA, "
              f"{row['balance_fp16_tensor']:.0f} for fp16 tensor cores (spec sheet)")
    print(f"a {SIZE}^3 fp32 GEMM, A and B read once and C written once: "
          f"{hardware.gemm_intensity(SIZE, SIZE, SIZE):.0f} FLOP/byte")
    t4, t4m = hardware.SPECS["t4"], hardware.REFERENCE_MEASURED["t4"]
    bal_ffma = hardware.balance_point(t4m["fp32_tflops"], t4m["dram_gbps"])
    bal_hmma = hardware.balance_point(t4m["fp16_tensor_tflops"], t4m["dram_gbps"])
    glue("t4_bal_fp32", f"{t4.balance():.0f}")
    glue("t4_bal_fp16", f"{hardware.balance_point(t4.fp16_tensor_tflops, t4.dram_gbps):.0f}")
    glue("t4_bal_ffma_meas", f"{bal_ffma:.0f}"); glue("t4_bal_hmma_meas", f"{bal_hmma:.0f}")
    glue("t4_bal_ratio", f"{bal_hmma / bal_ffma:.1f}")
    glue("gemm4096_intensity", f"{hardware.gemm_intensity(SIZE, SIZE, SIZE):.0f}")
    glue("naive_intensity", f"{2 / (2 * 4):.2f}")   # one FMA (2 FLOP) per two 4-byte loads


def bounds(gpu: str, n: int = SIZE) -> dict[str, float]:
    """The roofline's upper bounds on `gpu` (spec sheet): a copy's GB/s, and an n^3 GEMM's TFLOP/s in fp32 and fp16
    (the lower of the arithmetic peak and bandwidth x intensity)."""
    spec = hardware.spec_for(gpu)
    if spec is None:
        raise ValueError(f"no spec sheet for {gpu!r}: use one of {[s.name for s in hardware.SPECS.values()]}")

    def roof(tflops: float, element_bytes: int) -> float:
        return min(tflops, spec.dram_gbps * hardware.gemm_intensity(n, n, n, element_bytes) / 1e3)
    return {"copy_gbps": spec.dram_gbps, "fp32": roof(spec.fp32_tflops, 4), "fp16": roof(spec.fp16_tensor_tflops, 2)}


def predict(gpu: str) -> None:
    """The prediction before the measurement: what the roofline allows a copy and cuBLAS on `gpu`."""
    spec = hardware.spec_for(gpu) or hardware.SPECS["t4"]
    b = bounds(spec.name)
    glue("ch1_spec_name", spec.name)
    glue("ch1_bound_copy", f"{b['copy_gbps']:.0f}")
    glue("ch1_bound_fp32", f"{b['fp32']:.1f}"); glue("ch1_bound_fp16", f"{b['fp16']:.1f}")
    print(f"roofline of the {spec.name} (spec sheet): a copy at most {b['copy_gbps']:.0f} GB/s; a {SIZE}^3 GEMM at "
          f"most {b['fp32']:.1f} TFLOP/s in fp32 and {b['fp16']:.1f} in fp16 (both compute-bound)")


def measure() -> tuple[dict, dict]:
    """Copy bandwidth and cuBLAS at 4096 (live on a GPU and recorded; else the records), printed beside the
    roofline's bounds and glued. Returns (copy, cublas)."""
    copy, blas = hardware.measure_copy_bandwidth(), hardware.measure_cublas()
    have = bool(copy.get("gbps") and blas.get("fp32"))
    spec = hardware.spec_for(copy.get("gpu"))
    where = f"{copy['gpu']} ({copy['source']}, {copy['date']})" if have else hardware.NO_DATA
    if have:
        print(f"{where}: copy {copy['gbps']:.0f} GB/s, cuBLAS fp32 {blas['fp32']['tflops']:.1f} TFLOP/s "
              f"(TF32 {'on' if blas['fp32'].get('tf32') else 'off'}), fp16 {blas['fp16']['tflops']:.1f} TFLOP/s")
    else:
        print(where)
    glue("ch1_where", where)
    glue("ch1_copy", f"{copy['gbps']:.0f}" if have else "n/a")
    glue("ch1_copy_pct", f"{copy['gbps'] / spec.dram_gbps:.0%}" if have and spec else "n/a")
    glue("ch1_fp32", f"{blas['fp32']['tflops']:.1f}" if have else "n/a")
    glue("ch1_fp16", f"{blas['fp16']['tflops']:.1f}" if have else "n/a")
    if have and spec:
        b = bounds(spec.name)
        glue("ch1_fp32_pct", f"{blas['fp32']['tflops'] / b['fp32']:.0%}")
        glue("ch1_fp16_pct", f"{blas['fp16']['tflops'] / b['fp16']:.0%}")
    else:
        glue("ch1_fp32_pct", "n/a"); glue("ch1_fp16_pct", "n/a")
    probes(spec)
    return copy, blas


def probes(spec=None) -> None:
    """The instruction probes (kernels/probe/peak.cu: registers only, every SM full) of the page's GPU, live or
    recorded: what FFMA alone and the fp16 tensor-core instruction alone reach; printed and glued."""
    peaks = hardware.measure_peaks() if spec else {}
    ffma, mma = peaks.get("ffma"), peaks.get("mma_m16n8k16")
    if not (ffma and mma):
        glue("ch1_probe_ffma", "n/a"); glue("ch1_probe_ffma_pct", "n/a"); glue("ch1_probe_mma", "n/a")
        glue("ch1_probe_mma_pct", "n/a")
        return
    print(f"probes ({peaks['gpu']}, {peaks['source']}, {peaks['date']}): FFMA alone {ffma['tflops']:.1f} TFLOP/s, "
          f"fp16 mma.sync alone {mma['tflops']:.1f} TFLOP/s")
    glue("ch1_probe_ffma", f"{ffma['tflops']:.1f}")
    glue("ch1_probe_ffma_pct", f"{ffma['tflops'] / spec.fp32_tflops:.0%}")
    glue("ch1_probe_mma", f"{mma['tflops']:.1f}")
    glue("ch1_probe_mma_pct", f"{mma['tflops'] / spec.fp16_tensor_tflops:.0%}")


def roofline_points(copy: dict, blas: dict, gpu: str) -> list[tuple[str, float, float]]:
    """cuBLAS's measured rates at 4096 as (label, FLOP/byte, TFLOP/s), when they were measured on `gpu`."""
    if not (copy.get("gbps") and blas.get("fp32")) or hardware.spec_for(copy.get("gpu")) is not hardware.spec_for(gpu):
        return []
    return [(f"cuBLAS fp32 {SIZE}", hardware.gemm_intensity(SIZE, SIZE, SIZE), blas["fp32"]["tflops"]),
            (f"cuBLAS fp16 {SIZE}", hardware.gemm_intensity(SIZE, SIZE, SIZE, 2), blas["fp16"]["tflops"])]


def draw_roofline(info: dict | None, copy: dict, blas: dict):
    """Two rooflines: the page's GPU (this machine's, else the records') with cuBLAS on it, and the T4. Returns the
    two axes."""
    def known(name):
        return name if name and hardware.spec_for(name) else None

    gpu = known(info and info["name"]) or known(copy.get("gpu")) or "t4"
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    plots.roofline(axes[0], gpu, roofline_points(copy, blas, gpu))
    plots.roofline(axes[1], "t4")
    fig.tight_layout()
    return axes


def roofline(info: dict | None, copy: dict, blas: dict) -> None:
    """Draw and show the two rooflines (draw_roofline)."""
    draw_roofline(info, copy, blas)
    plt.show()
