"""Test-wide settings: a headless matplotlib, and the repository root on sys.path."""
import os
import sys
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_configure(config):
    """The lab's tests (tests/test_experiments.py: lab/'s patches and scripts, results/experiments/'s records) carry
    the marker `lab`: `pytest -m lab` runs them alone, `-m "not lab"` leaves them out. CI runs tests/ whole."""
    config.addinivalue_line("markers", "lab: the lab's experiments (lab/ and results/experiments/): patches, scripts, records")
