"""Figs. S3-S5 of Flint Ashery, Aiello & Baronchelli (2025): individual bias and its consequence.

- **S3** (theory): production probability of name '1' per population round in the minimal
  naming game with W = 2, N = 24 and a production bias b (a speaker holding both names says '1'
  with probability b), b = 0, 0.05, ..., 1, 10 000 runs each.
- **S4**: Llama-3 with the whole Latin alphabet (W = 26): first moves with empty memory (each
  agent's first move in the 20 runs, 480 in all) and the consensus of each run.
- **S5**: first moves with empty memory over the ten names of Fig. 1 (the ``no_memory``
  probes), with the chi-squared test of neutrality.

S3 follows the authors' ``plotter.ipynb`` (cells 35-37): runs stop after 3N consecutive successes
and the mean over runs pads a stopped run with 1 when b > 0.5, 0 when b < 0.5 and 0.5 at b = 0.5
-- whichever name it actually reached. With ``pad="consensus"`` a stopped run keeps producing the
name it converged on, which is the production probability proper: it levels off at
P(consensus on '1') (about 0.7 at b = 0.55 for N = 24) instead of reaching 1, so the caption's
"inevitable global convergence" is the large-N limit. The empty speaker does not keep the name it
utters (``invent="discard"``, the authors' ``NG_module.py``) and, unlike in that published module
(where the bias line is commented out), draws it with the bias (``bias_empty=True``): the
published curves start at b in round 1, which only a biased empty speaker gives.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Figs. S3-S5,
Supplementary Text "Theoretical Model"; ``plotter.ipynb`` cells 13-18, 35-37, ``NG_module.py``,
``analyse_individual_bias.py`` (MIT).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from normlab._rng import spawn
from normlab.theory import minimal_naming_game

from ._common import (COLORS, MODELS, SHORT, TEN, FigureSkipped, archives, check_model, integer_ticks, missing_note,
                      with_notes)
from .fig2 import first_move_counts
from .registry import figure

__all__ = ["figS3_data", "figS3_draw", "figS4_data", "figS4_draw", "figS5_data", "figS5_draw", "LATIN"]

LATIN = ",".join(chr(c) for c in range(ord("A"), ord("Z") + 1))


def _bias_matrix(res, R: int, pad: str, b: float) -> np.ndarray:
    """Runs x rounds share of name '1'; rounds after a run stopped are padded."""
    prod = res.round_production.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = prod[:, 1] / prod.sum(axis=1)
    off = res.round_offsets
    out = np.full((res.n_runs, R), np.nan)
    side = 1.0 if b > 0.5 else 0.0 if b < 0.5 else 0.5
    for k in range(res.n_runs):
        m = min(off[k + 1] - off[k], R)
        out[k, :m] = share[off[k]:off[k] + m]
        if m < R:
            out[k, m:] = side if pad == "bias_side" else float(res.winner[k] == 1) if res.winner[k] >= 0 else np.nan
    return out


@figure("figS3", "Fig. S3: minimal naming game with a production bias", published="theoretical_word_use.pdf")
def figS3_data(*, small: bool = False, runs: int | None = None, n_agents: int = 24, rounds: int = 21,
               pad: str = "bias_side", invent: str = "discard", bias_empty: bool = True, biases=None,
               rng=3) -> pd.DataFrame:
    """Mean production probability of name '1' per round and bias (Fig. S3).

    Parameters
    ----------
    small : bool
        1000 runs per bias instead of 10 000.
    runs : int, optional
    n_agents : int
        Population size (24, the paper's).
    rounds : int
        Rounds reported (21, the published x range).
    pad : {"bias_side", "consensus"}
        How a run that stopped counts afterwards: the authors' ``plotter.ipynb`` (the side of the
        bias) or the name it converged on.
    invent : {"discard", "keep"}
        Whether an empty speaker keeps the name it utters (the authors' ``NG_module.py``: no).
    bias_empty : bool
        An empty speaker also says '1' with probability b (default): the published curves start
        at b in round 1, which only a biased empty speaker gives; ``False`` biases only the
        choice between two held names (round 1 then starts near 0.5).
    biases : array_like, optional
        Default ``0, 0.05, ..., 1``.
    rng : seed

    Returns
    -------
    pandas.DataFrame
        ``bias``, ``round``, ``p_name_1``, ``p_consensus_1`` (share of runs converging on '1').
    """
    if pad not in ("bias_side", "consensus"):
        raise ValueError(f"pad must be 'bias_side' (the authors' plotter.ipynb) or 'consensus'; got {pad!r}")
    bs = np.round(np.linspace(0, 1, 21), 2) if biases is None else np.asarray(biases, dtype=float)
    if bs.ndim != 1 or bs.size == 0 or bs.min() < 0 or bs.max() > 1:
        raise ValueError("biases must be a 1-D array of probabilities in [0, 1]")
    n = runs if runs is not None else (1000 if small else 10_000)
    frames = []
    for b, child in zip(bs, spawn(rng, len(bs))):
        res = minimal_naming_game(n_agents, n_words=2, n_runs=n, production_bias=[1 - b, b], invent=invent,
                                  bias_empty=bias_empty, stop="streak", rng=child, progress=False)
        m = _bias_matrix(res, rounds, pad, b)
        frames.append(pd.DataFrame({"bias": b, "round": np.arange(1, rounds + 1), "p_name_1": np.nanmean(m, axis=0),
                                    "p_consensus_1": float(np.mean(res.winner == 1))}))
    df = pd.concat(frames, ignore_index=True)
    df.attrs.update(runs=n, n_agents=n_agents, pad=pad)
    pc = df.groupby("bias")["p_consensus_1"].first()
    last = df[df["round"] == rounds].set_index("bias")["p_name_1"]
    notes = [f"b = {b:.2f}: P(consensus on '1') = {pc.loc[b]:.2f}, production of '1' at round {rounds} "
             f"{last.loc[b]:.2f} ({pad} padding)" for b in pc.index if np.isclose(b, [0.5, 0.55, 0.6, 0.75]).any()]
    return with_notes(df, notes)


def figS3_draw(df: pd.DataFrame, *, ax=None):
    """One line per bias, coloured by the bias (coolwarm), with a colour bar (Fig. S3).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib as mpl
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(6.2, 4.6))
    else:
        fig = ax.figure
    norm = mpl.colors.Normalize(0, 1)
    cmap = plt.get_cmap("coolwarm")
    for b, r in df.groupby("bias"):
        ax.plot(r["round"], r["p_name_1"], color=cmap(norm(b)), lw=1.4)
    cb = fig.colorbar(mpl.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, shrink=0.8, ticks=[0, 0.5, 1])
    cb.set_label("Bias b (probability of saying '1')")
    ax.set(xlabel="Population Round", ylabel="Production Probability of '1'", ylim=(-0.03, 1.03),
           xlim=(0, int(df["round"].max())))
    integer_ticks(ax)
    a = df.attrs
    fig.suptitle(f"Fig. S3  Minimal naming game, W = 2, N = {a.get('n_agents', 24)}, biased production\n"
                 f"({a.get('runs', '')} runs per bias; stopped runs padded: {a.get('pad', '')})", fontsize=10)
    fig.tight_layout()
    return fig


