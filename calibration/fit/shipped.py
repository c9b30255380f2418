"""The fitted strategy tables shipped in ``calibration/data/``: their names and documents.

Kept apart from :mod:`normlab.calibration.fit.posterior` so that listing them (``normlab calibrate
--list-tables``) reads a folder and nothing else; :func:`normlab.calibration.load_fit` turns a
document into a :class:`~normlab.calibration.StrategyFit`. ``calibration/_build_tables.py``
rebuilds them.
"""

from __future__ import annotations

import json
from importlib import resources

__all__ = ["shipped_fits", "shipped_document"]


def _root():
    return resources.files("normlab.calibration") / "data"


def shipped_fits() -> list[str]:
    """Names of the fitted tables shipped with normlab (see :func:`normlab.calibration.load_fit`)."""
    root = _root()
    try:
        return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".json"))
    except (FileNotFoundError, NotADirectoryError):  # pragma: no cover - broken install
        return []


def shipped_document(name: str) -> dict:
    """The JSON document of the shipped table ``name`` (a name of :func:`shipped_fits`)."""
    return json.loads((_root() / f"{name}.json").read_text())
