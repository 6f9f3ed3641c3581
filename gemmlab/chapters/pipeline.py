"""Chapter 6's timeline model: when each K tile is loaded, stored and computed, per strategy.

A model, not a measurement: one block, a global load that takes `load` time units to arrive, a
compute phase of `compute` units per tile, barriers free. It shows the shape of each schedule
(what overlaps what), which is what the chapter's picture needs; the measured effect is in results/.
"""
from __future__ import annotations

from dataclasses import dataclass
import matplotlib.pyplot as plt

STRATEGIES = ("serial", "register_prefetch", "cp_async")


@dataclass(frozen=True)
class Interval:
    lane: str  # "load" (global -> registers or cp.async in flight), "compute"
    tile: int
    start: float
    end: float


def timeline(strategy: str, tiles: int = 4, load: float = 3.0, compute: float = 2.0,
             stages: int = 3) -> list[Interval]:
    """Intervals of loading and computing each tile under one strategy.

    serial (steps 03-07): load tile t, barrier, compute t, barrier, then load t+1.
    register_prefetch (step 08): the loads of t+1 are issued before computing t and land in
    registers while it runs; one tile of look-ahead.
    cp_async (step 09): up to stages-1 tiles are in flight at once, straight into shared memory.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, not {strategy!r}")
    ahead = {"serial": 0, "register_prefetch": 1, "cp_async": max(stages - 1, 1)}[strategy]
    load_start, load_end, comp_start, comp_end = {}, {}, {}, {}
    for t in range(tiles):
        if ahead == 0:  # the next load waits for the barrier after this tile's compute
            load_start[t] = comp_end.get(t - 1, 0.0)
        else:  # issued when tile t - ahead starts computing: its buffer is free from then on
            load_start[t] = 0.0 if t < ahead else comp_start[t - ahead]
        load_end[t] = load_start[t] + load
        comp_start[t] = max(load_end[t], comp_end.get(t - 1, 0.0))
        comp_end[t] = comp_start[t] + compute
    out = [Interval("load", t, load_start[t], load_end[t]) for t in range(tiles)]
    out += [Interval("compute", t, comp_start[t], comp_end[t]) for t in range(tiles)]
    return sorted(out, key=lambda iv: (iv.start, iv.lane))

def total_time(strategy: str, **kw) -> float:
    return max(iv.end for iv in timeline(strategy, **kw))


def draw_timelines(tiles: int = 4, load: float = 3.0, compute: float = 2.0, stages: int = 3, ax=None):
    """One row pair (load, compute) per strategy; bars labelled with the tile number."""
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.2))
    colours = {"load": "tab:blue", "compute": "tab:orange"}
    labels = []
    for row, strategy in enumerate(STRATEGIES):
        for iv in timeline(strategy, tiles, load, compute, stages):
            y = 2 * (len(STRATEGIES) - 1 - row) + (1 if iv.lane == "load" else 0)
            ax.barh(y, iv.end - iv.start, left=iv.start, color=colours[iv.lane], edgecolor="white", height=0.8)
            ax.text((iv.start + iv.end) / 2, y, str(iv.tile), ha="center", va="center", fontsize=7, color="white")
        labels += [(2 * (len(STRATEGIES) - 1 - row) + 1, f"{strategy}: load"),
                   (2 * (len(STRATEGIES) - 1 - row), f"{strategy}: compute")]
    ax.set_yticks([y for y, _ in labels], [t for _, t in labels], fontsize=8)
    ax.set_xlabel("time (model units: a load takes %g, a tile's compute %g)" % (load, compute))
    ax.set_title("When each K tile is loaded and computed (model)", fontsize=9)
    return ax
