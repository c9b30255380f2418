"""Input validation and batching shared by the game simulators (no Numba here)."""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from normlab._validate import check_int  # noqa: F401 (re-exported for the theory modules)

# Stop rules. Codes are written by the kernels into ``stop_reason``.
STOP_CODES = {"max": 0, "consensus": 1, "success95": 2, "streak": 3, "flip": 4}
STOP_NAMES = {v: k for k, v in STOP_CODES.items()}

#: Published flip criterion (AI-norms README / Flint Ashery et al. 2025, Methods): the committed name's production
#: share among uncommitted agents over the last 3 population rounds is >= 2.849 / 3.
PUBLISHED_FLIP_THRESHOLD = 2.849 / 3.0  # = criteria.FLIP_SUM / 3 (criteria imports _validate only)


def check_stop(stop: str) -> int:
    if not isinstance(stop, str) or stop not in STOP_CODES:
        raise ValueError(f"stop must be one of {sorted(STOP_CODES)}; got {stop!r}")
    return STOP_CODES[stop]


def graph_to_csr(graph, n_agents: int) -> tuple[np.ndarray, np.ndarray]:
    """Convert a networkx graph to CSR neighbour arrays (empty arrays mean the complete graph).

    Nodes are numbered in ``list(graph.nodes)`` order. Directed graphs, self-loops and isolated
    nodes are rejected with a ``ValueError``.
    """
    if graph is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int32)
    if not hasattr(graph, "nodes") or not hasattr(graph, "adj"):
        raise TypeError(f"graph must be a networkx graph; got {type(graph).__name__}")
    nodes = list(graph.nodes)
    if len(nodes) != n_agents:
        raise ValueError(f"graph has {len(nodes)} nodes but n_agents={n_agents}; they must agree")
    if graph.is_directed():
        raise ValueError("graph is directed; pass an undirected graph (e.g. G.to_undirected())")
    index = {u: k for k, u in enumerate(nodes)}
    indptr = np.zeros(n_agents + 1, np.int64)
    nbrs = []
    isolated = []
    for k, u in enumerate(nodes):
        row = [index[v] for v in graph.adj[u] if v != u]
        if any(v == u for v in graph.adj[u]):
            raise ValueError(f"graph has a self-loop at node {u!r}; remove self-loops first")
        if not row:
            isolated.append(u)
        nbrs.extend(row)
        indptr[k + 1] = len(nbrs)
    if isolated:
        raise ValueError(f"graph has isolated nodes (no neighbour to interact with): {isolated[:5]}")
    return indptr, np.asarray(nbrs, dtype=np.int32)


def committed_mask(committed, n_agents: int, rng_children=None) -> np.ndarray:
    """Boolean mask of committed agents from a count (the *last* ``k`` agents) or an index array."""
    mask = np.zeros(n_agents, dtype=np.bool_)
    if isinstance(committed, (bool, np.bool_)):
        raise TypeError("committed must be a count or an array of agent indices; got a bool")
    if isinstance(committed, numbers.Integral):
        k = int(committed)
        if k < 0 or k >= n_agents:
            raise ValueError(f"committed count must be in [0, n_agents - 1] = [0, {n_agents - 1}]; got {k}")
        if k:
            mask[n_agents - k:] = True
        return mask
    idx = np.asarray(committed)
    if idx.ndim != 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
        raise TypeError("committed must be an int count or a 1-D array of integer agent indices")
    if idx.size and (idx.min() < 0 or idx.max() >= n_agents):
        raise ValueError(f"committed indices must lie in [0, {n_agents - 1}]")
    if len(np.unique(idx)) != idx.size:
        raise ValueError("committed indices must be unique")
    if idx.size >= n_agents:
        raise ValueError("at least one agent must be uncommitted")
    mask[idx] = True
    return mask


def default_max_interactions(n_agents: int, stop: str, unlimited: bool) -> int:
    """A generous default cap: 1000 rounds, or 40 N^1.5 interactions for the unlimited pool."""
    if unlimited:
        return int(max(1000 * n_agents, 40 * n_agents**1.5))
    return int(1000 * n_agents)


def batch_size(n_runs: int, bytes_per_run: int, budget: int = 256 * 2**20) -> int:
    """Runs per kernel call so that per-round buffers stay under ``budget`` bytes."""
    return int(max(1, min(n_runs, budget // max(1, bytes_per_run))))


def warn_unfinished(stop: str, stop_reason: np.ndarray, max_interactions: int) -> None:
    """Warn when runs hit the cap before their stop rule (not for "max", nor for "flip", where
    not flipping is itself the measured outcome)."""
    if stop in ("max", "flip"):
        return
    n_bad = int(np.sum(stop_reason == 0))
    if n_bad:
        warnings.warn(
            f"{n_bad} of {len(stop_reason)} runs reached max_interactions={max_interactions} before the "
            f"stop rule {stop!r} was met; their stop times are NaN. Raise max_interactions if needed.",
            RuntimeWarning,
            stacklevel=3,
        )
