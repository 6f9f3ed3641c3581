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
    number = lambda v: float(v.replace(",", "")) if v not in ("", "n/a") else float("nan")  # noqa: E731
    return [{"us": number(r["gpu__time_duration.sum"]) / 1e3, "mhz": number(r["sm__cycles_elapsed.avg.per_second"]) / 1e6,
             "l2": number(r["lts__t_sector_hit_rate.pct"])} for r in profile.raw_csv_rows(text)]


def line(path) -> str:
    rows = launches(path)
    us = [r["us"] for r in rows]
    spread = f", spread {min(us):.1f}-{max(us):.1f} ({(max(us) - min(us)) / statistics.median(us):.1%})" if len(us) > 1 else ""
    return (f"{Path(path).name.split('.')[0]}: {len(rows)} launches, median {statistics.median(us):.1f} us{spread};"
            f" SM clock {', '.join(f'{r['mhz']:.0f}' for r in rows)} MHz; L2 hit {', '.join(f'{r['l2']:.1f}' for r in rows)}"
            f"; times {', '.join(f'{u:.1f}' for u in us)}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        try:
            print(line(p))
        except Exception as e:  # noqa: BLE001 (one bad file must not hide the others)
            print(f"{p}: {type(e).__name__}: {e}")
