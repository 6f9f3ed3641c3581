"""Where a kernel's warps wait and what it executes, per SASS instruction: Nsight Compute's source page
(`ncu --page source --print-source sass --csv`, lab/gaps/gpu.sh PART=places, `srcprof`) summed three ways.

    python3 lab/gaps/places.py SRC.csv.gz [...]

Per file: the stall samples by reason; the instructions executed by opcode (the mix: FFMA, HMMA, LDS, ...);
the `barrier` samples by the instruction they sit on (a warp stalled at a barrier is sampled on the instruction
after it, so each is printed with the barrier or wait before it); the hottest instructions.
"""
from __future__ import annotations

import collections
import csv
import gzip
import io
import re
import sys
from pathlib import Path

SAMPLES = "Warp Stall Sampling (All Samples)"
WAITS = ("BAR.SYNC", "BAR.ARV", "BAR.RED", "SYNCS", "WARPGROUP.DEPBAR", "WARPSYNC", "DEPBAR")


def rows_of(path) -> list[dict]:
    """The per-instruction rows of one source-page CSV, in address order, with 'index' (the line number)."""
    lines = [line for line in gzip.open(path, "rt").read().splitlines() if line.startswith('"')]
    table = list(csv.reader(io.StringIO("\n".join(lines))))
    start = next(i for i, r in enumerate(table) if r and r[0] == "Address")
    header = table[start]
    rows = [dict(zip(header, r)) for r in table[start + 1:] if len(r) == len(header)]
    for i, r in enumerate(rows):
        r["index"] = i
    return rows


def number(text: str) -> float:
    return float(text.replace(",", "")) if text not in ("", "-") else 0.0


def opcode(source: str) -> str:
    """'@!P0 LDS.U.128 R4, [R2]' -> 'LDS.U.128'."""
    words = re.sub(r"^\s*@!?U?P\w+\s+", "", source).split()
    return words[0] if words else "?"


def before(rows: list[dict], i: int) -> str:
    """The nearest barrier or wait at or before instruction i (up to 16 back), as 'index OPCODE'."""
    for j in range(i, max(-1, i - 16), -1):
        if any(w in rows[j]["Source"] for w in WAITS):
            return f"{j} {rows[j]['Source'].strip()[:60]}"
    return "-"


def summary(path) -> None:
    rows = rows_of(path)
    reasons = [h for h in rows[0] if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(number(r[SAMPLES]) for r in rows) or 1.0
    executed = collections.Counter()
    for r in rows:
        executed[opcode(r["Source"]).split(".")[0]] += number(r["Instructions Executed"])
    all_inst = sum(executed.values()) or 1.0
    print(f"\n{Path(path).name}: {len(rows)} instructions, {total:.0f} stall samples, {all_inst / 1e6:.1f}M warp "
          f"instructions executed")
    by_reason = collections.Counter({h[6:]: sum(number(r[h]) for r in rows) for h in reasons})
    print("  samples by reason: " + ", ".join(f"{k} {v / total:.1%}" for k, v in by_reason.most_common(8)))
    print("  executed by opcode: " + ", ".join(f"{k} {v / all_inst:.1%} ({v / 1e6:.1f}M)"
                                               for k, v in executed.most_common(14)))
    barrier = sorted(((number(r["stall_barrier"]), r) for r in rows if number(r["stall_barrier"])), key=lambda t: -t[0])
    if barrier:
        bar_total = sum(v for v, _ in barrier)
        print(f"  barrier samples ({bar_total / total:.1%} of all), by instruction:")
        for v, r in barrier[:6]:
            print(f"    {v / bar_total:6.1%}  at {r['index']} {r['Source'].strip()[:50]:50s}  after: {before(rows, r['index'])}")
    print("  hottest instructions (share of samples, top reasons):")
    for r in sorted(rows, key=lambda r: -number(r[SAMPLES]))[:10]:
        top = sorted(((number(r[h]), h[6:]) for h in reasons), reverse=True)[:2]
        print(f"    {number(r[SAMPLES]) / total:6.1%}  {r['index']:5d} {r['Source'].strip()[:56]:56s} "
              + ", ".join(f"{name} {v / max(number(r[SAMPLES]), 1):.0%}" for v, name in top if v))


if __name__ == "__main__":
    for p in sys.argv[1:]:
        try:
            summary(p)
        except Exception as e:  # noqa: BLE001 (one bad file must not hide the others)
            print(f"{p}: {type(e).__name__}: {e}")
