"""Fig. 2 of Flint Ashery, Aiello & Baronchelli (2025): collective bias in convention selection.

- **2A**: share of the 40 ten-name runs (N = 24, H = 5) reaching consensus on each name.
- **2B**: left, individual bias -- the share of each of Q and M among first moves with empty
  memory (the ``no_memory`` probes; Table S1), with an asterisk where the exact binomial test
  cannot reject neutrality (p >= 0.05); right, collective bias -- the share of the 40 Q/M runs
  reaching consensus on each (Table S2).

The authors hard-coded the consensus counts of 2A and 2B in ``plotter.ipynb`` (cells 5, 7) and
drew an asterisk over every model; here the counts are computed from the published runs and the
asterisk from each model's binomial test (the caption's rule). The computed counts equal their
hard-coded ones (tested).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. 2, Tables S1,
S2, Materials and Methods "Measuring Individual Bias"; ``plotter.ipynb`` cells 5-7 (MIT).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._common import COLORS, MODELS, SHORT, TEN, FigureSkipped, archives, missing_note, with_notes
from .registry import figure

__all__ = ["fig2a_data", "fig2a_draw", "fig2b_data", "fig2b_draw", "consensus_counts", "first_move_counts"]


def consensus_counts(data=None, *, names: str = "Q,M", memory: int = 5, n_agents: int = 24) -> pd.DataFrame:
    """Runs per consensus name of each model's baseline runs (long: ``model``, ``name``, ``runs``,
    ``n_runs``, ``share``); runs without consensus are counted under ``name = None``."""
    arch = archives(data)
    rows = []
    for m in MODELS:
        log = arch.runs(model=m, kind="baseline", names=names, memory=memory, n_agents=n_agents)
        if log is None:
            continue
        cons = log.runs["consensus"]
        n = len(cons)
        for nm in names.split(","):
            k = int((cons == nm).sum())
            rows.append({"model": m, "name": nm, "runs": k, "n_runs": n, "share": k / n})
        none = int(cons.isna().sum())
        if none:
            rows.append({"model": m, "name": None, "runs": none, "n_runs": n, "share": none / n})
    return pd.DataFrame(rows, columns=["model", "name", "runs", "n_runs", "share"])


def first_move_counts(data=None, *, names: str = "Q,M") -> pd.DataFrame:
    """First moves with empty memory per model and name from the ``no_memory`` probes (long:
    ``model``, ``name``, ``count``, ``n``, ``share``) with the neutrality test of the paper
    (``test``: exact binomial, two-sided, for two names; chi-squared against uniform otherwise;
    ``p_value``)."""
    from scipy.stats import binomtest, chisquare

    pr = archives(data).probes
    pr = pr[(pr["probe"] == "no_memory") & (pr["names"] == names) & pr["valid"]] if len(pr) else pr
    pool = names.split(",")
    rows = []
    for m in MODELS:
        sub = pr[pr["model"] == m] if len(pr) else pr
        if len(sub) == 0:
            continue
        counts = np.array([(sub["name"] == nm).sum() for nm in pool])
        n = int(counts.sum())
        if len(pool) == 2:
            test, p = "binomial", binomtest(int(counts[1]), n, 0.5).pvalue
        else:
            test, p = "chi2", chisquare(counts).pvalue
        for nm, c in zip(pool, counts):
            rows.append({"model": m, "name": nm, "count": int(c), "n": n, "share": c / n, "test": test,
                         "p_value": float(p)})
    return pd.DataFrame(rows, columns=["model", "name", "count", "n", "share", "test", "p_value"])


@figure("fig2a", "Fig. 2A: consensus convention with ten names", published="FIGURE_2.pdf")
def fig2a_data(data=None) -> pd.DataFrame:
    """Collective bias with ten names (Fig. 2A): share of runs reaching consensus on each name.

    Returns
    -------
    pandas.DataFrame
        ``model``, ``name``, ``runs``, ``n_runs``, ``share``.
    """
    df = consensus_counts(data, names=TEN)
    if df.empty:
        raise FigureSkipped(f"Fig. 2A: no ten-name baseline runs ({TEN}) in the data")
    have = list(dict.fromkeys(df["model"]))
    notes = [f"{m}: " + ", ".join(f"{r.name} {r.runs}" for r in df[df["model"] == m].itertuples()) for m in have]
    return with_notes(df, notes + [missing_note("Fig. 2A", have)])


def fig2a_draw(df: pd.DataFrame, *, ax=None):
    """Grouped bars, one colour per model (Fig. 2A).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(7.2, 4.0))
    else:
        fig = ax.figure
    pool = TEN.split(",")
    models = [m for m in MODELS if m in set(df["model"])]
    w = 0.8 / max(len(models), 1)
    x = np.arange(len(pool))
    for i, m in enumerate(models):
        s = df[df["model"] == m].set_index("name").reindex(pool)["share"].fillna(0)
        ax.bar(x + (i - (len(models) - 1) / 2) * w, s.to_numpy(), width=w, color=COLORS[m],
               label=f"{SHORT[m]} ({int(df[df['model'] == m]['n_runs'].iloc[0])} runs)")
    ax.set_xticks(x, pool)
    ax.set(xlabel="Convention", ylabel="Collective Bias (share of runs)", ylim=(0, 1.05))
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, fontsize=9)
    fig.suptitle("Fig. 2A  Consensus convention with W = 10 (N = 24, H = 5)", fontsize=10)
    fig.tight_layout()
    return fig


