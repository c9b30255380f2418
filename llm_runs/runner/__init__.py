"""Play the naming game of Flint Ashery et al. (2025) with LLM agents through an OpenAI-compatible endpoint.

Populations of ``N`` agents with memory ``H`` meet in random pairs (complete graph or any
networkx graph); both agents of a pair are prompted concurrently; every call and interaction is
journaled (append-only JSONL) so that a killed run resumes exactly; the output is a
:class:`normlab.schema.GameLog` saved as Parquet, in the same schema as the theory simulators.

The rooms, in the order a run passes through them:

- :mod:`.settings` -- :class:`GameSettings` and their validation (:func:`make_settings`);
- :mod:`.groups` -- mixed populations (:func:`make_groups`: a model, template or sampler per group);
- :mod:`.state` -- the state of one run (memories, stop rules, the running flip check) and its start;
- :mod:`.game` -- the game loop: decisions (sample and exact mode, re-asks), runs, the journal;
- :mod:`.progress` -- the progress bar and its estimate;
- :mod:`.log`, :mod:`.ledger` -- the tidy tables and the token/cost ledger rebuilt from the journal;
- :mod:`.result` -- :class:`LLMRunResult`;
- :mod:`.estimate` -- :func:`estimate_game` and :class:`RunEstimate` (``--dry-run``);
- :mod:`.orchestration` -- :func:`run_game` / :func:`arun_game`: the directory, resumption, the endpoints.
"""

from __future__ import annotations

from .estimate import (BYTES_PER_TOKEN, RunEstimate, distinct_prompts, estimate_game, estimate_requests,
                       prompt_tokens)
from .game import REASK_SAFETY_LIMIT, Agents, Game, ReaskLimitError, exact_cache_entries, load_cache
from .groups import GROUP_KEYS, GroupSpec, agent_groups, group_prices, make_groups
from .ledger import build_ledger, ledger_for_directory, ledger_totals
from .log import RUN_TABLES, build_result
from .orchestration import arun_game, run_game
from .progress import Progress, expected_interactions
from .result import LLMRunResult
from .settings import (COMMITTED_MODES, COMMITTED_PLACEMENTS, MODES, NAME_ORDERS, STOP_RULES, UNBOUNDED,
                       GameSettings, check_reasks, compare_settings, longest_prompt_bytes, make_settings, seed_list)
from .state import FLIP_THRESHOLD, RunState, run_setup

__all__ = [
    "BYTES_PER_TOKEN", "COMMITTED_MODES", "COMMITTED_PLACEMENTS", "FLIP_THRESHOLD", "GROUP_KEYS", "MODES",
    "NAME_ORDERS", "REASK_SAFETY_LIMIT", "RUN_TABLES", "STOP_RULES", "UNBOUNDED",
    "Agents", "Game", "GameSettings", "GroupSpec", "LLMRunResult", "Progress", "ReaskLimitError", "RunEstimate",
    "RunState",
    "agent_groups", "arun_game", "build_ledger", "build_result", "check_reasks", "compare_settings",
    "distinct_prompts", "estimate_game", "estimate_requests", "exact_cache_entries", "expected_interactions",
    "group_prices", "ledger_for_directory", "ledger_totals", "load_cache", "longest_prompt_bytes", "make_groups",
    "make_settings", "prompt_tokens", "run_game", "run_setup", "seed_list",
]
