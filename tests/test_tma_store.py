"""Step 10 (sm_90a: the epilogue through shared memory and TMA stores) without a Hopper GPU: the emulator
performs a TMA store at the wait that retires its bulk group, clipped to the tensor, and names what the GPU
leaves undefined: a staging buffer written again before its store was waited for, a store whose thread did
not fence its writes for the TMA unit, a thread that exits with stores pending."""
import numpy as np
import pytest

import gemmlab
from gemmlab import nvrtc, registry
from gemmlab.measure.check import run_on_inputs
from gemmlab.errors import ConfigError, InputError

STEP = "hgemm/10_tma_store"



@pytest.mark.parametrize("params", [dict(), dict(STORE_BUFS=1, NUM_STAGES=2, GROUP_M=1),
                                    dict(STORE_BUFS=4, NUM_STAGES=3, GROUP_M=4),
                                    dict(BLOCK_N=128, STORE_BUFS=1, NUM_STAGES=2)])
def test_every_tile_once_with_any_staging_ring(params):
    """M = 1000 and N = 264 end inside a tile and inside a 64-column box (the store clips both);
    K = 520 is 9 k tiles, so the ring of stages wraps."""
    kern = gemmlab.step(STEP, backend="cpu", **params)
    got, a, b = run_on_inputs(kern, 1000, 264, 520)
    assert not gemmlab.check.compare(got, a, b, "float32")[0].any()


def test_persistent_blocks_reuse_the_staging_ring_across_tiles():
    """256 tiles on 132 blocks: each block's second tile writes buffers whose stores from the first tile
    must have been read (with STORE_BUFS = 1 every chunk waits for the one before)."""
    kern = gemmlab.step(STEP, backend="cpu", BLOCK_N=128, NUM_STAGES=2, STORE_BUFS=1)
    got, a, b = run_on_inputs(kern, 2000, 2000, 136)
    assert not gemmlab.check.compare(got, a, b, "float32")[0].any()


def test_structured_inputs_show_the_layout():
    """Identity times small integers is exact: a box stored at the wrong place, or a swizzle that the
    buffer's writes and the tensor map disagree on, shows as a moved entry."""
    kern = gemmlab.step(STEP, backend="cpu", NUM_STAGES=2)
    b = np.arange(192 * 328).reshape(192, 328) % 17 - 8
    got = kern(np.eye(200, 192, dtype=np.float16), b.astype(np.float16))
    assert np.array_equal(got.astype(np.int64)[:192], b) and not got[192:].any()


def _mutant(old, new, **params):
    return gemmlab.kernel.edited(STEP, old, new, backend="cpu", **params)


@pytest.mark.parametrize("old,new,error", [
    # no wait before a buffer is written again: the store of two chunks ago may still be reading it
    ("if (threadIdx.x % 128 == 0) bulk_wait_group_read<STORE_BUFS - 1>();", "",
     r"line \d+ reads was written again before the store's group was waited for"),
    # one group too many left in flight: the buffer about to be written is the one still being read
    ("bulk_wait_group_read<STORE_BUFS - 1>()", "bulk_wait_group_read<STORE_BUFS>()",
     "written again before the store's group was waited for"),
    # the threads' writes are not fenced for the async proxy before the TMA unit reads the buffer
    ("            fence_proxy_async();  // this thread's writes", "            // this thread's writes",
     r"TMA store on line \d+ without fence_proxy_async\(\)"),
    # the block exits while its last stores may still read its shared memory
    ("    if (threadIdx.x % 128 == 0) bulk_wait_group<0>();", "", r"exited with 2 TMA store\(s\) not waited for"),
])
def test_store_mistakes_are_named(old, new, error):
    kern = _mutant(old, new, NUM_STAGES=2)
    with pytest.raises(InputError, match=error):
        run_on_inputs(kern, 300, 264, 200)


def test_configurations_that_cannot_run_are_explained():
    with pytest.raises(ConfigError, match="4 stages and 4 staging buffers per warpgroup need 263232 bytes"):
        gemmlab.instance(STEP, STORE_BUFS=4)
    assert gemmlab.instance(STEP, STORE_BUFS=4, NUM_STAGES=3).params["STORE_BUFS"] == 4
    launch = registry.get(STEP).launch(4096, 4096, 4096, gemmlab.instance(STEP).params)
    assert launch.shared_bytes == 230464 <= 227 * 1024  # 4 stages + 2 x 2 boxes of 8 KB + barriers


def test_compiles_for_sm90a_storing_c_by_tma_only():
    for params in (dict(), dict(STORE_BUFS=4, NUM_STAGES=3), dict(BLOCK_N=128, NUM_STAGES=6, STORE_BUFS=1)):
        r = gemmlab.instance(STEP, **params).resources("sm_90")
        assert r.arch == "sm_90a" and not r.spills and not r.wgmma_serialized, r
    counts = nvrtc.count_instructions(gemmlab.instance(STEP).sass("sm_90"), ["HGMMA", "UTMALDG", "UTMASTG", "STG", "STS"])
    assert counts["HGMMA"] > 0 and counts["UTMALDG"] > 0
    assert counts["UTMASTG"] == 4 and counts["STG"] == 0  # 4 boxes of 64 columns per tile, no st.global left
    assert counts["STS"] == 64  # 128 accumulators per thread, 2 per 4-byte shared store
