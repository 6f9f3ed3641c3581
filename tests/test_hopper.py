"""Step 08 (sm_90a: TMA, mbarriers, wgmma) without a Hopper GPU: the emulator's twins, the tensor
maps, the refusals, and what ptxas makes of it. The GPU lane checks the same step on an H100."""
import numpy as np
import pytest

import gemmlab
from gemmlab import gpu, nvrtc, registry, tma
from gemmlab.measure.check import run_on_inputs
from gemmlab.errors import ArchError, InputError, KernelError, ShapeError

STEP = "hgemm/08_wgmma"



@pytest.mark.parametrize("params", [dict(BLOCK_N=128, NUM_STAGES=2, GROUP_M=1), dict(BLOCK_N=256, NUM_STAGES=3, GROUP_M=3),
                                    dict(BLOCK_N=128, NUM_STAGES=4, GROUP_M=16)])
def test_every_tile_once_in_any_order_and_ring_depth(params):
    """K spans more tiles than stages (the ring wraps, parities alternate); M spans bands of GROUP_M
    block rows with a short last band; N ends mid-box (TMA's zero fill)."""
    kern = gemmlab.step(STEP, backend="cpu", **params)
    got, a, b = run_on_inputs(kern, 1000, 264, 520)
    assert not gemmlab.check.compare(got, a, b, "float32")[0].any()


def test_persistent_blocks_carry_the_ring_across_tiles():
    """Step 09: 256 tiles on a grid of 132 blocks, so most blocks take two; K = 520 is 9 k tiles on a
    ring of 2 stages, so each block's second tile starts mid-ring, on the other parity."""
    kern = gemmlab.step("hgemm/09_persistent", backend="cpu", BLOCK_N=128, NUM_STAGES=2)
    assert kern.launch_config(2000, 2000, 520).grid == (132, 1, 1) or gpu.available()
    got, a, b = run_on_inputs(kern, 2000, 2000, 520)
    assert not gemmlab.check.compare(got, a, b, "float32")[0].any()


def test_structured_inputs_show_the_layout():
    """Identity times a matrix of small integers is exact: a swapped row, column or k slice shows."""
    kern = gemmlab.step(STEP, backend="cpu", BLOCK_N=128, NUM_STAGES=2)
    b = np.arange(192 * 136).reshape(192, 136) % 17 - 8
    got = kern(np.eye(130, 192, dtype=np.float16), b.astype(np.float16))
    assert np.array_equal(got.astype(np.int64), b[:130])


def test_shapes_off_the_tma_grid_are_rejected_before_launch():
    kern = gemmlab.step(STEP, backend="cpu")
    with pytest.raises(ShapeError, match=r"K=12 and N=64 must be multiples of 8.*07_cp_async"):
        kern(np.zeros((64, 12), np.float16), np.zeros((12, 64), np.float16))
    with pytest.raises(ShapeError, match="multiples of 8"):
        kern(np.zeros((64, 16), np.float16), np.zeros((16, 20), np.float16))
    assert kern(np.ones((3, 8), np.float16), np.ones((8, 8), np.float16)).tolist() == [[8.0] * 8] * 3


def test_emulator_tensor_map_fields():
    x = np.zeros((100, 72), np.float16)
    fields = tma.emulator_map(x, 4, 64, 64).view(np.uint64)
    assert list(fields[1:9]) == [4, 2, 72, 100, 144, 64, 64, 128]
    with pytest.raises(InputError, match="multiple of 16 bytes"):
        tma.emulator_map(np.zeros((8, 12), np.float16), 3, 64, 64)
    with pytest.raises(InputError, match="128 bytes wide"):
        tma.emulator_map(x, 3, 64, 32)


def test_a_barrier_that_never_completes_is_a_clear_deadlock_not_a_hang():
    """Consumers release a stage with 2 arrivals; ask for 3 and the producer waits forever in its
    second round: the emulator names the mbarrier wait instead of spinning."""
    src = open(registry.get(STEP).file).read().replace("mbarrier_init(&empty[s], CONSUMERS)",
                                                       "mbarrier_init(&empty[s], CONSUMERS + 1)")
    kern = gemmlab.step(STEP, backend="cpu", source=src, NUM_STAGES=2)
    with pytest.raises(KernelError, match="mbarrier"):
        run_on_inputs(kern, 128, 128, 256)


def test_a_wrong_parity_is_caught():
    """Waiting on the other parity passes fresh stages at once and loses step with the ring later:
    the emulator ends in a named mbarrier deadlock (lines of the kernel), never a silent wrong answer."""
    src = open(registry.get(STEP).file).read().replace("mbarrier_wait(&full[s], (t / NUM_STAGES) & 1)",
                                                       "mbarrier_wait(&full[s], ((t / NUM_STAGES) & 1) ^ 1)")
    kern = gemmlab.step(STEP, backend="cpu", source=src, NUM_STAGES=2)
    with pytest.raises(KernelError, match=r"mbarrier on line \d+"):
        run_on_inputs(kern, 128, 128, 256)


@pytest.mark.parametrize("cc,name,instead", [(80, "NVIDIA A100", "hgemm/07_cp_async"), (75, "Tesla T4", "hgemm/06_double_buffer"),
                                             (100, "NVIDIA B200", "hgemm/07_cp_async")])
def test_refused_off_hopper_before_compiling(monkeypatch, cc, name, instead):
    """wgmma and setmaxnreg exist on sm_90a only: older and newer GPUs get an ArchError naming the latest
    earlier step that runs there (not 07's cp.async on a T4; not 08 for step 09, Hopper-only too)."""
    monkeypatch.setattr(gpu, "available", lambda: True)
    monkeypatch.setattr(gpu, "device", lambda: {"cc": cc, "name": name})
    for step in (STEP, "hgemm/09_persistent"):
        with pytest.raises(ArchError, match=rf"sm_90a.*{name}.*Use {instead},"):
            gemmlab.step(step, backend="gpu")


def test_compiles_for_sm90a_only_and_the_sass_is_hopper_shaped():
    inst = gemmlab.instance(STEP)
    for arch in ("sm_75", "sm_80"):
        with pytest.raises(ArchError, match="needs sm_90a.*wgmma"):
            inst.resources(arch)
    for params in (dict(BLOCK_N=256, NUM_STAGES=4), dict(BLOCK_N=128, NUM_STAGES=6)):
        r = gemmlab.instance(STEP, **params).resources("sm_90")
        assert r.arch == "sm_90a" and not r.spills and not r.wgmma_serialized, r
    counts = nvrtc.count_instructions(inst.sass("sm_90"), ["HGMMA", "UTMALDG", "SYNCS", "LDSM", "HMMA", "LDGSTS"])
    assert counts["HGMMA"] > 0 and counts["UTMALDG"] > 0 and counts["SYNCS"] > 0
    assert counts["LDSM"] == counts["HMMA"] == counts["LDGSTS"] == 0  # no ldmatrix, mma.sync or cp.async left


def test_configurations_that_cannot_run_are_explained():
    with pytest.raises(gemmlab.errors.ConfigError, match="227 KB"):
        gemmlab.instance(STEP, BLOCK_N=256, NUM_STAGES=5)
    with pytest.raises(gemmlab.errors.ConfigError, match="128 or 256"):
        gemmlab.instance(STEP, BLOCK_N=64)
