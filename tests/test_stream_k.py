"""Step 12 (sm_90a: the last wave's tiles shared out by k tiles, stream-K) without a Hopper GPU. The CPU
backend sizes a persistent grid for an H100 (132 blocks), so a test problem never has a last wave there; these
tests stand in a GPU of a few SMs (gpu.device), which gives the grid those few blocks: then a tile of the last
wave is cut between blocks, handed over through `partials` and finished by the block that holds its end."""
import numpy as np
import pytest

import gemmlab
from gemmlab import registry
from gemmlab.measure.check import make_inputs, run_on_inputs
from gemmlab.runtime import gpu

STEP = "hgemm/12_stream_k"


@pytest.fixture
def sms(monkeypatch):
    """stand_in(n): the live GPU is an sm_90 one with n SMs (only the grid's size reads it on the CPU backend)."""
    def stand_in(n: int):
        monkeypatch.setattr(gpu, "available", lambda: True)
        monkeypatch.setattr(gpu, "device", lambda: {"cc": 90, "name": f"a stand-in with {n} SMs", "sms": n,
                                                    "shared_per_block_optin": 232448})
    return stand_in


def schedule(tiles: int, grid: int, num_k: int, max_split: int, min_gain: int = 1) -> list[list[tuple]]:
    """The kernel's schedule in Python: each block's (tile, k_begin, k_end) in its order (as `unit` in the .cu)."""
    share = max_split > 1 and num_k * (grid - tiles % grid) >= min_gain * grid
    split = tiles % grid if share else 0
    whole, blocks = tiles - split, min(grid, split * max_split)
    start = lambda j: split * num_k * j // max(blocks, 1)  # noqa: E731
    out = []
    for b in range(grid):
        units = [(t, 0, num_k) for t in range(b, whole, grid)]
        if b < blocks and start(b) < start(b + 1):
            begin, end = start(b), start(b + 1)
            first, last = begin // num_k, (end - 1) // num_k
            units.append((whole + last, max(begin - last * num_k, 0), end - last * num_k))
            if first != last:
                units.append((whole + first, begin - first * num_k, num_k))
        out.append(units)
    return out


@pytest.mark.parametrize("tiles,grid,num_k,max_split", [(8, 6, 6, 4), (12, 5, 7, 4), (512, 132, 64, 4),
                                                        (2048, 132, 128, 4), (133, 132, 64, 4), (133, 132, 2, 8),
                                                        (20, 6, 1, 4), (10, 4, 9, 1), (7, 7, 3, 4)])
def test_the_schedule_covers_every_k_tile_once_and_waits_only_backwards(tiles, grid, num_k, max_split):
    """Every (tile, k tile) once; a block's range is at most a tile long (two units at most after its whole
    tiles); a tile's finishing unit is the last of its units, held by the highest block, and a block hands over
    before it finishes; no block shares a tile with more than MAX_SPLIT - 1 others."""
    plan = schedule(tiles, grid, num_k, max_split)
    seen = np.zeros((tiles, num_k), int)
    holders: dict[int, list[int]] = {}
    for b, units in enumerate(plan):
        handed = False
        for tile, k0, k1 in units:
            seen[tile, k0:k1] += 1
            holders.setdefault(tile, []).append(b)
            if k1 < num_k:
                assert not handed, "a block hands over at most one part (its slot of partials)"
                handed = True
            elif k0 > 0:
                assert units[-1] == (tile, k0, k1), "a block finishes after it has handed over"
    assert (seen == 1).all()
    for tile, blocks in holders.items():
        assert len(blocks) <= max(max_split, 1)
        ends = [b for b in blocks if any(t == tile and k1 == num_k for t, _, k1 in plan[b])]
        assert ends == [max(blocks)], "the block that ends a tile has the highest index of its holders"
    if tiles % grid and max_split > 1 and tiles > grid:
        busy = [sum(k1 - k0 for _, k0, k1 in units) for units in plan]
        assert max(busy) - min(busy) <= 1 + (num_k if tiles % grid * max_split < grid else 0)


@pytest.mark.parametrize("tiles,grid,num_k,shared", [(512, 132, 64, False), (2048, 132, 128, True),
                                                     (1152, 132, 96, True), (133, 132, 8, False)])
def test_the_last_round_is_shared_only_when_it_saves_min_gain(tiles, grid, num_k, shared):
    """MIN_GAIN = 16: 4096 on an H200 (512 tiles of 64 k tiles on 132 SMs) saves 7.8 k tiles per block: dealt
    whole; 8192 (2048 tiles of 128) saves 62, 6144 (1152 tiles of 96) 26: shared."""
    plan = schedule(tiles, grid, num_k, 4, min_gain=16)
    assert any(k1 - k0 < num_k for units in plan for _, k0, k1 in units) == shared
    assert plan == schedule(tiles, grid, num_k, 1) or shared


