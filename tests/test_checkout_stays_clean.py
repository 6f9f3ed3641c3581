"""Issue 56: opening a chapter in JupyterLab leaves the checkout as it was. The notebooks store the kernelspec that
JupyterLab writes for the course's venv (ipykernel's "Python 3 (ipykernel)"), and git ignores what
`python -m gemmlab exercise start` writes (./exercises/, or book/exercises/ from a notebook opened in book/)."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_kernelspec_is_what_jupyterlab_writes(path):
    meta = json.loads(path.read_text())["metadata"]
    assert meta["kernelspec"] == {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_exercise_copies_are_ignored():
    for path in ("exercises/ch2/coalesced_index.cu", "book/exercises/ch2/coalesced_index.cu"):
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0, path
    # ... but not the course's own templates
    assert subprocess.run(["git", "check-ignore", "-q", "kernels/exercises/ch2_coalesced_index.cu"],
                          cwd=ROOT).returncode == 1
