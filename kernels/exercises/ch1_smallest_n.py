"""Chapter 1's exercise: below which size is a square GEMM memory-bound, whatever the kernel does?

The chapter computed a GPU's balance point (hardware.balance_point(tflops, gbps): FLOP per DRAM byte) and the
intensity of one GEMM, N = 4096 (hardware.gemm_intensity: A and B read once, C written once, the best any kernel
can do). Turn it around: write smallest_n(gpu, precision), the smallest integer N at which an N x N x N GEMM's
intensity reaches the GPU's balance point. `gpu` is a hardware.GpuSpec (gpu.fp32_tflops,
gpu.fp16_tensor_tflops, gpu.dram_gbps); `precision` is "fp32" (FFMA on the CUDA cores, 4-byte A, B and C) or
"fp16" (the tensor cores, 2-byte A, B and C). The check tries every GPU of hardware.SPECS in both precisions,
and a GPU that is in no table.
"""
import math

from gemmlab.measure import hardware

# ---- EXERCISE: smallest_n(gpu, precision) ----
def smallest_n(gpu, precision):
    return 0
# ---- END ----
