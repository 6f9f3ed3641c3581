"""Issue 56: the command line's chapter labels (`python -m gemmlab steps`) come from the chapter that teaches each
step (registry.chapter_labels reads book/'s show.source / show.diff cells), not from a number typed in the registry."""
import json
from pathlib import Path

import pytest

from gemmlab import registry
from gemmlab.__main__ import listing_line

pytestmark = pytest.mark.unit
BOOK = Path(__file__).resolve().parent.parent / "book"


def _notebook(label: str) -> Path:
    """The chapter notebook a label names: "7b" -> book/07b_*.ipynb."""
    found = sorted(BOOK.glob(f"{label.zfill(2) if label[-1].isdigit() else label.zfill(3)}_*.ipynb"))
    assert len(found) == 1, f"label {label!r} names {found}"
    return found[0]


def test_every_label_names_a_chapter_that_shows_the_step():
    labels = registry.chapter_labels()
    assert labels, "no chapter notebook shows a step"
    for name, label in labels.items():
        text = "".join("".join(c["source"]) for c in json.loads(_notebook(label).read_text())["cells"]
                       if c["cell_type"] == "code")
        assert f'"{name}"' in text or f"'{name}'" in text, (name, label)


def test_labels_follow_the_chapters_not_the_registry_numbers():
    # The tensor-core ladder is chapter 7b and the Hopper fused steps chapter 9 (the registry said 7 and 8).
    assert registry.chapter_label("hgemm/04_register_prefetch") == "7b"
    assert registry.chapter_label("fused/06_wgmma_tf32x3") == "9"
    # A whole listing or a diff wins over an excerpt: chapter 5 quotes hgemm/03's swizzle, chapter 7 teaches it.
    assert registry.chapter_label("hgemm/03_swizzled") == "7"
    assert registry.chapter_label("sgemm/01_naive") == "2"


def test_steps_listing_uses_the_derived_label():
    for s in registry.all_steps():
        assert f" ch{registry.chapter_label(s)} " in listing_line(s), s.name
