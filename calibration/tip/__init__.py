"""The adaptive search for a critical mass (``normlab tip``): the search and its result, and where
its runs come from (a replayed archive, live LLM runs).

``normlab.calibration.tip`` was one module before the regroup: its names are exported here
(lazily; the private ones the tests import too), so ``from normlab.calibration.tip import tip``
keeps working. Imports ``fit/``, ``prediction/`` and ``evaluate/``."""

from __future__ import annotations

from normlab._lazy import lazy_exports

_EXPORTS = {
    "tip": "search",
    "run_tip": "search",
    "TipResult": "result",
    "TipSettings": "settings",
    "STRATEGIES": "settings",
    "count_met": "search",
    "_rule": "search",
    "_rule_draws": "search",
    "_run_class": "search",
    "_run_classes": "search",
    "Batch": "sources",
    "RunSource": "sources",
    "ArchiveReplay": "sources",
    "LLMSource": "sources",
    "archive_design": "sources",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
__all__ = [n for n in __all__ if not n.startswith("_")]
