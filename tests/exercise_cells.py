"""Write an exercise's cells into its chapter's notebook with the template's verdict as the stored output (CPU):

    python tests/exercise_cells.py book/02_coalescing.ipynb ch2/coalesced_1d [--replace OLD_NAME] [--tag move-to-7c]

The cells tagged `checked-exercise` that name OLD_NAME (or NAME) are replaced in place; otherwise the cells are
appended at the end. Nothing else of the notebook changes (nbformat read and write)."""
import argparse
import contextlib
import io
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gemmlab import exercises  # noqa: E402


def _output(value, count):
    data = {"text/plain": str(value)}
    if hasattr(value, "_repr_html_"):
        data["text/html"] = value._repr_html_()
    return nbformat.v4.new_output("execute_result", data=data, execution_count=count)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("notebook")
    p.add_argument("name")
    p.add_argument("--replace", default=None)
    p.add_argument("--tag", action="append", default=[])
    a = p.parse_args(argv)
    nb = nbformat.read(a.notebook, as_version=4)
    md, code, hint = exercises.notebook_cells(a.name)
    with contextlib.redirect_stdout(io.StringIO()):
        verdict = exercises.check(a.name, code=exercises.gap_of(exercises.template(a.name))[1], backend="cpu")
        first = exercises.hint(a.name)
    assert not verdict.passed, str(verdict)
    tags = ["checked-exercise", *a.tag]
    old = a.replace or a.name
    mine = [i for i, c in enumerate(nb.cells) if "checked-exercise" in c.metadata.get("tags", [])
            and (f"({old}" in c.source or f'"{old}"' in c.source)]
    # Replaced code cells keep their execution counts; new ones count on from the notebook's highest.
    n = max((c.get("execution_count") or 0 for c in nb.cells if c.cell_type == "code"), default=0)
    kept = [nb.cells[i].get("execution_count") for i in mine if nb.cells[i].cell_type == "code"]
    counts = kept if len(kept) == 2 and all(kept) else [n + 1, n + 2]
    cells = [nbformat.v4.new_markdown_cell(md), nbformat.v4.new_code_cell(code), nbformat.v4.new_code_cell(hint)]
    cells[1].execution_count, cells[2].execution_count = counts
    cells[1].outputs = [_output(verdict, counts[0])]
    cells[2].outputs = [_output(first, counts[1])]
    for c in cells:
        c.metadata["tags"] = list(tags)
    if mine:
        for i, new in zip(mine, cells):  # keep the old cells' ids
            new.id = nb.cells[i].id
            nb.cells[i] = new
        if len(mine) < len(cells):  # the hint cell: right after the exercise's own cells
            assert all("checked-exercise" in c.metadata.get("tags", []) for c in nb.cells[mine[-1] + 1:]), \
                "the exercise cells are not at the notebook's end"
            nb.cells[mine[-1] + 1:mine[-1] + 1] = cells[len(mine):]
    else:
        nb.cells += cells
    nbformat.write(nb, a.notebook)
    print(verdict)


if __name__ == "__main__":
    main()
