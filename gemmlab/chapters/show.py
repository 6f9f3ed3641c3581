"""Kernel listings as cell outputs: a step's source, or its diff against the step before, highlighted.

A chapter shows a kernel by calling `show.source("sgemm/01_naive")` or `show.diff("sgemm/02_coalesced")`.
The result is highlighted HTML with inline styles (no stylesheet needed), so the listing reads the same
in JupyterLab, on Colab and on the site; its plain-text form is the source or a unified diff.
"""
from __future__ import annotations

import difflib
import html
from pathlib import Path

from ..runtime.source import KERNELS
from ..runtime import registry

_BOX = ("background:#f7f7f7;color:#1f1f1f;border:1px solid #ddd;border-radius:4px;padding:6px 8px;margin:4px 0;"
        "overflow-x:auto;font-size:12px;line-height:1.35;font-family:SFMono-Regular,Menlo,Consolas,monospace")
_TITLE = "font-family:sans-serif;font-size:12px;color:#555;margin:8px 0 0 0"
_ADDED, _REMOVED, _HUNK = "background:#e6ffec", "background:#ffebe9", "color:#6e7781;background:#eef3f8"


class Listing:
    """A highlighted listing: `_repr_html_` for notebooks and the site, `str()` for plain text."""

    def __init__(self, title: str, html_lines: list[str], text: str):
        self.title, self.html_lines, self.text = title, html_lines, text

    def _repr_html_(self) -> str:
        body = "\n".join(self.html_lines)
        return (f'<div class="gemmlab-listing"><p style="{_TITLE}">{html.escape(self.title)}</p>'
                f'<pre style="{_BOX}">{body}</pre></div>')

    def __repr__(self) -> str:
        return f"{self.title}\n{self.text}"

    __str__ = __repr__


def kernel_file(name: str) -> Path:
    """The file of a step ("sgemm/01_naive") or of a path under kernels/ ("common.cuh", "fused/01_naive_row.cu")."""
    path = KERNELS / (name if name.endswith((".cu", ".cuh")) else f"{name}.cu")
    if not path.exists():
        raise FileNotFoundError(f"no kernel file {name!r}: expected {path}; a step is named like 'sgemm/01_naive'")
    return path


def _label(path: Path) -> str:
    return f"kernels/{path.relative_to(KERNELS).as_posix()}"


def highlighted_lines(text: str) -> list[str]:
    """One HTML string per line of `text`, highlighted as CUDA (plain escaped text if pygments is missing)."""
    try:  # optional: plain text without pygments
        from pygments import highlight  # optional (pyproject lists it; a bare install may lack it)
        from pygments.formatters import HtmlFormatter  # optional, as above
        from pygments.lexers import CudaLexer  # optional, as above
    except ImportError:
        return [html.escape(line) for line in text.split("\n")]
    out = highlight(text, CudaLexer(stripnl=False, ensurenl=False), HtmlFormatter(nowrap=True, noclasses=True,
                                                                                   style="default"))
    lines = out.split("\n")
    return lines[: text.count("\n") + 1]


def _excerpt(text: str, start_at: str | None, end_before: str | None) -> tuple[str, int]:
    """The lines of `text` from the first that contains `start_at` up to the first after it that contains
    `end_before`, and the number of the first line kept (1-based)."""
    lines = text.split("\n")
    first = 0
    if start_at is not None:
        first = next((i for i, line in enumerate(lines) if start_at in line), None)
        if first is None:
            raise ValueError(f"start_at={start_at!r} is not in the file")
    last = len(lines)
    if end_before is not None:
        last = next((i for i in range(first + 1, len(lines)) if end_before in lines[i]), None)
        if last is None:
            raise ValueError(f"end_before={end_before!r} does not follow start_at in the file")
    return "\n".join(lines[first:last]).rstrip("\n"), first + 1


def source(name: str, start_at: str | None = None, end_before: str | None = None) -> Listing:
    """The kernel file of step `name` (or a file under kernels/), whole or from the line holding `start_at` up
    to the line holding `end_before`."""
    path = kernel_file(name)
    text, first = _excerpt(path.read_text().rstrip("\n"), start_at, end_before)
    title = _label(path) + (f" (from line {first})" if first > 1 or end_before else "")
    return Listing(title, highlighted_lines(text), text)


def previous_step(name: str) -> str:
    """The step a step extends, as its registry entry names it (the GEMM registry or the fused steps' list)."""
    step = registry.lookup(name)
    if not step.previous:
        raise ValueError(f"{name} has no previous step: name the file to compare with (against=...)")
    return step.previous


def diff(name: str, against: str | None = None, context: int = 3, start_at: str | tuple[str, str] | None = None,
         end_before: str | tuple[str, str] | None = None) -> Listing:
    """What step `name` changes in `against` (default: the step it extends), as a highlighted unified diff; with
    `start_at`/`end_before` (as in source(); a pair gives the new file's marker, then the old file's) only that part
    of each file, line numbers kept."""
    new_path, old_path = kernel_file(name), kernel_file(against or previous_step(name))
    pair = lambda m: m if isinstance(m, tuple) else (m, m)  # noqa: E731
    new, new_first = _excerpt(new_path.read_text().rstrip("\n"), pair(start_at)[0], pair(end_before)[0])
    old, old_first = _excerpt(old_path.read_text().rstrip("\n"), pair(start_at)[1], pair(end_before)[1])
    new_lines, old_lines = new.split("\n"), old.split("\n")
    new_html, old_html = highlighted_lines(new), highlighted_lines(old)
    html_lines, text_lines = [], []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        (_, i1, _, j1, _), (_, _, i2, _, j2) = group[0], group[-1]
        hunk = f"@@ -{i1 + old_first},{i2 - i1} +{j1 + new_first},{j2 - j1} @@"
        html_lines.append(f'<span style="{_HUNK}">{hunk}</span>')
        text_lines.append(hunk)
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                for j in range(b1, b2):
                    html_lines.append(" " + new_html[j])
                    text_lines.append(" " + new_lines[j])
                continue
            for i in range(a1, a2):
                html_lines.append(f'<span style="{_REMOVED};display:inline-block;min-width:100%">-{old_html[i]}</span>')
                text_lines.append("-" + old_lines[i])
            for j in range(b1, b2):
                html_lines.append(f'<span style="{_ADDED};display:inline-block;min-width:100%">+{new_html[j]}</span>')
                text_lines.append("+" + new_lines[j])
    title = f"{_label(new_path)}, changes against {_label(old_path)}" + (f" (from line {new_first})" if new_first > 1 else "")
    if not html_lines:
        html_lines, text_lines = ["(no changes)"], ["(no changes)"]
    return Listing(title, html_lines, "\n".join(text_lines))
