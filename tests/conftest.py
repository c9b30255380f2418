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


def _file_costs() -> dict[str, float]:
    """Seconds per test file in CI's last measured run (tests/file_costs.json, tools/test_costs.py)."""
    import json

    try:
        return dict(json.loads((REPO / "tests" / "file_costs.json").read_text(encoding="utf-8"))["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def pytest_collection_modifyitems(config, items):
    """Every test that reads the published archives through ``ainorms_dir`` (directly or through a
    fixture) is in the ``data`` tier: opt-in (``-m data``; CI runs every tier). The files are then
    ordered heaviest first by their measured seconds (a file's tests stay together and in order):
    pytest-xdist hands out files in this order (``--no-loadscope-reorder``, in addopts), a worker
    queuing its next one when two of its tests are left, so the long files start early and the
    short ones fill the end."""
    for item in items:
        if "ainorms_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.data)
    cost = _file_costs()
    if not cost:
        return
    first: dict[str, int] = {}
    for k, item in enumerate(items):
        first.setdefault(item.nodeid.split("::", 1)[0], k)

    def key(item):
        f = item.nodeid.split("::", 1)[0]
        return -cost.get(f, 0.0), first[f]

    items[:] = sorted(items, key=key)  # stable: a file's tests keep their order
