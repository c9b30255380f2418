"""Input layer of the calibration: validated decision counts per memory state.

Everything the fitters need is the table of counts ``c[s, n]`` -- how often an uncommitted agent
whose memory was in state ``s`` answered name ``n`` -- kept per *group* (a run, or a probe file)
so that model selection can hold out whole runs. :class:`StateCounts` holds it; it is built from

- a tidy :class:`normlab.schema.GameLog` (normlab's own LLM runs, the AI-norms loader, or a
  theory simulation with ``record_decisions=True``) by :func:`counts_from_log`, which keeps the
  valid decisions of uncommitted agents, or
- a strategy-probe frame (fixed memory -> answers) by :func:`counts_from_probes`: the answers of
  :func:`normlab.llm_runs.published.ainorms.load_ainorms_probes` (one row per answer), or the table of
  :func:`normlab.llm_runs.strategy_table` (sampled counts, or exact probabilities turned into
  weighted pseudo-counts).

States use the stable encoding of :mod:`normlab.theory.strategies` (state 0 = empty memory; the
schema string ``"own,partner;own,partner"`` oldest first is the label).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1 and
Figs. S8-S10 (strategies p(name | memory state)); Methods "Committed Minorities".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd

from normlab._display import fmt, html_card, plain, short_repr
from normlab.schema import DECISION_COLUMNS, RUN_COLUMNS, GameLog, parse_memory_state, validate_names
from normlab.theory.strategies import decode_state, encode_state, n_states, state_offsets

__all__ = [
    "StateCounts",
    "counts_from_log",
    "counts_from_probes",
    "select_runs",
    "state_labels",
    "FIT_ON",
]

#: Which runs :func:`select_runs` keeps for ``fit_on``.
FIT_ON = {
    "baseline": ("baseline",),
    "evolved": ("evolved",),
    "swap": ("swap",),
    "all": ("baseline", "evolved", "swap", "simulation"),
}


# ----------------------------------------------------------------------------- state helpers
@lru_cache(maxsize=32)
def _state_tables(n_names: int, memory: int):
    """Labels-free decoding of every state: (entries list, lengths array)."""
    S = n_states(n_names, memory)
    entries = [tuple(decode_state(s, n_names, memory)) for s in range(S)]
    lengths = np.array([len(e) for e in entries], dtype=np.int64)
    return entries, lengths


def state_labels(names, memory: int) -> list[str]:
    """Schema strings of every memory state, in the stable state order.

    Parameters
    ----------
    names : sequence of str
    memory : int

    Returns
    -------
    list of str
    """
    names = validate_names(names)
    entries, _ = _state_tables(len(names), int(memory))
    return [";".join(f"{names[o]},{names[p]}" for o, p in e) for e in entries]


def _state_index_map(names, memory: int) -> dict[str, int]:
    return {lab: k for k, lab in enumerate(state_labels(names, memory))}


def _check_memory(memory) -> int:
    if isinstance(memory, (bool, np.bool_)) or not isinstance(memory, (int, np.integer)):
        raise TypeError(f"memory must be an int; got {type(memory).__name__} {memory!r}")
    if memory < 1:
        raise ValueError(f"memory must be >= 1; got {memory}")
    if memory > 8:
        raise ValueError(f"memory H={memory} is too long for a state table (at most 8 supported)")
    return int(memory)


def _check_names(names) -> tuple[str, ...]:
    if names is None:
        raise ValueError("names must be given (e.g. ('Q', 'M'))")
    names = validate_names(names)
    if len(names) < 2:
        raise ValueError(f"a strategy needs a pool of at least two names; got {names}")
    return names


# ----------------------------------------------------------------------------- result type
@dataclass(frozen=True)
class StateCounts:
    """Decision counts per memory state (and per group, for run-grouped cross-validation).

    Attributes
    ----------
    names : tuple of str
        Name pool; column ``n`` of :attr:`counts` is ``names[n]``.
    memory : int
        Memory length ``H``.
    groups : tuple of str
        Group labels (one per run, or per probe file).
    group_state : numpy.ndarray of int64
        Sparse per-group counts: row ``i`` says group ``group_index[i]`` saw state ``group_state[i]``
        and answered with the counts ``group_counts[i]``.
    group_index : numpy.ndarray of int64
    group_counts : numpy.ndarray of float64, shape (rows, W)
        Counts (integers for decisions and sampled probes; weighted pseudo-counts for exact
        probes).
    source : dict
        Provenance (model, kinds, runs, files...).

    Notes
    -----
    Committed agents' decisions and invalid answers are never counted: a committed agent does
    not follow a strategy, and an invalid answer is not a name.
    """

    names: tuple
    memory: int
    groups: tuple
    group_index: np.ndarray
    group_state: np.ndarray
    group_counts: np.ndarray
    source: dict = field(default_factory=dict)

    def __post_init__(self):
        W = len(self.names)
        gc = np.asarray(self.group_counts, dtype=np.float64).reshape(-1, W)
        gi = np.asarray(self.group_index, dtype=np.int64).reshape(-1)
        gs = np.asarray(self.group_state, dtype=np.int64).reshape(-1)
        if not (len(gc) == len(gi) == len(gs)):
            raise ValueError("group_index, group_state and group_counts must have the same number of rows")
        if len(gi) and (gi.min() < 0 or gi.max() >= len(self.groups)):
            raise ValueError("group_index refers to a group outside groups")
        if len(gs) and (gs.min() < 0 or gs.max() >= self.n_states):
            raise ValueError("group_state refers to a state outside the table")
        if np.any(gc < 0) or not np.all(np.isfinite(gc)):
            raise ValueError("counts must be finite and non-negative")
        for a in (gc, gi, gs):
            a.setflags(write=False)
        object.__setattr__(self, "group_counts", gc)
        object.__setattr__(self, "group_index", gi)
        object.__setattr__(self, "group_state", gs)
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "groups", tuple(self.groups))

    # -------------------------------------------------------------- views
    @property
    def n_names(self) -> int:
        return len(self.names)

    @property
    def n_states(self) -> int:
        return n_states(self.n_names, self.memory)

    @property
    def counts(self) -> np.ndarray:
        """Aggregated counts, shape ``(n_states, W)``."""
        out = np.zeros((self.n_states, self.n_names))
        np.add.at(out, self.group_state, self.group_counts)
        return out

    @property
    def n_decisions(self) -> float:
        return float(self.group_counts.sum())

    @property
    def observed(self) -> np.ndarray:
        """Boolean mask of states with at least one counted decision."""
        return self.counts.sum(axis=1) > 0

    def labels(self) -> list[str]:
        """Schema strings of all states (stable order)."""
        return state_labels(self.names, self.memory)

    def subset(self, groups) -> "StateCounts":
        """Counts of the given group indices only (for cross-validation)."""
        keep = np.isin(self.group_index, np.asarray(list(groups), dtype=np.int64))
        return StateCounts(self.names, self.memory, self.groups, self.group_index[keep], self.group_state[keep],
                           self.group_counts[keep], dict(self.source))

    def relabelled(self, perm) -> "StateCounts":
        """The counts after renaming name ``n`` to ``perm[n]`` (states and answers)."""
        perm = np.asarray(perm, dtype=np.int64)
        W = self.n_names
        if sorted(perm.tolist()) != list(range(W)):
            raise ValueError(f"perm must be a permutation of 0..{W - 1}")
        entries, _ = _state_tables(W, self.memory)
        smap = np.array([encode_state([(int(perm[o]), int(perm[p])) for o, p in e], W) for e in entries])
        gc = np.zeros_like(self.group_counts)
        gc[:, perm] = self.group_counts
        return StateCounts(self.names, self.memory, self.groups, self.group_index, smap[self.group_state], gc,
                           dict(self.source))

    @classmethod
    def concat(cls, parts) -> "StateCounts":
        """Combine counts over the same names and memory (groups are kept apart)."""
        parts = list(parts)
        if not parts:
            raise ValueError("nothing to concatenate")
        n0, h0 = parts[0].names, parts[0].memory
        for p in parts:
            if not isinstance(p, StateCounts):
                raise TypeError(f"expected StateCounts; got {type(p).__name__}")
            if p.names != n0 or p.memory != h0:
                raise ValueError(f"cannot combine counts for names {p.names}, H={p.memory} with {n0}, H={h0}")
        groups, gi, gs, gc, off = [], [], [], [], 0
        for p in parts:
            groups.extend(p.groups)
            gi.append(p.group_index + off)
            gs.append(p.group_state)
            gc.append(p.group_counts)
            off += len(p.groups)
        src = {"parts": [p.source for p in parts]}
        return cls(n0, h0, tuple(groups), np.concatenate(gi), np.concatenate(gs), np.concatenate(gc), src)

    def to_frame(self) -> pd.DataFrame:
        """Aggregated counts, one row per (observed state, name).

        Returns
        -------
        pandas.DataFrame
            Columns ``state``, ``memory_state``, ``memory_len``, ``name``, ``count``, ``n``
            (decisions in that state), ``frequency`` (``count / n``).
        """
        c = self.counts
        n = c.sum(axis=1)
        idx = np.flatnonzero(n > 0)
        labels = self.labels()
        _, lengths = _state_tables(self.n_names, self.memory)
        W = self.n_names
        return pd.DataFrame({
            "state": np.repeat(idx, W),
            "memory_state": np.repeat(np.asarray([labels[i] for i in idx], dtype=object), W),
            "memory_len": np.repeat(lengths[idx], W),
            "name": np.tile(np.asarray(self.names, dtype=object), len(idx)),
            "count": c[idx].reshape(-1),
            "n": np.repeat(n[idx], W),
            "frequency": (c[idx] / n[idx, None]).reshape(-1),
        })

    def summary(self) -> dict:
        """Pool, memory, groups and decisions as plain Python values."""
        c = self.counts
        return plain({
            "names": list(self.names),
            "memory": self.memory,
            "groups": len(self.groups),
            "decisions": float(c.sum()),
            "states_observed": int((c.sum(axis=1) > 0).sum()),
            "states_total": int(self.n_states),
        })

    def __repr__(self) -> str:
        s = self.summary()
        tot = self.counts.sum(axis=0)
        shares = ", ".join(f"{n} {v / tot.sum():.2f}" for n, v in zip(self.names, tot)) if tot.sum() else None
        return short_repr("StateCounts", f"names {','.join(self.names)}", f"H={self.memory}",
                          f"{fmt(s['decisions'])} decisions in {s['groups']} groups",
                          f"{s['states_observed']}/{s['states_total']} states seen", f"answer shares {shares}")

    def _repr_html_(self) -> str:
        c = self.counts
        n = c.sum(axis=1)
        off = list(state_offsets(self.n_names, self.memory)) + [self.n_states]
        rows = []
        for L in range(self.memory + 1):  # decisions and answer shares per memory length
            sel = slice(int(off[L]), int(off[L + 1]))
            tot = c[sel].sum(axis=0)
            if tot.sum():
                rows.append((f"memory length {L}", float(tot.sum()), None,
                             ", ".join(f"{nm} {v / tot.sum():.3f}" for nm, v in zip(self.names, tot))))
        return html_card("StateCounts", rows, level=None,
                         subtitle=f"decisions per memory state, names {','.join(self.names)}, H = {self.memory}",
                         settings={"groups": len(self.groups), "states seen": f"{int((n > 0).sum())} of {self.n_states}"},
                         note="value = decisions; .to_frame() gives every state.")

    @classmethod
    def _contract_example(cls) -> "StateCounts":
        """Two runs' decision counts over two names and memory one (five states, one never seen),
        literal numbers (``tests/umbrella/test_contracts.py``)."""
        return cls(names=("A", "B"), memory=1, groups=("run0", "run1"), group_index=np.array([0, 0, 0, 1, 1, 1]),
                   group_state=np.array([0, 1, 4, 0, 1, 3]),
                   group_counts=np.array([[5, 3], [9, 1], [1, 7], [4, 4], [8, 0], [2, 3]], dtype=float),
                   source={"model": "toy"})


# ----------------------------------------------------------------------------- from game logs
def select_runs(log: GameLog, *, names=None, memory=None, n_agents=None, model=None, fit_on="baseline") -> GameLog:
    """The runs of ``log`` to fit on: kind, name pool (in any order), memory, size and model.

    Parameters
    ----------
    log : normlab.schema.GameLog
    names : sequence of str, optional
        Name pool; runs whose pool holds the same names in any order are kept (the AI-norms
        committed runs list the majority name first, e.g. ``"M,Q"``).
    memory, n_agents : int, optional
    model : str or sequence of str, optional
        Values of the ``model`` run column.
    fit_on : {"baseline", "evolved", "swap", "all"} or sequence of run kinds, optional

    Returns
    -------
    normlab.schema.GameLog

    Raises
    ------
    ValueError
        Unknown ``fit_on``, or no run matches (the message lists what the log holds).
    """
    if not isinstance(log, GameLog):
        raise TypeError(f"log must be a normlab.schema.GameLog; got {type(log).__name__}")
    if isinstance(fit_on, str):
        if fit_on not in FIT_ON:
            raise ValueError(f"fit_on must be one of {sorted(FIT_ON)} or a list of run kinds; got {fit_on!r}")
        kinds = FIT_ON[fit_on]
    else:
        kinds = tuple(fit_on)
    runs = log.runs
    mask = np.array(runs["kind"].isin(kinds).to_numpy(), dtype=bool)
    if names is not None:
        names = _check_names(names)
        target = frozenset(names)
        mask &= runs["names"].map(lambda s: frozenset(str(s).split(",")) == target).to_numpy()
    if memory is not None:
        mask &= (runs["memory"] == _check_memory(memory)).to_numpy()
    if n_agents is not None:
        mask &= (runs["n_agents"] == int(n_agents)).to_numpy()
    if model is not None:
        models = [model] if isinstance(model, str) else list(model)
        mask &= runs["model"].isin(models).to_numpy()
    if not mask.any():
        avail = runs.groupby(["model", "kind", "names", "memory", "n_agents"]).size()
        listing = "; ".join(f"{m} {k} names={nm} H={h} N={n}: {c} runs" for (m, k, nm, h, n), c in avail.items())
        raise ValueError(
            f"no run matches kinds={list(kinds)}, names={names}, memory={memory}, n_agents={n_agents}, "
            f"model={model}. The log holds: {listing or 'no runs'}"
        )
    keep = runs[mask]
    return GameLog(log.decisions[log.decisions["run"].isin(keep["run"])], keep)


def counts_from_log(log: GameLog, *, names=None, memory=None) -> StateCounts:
    """Count decisions per memory state from a game log (valid answers of uncommitted agents).

    Parameters
    ----------
    log : normlab.schema.GameLog
        Already restricted to the runs to fit on (see :func:`select_runs`). Every run must have
        the same memory length and the same name pool (in any order).
    names : sequence of str, optional
        Name order of the result (default: the pool of the first run). Must be the runs' pool.
    memory : int, optional
        Expected memory length ``H``; a run with another memory is an error.

    Returns
    -------
    StateCounts
        One group per run (labelled ``"run:<id>"``).

    Raises
    ------
    ValueError
        Missing columns, empty log, a single name, mixed memory lengths or pools, memory states
        longer than ``H`` or using names outside the pool, or no valid uncommitted decision.
    TypeError
        ``log`` is not a GameLog.
    """
    if not isinstance(log, GameLog):
        raise TypeError(f"log must be a normlab.schema.GameLog; got {type(log).__name__}")
    d, runs = log.decisions, log.runs
    miss = [c for c in DECISION_COLUMNS if c not in d.columns] + [c for c in RUN_COLUMNS if c not in runs.columns]
    if miss:  # pragma: no cover - GameLog already enforces the schema
        raise ValueError(f"log is missing columns {miss}")
    if len(runs) == 0 or len(d) == 0:
        raise ValueError("the log is empty: no run or no decision to fit on")
    pools = {frozenset(str(s).split(",")) for s in runs["names"]}
    if len(pools) != 1:
        raise ValueError(f"runs use different name pools {sorted(sorted(p) for p in pools)}; select one pool first")
    pool = next(iter(pools))
    if names is None:
        names = tuple(str(runs["names"].iloc[0]).split(","))
    names = _check_names(names)
    if frozenset(names) != pool:
        raise ValueError(f"names {names} differ from the runs' pool {sorted(pool)}")
    mems = sorted(set(int(m) for m in runs["memory"]))
    if len(mems) != 1:
        raise ValueError(f"runs have different memory lengths {mems}; select one memory length first")
    H = mems[0]
    if memory is not None and _check_memory(memory) != H:
        raise ValueError(f"memory length mismatch: asked for H={memory} but the runs have H={H}")
    H = _check_memory(H)
    use = d[d["valid"].to_numpy() & ~d["committed"].to_numpy()]
    if len(use) == 0:
        raise ValueError("the log holds no valid decision by an uncommitted agent")
    if int(use["memory_len"].max()) > H:
        raise ValueError(f"memory length mismatch: decisions have memories of {int(use['memory_len'].max())} entries "
                         f"but the runs say H={H}")
    bad = set(use["name"].unique()) - set(names)
    if bad:
        raise ValueError(f"answers {sorted(map(str, bad))} are outside the pool {names}")
    smap = _state_index_map(names, H)
    agg = use.groupby(["run", "memory_state", "name"], sort=True).size().rename("c").reset_index()
    unknown = set(agg["memory_state"].unique()) - set(smap)
    if unknown:
        ex = sorted(unknown)[:3]
        for st in ex:  # a precise message: malformed, outside the pool, or too long
            entries = parse_memory_state(st)
            if len(entries) > H:
                raise ValueError(f"memory length mismatch: state {st!r} has {len(entries)} entries but H={H}")
        raise ValueError(f"memory states {ex} use names outside the pool {names}")
    run_ids = sorted(agg["run"].unique())
    gpos = {r: k for k, r in enumerate(run_ids)}
    key = agg[["run", "memory_state"]].drop_duplicates().reset_index(drop=True)
    key["row"] = np.arange(len(key))
    agg = agg.merge(key, on=["run", "memory_state"])
    W = len(names)
    npos = {n: k for k, n in enumerate(names)}
    gc = np.zeros((len(key), W))
    np.add.at(gc, (agg["row"].to_numpy(), agg["name"].map(npos).to_numpy()), agg["c"].to_numpy())
    source = {
        "kind": "log",
        "models": sorted(map(str, runs["model"].unique())),
        "kinds": sorted(map(str, runs["kind"].unique())),
        "n_runs": int(len(runs)),
        "n_agents": sorted(int(x) for x in runs["n_agents"].unique()),
    }
    return StateCounts(
        names, H, tuple(f"run:{r}" for r in run_ids), key["run"].map(gpos).to_numpy(),
        key["memory_state"].map(smap).to_numpy(), gc, source,
    )


# ----------------------------------------------------------------------------- from probes
def counts_from_probes(frame: pd.DataFrame, *, names, memory: int, exact_weight: float = 1000.0) -> StateCounts:
    """Count strategy-probe answers per memory state.

    Parameters
    ----------
    frame : pandas.DataFrame
        Either one row per answer (``memory_state``, ``name``, optional ``valid``; e.g.
        :func:`normlab.llm_runs.published.ainorms.load_ainorms_probes`), or one row per (state, name) with
        ``memory_state``, ``name`` and ``count`` (sampled probes) or ``p`` (exact probabilities,
        e.g. :meth:`normlab.llm_runs.StrategyTable.to_frame` in exact mode).
    names : sequence of str
        The pool (probe files of other pools in ``frame`` are ignored if a ``names`` column is
        present).
    memory : int
        Memory length ``H`` of the game the table is for; probed memories may be shorter (they
        are then the game's early states) but not longer.
    exact_weight : float, optional
        Pseudo-count given to an exact probability vector (``p * exact_weight``): exact
        probabilities are known without sampling error, so they should weigh like many samples.

    Returns
    -------
    StateCounts
        One group per ``source_file`` if present, else one group per state.

    Raises
    ------
    ValueError
        Missing columns, empty frame, a single name, memories longer than ``H`` or outside the pool.
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame; got {type(frame).__name__}")
    names = _check_names(names)
    H = _check_memory(memory)
    need = {"memory_state", "name"}
    miss = need - set(frame.columns)
    if miss:
        raise ValueError(f"probe frame is missing columns {sorted(miss)} (need memory_state, name and, per row "
                         f"aggregate, count or p)")
    f = frame
    if "names" in f.columns:
        f = f[f["names"].map(lambda s: frozenset(str(s).split(",")) == frozenset(names))]
    if "valid" in f.columns:
        f = f[f["valid"].astype(bool)]
    f = f[f["name"].notna()]
    if len(f) == 0:
        raise ValueError(f"the probe frame holds no valid answer for the pool {names}")
    if "count" in f.columns and f["count"].notna().all():
        w = f["count"].astype(float).to_numpy()
    elif "p" in f.columns and f["p"].notna().all():
        if not exact_weight > 0:
            raise ValueError(f"exact_weight must be > 0; got {exact_weight}")
        w = f["p"].astype(float).to_numpy() * float(exact_weight)
    else:
        w = np.ones(len(f))
    bad = set(f["name"]) - set(names)
    if bad:
        raise ValueError(f"answers {sorted(map(str, bad))} are outside the pool {names}")
    smap = _state_index_map(names, H)
    for st in f["memory_state"].unique():
        if st not in smap:
            entries = parse_memory_state(st)
            if len(entries) > H:
                raise ValueError(f"memory length mismatch: probe state {st!r} has {len(entries)} entries but H={H}")
            raise ValueError(f"probe state {st!r} uses names outside the pool {names}")
    gkey = f["source_file"].astype(str) if "source_file" in f.columns else f["memory_state"].astype(str)
    df = pd.DataFrame({"g": gkey.to_numpy(), "s": f["memory_state"].map(smap).to_numpy(),
                       "n": f["name"].map({n: k for k, n in enumerate(names)}).to_numpy(), "w": w})
    groups = sorted(df["g"].unique())
    gpos = {g: k for k, g in enumerate(groups)}
    key = df[["g", "s"]].drop_duplicates().reset_index(drop=True)
    key["row"] = np.arange(len(key))
    df = df.merge(key, on=["g", "s"])
    gc = np.zeros((len(key), len(names)))
    np.add.at(gc, (df["row"].to_numpy(), df["n"].to_numpy()), df["w"].to_numpy())
    src = {"kind": "probes", "models": sorted(map(str, frame["model"].unique())) if "model" in frame.columns else []}
    return StateCounts(names, H, tuple(f"probe:{g}" for g in groups), key["g"].map(gpos).to_numpy(),
                       key["s"].to_numpy(), gc, src)
