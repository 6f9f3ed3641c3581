"""Every step is right on any shape: hypothesis draws M, N, K (1, primes, off-tile, skinny).

On the CPU backend in CI (bounded: a few dozen launches per step); the GPU lane runs the same file
on the GPU backend, where `gemmlab.backend()` picks the GPU.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gemmlab
from gemmlab import registry
from gemmlab.measure.check import compare
from gemmlab.errors import ShapeError

PRIMES = [2, 3, 5, 7, 13, 31, 37, 61, 67, 127, 131]
size = st.one_of(st.integers(1, 150), st.sampled_from([1, *PRIMES]))
_kernels: dict[str, gemmlab.Kernel] = {}


def kernel_for(name: str) -> gemmlab.Kernel:
    if name not in _kernels:
        _kernels[name] = gemmlab.step(name)
    return _kernels[name]


def _allowed(kern, m, n, k):
    """(n, k) rounded up to the step's shape multiple (TMA's 8 for step 08), after checking that the
    shape as drawn is rejected before launch with a ShapeError when it is not one."""
    mult = kern.step.shape_multiple
    if n % mult or k % mult:
        a, b = np.zeros((m, k), kern.dtype), np.zeros((k, n), kern.dtype)
        with pytest.raises(ShapeError, match="multiples of"):
            kern(a, b)
    return -(-n // mult) * mult, -(-k // mult) * mult


@pytest.mark.parametrize("name", [s.name for s in registry.STEPS])
@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(m=size, n=size, k=size, seed=st.integers(0, 2**16))
def test_any_shape_matches_float64(name, m, n, k, seed):
    kern = kernel_for(name)
    n, k = _allowed(kern, m, n, k)
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(kern.dtype)
    b = rng.uniform(-1, 1, (k, n)).astype(kern.dtype)
    got = kern(a, b)  # NumPy in, NumPy out on either backend
    bad, _ = compare(got, a, b, kern.step.accumulate)
    assert not bad.any(), f"{name} wrong at {np.argwhere(bad)[:4].tolist()} for {m}x{n}x{k}"


@pytest.mark.parametrize("name", [s.name for s in registry.STEPS])
def test_tall_and_skinny_shapes(name):
    kern = kernel_for(name)
    for m, n, k in [(1, 300, 2), (300, 1, 3), (2, 3, 400), (257, 2, 1)]:
        n, k = _allowed(kern, m, n, k)
        a = np.linspace(-1, 1, m * k).reshape(m, k).astype(kern.dtype)
        b = np.linspace(1, -1, k * n).reshape(k, n).astype(kern.dtype)
        bad, _ = compare(np.asarray(kern(a, b)), a, b, kern.step.accumulate)
        assert not bad.any(), f"{name} wrong for {m}x{n}x{k}"
