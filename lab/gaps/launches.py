"""Launch by launch: the kernel time and SM clock of each launch Nsight Compute profiled in a raw-page CSV
(lab/gaps/gpu.sh PART=places, `launches`), and their median and spread.

    python3 lab/gaps/launches.py CSV [CSV ...]      # CSV or CSV.gz
"""
import gzip
import statistics
import sys
from pathlib import Path

from gemmlab.measure import profile


def launches(path) -> list[dict]:
    """[{'us': kernel time, 'mhz': SM clock, 'l2': L2 hit %}] per profiled launch, in launch order."""
    text = (gzip.open(path, "rt") if str(path).endswith(".gz") else open(path)).read()
    nan = float("nan")
    return [{"us": m.get("gpu__time_duration.sum", nan) / 1e3, "mhz": m.get("sm__cycles_elapsed.avg.per_second", nan) / 1e6,
             "l2": m.get("lts__t_sector_hit_rate.pct", nan)} for m in profile.launches(text)]


def line(path) -> str:
    rows = launches(path)
    us = [r["us"] for r in rows]
    clocks = ", ".join(f"{r['mhz']:.0f}" for r in rows)
    hits = ", ".join(f"{r['l2']:.1f}" for r in rows)
    times = ", ".join(f"{u:.1f}" for u in us)
    mid = statistics.median(us)
    spread = f", spread {min(us):.1f}-{max(us):.1f} ({(max(us) - min(us)) / mid:.1%})" if len(us) > 1 else ""
    return (f"{Path(path).name.split('.')[0]}: {len(rows)} launches, median {mid:.1f} us{spread}; SM clock {clocks} MHz;"
            f" L2 hit {hits}; times {times}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        try:
            print(line(p))
        except Exception as e:  # noqa: BLE001 (one bad file must not hide the others)
            print(f"{p}: {type(e).__name__}: {e}")
