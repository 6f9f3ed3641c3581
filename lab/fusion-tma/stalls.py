"""Where step 08's warps wait at 512: Nsight Compute's sampled warp states, per SASS instruction (chapter 8).

    ncu --profile-from-start off -k regex:fused_tile_flags --section SourceCounters --section WarpStateStats \\
        --page source --print-source sass --csv python lab/fusion-tma/stalls.py once 08 \\
        | gzip > results/experiments/fusion-tma/ncu-src-08-<gpu>-<date>.csv.gz   # on an H100 / H200
    (the same with `once "only the wgmmas"` > results/experiments/fusion-tma/ncu-src-only-the-wgmmas-<gpu>-<date>.csv.gz)
    python lab/fusion-tma/stalls.py summary [CSV ...]   # anywhere; default results/experiments/fusion-tma/ncu-src-*.csv.gz

`once VARIANT`: step 08 at its 512 tiles (n32 k3 s12), as it is (`08`, checked against float64) or one of
limits.py's VARIANTS (timed only), launched 20 times, then once between cudaProfilerStart and Stop, the one launch
ncu profiles. `summary`: for each CSV, the share of all samples by stall reason, by kind of place (the consumers'
waits for a full stage, the group barriers, the barrier where the groups hand over their sums, the wait for the
wgmmas, the wgmmas' issue, the rest), and the hottest instructions.
"""
from __future__ import annotations

import collections
import csv
import gzip
import io
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent  # lab/fusion-tma: the scripts and patches
DATA = HERE.parents[1] / "results" / "experiments" / HERE.name  # its logs and results.json
SAMPLES = "Warp Stall Sampling (All Samples)"


def rows_of(path) -> list[dict]:
    """The per-instruction rows of one `--page source --csv` output (gzipped)."""
    lines = [line for line in gzip.open(path, "rt").read().splitlines() if line.startswith('"')]
    table = list(csv.reader(io.StringIO("\n".join(lines))))
    start = next(i for i, r in enumerate(table) if r and r[0] == "Address")
    header = table[start]
    return [dict(zip(header, r)) for r in table[start + 1:] if len(r) == len(header)]


def number(text: str) -> float:
    return float(text) if text not in ("", "-") else 0.0


def places(rows: list[dict], i: int, reasons: list[str]) -> dict[str, float]:
    """The samples of instruction i by the place they stand for. A stall shows on the instruction a warp would issue
    next: the branch of a try-wait loop, or an instruction after a barrier. So "barrier" samples go to the nearest
    BAR.SYNC before them (barrier 9, where the groups hand over their sums; a group's own barriers, 0x80 threads;
    the block's), except at the wait for the wgmmas; long-scoreboard samples on the branch of a consumer's try-wait
    go to the wait for a full stage; the rest by the instruction: the wgmmas' issue, or everything else."""
    r, here = rows[i], rows[i]["Source"]
    out: collections.Counter = collections.Counter()
    for h in reasons:
        v = number(r[h])
        if not v:
            continue
        if "WARPGROUP.DEPBAR" in here:
            out["wait for the wgmmas"] += v
        elif h == "stall_barrier":
            bar = next((rows[j]["Source"] for j in range(i - 1, max(-1, i - 12), -1) if "BAR.SYNC" in rows[j]["Source"]), "")
            out["groups hand over their sums (barrier 9)" if "0x9," in bar else
                "a group's barriers around the split" if ", 0x80" in bar else "other barriers"] += v
        elif h == "stall_long_sb" and "BRA" in here and "TRYWAIT" in rows[i - 3]["Source"] + rows[i - 2]["Source"] + rows[i - 1]["Source"]:
            out["consumers wait for a full stage"] += v
        elif "HGMMA" in here or "WARPGROUP.ARRIVE" in here:
            out["wgmmas issued"] += v
        else:
            out["the rest (split, addresses, epilogue, producer)"] += v
    return out


def summary(paths) -> None:
    for path in paths:
        rows = rows_of(path)
        reasons = [h for h in rows[0] if h.startswith("stall_") and "Not Issued" not in h]
        total = sum(number(r[SAMPLES]) for r in rows)
        print(f"{Path(path).name}: {len(rows)} instructions, {total:.0f} samples")
        by_reason = collections.Counter({h[6:]: sum(number(r[h]) for r in rows) for h in reasons})
        print("  by reason: " + ", ".join(f"{k} {v / total:.1%}" for k, v in by_reason.most_common(8)))
        by_place = collections.Counter()
        for i in range(len(rows)):
            by_place.update(places(rows, i, reasons))
        for k, v in by_place.most_common():
            print(f"  place {k:48s} {v / total:6.1%}")
        for r in sorted(rows, key=lambda r: -number(r[SAMPLES]))[:8]:
            s = number(r[SAMPLES])
            top = sorted(((number(r[h]), h[6:]) for h in reasons), reverse=True)[:2]
            print(f"  hot {s / total:5.1%} {r['Source'].strip()[:56]:56s} " + " ".join(f"{n} {v / s:.0%}" for v, n in top if v))


def once(variant: str) -> None:
    import cupy

    sys.path.insert(0, str(HERE))
    import limits

    from gemmlab import fusion
    from lab import experiments

    a, b, c, want, _ = experiments.fusion_problem(512)
    source = None if variant == "08" else limits.variant_source(variant)
    kern = fusion.step("fused/08_tile_flags", source=source, **limits.TILES_512)
    if source is None:
        launch, err = fusion.checked_launcher(kern, a, b, c, want)
        print(f"08: error {err:.2e}", file=sys.stderr)
    else:
        launch = kern.launcher(a, b, c, cupy.empty((512, 512), dtype=cupy.float32))
    for _ in range(20):
        launch()
    cupy.cuda.Device().synchronize()
    cupy.cuda.profiler.start()
    launch()
    cupy.cuda.Device().synchronize()
    cupy.cuda.profiler.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["once"] and len(sys.argv) == 3:
        once(sys.argv[2])
    elif sys.argv[1:2] == ["summary"]:
        summary(sys.argv[2:] or sorted(DATA.glob("ncu-src-*.csv.gz")))
    else:
        sys.exit("usage: stalls.py once {08,VARIANT} | stalls.py summary [CSV.gz ...] (see the module's docstring)")
