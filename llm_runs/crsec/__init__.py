"""CRSEC norm lifecycle (Ren et al., IJCAI 2024): norm records, sanity check, synthesis, spreading.

- :mod:`.records` -- :class:`NormRecord` (content, utility, type, activated, valid + provenance)
  and :class:`NormDatabase` (candidate -> qualified -> synthesised state machine);
- :mod:`.lifecycle` -- the four-step sanity check (pluggable steps) and the long-term synthesis;
- :mod:`.operations` / :mod:`.llm_operations` -- the operations of §2 as deterministic rules or
  as LLM prompts (JSON files in ``prompts/``; the embedded model by default);
- :mod:`.runner` -- a small population in the Hobbs Cafe (agents of Appendix A);
- :mod:`.analysis` -- adoption curves (belief vs behaviour), conflicts/chats/thoughts, funnel;
- :mod:`.topics` -- topic and stance of free text (keyword rules as data).

Names are imported on first use.
"""

from __future__ import annotations

from normlab._lazy import lazy_exports

_EXPORTS = {
    "NormRecord": "records",
    "NormDatabase": "records",
    "CHECK_STEPS": "lifecycle",
    "CheckOutcome": "lifecycle",
    "SynthesisOutcome": "lifecycle",
    "sanity_check": "lifecycle",
    "arun_check": "lifecycle",
    "evaluate": "lifecycle",
    "aevaluate": "lifecycle",
    "synthesise": "lifecycle",
    "asynthesise": "lifecycle",
    "weighted_utility": "lifecycle",
    "NormOperations": "operations",
    "RuleOperations": "operations",
    "LLMOperations": "llm_operations",
    "run_population": "runner",
    "arun_population": "runner",
    "PopulationRun": "runner",
    "PopulationSettings": "runner",
    "load_population": "runner",
    "estimate_population": "runner",
    "adoption_curves": "analysis",
    "beliefs_from_norms": "analysis",
    "snapshot_beliefs": "analysis",
    "beliefs_from_snapshots": "analysis",
    "behaviour_from_nodes": "analysis",
    "events_from_nodes": "analysis",
    "event_counts": "analysis",
    "norm_funnel": "analysis",
    "plot_emergence": "analysis",
    "classify_text": "topics",
    "classify_type": "topics",
    "load_topics": "topics",
    "load_agents": "topics",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
