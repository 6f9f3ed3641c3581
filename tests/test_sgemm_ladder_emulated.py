"""The register-tiling ladder (sgemm 04-10), run by the CPU emulator, matches float64 on shapes off the tile grid.

Each step runs at its default configuration and at one small one, on shapes that are not multiples
of any tile: K % 4 != 0 takes the scalar path of the float4 steps, and 256 x 136 x 36 is
float4-aligned but ends mid-tile. C starts as NaN, so an output the kernel never writes fails, and
a NaN never passes the tolerance.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

cpu = pytest.importorskip("gemmlab.runtime.cpu", reason="the CPU emulator (gemmlab/runtime/cpu.py) is not there yet")

from gemmlab import registry, source  # noqa: E402
from gemmlab.errors import ConfigError  # noqa: E402

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the CPU emulator needs g++")

EPS = 2.0 ** -24  # unit roundoff of float32


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Spec:
    """What this test needs of a step; checked against gemmlab.registry once the step is there."""

    symbol: str
    params: tuple[str, ...]  # template-argument order
    defaults: tuple[int, ...]
    small: tuple[int, ...]  # a small configuration: several blocks even on 17 x 33
    threads: Callable[[dict], int]
    shared: Callable[[dict], int] = lambda p: 0  # dynamic shared memory bytes (0: static only)

    def launch(self, m: int, n: int, p: dict) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """grid (cdiv(N, BLOCK_N), cdiv(M, BLOCK_M)), block (threads): the same for every step here."""
        return (cdiv(n, p["BLOCK_N"]), cdiv(m, p["BLOCK_M"]), 1), (self.threads(p), 1, 1)


LADDER = {
    "sgemm/04_1d_blocktiling": Spec(
        "sgemm_1d_blocktiling", ("BLOCK_M", "BLOCK_N", "BLOCK_K", "THREAD_M"),
        (64, 64, 8, 8), (16, 16, 4, 4),
        lambda p: p["BLOCK_M"] // p["THREAD_M"] * p["BLOCK_N"]),
    "sgemm/05_2d_blocktiling": Spec(
        "sgemm_2d_blocktiling", ("BLOCK_M", "BLOCK_N", "BLOCK_K", "THREAD_M", "THREAD_N"),
        (128, 128, 8, 8, 8), (32, 16, 8, 4, 2),
        lambda p: (p["BLOCK_M"] // p["THREAD_M"]) * (p["BLOCK_N"] // p["THREAD_N"])),
    "sgemm/06_vectorized": Spec(
        "sgemm_vectorized", ("BLOCK_M", "BLOCK_N", "BLOCK_K", "THREAD_M", "THREAD_N"),
        (128, 128, 8, 8, 8), (32, 64, 4, 8, 4),  # 64 threads for 32 float4s of A: some stage none
        lambda p: (p["BLOCK_M"] // p["THREAD_M"]) * (p["BLOCK_N"] // p["THREAD_N"])),
    "sgemm/07_warptiling": Spec(
        "sgemm_warptiling", ("BLOCK_M", "BLOCK_N", "BLOCK_K", "WARP_M", "WARP_N", "THREAD_M", "THREAD_N"),
        (128, 128, 8, 64, 32, 8, 8), (32, 64, 8, 32, 32, 4, 8),  # 2 warps, 1 x 2 pieces per thread
        lambda p: (p["BLOCK_M"] // p["WARP_M"]) * (p["BLOCK_N"] // p["WARP_N"]) * 32),
    "sgemm/08_register_prefetch": Spec(
        "sgemm_register_prefetch", ("BLOCK_M", "BLOCK_N", "BLOCK_K", "WARP_M", "WARP_N", "THREAD_M", "THREAD_N"),
        (128, 128, 16, 64, 32, 8, 8), (32, 64, 8, 32, 32, 4, 8),  # registry default BLOCK_K=16; 2 float4s of B
        lambda p: (p["BLOCK_M"] // p["WARP_M"]) * (p["BLOCK_N"] // p["WARP_N"]) * 32),
    "sgemm/09_double_buffer": Spec(
        "sgemm_double_buffer", ("BLOCK_M", "BLOCK_N", "BLOCK_K", "WARP_M", "WARP_N", "THREAD_M", "THREAD_N"),
        (128, 128, 16, 64, 32, 8, 8), (32, 64, 8, 32, 32, 4, 8),  # as 08, two shared buffers
        lambda p: (p["BLOCK_M"] // p["WARP_M"]) * (p["BLOCK_N"] // p["WARP_N"]) * 32),
    "sgemm/10_cp_async": Spec(
        "sgemm_cp_async",
        ("BLOCK_M", "BLOCK_N", "BLOCK_K", "WARP_M", "WARP_N", "THREAD_M", "THREAD_N", "NUM_STAGES"),
        (128, 128, 16, 64, 32, 8, 8, 3), (32, 64, 8, 32, 32, 4, 8, 2),  # 2 warps, 2 stages
        lambda p: (p["BLOCK_M"] // p["WARP_M"]) * (p["BLOCK_N"] // p["WARP_N"]) * 32,
        # NUM_STAGES x (sA: BLOCK_M x (BLOCK_K + 4) floats, rows padded; sB: BLOCK_K x BLOCK_N floats)
        lambda p: p["NUM_STAGES"] * 4 * (p["BLOCK_M"] * (p["BLOCK_K"] + 4) + p["BLOCK_K"] * p["BLOCK_N"])),
}
# (M, N, K). The last one is aligned (K % 4 == N % 4 == 0) but ends mid-tile in every dimension:
# float4 loads beside zero-filled ones in the same tile.
SHAPES = [(1, 1, 1), (17, 33, 65), (128, 128, 128), (200, 72, 130), (257, 129, 64), (256, 136, 36)]
CONFIGS = [(name, which) for name in LADDER for which in ("default", "small")]


def params_of(name: str, which: str) -> dict:
    spec = LADDER[name]
    return dict(zip(spec.params, spec.defaults if which == "default" else spec.small))


def registered(name: str):
    """The registry's step, or None while its entry has not been added yet."""
    try:
        return registry.get(name)
    except ConfigError:
        return None