@figure("fig2b", "Fig. 2B: individual vs collective bias with {Q, M}", published="FIGURE_2.pdf")
def fig2b_data(data=None, *, alpha: float = 0.05) -> pd.DataFrame:
    """Individual vs collective bias with two names {Q, M} (Fig. 2B; Tables S1, S2).

    Parameters
    ----------
    data : path or Archives, optional
    alpha : float
        Level of the neutrality test behind the asterisks.

    Returns
    -------
    pandas.DataFrame
        ``panel`` (``individual``/``collective``), ``model``, ``name``, ``count``, ``n``,
        ``share``, ``p_value`` (individual: exact binomial test of p = 1/2), ``neutral``
        (individual: p >= alpha, the asterisk).
    """
    ind = first_move_counts(data, names="Q,M")
    col = consensus_counts(data, names="Q,M")
    if ind.empty and col.empty:
        raise FigureSkipped("Fig. 2B: neither first-move probes nor Q/M baseline runs in the data")
    ind = ind.assign(panel="individual", neutral=ind["p_value"] >= alpha)
    col = col.rename(columns={"runs": "count", "n_runs": "n"}).assign(panel="collective", p_value=np.nan,
                                                                      neutral=np.nan)
    df = pd.concat([ind, col], ignore_index=True)[["panel", "model", "name", "count", "n", "share", "p_value",
                                                   "neutral"]]
    notes = []
    for m in MODELS:
        i = ind[ind["model"] == m]
        c = col[col["model"] == m].set_index("name")
        if len(i):
            notes.append(f"{m}: first moves Q {int(i.iloc[0]['count'])}, M {int(i.iloc[1]['count'])} "
                         f"(binomial p = {i.iloc[0]['p_value']:.3f})")
        if len(c):
            notes.append(f"{m}: consensus on M in {int(c.loc['M', 'count'])} of {int(c.loc['M', 'n'])} runs")
    have = set(ind["model"]) | set(col["model"])
    return with_notes(df, notes + [missing_note("Fig. 2B", have)])


def fig2b_draw(df: pd.DataFrame):
    """Two bar panels, Q light and M dark per model (Fig. 2B).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8.0, 4.2))
    for ax, panel, ylabel in zip(axes, ("individual", "collective"), ("Individual Bias", "Collective Bias")):
        d = df[df["panel"] == panel]
        models = [m for m in MODELS if m in set(d["model"])]
        x = np.arange(len(models))
        for i, m in enumerate(models):
            s = d[d["model"] == m].set_index("name")["share"]
            ax.bar(x[i] - 0.18, s.get("Q", 0.0), 0.36, color=COLORS[m], alpha=0.45)
            ax.bar(x[i] + 0.18, s.get("M", 0.0), 0.36, color=COLORS[m])
            if panel == "individual" and bool(d[d["model"] == m]["neutral"].iloc[0]):
                ax.text(x[i], max(s.max(), 0) + 0.03, "*", ha="center", va="bottom", fontsize=14, fontweight="bold")
        ax.set_xticks(x, [SHORT[m] for m in models], rotation=30, ha="right")
        ax.set(ylabel=ylabel, ylim=(0, 1.1), yticks=[0, 0.5, 1.0])
        ax.set_title("first move, empty memory" if panel == "individual" else "consensus of the Q/M runs",
                     fontsize=9)
    from matplotlib.patches import Patch

    axes[1].legend([Patch(color="0.3", alpha=0.45), Patch(color="0.3")], ["Q (weak): light", "M (strong): dark"],
                   loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.suptitle("Fig. 2B  Individual vs collective bias, W = 2 {Q, M} (* : not significantly biased)", fontsize=10)
    fig.tight_layout()
    return fig
