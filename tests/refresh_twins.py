"""Re-store the static twins' outputs in the notebooks after a change to gemmlab/chapters/sitecontrols.py.

Each stored twin output names the call that built it (its div's data-gemmlab-twin attribute); this rebuilds the chart
from that call and replaces only that output's text/html and text/plain, through nbformat. No other cell or output
changes, nothing is executed, no GPU is needed. The browser test (tests/site) fails on a stale twin.

    PYTHONPATH=. python tests/refresh_twins.py [book/NN_name.ipynb ...]     (default: every notebook in book/)
"""
from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import nbformat

from gemmlab import sitecontrols

ROOT = Path(__file__).resolve().parent.parent
CALL = re.compile(r'data-gemmlab-twin="([^"]*)"')


def refresh(path: Path) -> int:
    """Rebuild every twin output of one notebook; how many changed."""
    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    sitecontrols.new_page()   # a fresh kernel per notebook
    changed = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("data", {}).get("text/html", "")
            text = "".join(text) if isinstance(text, list) else text
            m = CALL.search(text)
            if not m:
                continue
            call = json.loads(html.unescape(m.group(1)))
            bundle = getattr(sitecontrols, call["fn"])(**call["kwargs"])._repr_mimebundle_()
            if out["data"].get("text/html") != bundle["text/html"] or out["data"].get("text/plain") != bundle["text/plain"]:
                out["data"]["text/html"] = bundle["text/html"]
                out["data"]["text/plain"] = bundle["text/plain"]
                changed += 1
    if changed:
        nbformat.write(nb, path)
    return changed


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((ROOT / "book").glob("*.ipynb"))
    for p in paths:
        n = refresh(p)
        if n:
            print(f"{p}: {n} twin output(s) re-stored")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
