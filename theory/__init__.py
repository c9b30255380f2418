"""Theory models of convention formation (Numba kernels compile lazily on first call).

- :func:`minimal_naming_game` -- Baronchelli et al. 2006 naming game, finite or unlimited pool,
  any networkx graph, committed agents, production bias, β-model.
- :func:`strategy_game` -- the memory-H game of Flint Ashery et al. (2025) with strategy tables p(name | memory).
- :class:`~normlab.theory.spec.GameSpec`, :class:`~normlab.theory.spec.RunLength` -- a game as values
  (population, pool, committed agents, graph, initial memories, stop rule and cap), what the
  engines :func:`play_naming_game` (with :class:`NamingRules`) and :func:`play_strategy_game` take.
- :mod:`~normlab.theory.strategies` -- strategy tables, built-in strategies, state encoding.
- :func:`strategy_mean_field` -- the strategy game as N -> infinity: the deterministic map on the
  distribution of memory states, its fixed point and stability (collective bias in the limit).
- :func:`binary_agreement`, :func:`binary_agreement_ode`, :func:`critical_fraction` -- Xie et al.
  2011 committed minority, agents and mean field.
- :func:`invalid_answer_game` -- the memory-H game when decisions can be invalid (an LLM answer
  with no pool name after capped re-asks: a failed interaction written into no memory).
- :func:`centola_critical_mass` -- mean-field critical mass of memory-M best response.
- :func:`critical_mass` -- sweep committed sizes for any model and locate the tipping point.
- :mod:`~normlab.theory.criteria` -- the flip criteria of committed-minority runs (``published``
  ensemble rule of Flint Ashery et al. 2025, Table S3, ``per_run`` first passage, ``end_of_run``,
  the running flip check and its threshold), one home.
- :mod:`~normlab.theory.stats` -- Clopper-Pearson intervals, curve crossings, smallest counts,
  Firth logistic regression (shared by every layer).
- :mod:`~normlab.theory.population` -- graphs to CSR, committed masks, ``committed`` parsing.
- :func:`sweep` -- any simulator over a parameter grid, on any ``concurrent.futures`` executor.
- :func:`norm_contagion_agents`, :func:`norm_contagion_ode` -- two-stage norm contagion (belief by
  contact, compliance after a lag; entrepreneurs as seeds), agents and mean field (CRSEC, seed 000).
- :mod:`~normlab.theory.itcmas` -- ITCMA-S closed forms (PAD emotion, driver, topic, action rate,
  Eq. 19 rank-based resources) and the LTRHA resource simulation.

Names are imported on first use, so ``import normlab.theory`` (and the ``normlab`` command line)
stays fast.
"""

from __future__ import annotations

from normlab._lazy import lazy_exports

_EXPORTS = {
    "minimal_naming_game": "naming_game",
    "play_naming_game": "naming_game",
    "NamingRules": "naming_game",
    "strategy_game": "memory_game",
    "play_strategy_game": "memory_game",
    "GameSpec": "spec",
    "RunLength": "spec",
    "GameResult": "results",
    "binary_agreement": "committed_minority",
    "binary_agreement_ode": "committed_minority",
    "MeanFieldTrajectory": "committed_minority",
    "critical_fraction": "committed_minority",
    "consensus_time_mf": "committed_minority",
    "centola_critical_mass": "centola",
    "majority_probability": "centola",
    "critical_mass": "sweeps",
    "CriticalMassResult": "sweeps",
    "clopper_pearson": "stats",
    "locate_critical_mass": "sweeps",
    "sweep": "sweeps",
    "SweepResult": "sweeps",
    "Strategy": "strategies",
    "StrategyTable": "strategies",
    "BestResponse": "strategies",
    "WinStayLoseShift": "strategies",
    "LogitStrategy": "strategies",
    "FunctionStrategy": "strategies",
    "strategy_mean_field": "memory_mean_field",
    "StrategyMeanField": "memory_mean_field",
    "mean_field_boundary": "memory_mean_field",
    "norm_contagion_agents": "norm_contagion",
    "norm_contagion_ode": "norm_contagion",
    "ContagionResult": "norm_contagion",
    "ContagionODE": "norm_contagion",
    "invalid_answer_game": "invalid_answers",
    "graph_to_csr": "population",
    "InvalidAnswerGame": "invalid_answers",
}
_SUBMODULES = {"strategies", "itcmas", "criteria", "stats", "population"}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS, _SUBMODULES)
