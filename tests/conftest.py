"""Shared fixtures. The published AI-norms data are read from ../shared/data/ai-norms beside the
repository or from $NORMLAB_AINORMS (never copied into it); tests that need them skip cleanly when the folder is absent."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# the tests' own helper modules (``_docs``: the docs pages README's text moved to), importable under
# --import-mode=importlib
sys.path.insert(0, str(Path(__file__).resolve().parent))
# $NORMLAB_AINORMS (a folder) wins, as for the loaders; e.g. for a git worktree outside the repository's parent
AINORMS = Path(os.environ["NORMLAB_AINORMS"]) if os.environ.get("NORMLAB_AINORMS") else (
    REPO.parent / "shared" / "data" / "ai-norms")


@pytest.fixture(scope="session")
def ainorms_dir() -> Path:
    if not (AINORMS / "llama31_data.zip").exists():
        pytest.skip(f"published AI-norms data not found at {AINORMS}")
    return AINORMS


def pytest_collection_modifyitems(config, items):
    """Every test that reads the published archives through ``ainorms_dir`` (directly or through a
    fixture) is in the ``data`` tier: opt-in (``-m data``; CI runs every tier)."""
    for item in items:
        if "ainorms_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.data)
