"""Probes of Flint Ashery et al. (2025): individual bias, neutral name pools, strategy tables and meta-prompting.

Each probe prompts single agents with chosen memories (no population), in ``exact`` mode
(next-token distributions, cached per prompt) or ``sample`` mode (generations, counted with
Clopper-Pearson intervals), and returns a frozen result with a tidy ``to_frame()``. With ``out``
the probe journals every call and answer there and resumes from it when run again.

One module per probe -- :mod:`.bias`, :mod:`.neutral`, :mod:`.strategy`, :mod:`.meta` -- with the
shared pieces in :mod:`.session` (endpoint, journal and decision cache of a probe) and
:mod:`.common` (settings from arguments, Clopper-Pearson, neutrality statistics); :mod:`.registry`
lists them for ``normlab llm-probe`` (:data:`~normlab.llm_runs.probes.registry.PROBES`). Names
are imported on first use.
"""

from __future__ import annotations

from normlab._lazy import lazy_exports

_EXPORTS = {
    "PROBES": "registry",
    "ProbeSpec": "registry",
    "clopper_pearson": "common",
    "ProbeSession": "session",
    # individual bias
    "individual_bias": "bias",
    "aindividual_bias": "bias",
    "BiasResult": "bias",
    "bootstrap_p": "bias",
    # neutral names
    "find_neutral_names": "neutral",
    "NeutralSearch": "neutral",
    "random_names": "neutral",
    "ALPHABET": "neutral",
    # strategy tables
    "strategy_table": "strategy",
    "astrategy_table": "strategy",
    "StrategyProbe": "strategy",
    "enumerate_states": "strategy",
    "check_table_size": "strategy",
    "MAX_TABLE_STATES": "strategy",
    "ordered_prompt_text": "strategy",
    # meta-prompting
    "meta_prompting": "meta",
    "ameta_prompting": "meta",
    "MetaResult": "meta",
    "MetaSettings": "meta",
    "META_PROTOCOLS": "meta",
    "META_SCORINGS": "meta",
    "authors_meta_value": "meta",
    "authors_meta_gold": "meta",
    "authors_meta_correct": "meta",
    # names the tests import from the one-module layout
    "_meta_correct": "meta",
    "_meta_questions": "meta",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
__all__ = [n for n in __all__ if not n.startswith("_")]
