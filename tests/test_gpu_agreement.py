"""GPU lane: the emulator cannot drift from the hardware. Same inputs, both backends, every step."""
import numpy as np
import pytest

import gemmlab
from gemmlab import fusion, gpu, registry
from gemmlab.measure.check import compare, make_inputs, tile_of

pytestmark = pytest.mark.skipif(not gpu.available(), reason="needs a CUDA GPU (the GPU lane runs it)")


@pytest.mark.parametrize("name", [s.name for s in registry.STEPS])
def test_cpu_and_gpu_backends_agree(name, record_property):
    step = registry.get(name)
    if not step.runs_on(gpu.device()["cc"]):
        pytest.skip(f"{name} needs {step.arch_label}")
    on_cpu, on_gpu = gemmlab.step(name, backend="cpu"), gemmlab.step(name, backend="gpu")
    tm, tn, tk = tile_of({**step.fixed_tile, **on_cpu.params})
    up = lambda x: -(-x // step.shape_multiple) * step.shape_multiple  # noqa: E731 (step 08: N, K multiples of 8)
    identical = []
    for m, n, k in [(tm + 3, up(2 * tn + 1), up(3 * tk + 5)), (64, 64, 64)]:
        a, b = make_inputs("random", m, n, k, on_cpu.dtype, seed=1)
        c_cpu, c_gpu = on_cpu(a, b), on_gpu(a, b)  # NumPy in, NumPy out on both backends
        assert not compare(c_cpu, a, b, step.accumulate)[0].any(), "CPU result off the reference"
        assert not compare(c_gpu, a, b, step.accumulate)[0].any(), "GPU result off the reference"
        diff = np.abs(c_cpu.astype(np.float64) - c_gpu.astype(np.float64))
        identical.append(bool((diff == 0).all()))
        print(f"{name} {m}x{n}x{k}: max |cpu - gpu| = {diff.max():.3g}, bit-identical: {identical[-1]}")
    record_property("bit_identical", identical)


@pytest.mark.parametrize("name", [s.name for s in fusion.FUSED_STEPS])
def test_fused_steps_agree_and_handle_offset_views(name):
    """Every fused step on both backends against float64; on the GPU also inputs that start 4 bytes
    past a 16-byte boundary (a row-offset view), which step 05 must not feed to its cp.async path."""
    import cupy

    st = fusion.get(name)
    if not st.runs_on(gpu.device()["cc"]):
        pytest.skip(f"{name} needs {st.arch_label}")
    on_cpu, on_gpu = fusion.step(name, backend="cpu"), fusion.step(name, backend="gpu")
    for kind, dims in [("identity", (64, 64, 64, 64)), ("random", (67, 33, 70, 129)), ("random", (96, 128, 64, 160))]:
        dims = st.fit(dims)  # step 07 (TMA): K, L, N multiples of 4
        a, b, c = fusion.make_inputs(kind, *dims, seed=2)
        e_cpu, e_gpu = np.asarray(on_cpu(a, b, c)), on_gpu(a, b, c)
        assert not fusion.compare(e_cpu, a, b, c)[0].any(), f"CPU result off the reference at {dims}"
        assert not fusion.compare(e_gpu, a, b, c)[0].any(), f"GPU result off the reference at {dims}"
        print(f"{name} {kind} {dims}: max |cpu - gpu| = {np.abs(e_cpu.astype(np.float64) - e_gpu).max():.3g}")
    a, b, c = fusion.make_inputs("random", 65, 64, 64, 64, seed=3)
    # row 1 of a 65 x 65 array starts 260 bytes in: C-contiguous, not 16-byte aligned
    host = np.random.default_rng(5).uniform(-1, 1, (65, 65)).astype(np.float32)
    dev = cupy.asarray(host)[1:, 1:]  # not contiguous: rejected
    with pytest.raises(fusion.InputError, match="C-contiguous"):
        on_gpu(dev, cupy.asarray(b), cupy.asarray(c))
    flat = cupy.asarray(np.concatenate([[0.0], a[1:].ravel()]).astype(np.float32))[1:].reshape(64, 64)
    assert flat.data.ptr % 16 == 4
    e = cupy.asnumpy(on_gpu(flat, cupy.asarray(b), cupy.asarray(c)))
    assert not fusion.compare(e, a[1:], b, c)[0].any(), "an offset view gave a wrong result"


@pytest.mark.parametrize("grid", [None, 3])
def test_step08_counters_end_at_zero(grid):
    """fused/08's counters: each launch must leave every one at zero (the next launch waits on them), also
    with fewer blocks than tiles; two launches on different inputs in a row both match float64."""
    import cupy

    st = fusion.get("fused/08_tile_flags")
    if not st.runs_on(gpu.device()["cc"]):
        pytest.skip(f"{st.name} needs {st.arch_label}")
    for params in ({}, {"BLOCK_N": 64, "SPLIT_K": 2, "NUM_STAGES": 6}):
        kern = fusion.step(st.name, backend="gpu", **params)
        for seed, dims in enumerate([(200, 136, 264, 40), (256, 256, 256, 256)]):
            a, b, c = fusion.make_inputs("random", *dims, seed=seed)
            da, db, dc = (cupy.asarray(x) for x in (a, b, c))
            e = cupy.zeros((dims[0], dims[3]), dtype=cupy.float32)
            kern.run(da, db, dc, e, grid=grid)
            bad, _ = fusion.compare(cupy.asnumpy(e), a, b, c)
            assert not bad.any(), f"{kern.label} grid {grid} {dims}: {int(bad.sum())} elements off"
            counters = kern.workspace(cupy, dims[0], dims[2])[1]
            assert int(counters.max()) == 0, f"{kern.label} left counters at {cupy.asnumpy(counters).max()}"
