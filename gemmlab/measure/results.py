"""Recorded measurements: results/<gpu>.json, a list of benchmark records, written on a GPU only."""
from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import statistics
import uuid
from pathlib import Path

from ..errors import RecordsError
from ..runtime import registry
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


def shown(path: Path) -> str:
    """`path` as a message names it: relative to the repository when inside it (results/x.json)."""
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def _unreadable(path: Path, why: str, what: str = "records") -> RecordsError:
    return RecordsError(f"{shown(path)} cannot be read as {what} ({why}); restore it (git checkout -- {shown(path)}) "
                        f"or move it away, then run again.")


def read_json(path: Path, what: str = "records") -> object:
    """The JSON text of `path` as Python objects: a RecordsError naming the file (and the line and column, for text
    that is not JSON) when it cannot be read, never a raw JSONDecodeError or UnicodeDecodeError."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise _unreadable(path, f"not UTF-8 text: byte {e.start} is {e.object[e.start:e.start + 1]!r}", what) \
            from None
    except OSError as e:
        raise RecordsError(f"cannot read the {what} in {shown(path)} ({e.strerror}); check the file's permissions.") \
            from None
    if not text.strip():
        raise _unreadable(path, "it is empty, as a write that did not finish leaves it", what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise _unreadable(path, f"not JSON at line {e.lineno}, column {e.colno}: {e.msg}", what) from None


REQUIRED = {"step": str, "gpu": str, "m": int}  # what every reader of records looks up


def read_records(path: Path) -> list[dict]:
    """The records of `path` (a JSON list of records), each in the one schema (upgraded); a RecordsError naming the
    file and what is wrong when it is no such list (not JSON, an object, a record without a step, gpu or m)."""
    data = read_json(path)
    if not isinstance(data, list):
        raise _unreadable(path, f"a JSON {type(data).__name__} where a list of records belongs")
    out = []
    for i, r in enumerate(data):
        if not isinstance(r, dict):
            raise _unreadable(path, f"record {i} is a JSON {type(r).__name__}, not an object")
        try:
            r = upgraded(r)
        except (KeyError, TypeError, ZeroDivisionError):
            raise _unreadable(path, f"record {i} has the old 'speedup' without a median_s and a baseline_median_s "
                                    f"to read it from") from None
        for name, kind in REQUIRED.items():
            if name not in r:
                raise _unreadable(path, f"record {i} has no {name!r}")
            if not isinstance(r[name], kind) or isinstance(r[name], bool):
                raise _unreadable(path, f"record {i} has {name}={r[name]!r}, not a {kind.__name__}")
        out.append(r)
    return out


@contextlib.contextmanager
def locked(folder: Path):
    """Hold the records folder's lock (flock on the folder itself: no lock file among the records) while a save reads,
    merges and replaces a file, so that two processes saving at once both keep their records."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl  # optional: POSIX only
    except ImportError:  # not POSIX: no lock
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_json(path: Path, data, what: str = "records", indent: int = 1, sort_keys: bool = False) -> None:
    """Replace `path` with `data` as JSON, whole or not at all: a temporary file beside it, written and synced to the
    disk, then renamed over it. A full disk leaves the old file as it was and raises a RecordsError saying so."""
    path = Path(path)
    text = json.dumps(data, indent=indent, sort_keys=sort_keys) + "\n"
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise RecordsError(f"could not write the {what} to {shown(path)} ({e.strerror}); the file was left as it was: "
                           f"free some space (or fix the folder's permissions) and run again.") from None
    try:  # the rename itself on the disk
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def gpus() -> list[str]:
    """Names of the GPUs with recorded benchmark records."""
    names = []
    for p in sorted(RESULTS.glob("*.json")):
        if p.name.count(".") == 1:  # <gpu>.json; other kinds of records use <gpu>.<what>.json
            recs = read_records(p)
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
    with locked(RESULTS):
        for path in sorted(RESULTS.glob(f"*{suffix}")):
            old = read_json(path)
            new = read_records(path)
            if new != old:
                write_json(path, new)
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
            out += [dict(r, source="recorded") for r in read_records(p)]
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
    defaults = registry.lookup(step).resolve({})
    found = [r for r in records if r["step"] == step and r["m"] == size and r.get("params", defaults) == defaults]
    return found[-1] if found else None


def save(records: list[dict], suffix: str = ".json", key_fields=KEY_FIELDS,
         order: tuple = ("step", "m", "n", "k", "params")) -> Path:
    """Merge records into their GPU's file: a new record replaces an old one with the same key
    (the values of `key_fields`, a tuple of field names or a function from a record to one); the
    file is sorted by the fields in `order`. The file is read, merged and replaced under the folder's lock, and
    replaced whole or not at all (write_json); a file that is not a list of records is left alone (RecordsError)."""
    assert records, "nothing to save"
    path = path_for(records[0]["gpu"], suffix)
    fields = key_fields if callable(key_fields) else lambda r: key_fields
    key = lambda r: tuple(json.dumps(r.get(f), sort_keys=True) for f in fields(r))  # noqa: E731
    with locked(RESULTS):
        old = read_records(path) if path.exists() else []
        merged = {key(r): r for r in old}
        for r in records:
            r = upgraded({k: v for k, v in r.items() if k != "source"})
            merged[key(r)] = r
        rows = sorted(merged.values(), key=lambda r: tuple(json.dumps(r.get(f)) if f == "params"
                                                           else r.get(f) for f in order))
        write_json(path, rows)
    return path


