"""Recorded measurements: results/<gpu>.json, a list of benchmark records, written on a GPU only."""
from __future__ import annotations

import collections
import json
import re
from pathlib import Path

from ..runtime.source import REPO

RESULTS = REPO / "results"
KEY_FIELDS = ("step", "params", "dtype", "m", "n", "k")
# One schema for every benchmark record (issue 42): a GEMM record (results/<gpu>.json, bench.benchmark) and a fused
# lane's (results/<gpu>.fusion.json, fusion.benchmark and sweep) name the same things alike: `step` (the step, or the
# baseline timed: "torch a@b@c"), `params`, `dtype`, `m`, `n`, `k`, `median_s`, `tflops`, `baseline`,
# `baseline_median_s`, `pct_of_baseline` (100 x baseline_median_s / median_s), `gpu`, `date`. A fused record adds
# `l` (B is K x L), `kind` (benchmark, sweep, tuned), `grid`, `threads`, `graph_median_s`, `wall_median_s`, ...


def slug(gpu_name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3' (the file name of that GPU's records)."""
    return re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")


def path_for(gpu_name: str, suffix: str = ".json") -> Path:
    """results/<gpu><suffix>: ".json" for the GEMM benchmark, ".fusion.json" etc. for other kinds."""
    return RESULTS / f"{slug(gpu_name)}{suffix}"


def gpus() -> list[str]:
    """Names of the GPUs with recorded benchmark records."""
    names = []
    for p in sorted(RESULTS.glob("*.json")):
        if p.name.count(".") == 1:  # <gpu>.json; other kinds of records use <gpu>.<what>.json
            recs = json.loads(p.read_text())
            if recs:
                names.append(recs[0]["gpu"])
    return names


def is_fused(record: dict) -> bool:
    """Whether `record` is the fused lane's (results/<gpu>.fusion.json): it has the fused problem's L."""
    return "l" in record


def upgraded(record: dict) -> dict:
    """`record` in the one schema: a fused lane's record written before issue 42 named its step `impl` and its
    speed-up `speedup` (baseline_median_s / median_s), now `step` and `pct_of_baseline` (100 times it), and had no
    `dtype` (float32); any other record is returned as it is. Field order is kept."""
    if "impl" not in record and "speedup" not in record:
        return record
    out = {}
    for name, value in record.items():
        if name == "impl":
            out["step"] = value
        elif name == "speedup":
            out["pct_of_baseline"] = 100.0 * record["baseline_median_s"] / record["median_s"]
        else:
            out[name] = value
        if name == "params" and "dtype" not in record:
            out["dtype"] = "float32"
    return out


def upgrade_files(suffix: str = ".fusion.json") -> list[Path]:
    """Rewrite the record files results/*<suffix> in the one schema (upgraded), in place, order and format kept;
    the files changed. Run once over the committed fused records (issue 42); a file already upgraded is left as is."""
    changed = []
    for path in sorted(RESULTS.glob(f"*{suffix}")):
        old = json.loads(path.read_text())
        new = [upgraded(r) for r in old]
        if new != old:
            path.write_text(json.dumps(new, indent=1) + "\n")
            changed.append(path)
    return changed


def load(gpu: str | None = None, suffix: str = ".json") -> list[dict]:
    """Recorded records of one GPU (by name or slug), or of every GPU if None; labelled source='recorded'.

    suffix ".json" reads the GEMM benchmark files (<gpu>.json only, not <gpu>.<what>.json)."""
    files = [path_for(gpu, suffix)] if gpu else sorted(RESULTS.glob(f"*{suffix}"))
    if suffix == ".json":
        files = [p for p in files if p.name.count(".") == 1]
    out = []
    for p in files:
        if p.exists():
            out += [dict(upgraded(r), source="recorded") for r in json.loads(p.read_text())]
    return out


def one_gpu(records: list[dict]) -> list[dict]:
    """Of `records`, those of the one GPU that has the most of them (on a tie, the one recorded last).

    For a table or figure of recorded sweeps: on a reader's GPU a chapter's own benchmark adds that GPU's
    records to results/, and a sweep must not mix them with another GPU's."""
    if not records:
        return []
    count = collections.Counter(r["gpu"] for r in records)
    last = {g: max(r["date"] for r in records if r["gpu"] == g) for g in count}
    gpu = max(count, key=lambda g: (count[g], last[g]))
    return [r for r in records if r["gpu"] == gpu]


# Since this date (commit 1c4300d) every benchmark times cuBLAS and the kernel launch by launch in turn. Records
# made before it timed cuBLAS first and then each configuration's launches back to back; the H100 slowed
# within seconds of sustained load, so their % of cuBLAS can wander by several points either way.
INTERLEAVED_SINCE = "2026-11-24"
ROTATED_SINCE = "2026-11-28"  # from this day the interleaved order rotates every turn (bench.rotated)


def timing_note(records: list[dict]) -> str:
    """One sentence for records made before the interleaved protocol (empty when there are none), to print
    beside a recorded sweep so a reader knows which figures to trust to a point and which to several."""
    records = [r for r in records if "pct_of_baseline" in r and not is_fused(r)]  # GEMM benchmark records
    old = sorted({r["date"] for r in records if r["date"] < INTERLEAVED_SINCE})
    if not old:
        return ""
    n_old = sum(r["date"] < INTERLEAVED_SINCE for r in records)
    return (f"{n_old} of these {len(records)} records ({', '.join(old)}) predate the interleaved timing "
            "(appendix, Recorded results): cuBLAS was timed first, then each configuration's launches back to "
            "back, so their % of cuBLAS can be off by several points.")


def default_record(records: list[dict], step: str, size: int) -> dict | None:
    """The record of `step` at size^3 with the step's default parameters (what a chapter's benchmark() shows); the
    last if several, None if there is none."""
    from ..runtime import registry

    defaults = registry.get(step).resolve({})
    found = [r for r in records if r["step"] == step and r["m"] == size and r.get("params", defaults) == defaults]
    return found[-1] if found else None


def save(records: list[dict], suffix: str = ".json", key_fields=KEY_FIELDS,
         order: tuple = ("step", "m", "n", "k", "params")) -> Path:
    """Merge records into their GPU's file: a new record replaces an old one with the same key
    (the values of `key_fields`, a tuple of field names or a function from a record to one); the
    file is sorted by the fields in `order`."""
    assert records, "nothing to save"
    path = path_for(records[0]["gpu"], suffix)
    fields = key_fields if callable(key_fields) else lambda r: key_fields
    key = lambda r: tuple(json.dumps(r.get(f), sort_keys=True) for f in fields(r))  # noqa: E731
    old = [upgraded(r) for r in json.loads(path.read_text())] if path.exists() else []
    merged = {key(r): r for r in old}
    for r in records:
        r = upgraded({k: v for k, v in r.items() if k != "source"})
        merged[key(r)] = r
    RESULTS.mkdir(exist_ok=True)
    rows = sorted(merged.values(), key=lambda r: tuple(json.dumps(r.get(f)) if f == "params"
                                                       else r.get(f) for f in order))
    path.write_text(json.dumps(rows, indent=1) + "\n")
    return path


EXPERIMENTS = RESULTS / "experiments"


def experiment(name: str) -> dict:
    """results/experiments/<name>/results.json: a recorded experiment (variants of a step, profiler
    counters, probes), with the question it asked and what each change was predicted to do.
    Experiments are run on a GPU with lab/run.py and lab/<name>/'s scripts; the chapters only read them."""
    path = EXPERIMENTS / name / "results.json"
    if not path.exists():
        known = sorted(p.parent.name for p in EXPERIMENTS.glob("*/results.json"))
        raise FileNotFoundError(f"no recorded experiment {name!r} in {EXPERIMENTS}; recorded: {', '.join(known)}")
    return json.loads(path.read_text())

