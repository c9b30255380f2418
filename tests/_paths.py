"""Where the tests find the repository, whatever folder a test module lies in (tests are grouped by
the package they test: tests/theory/, tests/llm_runs/, tests/calibration/, tests/umbrella/).
Importable as ``_paths`` like ``_docs`` (conftest.py puts tests/ on sys.path)."""

from __future__ import annotations

from pathlib import Path

#: tests/ (its helper modules and data/)
TESTS = Path(__file__).resolve().parent
#: the repository's root
REPO = TESTS.parent
#: tests/data/: the committed fixtures
DATA = TESTS / "data"
