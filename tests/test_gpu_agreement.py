"""GPU lane: the emulator cannot drift from the hardware. Same inputs, both backends, every step."""
import numpy as np
import pytest

import gemmlab
from gemmlab import gpu, registry
from gemmlab.check import compare, make_inputs, tile_of

pytestmark = pytest.mark.skipif(not gpu.available(), reason="needs a CUDA GPU (the GPU lane runs it)")


@pytest.mark.parametrize("name", [s.name for s in registry.STEPS])
def test_cpu_and_gpu_backends_agree(name, record_property):
    step = registry.get(name)
    if gpu.device()["cc"] < step.min_arch:
        pytest.skip(f"{name} needs sm_{step.min_arch}")
    on_cpu, on_gpu = gemmlab.step(name, backend="cpu"), gemmlab.step(name, backend="gpu")
    tm, tn, tk = tile_of(on_cpu.params)
    identical = []
    for m, n, k in [(tm + 3, 2 * tn + 1, 3 * tk + 5), (64, 64, 64)]:
        a, b = make_inputs("random", m, n, k, on_cpu.dtype, seed=1)
        c_cpu, c_gpu = on_cpu(a, b), on_gpu(a, b)  # NumPy in, NumPy out on both backends
        assert not compare(c_cpu, a, b, step.accumulate)[0].any(), "CPU result off the reference"
        assert not compare(c_gpu, a, b, step.accumulate)[0].any(), "GPU result off the reference"
        diff = np.abs(c_cpu.astype(np.float64) - c_gpu.astype(np.float64))
        identical.append(bool((diff == 0).all()))
        print(f"{name} {m}x{n}x{k}: max |cpu - gpu| = {diff.max():.3g}, bit-identical: {identical[-1]}")
    record_property("bit_identical", identical)
