"""Stop rules, default caps and batch sizes shared by the game simulators (no Numba here).

The population set-up (graphs, committed agents) is :mod:`normlab.theory.population`; the flip
threshold is :data:`normlab.theory.criteria.PUBLISHED_FLIP_THRESHOLD`.
"""

from __future__ import annotations

import warnings

import numpy as np


# Stop rules. Codes are written by the kernels into ``stop_reason``.
STOP_CODES = {"max": 0, "consensus": 1, "success95": 2, "streak": 3, "flip": 4}
STOP_NAMES = {v: k for k, v in STOP_CODES.items()}


def check_stop(stop: str) -> int:
    if not isinstance(stop, str) or stop not in STOP_CODES:
        raise ValueError(f"stop must be one of {sorted(STOP_CODES)}; got {stop!r}")
    return STOP_CODES[stop]


def default_max_interactions(n_agents: int, stop: str, unlimited: bool) -> int:
    """A generous default cap: 1000 rounds, or 40 N^1.5 interactions for the unlimited pool."""
    if unlimited:
        return int(max(1000 * n_agents, 40 * n_agents**1.5))
    return int(1000 * n_agents)


def batch_size(n_runs: int, bytes_per_run: int, budget: int = 256 * 2**20) -> int:
    """Runs per kernel call so that per-round buffers stay under ``budget`` bytes."""
    return int(max(1, min(n_runs, budget // max(1, bytes_per_run))))


def warn_unfinished(stop: str, stop_reason: np.ndarray, max_interactions: int, stacklevel: int = 3) -> None:
    """Warn when runs hit the cap before their stop rule (not for "max", nor for "flip", where
    not flipping is itself the measured outcome); ``stacklevel`` 3 names the caller of the
    simulator that calls this."""
    if stop in ("max", "flip"):
        return
    n_bad = int(np.sum(stop_reason == 0))
    if n_bad:
        warnings.warn(
            f"{n_bad} of {len(stop_reason)} runs reached max_interactions={max_interactions} before the "
            f"stop rule {stop!r} was met; their stop times are NaN. Raise max_interactions if needed.",
            RuntimeWarning,
            stacklevel=stacklevel,
        )
