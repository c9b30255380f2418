"""From nothing to a report: ``normlab demo`` (the top layer; it may import every other layer).

One call (:func:`run_demo`, or ``normlab demo --out DIR``) probes an LLM's strategy table, predicts
with the theory what a population of that LLM will do (collective bias, time to consensus, critical
mass), plays small LLM populations and committed-minority runs to check the predictions, calibrates
the strategy again from the population's own log, and writes a self-contained report
(``DIR/report.html``, ``DIR/*.png``, ``DIR/summary.json``). Every LLM call is journaled, so a rerun
reuses them; nothing in ``theory``, ``llm_runs`` or ``calibration`` imports this package.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, "Emergent social conventions and collective bias in
LLM populations", Sci. Adv. 11, eadu9368 (2025): Figs. 1-3, Table 1, Fig. S8, Table S3.
"""

from __future__ import annotations

from normlab._lazy import lazy_exports

_EXPORTS = {
    "run_demo": "pipeline",
    "estimate_demo": "pipeline",
    "DemoResult": "pipeline",
    "DemoSettings": "pipeline",
    "DEMO_DEFAULTS": "pipeline",
    "SUMMARY_SCHEMA": "report",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