@pytest.mark.parametrize("n_sms,m,n,k,params", [
    (6, 500, 520, 400, dict(BLOCK_N=128, NUM_STAGES=2, MIN_GAIN=1)),   # 20 tiles on 6 SMs: 2 shared by 6 blocks
    (5, 1000, 264, 520, dict(BLOCK_N=128, NUM_STAGES=3, MIN_GAIN=1)),  # 24 tiles, 9 k tiles: ranges across two tiles
    (7, 384, 520, 384, dict(BLOCK_N=256, NUM_STAGES=2, MAX_SPLIT=2, MIN_GAIN=1)),  # 9 tiles: 2 shared, two blocks each
    (3, 256, 264, 648, dict(BLOCK_N=128, NUM_STAGES=2, MAX_SPLIT=8, GROUP_M=1)),  # 6 tiles: no last wave
    (6, 500, 520, 1544, dict(BLOCK_N=128, NUM_STAGES=2)),  # MIN_GAIN 16: 25 k tiles x 4 idle / 6 SMs = 16.7, shared
])
def test_every_k_tile_once_on_a_gpu_of_few_sms(sms, n_sms, m, n, k, params):
    sms(n_sms)
    kern = gemmlab.step(STEP, backend="cpu", **params)
    assert kern.launch_config(m, n, k).grid[0] == n_sms
    for kind in ("random", "inf", "ones"):
        a, b = make_inputs(kind, m, n, k, np.float16)
        got = kern(a, b)
        bad, _ = gemmlab.check.compare(got, a, b, "float32")
        assert not bad.any(), kind


def test_verify_adds_shapes_with_a_last_round_on_a_gpu(sms):
    """On the GPU backend, verify's cases include two shapes of about 1.2 tiles per SM, off the tile grid; run
    here on the CPU backend as a GPU of 9 SMs would."""
    sms(9)
    params = {"BLOCK_N": 128, "MAX_SPLIT": 4, "MIN_GAIN": 16}
    cases = registry.get(STEP).more_cases(params, "gpu")
    assert [c[0] for c in cases] == ["random", "inf"]
    kind, m, n, k = cases[0]
    tiles, k_tiles = -(-m // 128) * -(-n // 128), -(-k // 64)
    assert tiles > 9 and tiles % 9 and m % 128 and n % 128 and k % 64
    assert k_tiles * (9 - tiles % 9) >= 16 * 9  # sharing pays, by the kernel's rule
    assert registry.get(STEP).more_cases(params, "cpu") == []
    kern = gemmlab.step(STEP, backend="cpu", BLOCK_N=128, NUM_STAGES=2)
    report = gemmlab.check.verify(kern, cases=[gemmlab.check.Case(*c) for c in cases])
    assert report.passed


def _mutant(old, new, **params):
    return gemmlab.kernel.edited(STEP, old, new, backend="cpu", **params)


@pytest.mark.parametrize("old,new", [
    ("d[4 * i] += v.x,", "d[4 * i] += 0.0f * v.x,"),                 # a handed-over part left out of the sum
    ("k_begin > 0 && j >= 0", "false && j >= 0"),                     # the finishing block adds no part
    ("const float4* theirs = slot(j);", "const float4* theirs = slot(blockIdx.x);"),  # the wrong slot read
])
def test_mistakes_in_the_hand_over_are_wrong_answers(sms, old, new):
    sms(6)
    kern = _mutant(old, new, BLOCK_N=128, NUM_STAGES=2, MIN_GAIN=1)
    got, a, b = run_on_inputs(kern, 500, 520, 400)
    assert gemmlab.check.compare(got, a, b, "float32")[0].any()


@pytest.mark.parametrize("params", [dict(MAX_SPLIT=1, MIN_GAIN=1), dict(MAX_SPLIT=4, MIN_GAIN=16)])
def test_whole_tiles_are_step_11s_schedule(sms, params):
    """MAX_SPLIT = 1, or a saving under MIN_GAIN (7 k tiles x 4 idle SMs / 6 < 16): no tile is shared; the same
    answer as step 11, bit for bit."""
    sms(6)
    a, b = make_inputs("random", 500, 520, 400, np.float16)
    got = gemmlab.step(STEP, backend="cpu", BLOCK_N=128, NUM_STAGES=2, **params)(a, b)
    want = gemmlab.step("hgemm/11_mma_in_flight", backend="cpu", BLOCK_N=128, NUM_STAGES=2)(a, b)
    assert np.array_equal(got, want)
