"""Step 11 (sm_90a: one k tile's wgmma group stays in flight) without a Hopper GPU. The emulator computes a
wgmma at once, but thread 0 of each warpgroup records a hash of the shared memory its wgmmas read and checks
it again at the wgmma_wait that retires their group: a stage handed back to the producer, and refilled, while
a group that reads it is still pending is an error, as is a thread that exits with groups not waited for."""
import pytest

import gemmlab
from gemmlab.measure.check import run_on_inputs
from gemmlab.errors import InputError

STEP = "hgemm/11_mma_in_flight"



@pytest.mark.parametrize("params", [dict(), dict(NUM_STAGES=2, STORE_BUFS=1, GROUP_M=1),
                                    dict(BLOCK_N=128, NUM_STAGES=3)])
def test_every_k_tile_once_with_any_ring(params):
    """K = 520 is 9 k tiles (the ring wraps; the last is partial); M = 1000 and N = 264 end inside a tile.
    With 2 stages a stage is refilled as soon as the consumers release it: one release too early and the
    emulator's check at the wait fires."""
    kern = gemmlab.step(STEP, backend="cpu", **params)
    got, a, b = run_on_inputs(kern, 1000, 264, 520)
    assert not gemmlab.check.compare(got, a, b, "float32")[0].any()


def test_one_k_tile_per_tile_releases_its_stage_after_the_loop():
    """K = 64: the k loop runs once, so its only stage is released by the arrival after the loop; a block's
    next tile would wait forever (a deadlock error) if that arrival were missing."""
    kern = gemmlab.step(STEP, backend="cpu", BLOCK_N=128, NUM_STAGES=2)
    got, a, b = run_on_inputs(kern, 600, 520, 64)
    assert not gemmlab.check.compare(got, a, b, "float32")[0].any()


def _mutant(old, new, **params):
    return gemmlab.kernel.edited(STEP, old, new, backend="cpu", **params)


WAIT = "            wgmma_wait<1>();"
RELEASE = "if (t > 0 && threadIdx.x % 128 == 0) mbarrier_arrive(&empty[(ring_pos - 1) % NUM_STAGES]);"


@pytest.mark.parametrize("old,new,error", [
    # the stage of the group just committed is released: the producer refills it under the running wgmmas
    (RELEASE, "if (threadIdx.x % 128 == 0) mbarrier_arrive(&empty[s]);", "changed before wgmma_wait retired the group"),
    # no wait in the loop: every group stays pending while its stage is released and refilled
    (WAIT, "", "changed before wgmma_wait retired the group"),
    # the accumulators are read and the block exits with the tile's last group never waited for
    ("        wgmma_wait<0>();  // the tile's last group", "        // the tile's last group",
     "changed before wgmma_wait retired the group|exited with wgmma groups not waited for"),
])
def test_release_mistakes_are_named(old, new, error):
    kern = _mutant(old, new, NUM_STAGES=2, BLOCK_N=128)
    with pytest.raises(InputError, match=error):
        run_on_inputs(kern, 300, 264, 520)


def test_step_10s_serial_wait_passes_the_same_check():
    """Step 10 waits for every group before it releases the stage: the check never fires there."""
    kern = gemmlab.step("hgemm/10_tma_store", backend="cpu", NUM_STAGES=2, BLOCK_N=128)
    got, a, b = run_on_inputs(kern, 300, 264, 520)
    assert not gemmlab.check.compare(got, a, b, "float32")[0].any()


def test_compiles_for_sm90a_with_one_group_in_flight():
    for params in (dict(), dict(BLOCK_N=128, NUM_STAGES=6, STORE_BUFS=1)):
        r = gemmlab.instance(STEP, **params).resources("sm_90")
        assert r.arch == "sm_90a" and not r.spills and not r.wgmma_serialized, r
    sass = gemmlab.instance(STEP).sass("sm_90")
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in sass  # wgmma_wait<1>: one group may still run
