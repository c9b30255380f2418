"""The strategy game's inputs, checked and resolved before any run: the strategies of a homogeneous
or mixed population, the tables of runs that each play their own (``per_run=True``), memory and
name order, the names and the challenger, initial memories, and the kernels' parameter arrays.
Used by :func:`normlab.theory.memory_game.strategy_game` and its engine."""

from __future__ import annotations

import numbers

import numpy as np

from normlab._validate import check_int

from .name_order import order_mode, order_tables
from .strategies import KIND_TABLE, KIND_USER, StrategyTable, encode_state, n_states, resolve_strategy

__all__ = []


def _resolve_groups(strategy, groups, n_names, n_agents: int):
    """``(strategies, group id per agent)`` of a homogeneous (one strategy, ``groups`` None) or mixed
    population (a sequence of strategies, ``groups``: one group id per agent or one size per
    group, agents numbered group after group)."""
    if groups is None:
        if isinstance(strategy, (list, tuple)):
            raise ValueError("several strategies need groups= (one group id per agent, or one size per strategy)")
        return [resolve_strategy(strategy, n_names)], np.zeros(n_agents, np.int64)
    if not isinstance(strategy, (list, tuple)) or len(strategy) < 1:
        raise TypeError("with groups=, strategy must be a list of strategies (one per group)")
    strats = [resolve_strategy(s, n_names) for s in strategy]
    G = len(strats)
    g = np.asarray(groups)
    if g.ndim != 1 or g.size == 0 or not np.issubdtype(g.dtype, np.integer):
        raise ValueError(f"groups must be {n_agents} integer group ids or {G} group sizes")
    if g.size == G and g.size != n_agents:  # sizes
        if g.min() < 0 or g.sum() != n_agents:
            raise ValueError(f"group sizes must be >= 0 and sum to n_agents={n_agents}; got {g.tolist()}")
        g = np.repeat(np.arange(G), g)
    elif g.size != n_agents:
        raise ValueError(f"groups must be {n_agents} group ids (one per agent) or {G} group sizes; got {g.size} values")
    if g.min() < 0 or g.max() >= G:
        raise ValueError(f"group ids must lie in [0, {G - 1}] (one per strategy)")
    W = strats[0].n_names
    if any(s.n_names != W for s in strats):
        raise ValueError(f"every strategy must play the same names; got pools of {[s.n_names for s in strats]}")
    named = [tuple(s.names) for s in strats if getattr(s, "names", ())]
    if any(nm != named[0] for nm in named):
        raise ValueError(f"the strategies name their {W} names differently: {sorted(set(named))}")
    if G > 1 and any(s.kind == KIND_USER for s in strats):
        raise ValueError("a FunctionStrategy cannot be mixed with other strategies; tabulate it (to_table) first")
    return strats, g.astype(np.int64)


def _check_order_for(strats, order_bias, name_order) -> int:
    """The name-order mode (:func:`normlab.theory.name_order.order_mode`), refused for strategies
    other than tables."""
    omode = order_mode(order_bias, name_order)
    if omode and any(s.kind != KIND_TABLE for s in strats):
        raise ValueError("order_bias needs strategy tables (tabulate other strategies with to_table first)")
    return omode


def _check_memory(strats, W: int, H: int) -> None:
    """Tables match the memory; the memory-state code fits in 64 bits."""
    for s in strats:
        if s.kind == KIND_TABLE and H != s.memory:
            raise ValueError(f"the strategy table is for memory H={s.memory}; got memory={H}")
    B = W * W
    if B ** (H - 1) > 2**62 // max(B, 1):
        raise ValueError(f"W={W}, H={H} overflows the 64-bit memory-state code; use fewer names or a shorter memory")


def _sg_names(strats, names, W: int) -> tuple:
    """The name labels: given (validated), else the strategies' own, else ``"0"``, ``"1"``, ..."""
    if names is None:
        named = [s for s in strats if getattr(s, "names", ())]
        names = tuple(named[0].names) if named else tuple(str(k) for k in range(W))
    else:
        from normlab.schema import validate_names  # schema imports pandas: only when names are given

        names = validate_names(names)
    if len(names) != W:
        raise ValueError(f"got {len(names)} names for a strategy over W={W} names")
    return names


def _challenger(committed_name, names, W: int, mask) -> int:
    """Index of the committed agents' name (the challenger): given, else the last name with
    committed agents, else -1."""
    if committed_name is not None:
        if isinstance(committed_name, str):
            if committed_name not in names:
                raise ValueError(f"committed_name {committed_name!r} is not in {names}")
            return names.index(committed_name)
        return check_int(committed_name, "committed_name", low=0, high=W - 1)
    return W - 1 if mask.any() else -1