BASELINE = "torch a@b@c"                      # the fused steps' baseline, named in the chapter (the seed's)
BASELINES = ("torch a@b@c", "cupy a@b@c")     # their speed-ups are against the faster of the two, same run

EXPERIMENTS = RESULTS / "experiments"


def experiment(name: str) -> dict:
    """results/experiments/<name>/results.json: a recorded experiment (variants of a step, profiler
    counters, probes), with the question it asked and what each change was predicted to do.
    Experiments are run on a GPU with lab/run.py and lab/<name>/'s scripts; the chapters only read them."""
    path = EXPERIMENTS / name / "results.json"
    if not path.exists():
        known = sorted(p.parent.name for p in EXPERIMENTS.glob("*/results.json"))
        raise FileNotFoundError(f"no recorded experiment {name!r} in {EXPERIMENTS}; recorded: {', '.join(known)}")
    return read_json(path, "experiment")


# ------------------------------------------------------------------------------------------------
# The fused steps' records: results/<gpu>.fusion.json, in the GEMM records' schema plus their own fields
# ------------------------------------------------------------------------------------------------
FUSION_SUFFIX = ".fusion.json"
FUSION_KEY = ("step", "params", "kind", "m", "k", "l", "n")
# A record has the GEMM records' fields (results.py: step, params, dtype, m, n, k, median_s, tflops, baseline,
# baseline_median_s, pct_of_baseline, gpu, date) and the fused lane's own: l, kind, grid, threads, graph_median_s, ...


def fusion_path(gpu: str):
    return path_for(gpu, FUSION_SUFFIX)


def load_fused(gpu: str | None = None) -> list[dict]:
    """Recorded fusion records of one GPU (name or slug), or of every GPU; labelled source='recorded'."""
    return load(gpu, FUSION_SUFFIX)


def fusion_key_fields(r: dict) -> tuple:
    """A record's key: the benchmark times one configuration per step and size (FusedStep.tiles_for), so its
    new record replaces the old one whatever the tiles; a sweep keeps one record per configuration."""
    return tuple(f for f in FUSION_KEY if f != "params") if r["kind"] == "benchmark" else FUSION_KEY


def save_fused(records: list[dict]):
    """Merge records into their GPU's file; a new record replaces one with the same key (_key_fields)."""
    if records:
        return save(records, FUSION_SUFFIX, fusion_key_fields, order=("kind", "step", "m", "params"))
    return None


def speedup(record: dict) -> float:
    """How many times faster than its baseline a record ran: baseline_median_s / median_s (pct_of_baseline / 100)."""
    return record["baseline_median_s"] / record["median_s"]


def lookup_fused(records: list[dict], step: str, n: int, kind: str = "benchmark", params: dict | None = None) -> dict | None:
    """The record of `step` (a fused step or a baseline, "torch a@b@c") at size n (and `params`, if given), or None."""
    for r in records:
        if r["step"] == step and r["m"] == n and r["kind"] == kind and (params is None or r.get("params") == params):
            return r
    return None


def fused_baseline(records: list[dict], n: int, kind: str = "benchmark") -> dict | None:
    """The faster of the BASELINES' records at size n (what the speed-ups are against), or None."""
    rows = [r for r in (lookup_fused(records, b, n, kind) for b in BASELINES) if r]
    return min(rows, key=lambda r: r["median_s"]) if rows else None


def best(records: list[dict], step: str, n: int) -> dict | None:
    """The fastest record of `step` at size n, benchmark or sweep."""
    rows = [r for r in records if r["step"] == step and r["m"] == n]
    return min(rows, key=lambda r: r["median_s"]) if rows else None


# --- reading an experiment's record (results/experiments/<name>/results.json, experiment()) ---
def group(exp: dict, name: str) -> dict:
    """The experiment group called `name` in a multi-part experiment (hgemm-diagnosis)."""
    for e in exp["experiments"]:
        if e["name"] == name:
            return e
    raise KeyError(f"no group {name!r}: {[e['name'] for e in exp['experiments']]}")


def _runs(exp_group: dict, spec: str, size: int | None) -> list[dict]:
    runs = [r for r in exp_group["runs"][spec] if size is None or r["size"] == size]
    if not runs:
        raise ValueError(f"no recorded runs of {spec}" + (f" at size {size}" if size else ""))
    return runs


def pct(exp_group: dict, spec: str, size: int | None = None) -> float:
    """Median recorded % of cuBLAS of one variant in a group (cuBLAS measured in the same round)."""
    return statistics.median(r["pct"] for r in _runs(exp_group, spec, size))


def tflops(exp_group: dict, spec: str, size: int | None = None) -> float:
    """Median recorded TFLOP/s of one variant in a group."""
    return statistics.median(r["tflops"] for r in _runs(exp_group, spec, size))
