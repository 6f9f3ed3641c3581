"""Chapter 6's timeline model: each schedule respects its dependences, and look-ahead shortens it."""
import pytest

from gemmlab import pipeline


@pytest.mark.parametrize("strategy", pipeline.STRATEGIES)
def test_a_tile_is_computed_after_it_is_loaded_and_in_order(strategy):
    ivs = pipeline.timeline(strategy, tiles=6, load=3, compute=2)
    loads = {iv.tile: iv for iv in ivs if iv.lane == "load"}
    computes = {iv.tile: iv for iv in ivs if iv.lane == "compute"}
    assert sorted(loads) == sorted(computes) == list(range(6))
    for t in range(6):
        assert computes[t].start >= loads[t].end
        if t:
            assert computes[t].start >= computes[t - 1].end


def test_serial_is_the_sum_and_look_ahead_hides_loads():
    assert pipeline.total_time("serial", tiles=4, load=3, compute=2) == 4 * (3 + 2)
    prefetch = pipeline.total_time("register_prefetch", tiles=4, load=3, compute=2)
    deep = pipeline.total_time("cp_async", tiles=4, load=3, compute=2, stages=3)
    assert deep <= prefetch < 20
    # when compute takes longer than a load, one tile of look-ahead hides loads completely
    assert pipeline.total_time("register_prefetch", tiles=4, load=2, compute=3) == 2 + 4 * 3


def test_buffers_bound_the_loads_in_flight():
    ivs = pipeline.timeline("cp_async", tiles=8, load=10, compute=1, stages=3)
    loads = [iv for iv in ivs if iv.lane == "load"]
    computes = {iv.tile: iv for iv in ivs if iv.lane == "compute"}
    for iv in loads:  # tile t's load starts only after tile t - stages finished computing (its buffer)
        if iv.tile >= 3:
            assert iv.start >= computes[iv.tile - 3].end


def test_unknown_strategy():
    with pytest.raises(ValueError):
        pipeline.timeline("magic")
