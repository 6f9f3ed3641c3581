"""Sphinx extension: the `:diff:` listings show repository paths, not the building machine's.

`literalinclude` with `:diff:` writes a unified diff whose two header lines carry the absolute paths of the
files it compared (/home/<someone>/.../kernels/sgemm/07_warptiling.cu); a reader needs kernels/sgemm/...
"""
from __future__ import annotations

from docutils import nodes


def _relative_headers(app, doctree) -> None:
    root = str(app.srcdir).rstrip("/") + "/"
    for block in doctree.findall(nodes.literal_block):
        text = block.astext()
        if block.get("language") != "udiff" or root not in text:
            continue
        lines = text.split("\n")
        for i, line in enumerate(lines[:3]):  # only the "--- old" and "+++ new" header lines
            if line.startswith(("--- ", "+++ ")):
                lines[i] = line[:4] + line[4:].replace(root, "", 1)
        block.children = [nodes.Text("\n".join(lines))]


def setup(app):
    app.connect("doctree-read", _relative_headers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
