"""A blind study of normlab's predictions on one model: ``normlab study`` (a top layer, beside the demo;
it may import every other layer).

The study probes the model's strategy table, writes every prediction with its interval -- for the
design about to be run -- to ``OUT/predictions.json`` (hashed; later stages refuse to run if it
changes), then plays the populations and committed-minority runs in the paper's sample mode (with
exact-mode twins as the consistency check), runs the tip search against the full grid, scores every
prediction beside the rivals and writes a report. Each stage runs once and is journaled
(``OUT/stages.jsonl``): a rerun resumes where the last one stopped.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, "Emergent social conventions and collective bias in
LLM populations", Sci. Adv. 11, eadu9368 (2025).
"""

from __future__ import annotations

from normlab._lazy import lazy_exports

_EXPORTS = {
    "run_study": "pipeline",
    "estimate_study": "pipeline",
    "StudyResult": "pipeline",
    "StudySettings": "pipeline",
    "STUDY_DEFAULTS": "_settings",
    "STAGES": "_settings",
    "SUMMARY_SCHEMA": "report",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