@figure("figS4", "Fig. S4: individual and collective bias with W = 26", published="SI_FIGURE_LATIN.pdf")
def figS4_data(data=None, *, model: str = "Llama-3-70B-Instruct") -> pd.DataFrame:
    """First moves and consensus with the Latin alphabet (Fig. S4).

    Individual bias: every agent's first move (empty memory) in every run; collective bias: the
    most frequent name of each run's last 72 interactions (the authors' rule).

    Returns
    -------
    pandas.DataFrame
        ``panel`` (``individual``/``collective``), ``name``, ``count``, ``n``, ``share``.
    """
    check_model(model)
    arch = archives(data)
    log = arch.need_runs("Fig. S4", model=model, kind="baseline", names=LATIN, memory=5, n_agents=24)
    d = log.decisions.sort_values(["run", "t"])
    first = d.groupby(["run", "agent"])["name"].first()
    T = d.groupby("run")["t"].transform("max")
    last = d[d["t"] > T - 72].groupby("run")["name"].agg(lambda s: s.value_counts().index[0])
    rows = []
    for panel, vals in (("individual", first), ("collective", last)):
        vc = vals.value_counts()
        for nm in LATIN.split(","):
            rows.append({"panel": panel, "name": nm, "count": int(vc.get(nm, 0)), "n": int(len(vals)),
                         "share": vc.get(nm, 0) / len(vals)})
    df = pd.DataFrame(rows)
    df.attrs["model"] = model
    ind = df[df["panel"] == "individual"].set_index("name")
    col = df[df["panel"] == "collective"].set_index("name")
    return with_notes(df, [f"{model}: A is {ind.loc['A', 'share']:.2f} of {int(ind['n'].iloc[0])} first moves; "
                           f"consensus on A in {int(col.loc['A', 'count'])} of {int(col['n'].iloc[0])} runs"])


