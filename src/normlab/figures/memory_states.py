"""Figs. S8-S10 of Flint Ashery, Aiello & Baronchelli (2025): strategy by memory state.

A memory state of a two-name game is drawn on a grid: rows are the agent's own plays, columns
its partners' plays, oldest first (``QMM`` = Q, then M, then M). The colour is the probability
of playing M in that state; in S9-S10 the area of a circle grows with how often agents were in the state (as the square
root of the frequency, so that rare states stay visible).

- **S8**: the whole strategy table at full memory (H = 5: 32 x 32 states) of Llama-3 and
  Llama-3.1.
- **S9**: states visited around a consensus on M (N = 24, H = 5), left alone or perturbed by one
  agent committed to Q: in the published Llama-3.1 runs (``evolved`` from M; ``swap`` with one
  committed agent; about 40 and 33 rounds) and in normlab's strategy game played with each
  model's fitted table for the paper's 100 rounds and 10 runs (the published archives hold no
  such Llama-3 runs).
- **S10**: states visited during the emergence of a convention (the 40 Q/M baseline runs of each
  model, N = 24, H = 5), for memories of 1, 2 and 3 entries (an agent's 2nd, 3rd and 4th
  interaction).

The paper's colours are exact next-token probabilities of the LLM, which are not published.
Here they are the posterior mean of the strategy table normlab fitted on each model's 40 baseline
runs (the shipped fits ``llama3_70b_QM_H5`` and ``llama31_70b_QM_H5``; a hierarchical logit that
also predicts states the runs never visited -- marked with a dot in S8); ``source="counts"``
colours S8 by the observed frequency of M instead (unvisited states left blank).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Figs. S8-S10,
Supplementary Text "Characterizing Relative Strength".
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd

from normlab._rng import spawn
from normlab.calibration import load_fit, state_labels
from normlab.theory import strategy_game

from ._common import SHORT, FigureSkipped, archives, with_notes
from .registry import figure

__all__ = ["figS8_data", "figS8_draw", "figS9_data", "figS9_draw", "figS10_data", "figS10_draw", "FITS"]

#: Shipped fits (H = 5, pool Q/M) per model.
FITS = {"Llama-3-70B-Instruct": "llama3_70b_QM_H5", "Llama-3.1-70B-Instruct": "llama31_70b_QM_H5"}
NAMES = ("Q", "M")


def _seqs(L: int) -> list[str]:
    return ["".join(NAMES[(v >> (L - 1 - i)) & 1] for i in range(L)) for v in range(2 ** L)]


def _split(state: str) -> tuple[str, str]:
    """``"Q,M;M,M"`` -> (own ``"QM"``, partner ``"MM"``)."""
    pairs = [p.split(",") for p in state.split(";")] if state else []
    return "".join(p[0] for p in pairs), "".join(p[1] for p in pairs)


def _state(own: str, partner: str) -> str:
    return ";".join(f"{a},{b}" for a, b in zip(own, partner))


@lru_cache(maxsize=8)
def _table(model: str, source: str = "fit"):
    """State label -> (p(M), decisions in the fit's training runs)."""
    fit = load_fit(FITS[model])
    n = fit.counts.sum(axis=1)
    if source == "fit":
        p = fit.mean_table().table[:, fit.names.index("M")]
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.where(n > 0, fit.counts[:, fit.names.index("M")] / n, np.nan)
    return dict(zip(state_labels(fit.names, fit.memory), zip(p, n)))


@figure("figS8", "Fig. S8: strategy over all memory states (H = 5)")
def figS8_data(*, models=tuple(FITS), source: str = "fit", memory_len: int = 5) -> pd.DataFrame:
    """p(M | memory state) for every state of one memory length (Fig. S8).

    Parameters
    ----------
    models : sequence of str
        Models with a shipped H = 5 fit (Llama-3 and Llama-3.1).
    source : {"fit", "counts"}
        Posterior mean of the fitted table (default) or observed frequency in the baseline runs.
    memory_len : int
        Entries in the memory (5, the paper's).

    Returns
    -------
    pandas.DataFrame
        ``model``, ``own``, ``partner``, ``state``, ``p_M``, ``n`` (decisions observed in the state
        in the baseline runs), ``observed``.
    """
    if source not in ("fit", "counts"):
        raise ValueError(f"source must be 'fit' or 'counts'; got {source!r}")
    if not 1 <= int(memory_len) <= 5:
        raise ValueError(f"memory_len must be in 1..5; got {memory_len!r}")
    rows = []
    for m in models:
        if m not in FITS:
            raise ValueError(f"no shipped H = 5 fit for {m!r}; available: {list(FITS)}")
        tab = _table(m, source)
        for own in _seqs(memory_len):
            for par in _seqs(memory_len):
                st = _state(own, par)
                p, n = tab[st]
                rows.append({"model": m, "own": own, "partner": par, "state": st, "p_M": p, "n": int(n),
                             "observed": n > 0})
    df = pd.DataFrame(rows)
    df.attrs.update(source=source, memory_len=int(memory_len))
    notes = [f"{m}: {int(g['observed'].sum())} of {len(g)} states visited in the baseline runs; mean p(M) over all "
             f"states {g['p_M'].mean():.2f}" for m, g in df.groupby("model", sort=False)]
    return with_notes(df, notes)


#: Smallest tick-label size (points) of the memory-state grids: readable at the printed size.
MIN_TICK_PT = 7.0


def _grid_axes(ax, L: int, fontsize: float):
    seqs = _seqs(L)
    ax.set_xticks(np.arange(len(seqs)), seqs, rotation=90, fontsize=fontsize, family="monospace")
    ax.set_yticks(np.arange(len(seqs)), seqs, fontsize=fontsize, family="monospace")
    ax.set_xlim(-0.5, len(seqs) - 0.5)
    ax.set_ylim(len(seqs) - 0.5, -0.5)
    ax.set_xlabel("partner's plays (oldest first)")
    ax.set_ylabel("own plays (oldest first)")
    ax.tick_params(length=1.5, pad=1)


def _colorbar(fig, axes, label="p(M | memory state)"):
    import matplotlib as mpl

    sm = mpl.cm.ScalarMappable(norm=mpl.colors.Normalize(0, 1), cmap="coolwarm")
    cb = fig.colorbar(sm, ax=axes, shrink=0.7, pad=0.02, ticks=[0, 0.5, 1])
    cb.set_label(label)


def figS8_draw(df: pd.DataFrame):
    """One heat map per model, tick labels on both axes (Fig. S8).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    L = int(df.attrs.get("memory_len", len(df["own"].iloc[0])))
    models = list(dict.fromkeys(df["model"]))
    size = 2 ** L
    fig, axes = plt.subplots(1, len(models), figsize=(7.6 * len(models) + 1.2, 8.2), squeeze=False,
                             layout="constrained")
    seqs = _seqs(L)
    for ax, m in zip(axes[0], models):
        d = df[df["model"] == m].set_index(["own", "partner"])["p_M"]
        M = np.array([[d.loc[(o, p)] for p in seqs] for o in seqs], dtype=float)
        ax.imshow(np.ma.masked_invalid(M), cmap="coolwarm", vmin=0, vmax=1, aspect="equal", interpolation="nearest")
        ax.set_facecolor("0.85")
        if df.attrs.get("source") == "fit":
            un = df[(df["model"] == m) & ~df["observed"]]
            ys = un["own"].map(seqs.index)
            xs = un["partner"].map(seqs.index)
            ax.scatter(xs, ys, s=1.2 if size >= 32 else 8, c="k", marker=".", linewidths=0)
        _grid_axes(ax, L, MIN_TICK_PT if size >= 32 else 9)
        ax.set_title(SHORT.get(m, m), fontsize=12)
    _colorbar(fig, axes[0])
    how = ("posterior mean of the table fitted on the 40 baseline runs; dot: state never visited there"
           if df.attrs.get("source") == "fit" else
           "observed frequency of M in the 40 baseline runs; grey: never visited")
    fig.suptitle(f"Fig. S8  Strategy p(M | memory) over all {size} x {size} memory states, H = {L}\n({how})",
                 fontsize=10)
    return fig


def _frequencies(log, lengths, uncommitted=True) -> pd.DataFrame:
    d = log.decisions
    if uncommitted:
        d = d[~d["committed"]]
    d = d[d["memory_len"].isin(list(lengths))]
    c = d.groupby(["memory_len", "memory_state"]).size().rename("n").reset_index()
    c["frequency"] = c["n"] / c.groupby("memory_len")["n"].transform("sum")
    return c


def _circles(freq: pd.DataFrame, tab: dict, **keys) -> pd.DataFrame:
    rows = []
    for r in freq.itertuples():
        own, par = _split(r.memory_state)
        rows.append({**keys, "memory_len": int(r.memory_len), "own": own, "partner": par, "state": r.memory_state,
                     "frequency": r.frequency, "n": int(r.n), "p_M": float(tab[r.memory_state][0])})
    return pd.DataFrame(rows)


@figure("figS9", "Fig. S9: memory states around a consensus on M")
def figS9_data(data=None, *, small: bool = False, rounds: int = 100, runs: int = 10, rng=2025) -> pd.DataFrame:
    """Memory states visited around a consensus on M, unperturbed or with one agent committed to Q.

    Parameters
    ----------
    data : path or Archives, optional
        The published Llama-3.1 runs (drawn when present).
    small : bool
        30 rounds instead of 100 for the strategy-game panels.
    rounds, runs : int
        Strategy-game panels: population rounds and runs (the paper: 100 and 10).
    rng : seed

    Returns
    -------
    pandas.DataFrame
        ``model``, ``source`` (``published runs``/``fitted table``), ``setting``
        (``unperturbed``/``1 committed to Q``), ``own``, ``partner``, ``state``, ``frequency``
        (share of the uncommitted agents' decisions), ``n``, ``p_M`` (fitted table).
    """
    R = 30 if small and rounds == 100 else int(rounds)
    N, H = 24, 5
    frames, notes = [], []
    arch = archives(data, required=False)
    children = spawn(rng, 2 * len(FITS))
    for i, m in enumerate(FITS):
        tab = _table(m)
        if arch is not None:
            got = False
            for setting, kind, c in (("unperturbed", "evolved", 0), ("1 committed to Q", "swap", 1)):
                log = arch.runs(model=m, kind=kind, names="M,Q", memory=H, n_agents=N)
                if log is not None:
                    log = log.select(committed_count=c)
                if log is None or len(log.runs) == 0:
                    continue
                got = True
                fr = _circles(_frequencies(log, [H]), tab, model=m, source="published runs", setting=setting)
                frames.append(fr)
                rounds = int(log.runs["n_interactions"].max()) // N
                notes.append(f"{m}, {setting}: {len(log.runs)} published runs, {rounds} rounds; "
                             f"{len(fr)} states visited")
            if not got:
                notes.append(f"{m}: no published runs from a consensus on M at N = {N}, H = {H}; fitted table only")
        fit = load_fit(FITS[m])
        for j, (setting, c) in enumerate((("unperturbed", 0), ("1 committed to Q", 1))):
            res = strategy_game(fit.mean_table(), n_agents=N, memory=H, n_runs=runs, committed=c, committed_name="Q",
                                initial="consensus:M", names=NAMES, max_interactions=R * N, stop="max",
                                record_decisions=True, progress=False, rng=children[2 * i + j])
            fr = _circles(_frequencies(res.to_log(), [H]), tab, model=m, source="fitted table", setting=setting)
            frames.append(fr)
            notes.append(f"{m}, {setting}: fitted table, {runs} runs x {R} rounds; {len(fr)} states visited")
    df = pd.concat(frames, ignore_index=True)
    df.attrs["rounds"] = R
    return with_notes(df, notes)


def _circle_panel(ax, d: pd.DataFrame, L: int, fontsize: float, smax: float):
    seqs = _seqs(L)
    x = d["partner"].map(seqs.index)
    y = d["own"].map(seqs.index)
    # area grows with the square root of the frequency, so that rare states stay visible
    ax.scatter(x, y, s=smax * np.sqrt(d["frequency"] / d["frequency"].max()), c=d["p_M"], cmap="coolwarm",
               vmin=0, vmax=1, edgecolors="0.3", linewidths=0.3)
    for v in np.arange(-0.5, len(seqs), 1.0):
        ax.axhline(v, color="0.93", lw=0.4, zorder=0)
        ax.axvline(v, color="0.93", lw=0.4, zorder=0)
    _grid_axes(ax, L, fontsize)


def figS9_draw(df: pd.DataFrame):
    """Rows: unperturbed, one committed agent; columns: model and source (Fig. S9).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    cols = list(dict.fromkeys(zip(df["model"], df["source"])))
    settings = ["unperturbed", "1 committed to Q"]
    fig, axes = plt.subplots(2, len(cols), figsize=(6.2 * len(cols) + 1.2, 13.0), squeeze=False, layout="constrained")
    for j, (m, src) in enumerate(cols):
        for i, s in enumerate(settings):
            ax = axes[i, j]
            d = df[(df["model"] == m) & (df["source"] == src) & (df["setting"] == s)]
            if d.empty:
                ax.set_visible(False)
                continue
            _circle_panel(ax, d, 5, MIN_TICK_PT, 220)
            ax.set_title(f"{SHORT.get(m, m)}, {src}\n{s}", fontsize=11)
    _colorbar(fig, axes)
    fig.suptitle("Fig. S9  Memory states visited around a consensus on M (N = 24, H = 5); "
                 "circle area ~ sqrt(frequency) "
                 f"among uncommitted agents; fitted-table panels: {df.attrs.get('rounds', '')} rounds", fontsize=10)
    return fig


@figure("figS10", "Fig. S10: memory states during emergence")
def figS10_data(data=None, *, lengths=(1, 2, 3)) -> pd.DataFrame:
    """Memory states visited while a convention emerges (the Q/M baseline runs; Fig. S10).

    Parameters
    ----------
    data : path or Archives, optional
    lengths : sequence of int
        Memory lengths drawn (an agent's interaction ``L + 1``); default 1, 2, 3.

    Returns
    -------
    pandas.DataFrame
        ``model``, ``memory_len``, ``own``, ``partner``, ``state``, ``frequency`` (share of the
        decisions taken with a memory of that length), ``n``, ``p_M`` (fitted table);
        ``attrs["aggregate"]``: the frequency-weighted and the unweighted mean p(M) per model and
        length.
    """
    lengths = tuple(int(v) for v in lengths)
    if not lengths or min(lengths) < 1 or max(lengths) > 5:
        raise ValueError(f"lengths must be memory lengths in 1..5; got {lengths!r}")
    arch = archives(data)
    frames, notes, agg = [], [], []
    for m in FITS:
        log = arch.runs(model=m, kind="baseline", names="Q,M", memory=5, n_agents=24)
        if log is None:
            notes.append(f"Fig. S10: no {m} Q/M baseline runs in the data")
            continue
        fr = _circles(_frequencies(log, lengths), _table(m), model=m)
        frames.append(fr)
        for L, g in fr.groupby("memory_len"):
            w = float((g["frequency"] * g["p_M"]).sum())
            u = float(g["p_M"].mean()) if len(g) == 4 ** L else float(
                np.mean([_table(m)[_state(o, p)][0] for o in _seqs(L) for p in _seqs(L)]))
            agg.append({"model": m, "memory_len": L, "p_M_visited": w, "p_M_all_states": u})
            notes.append(f"{m}, memory of {L}: p(M) {w:.2f} weighted by visits, {u:.2f} over all states alike")
    if not frames:
        raise FigureSkipped("Fig. S10: no Q/M baseline runs (N = 24, H = 5) of Llama-3 or Llama-3.1 in the data")
    df = pd.concat(frames, ignore_index=True)
    df.attrs["aggregate"] = agg
    return with_notes(df, notes)


def figS10_draw(df: pd.DataFrame):
    """Rows: models; columns: memory lengths (Fig. S10).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(df["model"]))
    lengths = sorted(df["memory_len"].unique())
    fig, axes = plt.subplots(len(models), len(lengths), figsize=(3.9 * len(lengths) + 1.2, 4.1 * len(models)),
                             squeeze=False, layout="constrained")
    agg = {(a["model"], a["memory_len"]): a for a in df.attrs.get("aggregate", [])}
    for i, m in enumerate(models):
        for j, L in enumerate(lengths):
            ax = axes[i, j]
            d = df[(df["model"] == m) & (df["memory_len"] == L)]
            _circle_panel(ax, d, int(L), 9 if L <= 2 else 7, 900 / 2 ** L)
            a = agg.get((m, L))
            extra = (f"\np(M): {a['p_M_visited']:.2f} as visited, {a['p_M_all_states']:.2f} all states alike"
                     if a else "")
            ax.set_title(f"{SHORT.get(m, m)}: interaction {L + 1} (memory of {L}){extra}", fontsize=8.5)
    _colorbar(fig, axes)
    fig.suptitle("Fig. S10  Memory states visited during emergence (40 Q/M runs, N = 24, H = 5); "
                 "circle area ~ sqrt(frequency)", fontsize=10)
    return fig
