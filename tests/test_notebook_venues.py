"""Every chapter is whole in JupyterLab, on Colab and on the site (issue 40).

Markdown cells hold CommonMark and $math$ only: the MyST roles and directives that Jupyter Book renders show as
raw text in JupyterLab and on Colab. Numbers in the prose are a prose() cell's Markdown output (gemmlab.glue),
kernels are a show.source()/show.diff() cell's HTML output (gemmlab.show), and every chapter opens with the same
set-up cell, which takes the course's address from one place.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import gemmlab
from gemmlab import fusion, glue, nvrtc

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
NOTEBOOKS = sorted(BOOK.glob("*.ipynb"))
# MyST-only syntax: roles ({glue:text}`x`), directives (```{name}, :::), targets ((label)=), substitutions ({{x}})
MYST_ONLY = re.compile(r"\{[a-z][\w:-]*\}`|```\{|^:::|^\(\w[\w-]*\)=\s*$|\{\{", re.M)


def _cells(path: Path):
    return nbformat.read(path, as_version=4).cells


def _markdown_outputs(cell) -> list[str]:
    return [out["data"]["text/markdown"] for out in cell.get("outputs", []) if "text/markdown" in out.get("data", {})]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_markdown_renders_everywhere(path):
    """No MyST-only syntax in a markdown cell or in a prose() cell's stored Markdown."""
    for i, cell in enumerate(_cells(path)):
        texts = [cell.source] if cell.cell_type == "markdown" else _markdown_outputs(cell)
        for text in texts:
            found = MYST_ONLY.findall(text)
            assert not found, f"{path.name} cell {i}: MyST-only syntax {found} shows as raw text in JupyterLab and Colab"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_prose_cells_are_hidden_and_stored(path):
    """A prose() cell hides its input in every venue and stores the text it showed, with the values it used."""
    for i, cell in enumerate(_cells(path)):
        if cell.cell_type != "code" or "prose(" not in cell.source:
            continue
        assert "remove-input" in cell.metadata.get("tags", []), f"{path.name} cell {i}: tag remove-input (the site)"
        assert cell.metadata.get("jupyter", {}).get("source_hidden"), f"{path.name} cell {i}: source_hidden (JupyterLab)"
        assert cell.metadata.get("cellView") == "form", f"{path.name} cell {i}: cellView form (Colab)"
        outs = [o for o in cell.outputs if "text/markdown" in o.get("data", {})]
        assert len(outs) == 1 and glue.METADATA_KEY in outs[0].get("metadata", {}), \
            f"{path.name} cell {i}: a prose cell stores one Markdown output with the values it used"


def _setup_source(path: Path) -> str:
    first = _cells(path)[0]
    assert first.cell_type == "code" and first.source.startswith("# @title Set-up"), f"{path.name} must open with the set-up"
    return first.source


def test_setup_cell_is_the_same_everywhere_and_names_the_course_once():
    """One set-up for every chapter, hidden on the site, whose address is _config.yml's repository.url (the
    address the site's launch and repository buttons use)."""
    sources = {p.name: _setup_source(p) for p in NOTEBOOKS}
    assert len(set(sources.values())) == 1, f"the set-up cells differ: {sorted(sources)}"
    setup = next(iter(sources.values()))
    config = (ROOT / "_config.yml").read_text()
    url = re.search(r"^repository:\s*\n\s+url:\s*(\S+)", config, re.M).group(1)
    assert f'COURSE_URL = "{url}"' in setup
    for p in NOTEBOOKS:
        assert "remove-cell" in _cells(p)[0].metadata.get("tags", [])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_colab_opens_on_a_gpu_runtime(path):
    meta = nbformat.read(path, as_version=4).metadata
    assert meta.get("accelerator") == "GPU" and meta.get("colab", {}).get("gpuType") == "T4"


def _listed_kernels(path: Path) -> set[str]:
    titles = set()
    for cell in _cells(path):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            html = out.get("data", {}).get("text/html", "")
            titles |= set(re.findall(r'<div class="gemmlab-listing"><p[^>]*>kernels/([\w/]+)\.cu', html))
    return titles


def test_every_step_is_listed_in_its_chapter():
    """Each step a chapter teaches has its source (whole or as a diff) among that chapter's outputs."""
    by_chapter = {2: ["02"], 3: ["03"], 4: ["04"], 6: ["06"], 7: ["07", "07b", "07c", "07d"], "7c": ["07c"], 8: ["08", "09"]}
    taught = [(s.name, s.chapter) for s in gemmlab.steps()] + [(s.name, 8) for s in fusion.steps()]
    for name, chapter in taught:
        pages = [p for p in NOTEBOOKS if p.stem.split("_")[0] in by_chapter[chapter]]
        assert any(name in _listed_kernels(p) for p in pages), f"{name} is not listed in chapter {chapter}'s outputs"


