"""Recorded measurements: results/<gpu>.json, a list of benchmark records, written on a GPU only."""
from __future__ import annotations

import json
import re
from pathlib import Path

from .source import REPO

RESULTS = REPO / "results"
KEY_FIELDS = ("step", "params", "dtype", "m", "n", "k")


def slug(gpu_name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3' (the file name of that GPU's records)."""
    return re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")


def path_for(gpu_name: str) -> Path:
    return RESULTS / f"{slug(gpu_name)}.json"


def gpus() -> list[str]:
    """Names of the GPUs with recorded benchmark records."""
    names = []
    for p in sorted(RESULTS.glob("*.json")):
        if p.name.count(".") == 1:  # <gpu>.json; other kinds of records use <gpu>.<what>.json
            recs = json.loads(p.read_text())
            if recs:
                names.append(recs[0]["gpu"])
    return names


def load(gpu: str | None = None) -> list[dict]:
    """Recorded benchmark records of one GPU (by name or slug), or of every GPU if None."""
    files = [RESULTS / f"{slug(gpu)}.json"] if gpu else sorted(RESULTS.glob("*.json"))
    out = []
    for p in files:
        if p.exists() and p.name.count(".") == 1:
            out += [dict(r, source="recorded") for r in json.loads(p.read_text())]
    return out


def _key(r: dict) -> tuple:
    return tuple(json.dumps(r.get(f), sort_keys=True) for f in KEY_FIELDS)


def save(records: list[dict]) -> Path:
    """Merge records into their GPU's file: a new record replaces an old one with the same key."""
    assert records, "nothing to save"
    path = path_for(records[0]["gpu"])
    old = json.loads(path.read_text()) if path.exists() else []
    merged = {_key(r): r for r in old}
    for r in records:
        merged[_key({k: v for k, v in r.items() if k != "source"})] = {k: v for k, v in r.items() if k != "source"}
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(sorted(merged.values(), key=lambda r: (r["step"], r["m"], r["n"], r["k"],
                                                                      json.dumps(r["params"]))), indent=1) + "\n")
    return path