_MODULES: dict = {}


def module_for(name: str, params: dict):
    key = (name, tuple(params.values()))
    if key not in _MODULES:
        spec = LADDER[name]
        expr = f"{spec.symbol}<{', '.join(str(v) for v in params.values())}>"
        _MODULES[key] = cpu.compile_kernel(source.assemble(f"{name}.cu"), expr, label=f"{name}.cu")
    return _MODULES[key]


def check(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """|got - A@B| <= 2 K u (|A| @ |B|) + u |A@B| element-wise (u = 2^-24), in float64; NaN fails."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64 @ b64
    k = a.shape[1]
    tol = 2 * k * EPS * (np.abs(a64) @ np.abs(b64)) + EPS * np.abs(want)
    err = np.abs(got.astype(np.float64) - want)
    ok = err <= tol  # False wherever got is NaN
    if not ok.all():
        bad = np.argwhere(~ok)[:5]
        first = ", ".join(f"({r}, {c}, {got[r, c]!r}, {want[r, c]!r})" for r, c in bad)
        raise AssertionError(f"{(~ok).sum()} of {ok.size} outputs wrong; first (row, col, got, want): {first}")


@pytest.mark.parametrize("name,which", CONFIGS, ids=[f"{n.split('/')[1]}-{w}" for n, w in CONFIGS])
def test_ladder_step_matches_float64(name, which):
    spec, params = LADDER[name], params_of(name, which)
    module = module_for(name, params)
    rng = np.random.default_rng(sum(map(ord, name)) + len(which))
    for m, n, k in SHAPES:
        a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        c = np.full((m, n), np.nan, np.float32)  # every output must be written
        grid, block = spec.launch(m, n, params)
        cpu.launch(module, grid, block, [np.int32(m), np.int32(n), np.int32(k), a, b, c], spec.shared(params))
        try:
            check(c, a, b)
        except AssertionError as e:
            raise AssertionError(f"{name} {params} on M={m}, N={n}, K={k}: {e}") from None


def test_identity_reveals_layout():
    """A = I (M = K): C must equal B exactly; a failure here is a layout bug, not rounding."""
    m = n = k = 72
    for name in LADDER:
        params = params_of(name, "small")
        a = np.eye(m, k, dtype=np.float32)
        b = np.arange(k * n, dtype=np.float32).reshape(k, n)
        c = np.full((m, n), np.nan, np.float32)
        grid, block = LADDER[name].launch(m, n, params)
        cpu.launch(module_for(name, params), grid, block, [np.int32(m), np.int32(n), np.int32(k), a, b, c],
                   LADDER[name].shared(params))
        assert np.array_equal(c, b), f"{name} {params}: C != B for A = identity"


def test_nan_in_the_check_never_passes():
    a = np.ones((2, 3), np.float32)
    b = np.ones((3, 2), np.float32)
    got = np.full((2, 2), 3.0, np.float32)
    check(got, a, b)
    got[1, 0] = np.nan
    with pytest.raises(AssertionError, match=r"\(1, 0, "):
        check(got, a, b)


@pytest.mark.parametrize("name", list(LADDER))
def test_registry_entry_agrees(name):
    """Once the lead adds the step to gemmlab.registry, its symbol, parameters and launch match these."""
    step = registered(name)
    if step is None:
        pytest.skip(f"{name} is not in gemmlab.registry yet")
    spec = LADDER[name]
    assert step.symbol == spec.symbol
    assert tuple(step.params) == spec.params
    assert tuple(p.default for p in step.params.values()) == spec.defaults
    for which in ("default", "small"):
        params = params_of(name, which)
        assert step.rules(params) == [], f"{name} {params}: {step.rules(params)}"
        for m, n, k in SHAPES:
            launch = step.launch(m, n, k, params)
            assert (launch.grid, launch.block) == spec.launch(m, n, params)
            assert launch.shared_bytes == spec.shared(params)
