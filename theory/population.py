"""Who plays whom, and who is committed: the population set-up every simulator (and the LLM runner) shares.

- :func:`graph_to_csr` -- a networkx graph as CSR neighbour arrays (the kernels' form; empty
  arrays: the complete graph).
- :func:`committed_mask` -- committed agents from a count (the last ``k``) or an index array.
- :func:`parse_committed` -- committed counts or fractions of ``N`` written as text
  (``"1,2,3"``, ``"0.1,0.2"``; the ``--committed`` of ``normlab critical-mass``), in their
  canonical form: whole counts (``int``) or fractions in (0, 1) (``float``), never both.
- :func:`committed_counts` -- counts or fractions of ``N`` (numbers) resolved to the sorted
  distinct counts a sweep runs (:func:`normlab.theory.critical_mass`).

Every check raises a one-line ``ValueError`` (``TypeError`` for a wrong type) before any work.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["graph_to_csr", "committed_mask", "parse_committed", "committed_counts"]


def graph_to_csr(graph, n_agents: int) -> tuple[np.ndarray, np.ndarray]:
    """Convert a networkx graph to CSR neighbour arrays (empty arrays mean the complete graph).

    Nodes are numbered in ``list(graph.nodes)`` order. Directed graphs, self-loops and isolated
    nodes are rejected with a ``ValueError``.

    Parameters
    ----------
    graph : networkx.Graph or None
        ``None``: the complete graph.
    n_agents : int

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``indptr`` (int64, ``n_agents + 1``) and ``nbrs`` (int32): agent ``k``'s neighbours are
        ``nbrs[indptr[k]:indptr[k + 1]]``.
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


def committed_mask(committed, n_agents: int) -> np.ndarray:
    """Boolean mask of committed agents from a count (the *last* ``k`` agents) or an index array.

    Parameters
    ----------
    committed : int or array_like of int
        A count in ``[0, n_agents - 1]``, or distinct agent indices (at least one agent left
        uncommitted).
    n_agents : int

    Returns
    -------
    numpy.ndarray of bool
    """
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


def parse_committed(text: str, *, flag: str = "--committed") -> list[int] | list[float]:
    """Committed counts or fractions of ``N`` written as comma-separated text, in canonical form.

    Parameters
    ----------
    text : str
        Whole counts (``"1,2,3"``; ``"2.0"`` is the count 2) or fractions of ``N`` strictly
        between 0 and 1 (``"0.1,0.25"``); never both.
    flag : str, optional
        How the messages name the value (``"--committed"``).

    Returns
    -------
    list of int or list of float
        The counts (``int``), or the fractions (``float``), in the order given; resolve them for
        a population with :func:`committed_counts`.

    Raises
    ------
    ValueError
        One line: empty text, a token that is not a finite number, fractions mixed with counts,
        a value that is neither a whole count nor a fraction in (0, 1).
    """
    if not isinstance(text, str):
        raise TypeError(f"{flag} must be text such as '1,2,3' or '0.1,0.2'; got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{flag} is empty; give counts (1,2,3) or fractions of N (0.1,0.2), or leave it out")
    vals, toks = [], [t.strip() for t in text.split(",")]
    for tok in toks:
        try:
            vals.append(float(tok))
        except ValueError:
            raise ValueError(f"{flag} takes comma-separated counts or fractions of N; {tok!r} "
                             "is not a number") from None
        if not math.isfinite(vals[-1]):
            raise ValueError(f"{flag} {tok} is not a finite number")
    fractions = [v for v in vals if 0 < v < 1]
    if fractions and len(fractions) < len(vals):
        raise ValueError(f"{flag} mixes fractions of N in (0, 1) with counts ({text}); give one kind")
    if fractions:
        return vals
    for v, tok in zip(vals, toks):
        if v < 0 or v != int(v):
            raise ValueError(f"{flag} {tok} is neither a whole count (0, 1, 2, ...) nor a fraction of N "
                             "in (0, 1)")
    return [int(v) for v in vals]


def committed_counts(committed, n_agents: int, *, low: int = 0) -> np.ndarray:
    """Committed counts, or fractions of ``N`` (rounded to counts), as the sorted distinct counts.

    Parameters
    ----------
    committed : int, float or array_like
        Counts, or fractions in (0, 1) (a float array whose every value lies in (0, 1));
        e.g. the output of :func:`parse_committed`.
    n_agents : int
    low : int, optional
        Smallest count allowed (0, or 1 for models whose consensus cannot flip on its own).

    Returns
    -------
    numpy.ndarray of int
        Sorted distinct counts in ``[low, n_agents - 1]``.

    Raises
    ------
    TypeError
        Values that are not finite numbers.
    ValueError
        An empty or nested list, a value that is neither a whole count nor a fraction, a count
        outside ``[low, n_agents - 1]``.
    """
    N = int(n_agents)
    vals = np.atleast_1d(np.asarray(committed))
    if vals.ndim != 1 or vals.size == 0:
        raise ValueError("committed must be a non-empty 1-D list of counts or fractions")
    if not (np.issubdtype(vals.dtype, np.number) and np.all(np.isfinite(vals))):
        raise TypeError(f"committed must be finite numbers: counts or fractions of N; got {committed!r}")
    if np.issubdtype(vals.dtype, np.floating) and np.all((vals > 0) & (vals < 1)):
        counts = np.unique(np.round(vals * N).astype(int))
    elif np.all(np.equal(np.mod(vals, 1), 0)):
        counts = np.unique(vals.astype(int))
    else:
        raise ValueError("committed must be integer counts or fractions in (0, 1)")
    if counts.min() < low or counts.max() >= N:
        raise ValueError(f"committed counts must lie in [{low}, {N - 1}]; got {counts.min()}..{counts.max()}")
    return counts
