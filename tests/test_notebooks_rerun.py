"""Notebooks give the same checked outputs however a reader runs them (issue 9, item 4).

nbval (`pytest --nbval-lax book/`) runs every chapter once, top to bottom, against its stored outputs.
This file adds what a reader does next:
- restart and run all a second time: the claim cells (tag `nbval-check-output`) print the same text;
- run cells out of order: after the whole chapter (sliders, timings, plots included) has run, its
  claim cells run again, last first, in the same kernel, and still print what they printed the
  first time; no earlier cell leaves state behind that changes a later result;
- read the records: run without a GPU, every chapter reads its measured figures from results/, and
  each value it glues into the prose is the value the stored chapter shows (a chapter stored from a
  GPU run whose records were later replaced would quote figures that are in no record). That holds for
  the records as committed: on a reader's GPU, `make test` runs the chapters first and they save that
  GPU's records, which the chapters then read. So where git says a record file under results/ differs
  from the commit, the glued values are not compared (a warning names the files); CI's clean clone and
  the GPU lane (tools/gpu_lane.sh runs tests/ before book/) always compare them.
"""
from __future__ import annotations

import copy
import subprocess
import sys
import warnings
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from gemmlab.chapters.glue import METADATA_KEY

BOOK = Path(__file__).resolve().parents[1] / "book"
NOTEBOOKS = sorted(BOOK.glob("*.ipynb"))
CLAIM = "nbval-check-output"  # the cell tag nbval reads (no marker in view)


def _is_claim(cell) -> bool:
    return cell.cell_type == "code" and CLAIM in cell.metadata.get("tags", [])


def _text(cell) -> str:
    """What a claim cell printed: its stream and plain-text results, in order."""
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.get("data", {}).get("text/plain", ""))
        elif out.output_type == "error":
            parts.append(f"ERROR {out.ename}: {out.evalue}")
    return "".join(parts)


# Glued values that come from this machine's NVRTC, not from a record: a release (or two compiles under
# load, tests/test_runtime.py) can give a register more or less, so they are shown, not compared.
COMPILER_DEPENDENT = {"ch6_v12_registers", "ch7b_v12_registers"}


def _glued(nb) -> dict[str, str]:
    """Each value the chapter's prose shows (a prose() cell's output records the text of every value it filled in,
    by name and format), with a live run's label read as "recorded": a GPU run that saved its records quotes them
    as "(live, DATE)", a run without a GPU as "(recorded, DATE)"."""
    return {name: text.replace("(live, ", "(recorded, ")
            for cell in nb.cells if cell.cell_type == "code"
            for out in cell.get("outputs", []) if METADATA_KEY in out.get("metadata", {})
            for name, text in out["metadata"][METADATA_KEY]["values"].items()}


def _changed_records() -> list[str]:
    """The record files a chapter run saves (results/<gpu>*.json, not the experiments' folders) that differ
    from the checkout's commit (modified or new), by git; none where git or the repository's history is missing."""
    try:
        status = subprocess.run(["git", "status", "--porcelain", "--", "results"], cwd=BOOK.parent,
                                capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    if status.returncode != 0:
        return []
    paths = (line[3:] for line in status.stdout.splitlines())
    return [p for p in paths if p.endswith(".json") and p.count("/") == 1]


def _run(nb) -> nbformat.NotebookNode:
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    # The kernel is this interpreter, whatever kernelspec the machine has (on a GPU machine whose
    # packages come from wheels installed with --target, the "python3" spec's interpreter lacks them).
    km = KernelManager(kernel_cmd=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"])
    NotebookClient(nb, km=km, timeout=600, allow_errors=False,
                   resources={"metadata": {"path": str(BOOK)}}).execute(cwd=str(BOOK))
    return nb


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_claims_survive_a_second_run_and_out_of_order_reruns(path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_BACKEND", "cpu")  # the same on every machine; the GPU lane runs nbval on the GPU
    nb = nbformat.read(path, as_version=4)
    claims = [i for i, c in enumerate(nb.cells) if _is_claim(c)]
    assert claims or not path.stem[0].isdigit(), f"{path.name} has no claim cells"  # every chapter has one

    # Run 1: the whole chapter, then its claim cells again, last first, in the same kernel.
    extended = copy.deepcopy(nb)
    extended.cells += [copy.deepcopy(nb.cells[i]) for i in reversed(claims)]
    first = _run(extended)
    # Run 2: restart and run all.
    second = _run(nb)

    stored, recorded = _glued(nb), _glued(second)
    assert stored, f"{path.name} shows no value from its prose() cells"
    differ = {k: (stored.get(k), recorded.get(k)) for k in stored.keys() | recorded.keys()
              if k.split(":")[0] not in COMPILER_DEPENDENT and stored.get(k) != recorded.get(k)}
    changed = _changed_records()
    if changed:
        warnings.warn(f"{path.name}: glued values not compared with the records: results/ is not as committed "
                      f"({', '.join(changed)}; a GPU run of the chapters saves its own records)")
    else:
        assert not differ, (f"{path.name}: glued values (stored, from the records) differ: {differ}; re-execute "
                            f"the chapter on the GPU that recorded them, or re-store the cells that read the records")

    n = len(nb.cells)
    for j, i in enumerate(reversed(claims)):
        once, rerun, again = _text(first.cells[i]), _text(first.cells[n + j]), _text(second.cells[i])
        assert "ERROR" not in once, f"{path.name} cell {i} failed: {once}"
        assert rerun == once, f"{path.name} cell {i} changed when re-run after the whole chapter"
        assert again == once, f"{path.name} cell {i} changed between two restart-and-run-all runs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_glue_keys_are_unique(path):
    """Each glue key is set by one cell only: otherwise the prose would quote whichever cell ran last."""
    import re
    keys = [k for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"  # a cell may set
            for k in set(re.findall(r"""\bglue\(\s*["'](\w+)["']""", cell.source))]           # one in two branches
    assert len(keys) == len(set(keys)), sorted({k for k in keys if keys.count(k) > 1})


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_figures_are_stored(path):
    """A cell that draws with plt.show() keeps its figure among its stored outputs: the book is built from them
    (execute_notebooks: off), so a figure the executing kernel did not capture (a notebook without the inline backend,
    run with MPLBACKEND=Agg) would be missing from the site without any error."""
    for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.cell_type == "code" and "plt.show()" in cell.source:
            assert any("image/png" in out.get("data", {}) for out in cell.get("outputs", [])), \
                f"{path.name} cell {i} draws a figure but stores none: run the chapter with its inline backend"
