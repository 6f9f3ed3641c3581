"""The clusters lab kernel (lab/hgemm-past-cublas/clusters.cu, measured as step 10; sm_90a: thread-block
clusters, TMA multicast, mbarriers across blocks) without a Hopper GPU:
the emulator runs the blocks of a cluster together, each with its own shared memory, so a multicast
lands in every block it names and a consumer's arrival reaches the producer of another block. The
mutants show that what the kernel gets wrong about the cluster ends in a named error, not a hang or a
silently right answer."""
import numpy as np
import pytest

import gemmlab
from gemmlab import cpu, gpu, nvrtc, registry
from gemmlab.measure.check import run_on_inputs
from gemmlab.errors import ConfigError, InputError, KernelError

STEP = "hgemm-past-cublas/clusters"  # measured as step hgemm/10_clusters; a lab kernel since it lost



@pytest.mark.parametrize("params", [dict(CLUSTER_M=2, BLOCK_N=256, NUM_STAGES=2, GROUP_M=2),
                                    dict(CLUSTER_M=2, BLOCK_N=128, NUM_STAGES=3, GROUP_M=16),
                                    dict(CLUSTER_M=4, BLOCK_N=256, NUM_STAGES=2, GROUP_M=4),
                                    dict(CLUSTER_M=1, BLOCK_N=128, NUM_STAGES=2, GROUP_M=1)])
def test_every_tile_once_with_any_cluster(params):
    """M = 1000 ends inside a cluster tile (the last cluster's upper blocks read zeros and store nothing);
    K = 520 is 9 k tiles, so the ring wraps and each block's next tile starts mid-ring; N ends mid-box."""
    kern = gemmlab.step(STEP, backend="cpu", **params)
    got, a, b = run_on_inputs(kern, 1000, 264, 520)
    assert not gemmlab.check.compare(got, a, b, "float32")[0].any()


def test_structured_inputs_show_the_layout():
    """Identity times small integers is exact: a B box multicast to the wrong place or block shows."""
    kern = gemmlab.step(STEP, backend="cpu", CLUSTER_M=2, NUM_STAGES=2, GROUP_M=2)
    b = np.arange(192 * 520).reshape(192, 520) % 17 - 8
    got = kern(np.eye(300, 192, dtype=np.float16), b.astype(np.float16))
    assert np.array_equal(got.astype(np.int64)[:192], b) and not got[192:].any()


def test_the_grid_is_whole_clusters_one_block_per_sm():
    for c in (1, 2, 4):
        inst = gemmlab.instance(STEP, CLUSTER_M=c, GROUP_M=4)
        grid = registry.get(STEP).launch(8192, 8192, 8192, inst.params).grid
        assert grid[0] % c == 0 and grid[0] <= (gpu.device()["sms"] if gpu.available() else 132)
        small = registry.get(STEP).launch(300, 264, 64, inst.params).grid  # 2 column tiles, cdiv(300, 128 c) rows
        assert small == (c * -(-300 // (128 * c)) * 2, 1, 1)


def test_the_emulator_reads_the_cluster_shape_from_the_kernel():
    src = open(registry.get(STEP).file).read()
    assert cpu.cluster_dims(src, "hgemm_clusters<256, 4, 16, 2>") == (2, 1, 1)
    assert cpu.cluster_dims(src, "hgemm_clusters<128,2,4,4>") == (4, 1, 1)
    assert cpu.cluster_dims(open(registry.get("hgemm/09_persistent").file).read(), "hgemm_persistent<256, 4, 16>") == (1, 1, 1)


def _mutant(old, new, **params):
    return gemmlab.kernel.edited(STEP, old, new, backend="cpu", **params)


@pytest.mark.parametrize("old,new", [
    # the producers would refill a stage the other block is still reading: too few arrivals asked for
    ("mbarrier_init(&empty[s], CONSUMERS * CLUSTER_M)", "mbarrier_init(&empty[s], CONSUMERS)"),
    # each block multicasts its B boxes to itself only: the others' boxes never arrive
    ("(1u << CLUSTER_M) - 1);", "1u << rank);"),
    # a consumer frees the stage in its own block only: the other producer waits forever
    ("for (int r = 0; r < CLUSTER_M; ++r) mbarrier_arrive_cluster(&empty[s], r);", "mbarrier_arrive_cluster(&empty[s], rank);"),
])
def test_cluster_synchronisation_mistakes_are_named_deadlocks(old, new):
    kern = _mutant(old, new, NUM_STAGES=2)
    with pytest.raises(KernelError, match=r"deadlock in the cluster of 2 blocks.*mbarrier on line \d+"):
        run_on_inputs(kern, 300, 264, 200)


def test_a_block_that_exits_before_the_cluster_is_done_is_caught():
    """Without the last cluster_sync() a block can exit while the other still arrives on its barriers."""
    kern = _mutant("    cluster_sync();  // no block exits", "    //", NUM_STAGES=2)
    with pytest.raises(InputError, match="whose threads have all exited.*cluster_sync"):
        run_on_inputs(kern, 300, 264, 200)


def test_a_thread_that_skips_the_cluster_barrier_is_a_named_deadlock():
    kern = _mutant("        setmaxnreg_dec<40>();", "        setmaxnreg_dec<40>();\n        if (threadIdx.x == 5) return;",
                   NUM_STAGES=2)
    with pytest.raises(KernelError, match="cluster barrier"):
        run_on_inputs(kern, 300, 264, 200)


def test_configurations_that_cannot_run_are_explained():
    with pytest.raises(ConfigError, match="must divide the 2 64-column boxes"):
        gemmlab.instance(STEP, BLOCK_N=128, CLUSTER_M=4, GROUP_M=16)
    with pytest.raises(ConfigError, match="multiple of CLUSTER_M"):
        gemmlab.instance(STEP, GROUP_M=1, CLUSTER_M=2)
    with pytest.raises(ConfigError, match="227 KB"):
        gemmlab.instance(STEP, NUM_STAGES=5)


def test_the_lab_kernel_is_loadable_but_not_a_step():
    """It lost to 09 and left the ladder: `steps()` and the listing leave it out, `get` still finds it."""
    assert STEP not in [s.name for s in registry.steps()] and registry.get("clusters").name == STEP
    assert registry.get(STEP).file == "lab/hgemm-past-cublas/clusters.cu"


def test_compiles_for_sm90a_with_multicast_and_no_spills():
    for params in (dict(), dict(CLUSTER_M=4), dict(BLOCK_N=128, NUM_STAGES=6)):
        r = gemmlab.instance(STEP, **params).resources("sm_90")
        assert r.arch == "sm_90a" and not r.spills and not r.wgmma_serialized, r
    counts = nvrtc.count_instructions(gemmlab.instance(STEP).sass("sm_90"), ["HGMMA", "UTMALDG", "SYNCS", "UCGABAR"])
    assert counts["HGMMA"] > 0 and counts["UTMALDG"] > 0 and counts["SYNCS"] > 0
