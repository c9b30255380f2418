"""ITCMA-S (Zhang et al. 2024): closed forms and the LTRHA resource loop.

- :mod:`.equations` -- PAD emotions and the driver (Eqs. 10-15), topic and action rate (Eqs. 17-18).
- :mod:`.allocation` -- Eq. 19 rank-based zero-sum allocation, ranks from an ordered answer, Gini.
- :mod:`.ltrha` -- the matrix (ranker) protocol, closed-form rankers, :func:`simulate_ltrha`.

The LLM matrix (its prompt as a data file and :class:`~normlab.llm_runs.LLMRanker`) lives in
:mod:`normlab.llm_runs.rankers`: theory code renders no prompts.

References
----------
X. Zhang, X. Yin, N. Jiang, S. Su, "Can Agents Spontaneously Form a Society? Introducing a Novel
Architecture for Generative Multi-Agents to Elicit Social Emergence" (ITCMA-S), arXiv:2409.06750
(2024).
"""

from __future__ import annotations

from .allocation import allocate_resources, gini, ranks_from_order, resource_changes
from .equations import (
    action_rate,
    arousal,
    cosine_diff,
    demand,
    dominance,
    driver_bias,
    driver_path,
    driver_update,
    pleasure,
    topic,
    topic_by_env,
)
from .ltrha import (
    ContributionRanker,
    LTRHAParams,
    LTRHAResult,
    MatrixInput,
    RandomRanker,
    Ranker,
    ResourceRanker,
    play_ltrha,
    simulate_ltrha,
)

__all__ = [
    # closed forms
    "pleasure",
    "arousal",
    "dominance",
    "cosine_diff",
    "driver_bias",
    "demand",
    "driver_update",
    "driver_path",
    "topic",
    "topic_by_env",
    "action_rate",
    "allocate_resources",
    "resource_changes",
    "gini",
    "ranks_from_order",
    # LTRHA simulation
    "MatrixInput",
    "Ranker",
    "ContributionRanker",
    "ResourceRanker",
    "RandomRanker",
    "LTRHAResult",
    "LTRHAParams",
    "simulate_ltrha",
    "play_ltrha",
]
