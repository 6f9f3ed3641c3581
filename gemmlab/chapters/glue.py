"""glue() and prose(): measured numbers in a chapter's text, visible in JupyterLab, on Colab and on the site.

A chapter computes a figure in a code cell (`glue("ch2_speedup", "9.6x")`, from the records in results/),
and a later cell writes the sentences that carry it:

    prose('''At 4096 the coalesced kernel is {{ch2_speedup}} faster.''')

prose() shows the text as a Markdown output, with each `{{name}}` (or `{{name:.1f}}`, a format spec)
replaced by the glued value. Markdown cells cannot compute, and the MyST roles that can (`{glue:text}`)
show as raw text outside Jupyter Book; a cell's Markdown output renders the same everywhere. The output
also carries the values it used (metadata "gemmlab.values"), so a test can compare a stored chapter's
figures with the records one by one. The chapters hide these cells' input (tag remove-input, JupyterLab's
source_hidden, Colab's form view).
"""
from __future__ import annotations

import ast
import re
from typing import Any
from ..runtime.source import REPO
from ..runtime import optional


def ipy_display(*objs, **kw):
    """IPython's display, imported when first called (the command line runs without IPython)."""
    return optional.module("IPython.display").display(*objs, **kw)


import json

# The values glued in this kernel so far, by name (a chapter's cells run in order; a re-run replaces).
VALUES: dict[str, Any] = {}
# {{name}}, {{name:.1f}} (a format spec), or {{chapter::name}}: a value another chapter's stored prose shows
PLACEHOLDER = re.compile(r"\{\{\s*(\w+(?:::\w+)?)\s*(?::([^}]*))?\}\}")
METADATA_KEY = "gemmlab"


def glue(name: str, value: Any, display: bool = False) -> None:
    """Keep `value` under `name` for later prose() cells; show it too if `display`."""
    VALUES[name] = value
    if display:
        ipy_display(value)


def shown(value: Any, spec: str = "") -> str:
    """The text of `value` in prose, formatted by `spec` (a str.format spec, e.g. '.1f') if one is given.

    Text that reads as a number ('12.9') is formatted as that number, so a figure glued as text and one
    glued as a float read the same."""
    if spec:
        if isinstance(value, str):
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                pass
        return format(value, spec)
    return str(value)


def render(text: str, values: dict[str, Any] | None = None) -> tuple[str, dict[str, str]]:
    """`text` with its placeholders filled from `values` (default: what this kernel glued), and the text of each
    value used. A name that was never glued raises, naming the cell that should have run first."""
    values = VALUES if values is None else values
    used: dict[str, str] = {}

    def fill(m: re.Match) -> str:
        name, spec = m.group(1), (m.group(2) or "").strip()
        if "::" in name:
            used[name] = text_ = chapter_value(*name.split("::"))
            return text_
        if name not in values:
            raise KeyError(f"prose() quotes {{{{{name}}}}}, which no cell has glued yet: run the chapter's cells "
                           f"from the top (the cell that computes {name!r} comes earlier)")
        used[m.group(0)[2:-2].strip()] = text_ = shown(values[name], spec)
        return text_

    return PLACEHOLDER.sub(fill, text), used


def chapter_value(chapter: str, name: str) -> str:
    """The text chapter `chapter` (a notebook's stem in book/, e.g. "02_coalescing") shows for `name`, as stored
    in its prose() outputs: for a page that gathers the chapters' figures (the appendix) without re-running them."""

    path = REPO / "book" / f"{chapter}.ipynb"
    if not path.is_file():
        raise FileNotFoundError(f"no chapter {chapter!r}: expected {path}")
    shown_as = {}
    for cell in json.loads(path.read_text())["cells"]:
        for out in cell.get("outputs", []):
            shown_as.update(out.get("metadata", {}).get(METADATA_KEY, {}).get("values", {}))
    matches = [text for key, text in shown_as.items() if key.split(":")[0] == name]
    if len(set(matches)) != 1:
        raise KeyError(f"{chapter} shows {name!r} {len(set(matches))} ways ({sorted(set(matches))}): quote one the "
                       "chapter's prose shows once")
    return matches[0]


def prose(text: str) -> None:
    """Show `text` (Markdown with `{{name}}` placeholders) as the cell's output, the placeholders filled."""
    markdown, used = render(text.strip("\n"))
    ipy_display({"text/markdown": markdown, "text/plain": markdown}, raw=True,
                metadata={METADATA_KEY: {"values": used}})
