"""Chapter 1's exercise, the course's solution (see ../ch1_smallest_n.py)."""
import math

from gemmlab.measure import hardware

# ---- EXERCISE: smallest_n(gpu, precision) ----
def smallest_n(gpu, precision):
    tflops, size = (gpu.fp32_tflops, 4) if precision == "fp32" else (gpu.fp16_tensor_tflops, 2)
    balance = hardware.balance_point(tflops, gpu.dram_gbps)
    # an N^3 GEMM does 2 N^3 FLOP and moves size * 3 N^2 bytes: intensity 2 N / (3 size) >= balance
    return math.ceil(1.5 * size * balance)
# ---- END ----
