"""Facts about the hardware, in one place: what one block may use on each architecture (ARCH_LIMITS), what an SM
holds at once (SM_LIMITS, blocks_per_sm), the arithmetic an SM does per clock (FLOP_PER_CLOCK_PER_SM) and the GPUs'
spec sheets (SPECS). Every other module reads them from here (nvrtc's fit, the emulator's limits, the steps' rules,
the occupancy of a persistent grid, the benchmark's time estimate, the roofline)."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError

KB = 1024
STATIC_SMEM = 48 * KB        # static shared memory one block may declare, every architecture here
T4_SHARED_LIMIT = 64 * KB    # bytes of shared memory one block may use on sm_75
HOPPER_SMEM = 227 * KB       # what one block may opt in to on sm_90 (H100, H200)
CPU_SMEM_LIMIT = HOPPER_SMEM  # the emulator allows what an H100 block may opt in to
REGISTER_UNIT = 256  # registers are given to a warp in units of 256 (8 a thread) on sm_75 to sm_90


@dataclass(frozen=True)
class ArchLimits:
    """What one block may use on an architecture (CUDA C++ Programming Guide, "Technical Specifications
    per Compute Capability"): the limits a launch fails on, whatever the compiler made of the kernel."""

    name: str                       # "a T4" in "fits a T4"
    shared_optin: int               # static + dynamic shared memory per block, opted in
    shared_static: int = STATIC_SMEM  # static shared memory per block
    registers_per_block: int = 65536  # the register file of an SM, the most one block may take
    registers_per_thread: int = 255
    threads_per_block: int = 1024


ARCH_LIMITS = {
    "sm_75": ArchLimits("a T4", T4_SHARED_LIMIT),
    "sm_80": ArchLimits("sm_80 (A100)", 163 * KB),
    "sm_86": ArchLimits("sm_86", 99 * KB),
    "sm_89": ArchLimits("sm_89", 99 * KB),
    "sm_90": ArchLimits("sm_90 (H100, H200)", HOPPER_SMEM),
}


def arch_limits(arch: str) -> ArchLimits:
    """The per-block limits of `arch` ("sm_75"; "sm_90a" is sm_90's); a ConfigError for an unknown one."""
    key = arch[:-1] if arch.endswith("a") else arch
    if key not in ARCH_LIMITS:
        raise ConfigError(f"no per-block limits are recorded for {arch}; the known architectures are "
                          f"{', '.join(ARCH_LIMITS)} (nvrtc.ARCH_LIMITS)")
    return ARCH_LIMITS[key]


def register_allocation(registers: int, threads: int) -> int:
    """Registers a block takes from the SM: each warp's 32 x `registers`, rounded up to REGISTER_UNIT."""
    warps = -(-threads // 32)
    return warps * -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT


# Per-SM limits used for occupancy, by compute capability (CUDA C++ Programming Guide, table of
# technical specifications): registers, resident threads, resident blocks, shared memory in bytes.
SM_LIMITS = {75: (65536, 1024, 16, 64 * KB), 80: (65536, 2048, 32, 164 * KB),
             86: (65536, 1536, 16, 100 * KB), 89: (65536, 1536, 24, 100 * KB),
             90: (65536, 2048, 32, 228 * KB)}


def blocks_per_sm(registers: int, threads: int, shared_bytes: int, cc: int = 90) -> tuple[int, str]:
    """Resident blocks per SM and the resource that limits them (registers are allocated per warp
    in units of 256, i.e. per thread rounded up to a multiple of 8)."""
    regs_sm, threads_sm, blocks_sm, smem_sm = SM_LIMITS[cc]
    regs_per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    warps = -(-threads // 32)
    limits = {"registers": regs_sm // max(regs_per_warp * warps, 1), "threads": threads_sm // threads,
              "blocks": blocks_sm, "shared memory": smem_sm // shared_bytes if shared_bytes else blocks_sm}
    limiter = min(limits, key=limits.get)
    return limits[limiter], limiter


# FLOP per clock per SM by compute capability (x 10), for a GPU the spec table lacks: fp16 on the tensor
# cores with fp32 accumulation, and fp32 FFMA (two FLOP per lane per clock).
FLOP_PER_CLOCK_PER_SM = {"float16": {70: 1024, 75: 1024, 80: 2048, 86: 1024, 89: 1024, 90: 4096},
                         "float32": {70: 128, 75: 128, 80: 128, 86: 256, 89: 256, 90: 256}}


def balance_point(tflops: float, gbps: float) -> float:
    """FLOP per byte needed to keep `tflops` of arithmetic busy on `gbps` of bandwidth."""
    return tflops * 1e12 / (gbps * 1e9)


@dataclass(frozen=True)
class GpuSpec:
    """Spec-sheet numbers of one GPU model (peaks at boost clock, dense, no sparsity)."""

    key: str
    name: str
    arch: str
    sms: int
    dram_gbps: float            # DRAM bandwidth, GB/s
    fp32_tflops: float          # FFMA on the CUDA cores
    fp16_tensor_tflops: float   # fp16 inputs on the tensor cores, fp32 accumulation
    memory_gb: int
    l2_mb: float
    smem_per_sm_kb: int         # shared memory (carved out of L1) per SM
    smem_per_block_kb: int      # the most one block may opt in to
    regs_per_sm: int            # 32-bit registers
    max_threads_per_sm: int
    boost_mhz: int
    source: str

    def balance(self, tflops: float | None = None, gbps: float | None = None) -> float:
        """FLOP per DRAM byte at which this GPU turns from memory- to compute-bound."""
        return balance_point(tflops or self.fp32_tflops, gbps or self.dram_gbps)


# Public data sheets. T4: "NVIDIA T4 Tensor Core GPU" data sheet and the Turing architecture
# whitepaper; H100 SXM5 and H200 SXM: NVIDIA's product pages / H100 architecture whitepaper.
# The sheets quote tensor throughput "with sparsity"; the dense figure, used here, is half of it.
SPECS: dict[str, GpuSpec] = {
    "t4": GpuSpec("t4", "Tesla T4", "sm_75", 40, 320.0, 8.1, 65.0, 16, 4.0, 64, 64, 65536, 1024,
                  1590, "NVIDIA T4 data sheet; Turing whitepaper"),
    "h100-sxm": GpuSpec("h100-sxm", "H100 SXM5", "sm_90", 132, 3350.0, 67.0, 989.4, 80, 50.0, 228,
                        227, 65536, 2048, 1980, "NVIDIA H100 data sheet (SXM5); Hopper whitepaper"),
    "h200": GpuSpec("h200", "H200 SXM", "sm_90", 132, 4800.0, 67.0, 989.4, 141, 50.0, 228, 227,
                    65536, 2048, 1980, "NVIDIA H200 product page (SXM)"),
}