def _parse_sg_initial(initial, n_agents, W, H, names):
    """Initial memories: empty; consensus on a name (H successful plays of it); or one name per
    agent (an array of name indices, -1 = empty memory)."""
    init_own = np.zeros((n_agents, H), np.int64)
    init_len = np.zeros(n_agents, np.int64)
    if initial is None or (isinstance(initial, str) and initial == "empty"):
        return init_own, init_len, "empty", None
    if isinstance(initial, str):
        if not initial.startswith("consensus"):
            raise ValueError(f"initial must be None, 'empty', 'consensus', 'consensus:<name>', a name index or an array; got {initial!r}")
        _, _, nm = initial.partition(":")
        if nm == "":
            initial = 0
        elif nm in names:
            initial = names.index(nm)
        else:
            raise ValueError(f"unknown name {nm!r} in initial={initial!r}; names are {names}")
    if isinstance(initial, numbers.Integral) and not isinstance(initial, (bool, np.bool_)):
        idx = int(initial)
        if not 0 <= idx < W:
            raise ValueError(f"initial consensus name index must be in [0, {W - 1}]; got {idx}")
        init_own[:, :] = idx
        init_len[:] = H
        return init_own, init_len, f"consensus:{names[idx]}", np.full(n_agents, idx)
    arr = np.asarray(initial)
    if arr.shape != (n_agents,) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"initial as an array must hold {n_agents} integer name indices (-1 = empty memory)")
    if arr.min() < -1 or arr.max() >= W:
        raise ValueError(f"initial name indices must lie in [-1, {W - 1}]")
    full = arr >= 0
    init_own[full, :] = arr[full, None]
    init_len[full] = H
    return init_own, init_len, "custom", arr.astype(np.int64)


def _kernel_params(strats, group, H: int, order_bias: float = 0.0):
    """``(params, kinds, poffs)``: every strategy's parameters in one float64 array, and per agent
    its strategy kind and the offset of its parameters (with a first-listed bias a table's
    parameters are its ``W`` per-order tables, :func:`normlab.theory.name_order.order_tables`)."""
    if order_bias:
        blocks = [order_tables(s.table, order_bias).reshape(-1) for s in strats]
    else:
        blocks = [np.asarray(s.kernel_params(H), dtype=np.float64).reshape(-1) for s in strats]
    params = np.concatenate(blocks) if len(blocks) > 1 else np.ascontiguousarray(blocks[0])
    starts = np.concatenate([[0], np.cumsum([len(b) for b in blocks])[:-1]]).astype(np.int64)
    return params, np.array([s.kind for s in strats], np.int64)[group], starts[group]


class PerRunTables:
    """The tables of a ``per_run=True`` call, as the checks of a single strategy see them (memory,
    pool, names). ``tables``: ``(n_runs, n_states, W)``."""

    kind = KIND_TABLE

    def __init__(self, tables, memory: int, names=None):
        self.tables, self.memory, self.n_names = tables, memory, tables.shape[2]
        self.names = tuple(names) if names is not None else ()

    @classmethod
    def of(cls, strategy, memory: int, n_runs=None) -> "PerRunTables":
        """From a list of :class:`StrategyTable` (one memory and pool) or an array ``(n_runs,
        n_states, W)`` (``(n_runs, n_states)``: p(name 1 | s) of two names), checked like a
        StrategyTable's rows; ``n_runs``, when given, must be the number of tables."""
        if isinstance(strategy, (list, tuple)):
            if not strategy or not all(isinstance(t, StrategyTable) for t in strategy):
                raise TypeError("per_run=True needs a list of StrategyTable (one per run) or an array of tables")
            if any(t.memory != memory for t in strategy):
                raise ValueError(f"every per-run table must be for memory H={memory}")
            named = {tuple(t.names) for t in strategy}
            if len(named) > 1 or len({t.n_names for t in strategy}) > 1:
                raise ValueError("the per-run tables must play the same names")
            own = next(iter(named)) or None
            t = np.stack([t.table for t in strategy])
        else:
            own = None
            t = np.asarray(strategy, dtype=np.float64)
            if t.ndim == 2:
                t = np.stack([1.0 - t, t], axis=2)
            if t.ndim != 3:
                raise ValueError(f"per_run=True needs tables shaped (n_runs, n_states, W) or (n_runs, n_states); "
                                 f"got {t.shape}")
        R, S, W = t.shape
        if W < 2 or S != n_states(W, memory):
            raise ValueError(f"per-run tables for W={W} names and memory H={memory} need {n_states(W, memory)} "
                             f"states; got {S}")
        if n_runs is not None and n_runs != R:
            raise ValueError(f"n_runs={n_runs} but {R} per-run tables were given (leave n_runs out)")
        if not np.all(np.isfinite(t)) or t.min() < 0 or not np.allclose(t.sum(axis=2), 1.0, atol=1e-9):
            raise ValueError("per-run tables must hold probability vectors (finite, >= 0, rows summing to 1)")
        return cls(np.ascontiguousarray(t), memory, own)

    def kernel_rows(self, order_bias: float = 0.0) -> np.ndarray:
        """One row of kernel parameters per run, laid out as a single table's (with a first-listed
        bias its ``W`` per-order tables, :func:`~normlab.theory.name_order.order_tables`)."""
        R = self.tables.shape[0]
        t = np.moveaxis(order_tables(self.tables, order_bias), 0, 1) if order_bias else self.tables
        return np.ascontiguousarray(t.reshape(R, -1))

    def absorbs(self, w: int) -> np.ndarray:
        """Per run: its table plays ``w`` surely from a memory full of successful ``w``."""
        return self.tables[:, encode_state([(w, w)] * self.memory, self.n_names), w] == 1.0
