"""Play the naming game of Flint Ashery et al. (2025) with LLM agents through an OpenAI-compatible endpoint.

Populations of ``N`` agents with memory ``H`` meet in random pairs (complete graph or any
networkx graph); both agents of a pair are prompted concurrently; every call and interaction is
journaled (append-only JSONL) so that a killed run resumes exactly; the output is a
:class:`normlab.schema.GameLog` saved as Parquet, in the same schema as the theory simulators.

The rooms, in the order a run passes through them:

- :mod:`.prompts` -- the prompt templates, their rendering and the answer parsers;
- :mod:`.exact` -- exact mode: a name's probability from the next-token distributions;
- :mod:`.sampling` -- :class:`Sampling`: the prompt and the sampler, as a value;
- :mod:`.mode` -- :class:`DecisionMode` (``EXACT``, ``SAMPLE``): tokens per request, context,
  cache use, default prefill, exact mode's sampler checks, the requests a design costs;
- :mod:`.settings` -- :class:`GameSettings` from a ``GameSpec``, a ``Sampling`` and a mode
  (:func:`game_settings`) or from keywords (:func:`make_settings`);
- :mod:`.groups` -- mixed populations (:func:`make_groups`: a model, template or sampler per group);
- :mod:`.state` -- the state of one run (memories, stop rules, the running flip check) and its start;
- :mod:`.game` -- the game loop: decisions (sample and exact mode, re-asks), runs, the journal;
- :mod:`.progress` -- the progress bar and its estimate;
- :mod:`.log`, :mod:`.ledger` -- the tidy tables and the token/cost ledger rebuilt from the journal;
- :mod:`.result` -- :class:`LLMRunResult`;
- :mod:`.estimate` -- :func:`estimate_game` and :class:`RunEstimate` (``--dry-run``);
- :mod:`.orchestration` -- :func:`run_game` / :func:`arun_game`: the directory, resumption, the endpoints.

Names are imported on first use (``normlab.llm_runs.runner.prompts`` does not load the game loop);
``from normlab.llm_runs.runner import game`` gives the module.
"""

from __future__ import annotations

from normlab._lazy import lazy_exports

_EXPORTS = {
    "BYTES_PER_TOKEN": "estimate", "RunEstimate": "estimate", "distinct_prompts": "estimate",
    "estimate_game": "estimate", "estimate_requests": "estimate", "prompt_tokens": "estimate",
    "REASK_SAFETY_LIMIT": "game", "Agents": "game", "Game": "game", "ReaskLimitError": "game",
    "exact_cache_entries": "game", "load_cache": "game",
    "GROUP_KEYS": "groups", "GroupSpec": "groups", "agent_groups": "groups", "group_prices": "groups",
    "make_groups": "groups",
    "build_ledger": "ledger", "ledger_for_directory": "ledger", "ledger_totals": "ledger",
    "RUN_TABLES": "log", "build_result": "log",
    "arun_game": "orchestration", "run_game": "orchestration", "aplay_game": "orchestration",
    "DecisionMode": "mode", "EXACT": "mode", "SAMPLE": "mode", "mode_of": "mode",
    "SAMPLING_KEYS": "sampling", "Sampling": "sampling",
    "Progress": "progress", "expected_interactions": "progress",
    "LLMRunResult": "result",
    "COMMITTED_MODES": "settings", "COMMITTED_PLACEMENTS": "settings", "MODES": "settings",
    "NAME_ORDERS": "settings", "STOP_RULES": "settings", "UNBOUNDED": "settings", "GameSettings": "settings",
    "check_reasks": "settings", "compare_settings": "settings", "longest_prompt_bytes": "settings",
    "game_settings": "settings", "make_settings": "settings", "seed_list": "settings",
    "FLIP_THRESHOLD": "state", "RunState": "state", "run_setup": "state",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
