"""Test-wide settings: a headless matplotlib, and the repository root on sys.path."""
import os
import sys
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# The claim tests: whole modules about the book, and tests elsewhere whose name says they check a claim.
CLAIM_MODULES = {"test_notebooks_rerun.py", "test_notebook_venues.py", "test_documents.py"}


def pytest_collection_modifyitems(config, items):
    """Every test is `unit` or `claims` (issue 42): `pytest -m unit` catches code defects fast, `pytest -m claims`
    checks the book against its records; CI runs both (and nbval over book/, which is neither)."""
    import pytest

    for item in items:
        if item.path.suffix != ".py" or item.path.parent.name not in ("tests", "site"):
            continue  # nbval's notebook cells
        is_claim = item.path.name in CLAIM_MODULES or "claim" in item.name
        item.add_marker(pytest.mark.claims if is_claim else pytest.mark.unit)