def figS4_draw(df: pd.DataFrame):
    """Two bar panels over the 26 letters (Fig. S4).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(7.0, 5.6))
    letters = LATIN.split(",")
    for ax, (panel, lab) in zip(axes, (("individual", "Individual Bias"), ("collective", "Collective Bias"))):
        d = df[df["panel"] == panel].set_index("name").reindex(letters)
        ax.bar(np.arange(26), d["share"], color=COLORS["Llama-3-70B-Instruct"])
        ax.set_xticks(np.arange(26), letters)
        n = int(d["n"].iloc[0])
        ax.set(ylabel=lab, xlabel="Convention",
               title=f"first moves with empty memory ({n})" if panel == "individual" else f"consensus of {n} runs")
    fig.suptitle(f"Fig. S4  W = 26 (Latin alphabet), {SHORT.get(df.attrs.get('model'), '')}, N = 24, H = 5",
                 fontsize=10)
    fig.tight_layout()
    return fig


@figure("figS5", "Fig. S5: individual bias with W = 10", published="SI_FIGURE_10_individual_bias.pdf")
def figS5_data(data=None) -> pd.DataFrame:
    """First moves with empty memory over the ten names, per model (Fig. S5).

    Returns
    -------
    pandas.DataFrame
        ``model``, ``name``, ``count``, ``n``, ``share``, ``test`` (``chi2``), ``p_value``.
    """
    df = first_move_counts(data, names=TEN)
    if df.empty:
        raise FigureSkipped(f"Fig. S5: no first-move probes over {TEN} in the data")
    have = list(dict.fromkeys(df["model"]))
    notes = [f"{m}: {int(df[df['model'] == m]['n'].iloc[0])} first moves, chi-squared p = "
             f"{df[df['model'] == m]['p_value'].iloc[0]:.2g}" for m in have]
    return with_notes(df, notes + [missing_note("Fig. S5", have)])


def figS5_draw(df: pd.DataFrame):
    """One bar panel per model (Fig. S5).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    models = [m for m in MODELS if m in set(df["model"])]
    ncol = min(2, len(models))
    nrow = -(-len(models) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.4 * ncol, 3.4 * nrow), squeeze=False, sharey=True)
    pool = TEN.split(",")
    for ax, m in zip(axes.flat, models):
        d = df[df["model"] == m].set_index("name").reindex(pool)
        ax.bar(np.arange(len(pool)), d["share"], 0.55, color=COLORS[m])
        ax.axhline(0.1, color="0.4", lw=0.8, ls=":")
        ax.set_xticks(np.arange(len(pool)), pool)
        p = d["p_value"].iloc[0]
        ax.set(xlabel="Convention", ylim=(0, 0.125),
               title=f"{SHORT[m]}: {int(d['n'].iloc[0])} samples, χ² p = {p:.2g}")
    for ax in axes[:, 0]:
        ax.set_ylabel("Production Probability")
    for ax in list(axes.flat)[len(models):]:
        ax.set_visible(False)
    fig.suptitle("Fig. S5  Individual bias with W = 10: first moves with empty memory (dotted: neutral 0.1)",
                 fontsize=10)
    fig.tight_layout()
    return fig