def test_listing_html_is_self_contained():
    """A listing styles itself inline (no stylesheet), so JupyterLab, Colab and the site show the same."""
    listing = gemmlab.show.diff("sgemm/02_coalesced")
    html = listing._repr_html_()
    assert "<style" not in html and "class=\"gemmlab-listing\"" in html and "style=" in html
    assert "+    const int col = blockIdx.x * BLOCK_X + threadIdx.x;" in repr(listing)
    assert listing.title == "kernels/sgemm/02_coalesced.cu, changes against kernels/sgemm/01_naive.cu"
    with pytest.raises(FileNotFoundError, match="sgemm/01_naive"):
        gemmlab.show.source("sgemm/99_nothing")


def test_prose_fills_placeholders_and_names_a_missing_value():
    text, used = glue.render("{{a}} and {{b:.1f}}%", {"a": "9.6x", "b": "12.94"})
    assert text == "9.6x and 12.9%" and used == {"a": "9.6x", "b:.1f": "12.9"}
    with pytest.raises(KeyError, match="no cell has glued"):
        glue.render("{{missing}}", {})
    assert glue.render("$x_{big}$ {not a placeholder}", {})[0] == "$x_{big}$ {not a placeholder}"


def test_setup_cell_failure_says_what_to_do(tmp_path):
    """On Colab, a course that cannot be fetched gets one sentence saying why and what to do, not a traceback."""
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    fake = tmp_path / "fake" / "google" / "colab"
    fake.mkdir(parents=True)
    (fake.parent / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(_setup_source(NOTEBOOKS[0]))])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(tmp_path / "fake"), GEMMLAB_COURSE_URL=str(tmp_path / "no-such-repository"),
               GEMMLAB_COURSE_DIR=str(tmp_path / "course"))
    km = KernelManager(kernel_cmd=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"])
    client = NotebookClient(nb, km=km, timeout=120, resources={"metadata": {"path": str(tmp_path)}})
    with pytest.raises(CellExecutionError):
        client.execute(cwd=str(tmp_path), env=env)
    error = next(o for o in nb.cells[0].outputs if o.output_type == "error")
    assert error.ename == "SetupError" and error.traceback == [f"SetupError: {error.evalue}"]
    assert "could not fetch the course from" in error.evalue and "GEMMLAB_COURSE_URL" in error.evalue


def test_pip_install_gives_a_working_package(tmp_path):
    """`pip install .` ships kernels/, results/ and lab/'s patches inside the package: a step compiles and checks
    from there, and chapter 8's variant (a patch from lab/) applies with no git history (to the current kernel)."""
    import shutil

    source, target = tmp_path / "course", tmp_path / "site"  # a copy: setuptools builds inside the source tree
    source.mkdir()
    for part in ("pyproject.toml", "README.md", "gemmlab", "kernels", "results", "lab", "book"):
        copy = shutil.copytree if (ROOT / part).is_dir() else shutil.copy
        copy(ROOT / part, source / part, **({"ignore": shutil.ignore_patterns("__pycache__")} if copy is shutil.copytree else {}))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(source)], check=True, capture_output=True, timeout=300)
    code = ("import gemmlab, gemmlab.runtime.source as s, gemmlab.measure.results as r; "
            "assert str(s.REPO).startswith(%r), s.REPO; "
            "assert (s.KERNELS / 'common.cuh').is_file() and any(r.RESULTS.glob('*.json')); "
            "from gemmlab import variants as x, fusion as f; assert str(x.LAB).startswith(%r), x.LAB; "
            "assert x.variant_source('fusion-tf32x3', f.get('fused/05_tf32x3'), '1x'); "
            "assert gemmlab.glue.chapter_value('02_coalescing', 'ch2_speedup'); "  # the appendix quotes the chapters
            "assert gemmlab.nvrtc.pinned_version() == %r, gemmlab.nvrtc.pinned_version(); "  # from the package's metadata
            "print(gemmlab.show.source('sgemm/01_naive').title)") % (str(target), str(target), nvrtc.pinned_version())
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "kernels/sgemm/01_naive.cu"


def _prose_words(path: Path) -> int:
    """Words a reader reads: markdown cells and the text of prose() cells (code fences and placeholders aside)."""
    words = 0
    for cell in _cells(path):
        if any(t.startswith("move-to-") for t in cell.metadata.get("tags", [])):
            continue  # a cell waiting to move to another chapter (move-to-7c: exercises) counts there
        if cell.cell_type == "markdown":
            text = cell.source
        elif cell.cell_type == "code" and "prose(" in cell.source:
            text = cell.source[cell.source.index("prose("):]
        else:
            continue
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        words += len(re.sub(r"\{\{[^}]*\}\}", "N", text).split())
    return words


def test_core_chapters_keep_to_the_word_budget():
    """A core chapter (the table of contents' "Chapters" part) holds at most 4,000 words of prose; what does not
    teach its idea goes into a lab note (the "Lab notes" part), which the chapter links."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    parts = {part["caption"]: [ROOT / f"{c['file']}.ipynb" for c in part["chapters"]] for part in toc["parts"]}
    assert parts["Chapters"] and parts["Lab notes"]
    over = {p.stem: _prose_words(p) for p in parts["Chapters"] if _prose_words(p) > 4000}
    assert not over, f"core chapters over 4,000 words of prose: {over}; move what does not teach the idea to a lab note"
    for lab in parts["Lab notes"]:
        linked = [p.stem for p in parts["Chapters"] if f"]({lab.name})" in (p.read_text())]
        assert linked, f"{lab.name}: no chapter links this lab note"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_code_reads_no_file_beside_the_notebook(path):
    """On Colab a chapter runs from /content with the course installed as a package, not from a checkout's book/
    folder: code cells find kernels and records through gemmlab (source.KERNELS, source.kernel_path, results)."""
    for i, cell in enumerate(_cells(path)):
        if cell.cell_type == "code" and i > 0:  # the set-up cell looks for a checkout on purpose
            assert not re.search(r"""['"]\.\.[/'"]""", cell.source), f"{path.name} cell {i} reads a path relative to book/"


def _core_chapters() -> list[Path]:
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    part = next(p for p in toc["parts"] if p["caption"] == "Chapters")
    return [ROOT / f"{c['file']}.ipynb" for c in part["chapters"]]


# A core chapter's shape, in the reader's order (issue 39): where we are and the problem, the kernel, its check,
# a measurement, try it, the claim, exercises. Chapter 1 teaches the machine and shows no kernel of its own.
SHAPE = (("where we are", r"\*\*Where we are\.\*\*"),
         ("a kernel listing", r"^show\.(source|diff)\("),
         ("a check against float64", r"^\[nbval-check-output\][\s\S]*(verify|check)\("),
         ("a measurement", r"^## (Measure|Counted)"),
         ("try it", r"^## Try it"),
         ("the claim", r"^## Claim and what comes next"),
         ("exercises", r"\*\*Exercises\.\*\*"))


@pytest.mark.parametrize("path", [p for p in _core_chapters() if not p.stem.startswith("01")], ids=lambda p: p.stem)
def test_core_chapter_has_the_course_shape(path):
    """Each part of the shape is there, and the first of each comes after the first of the part before it."""
    cells = _cells(path)
    def text(c):
        if c.cell_type == "code" and "prose(" in c.source:
            return c.source[c.source.index("prose("):]
        checked = c.cell_type == "code" and "nbval-check-output" in c.metadata.get("tags", [])
        return ("[nbval-check-output]\n" if checked else "") + c.source  # a claim cell is tagged, not marked
    first = []
    for name, pattern in SHAPE:
        hits = [i for i, c in enumerate(cells) if re.search(pattern, text(c), re.M)]
        assert hits, f"{path.name}: no {name}"
        first.append((name, hits[0]))
    # the order: each part first appears at or after the previous part's first appearance
    for (a, i), (b, j) in zip(first, first[1:]):
        assert j >= i, f"{path.name}: {b} (cell {j}) comes before {a} (cell {i})"


def test_core_chapters_show_no_code_cell_over_10_lines():
    """Issue 52: only the code a learner would type stays in view. A code cell the site shows (not tagged
    remove-input or remove-cell) holds at most 10 lines; what is longer belongs in the chapter's module."""
    long = {}
    for path in _core_chapters():
        for i, cell in enumerate(_cells(path)):
            hidden = {"remove-input", "remove-cell"} & set(cell.metadata.get("tags", []))
            lines = len(cell.source.rstrip("\n").split("\n"))
            if cell.cell_type == "code" and not hidden and lines > 10:
                long.setdefault(path.stem, []).append(f"cell {i}: {lines} lines")
    assert not long, f"visible code cells over 10 lines: {long}"


def test_step_diffs_follow_the_registry():
    """A chapter's diff of a step is against the step the registry says it extends (show.previous_step), so the
    book and the registry tell one story of which idea each step adds."""
    from gemmlab import show

    pairs = [(path.name, m.group(1), m.group(2)) for path in NOTEBOOKS for cell in _cells(path)
             if cell.cell_type == "code" for m in re.finditer(r'show\.diff\("([^"]+)"(?:,\s*"([^"]+)")?', cell.source)]
    assert pairs
    ladder = {s.name for s in gemmlab.steps()} | {s.name for s in fusion.steps()}
    for notebook, name, against in pairs:
        if name not in ladder:  # a demo or lab kernel against the step it varies (chapter 7's fp16 sums)
            continue
        assert against is None or against == show.previous_step(name), \
            f"{notebook}: diff of {name} against {against}, but the registry says it extends {show.previous_step(name)}"
