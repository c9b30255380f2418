"""Analogues of ITCMA-S Figs. 6-7 (Zhang et al., arXiv:2409.06750) from the closed-form LTRHA loop.

- **itcmas_fig6**: (a) driver d_t of each agent (Eq. 15); (b) pleasure, arousal and dominance
  (5-step rolling means).
- **itcmas_fig7**: (a) resources S_i of each agent (Eq. 19 every step); (b) topic of each locale
  (Eq. 17) over the 75 steps.
- **itcmas_gini**: resource inequality over time for three rankers (contribution, resources,
  random), 100 runs each: the Gini coefficient with a floor at 0, and -- Eq. 19 as written drives
  resources negative, where the Gini coefficient is undefined -- the share of agents in debt.

The paper's curves come from one LLM-agent run in its IrollanValley sandbox; these come from
:func:`normlab.theory.itcmas.simulate_ltrha` (six agents, eight locales, 75 steps), so they are
analogues of the mechanics, not reproductions of that run.

References
----------
Zhang et al., "ITCMA-S: a multi-agent architecture for emergent social behaviour", arXiv:2409.06750,
Figs. 6-7, Eqs. 10-19.
"""

from __future__ import annotations

import pandas as pd

from normlab.theory import itcmas

from ._common import integer_ticks, with_notes
from .registry import figure

__all__ = ["itcmas_fig6_data", "itcmas_fig6_draw", "itcmas_fig7_data", "itcmas_fig7_draw", "itcmas_gini_data",
           "itcmas_gini_draw", "AGENTS", "LOCALES"]

AGENTS = ["AY", "SG", "MD", "WL", "LL", "WM"]
LOCALES = [f"{a}'s house" for a in AGENTS] + ["canteen", "reading room"]


def _run(rng):
    return itcmas.simulate_ltrha(agent_names=AGENTS, env_names=LOCALES, rng=rng)


@figure("itcmas_fig6", "ITCMA-S Fig. 6 analogue: driver and emotions", paper="itcmas")
def itcmas_fig6_data(*, rng=2409) -> pd.DataFrame:
    """Driver and PAD emotions per agent and step of one LTRHA run (tidy: ``step``, ``agent``,
    ``d``, ``P``, ``A``, ``D`` and the 5-step rolling means ``P_mean``, ``A_mean``, ``D_mean``)."""
    df = _run(rng).to_frame()[["step", "agent", "d", "P", "A", "D"]].copy()
    roll = df.groupby("agent", observed=True)[["P", "A", "D"]].transform(lambda x: x.rolling(5, min_periods=1).mean())
    df[["P_mean", "A_mean", "D_mean"]] = roll.to_numpy()
    last = df[df["step"] == df["step"].max()]
    return with_notes(df, [f"step {int(last['step'].iloc[0])}: driver {last['d'].min():.2f} to {last['d'].max():.2f} "
                           "across agents"])


def itcmas_fig6_draw(df: pd.DataFrame):
    """Four panels: driver, then P, A, D (5-step means), one line per agent; legend outside.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(1, 4, figsize=(17, 3.6), sharex=True)
    sns.lineplot(df, x="step", y="d", hue="agent", ax=ax[0], legend=False)
    ax[0].set_title("(a) driver $d_t$ (Eq. 15)")
    for k, (a, (c, name)) in enumerate(zip(ax[1:], [("P", "pleasure"), ("A", "arousal"), ("D", "dominance")])):
        sns.lineplot(df, x="step", y=f"{c}_mean", hue="agent", ax=a, legend=k == 2)
        a.axhline(0, color="k", lw=0.5)
        a.set(title=f"(b) {name} {c} (5-step mean)", ylabel=c)
    ax[3].legend(title="agent", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    for a in ax:
        integer_ticks(a)
    fig.suptitle("ITCMA-S Fig. 6 analogue: driver and emotions of six agents over 75 steps (LTRHA model)",
                 fontsize=10)
    fig.tight_layout()
    return fig


@figure("itcmas_fig7", "ITCMA-S Fig. 7 analogue: resources and topics", paper="itcmas")
def itcmas_fig7_data(*, rng=2409) -> pd.DataFrame:
    """Resources per agent and topic per locale of one LTRHA run (tidy: ``panel``
    (``resources``/``topic``), ``step``, ``who``, ``value``; topic NaN where a locale is empty)."""
    res = _run(rng)
    r = res.to_frame()[["step", "agent", "S"]].rename(columns={"agent": "who", "S": "value"}).assign(panel="resources")
    t = res.topic_frame()
    t = t.assign(value=t["topic"].where(t["n_present"] > 0))[["step", "env", "value"]].rename(columns={"env": "who"})
    df = pd.concat([r, t.assign(panel="topic")], ignore_index=True)[["panel", "step", "who", "value"]]
    last = r[r["step"] == r["step"].max()].set_index("who")["value"]
    return with_notes(df, [f"resources at step {int(r['step'].max())}: {last.idxmax()} {last.max():.1f} (most), "
                           f"{last.idxmin()} {last.min():.1f} (least)"])


def itcmas_fig7_draw(df: pd.DataFrame):
    """(a) resources per agent; (b) heat map of the topic per locale and step (tick labels on both).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(1, 2, figsize=(16, 4.0), gridspec_kw={"width_ratios": [1, 1.45]})
    r = df[df["panel"] == "resources"].rename(columns={"who": "agent", "value": "S"})
    sns.lineplot(r, x="step", y="S", hue="agent", ax=ax[0])
    ax[0].axhline(0, color="k", lw=0.5)
    ax[0].legend(title="agent", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax[0].set_title("(a) resources $S_i$ (Eq. 19 each step)")
    integer_ticks(ax[0])
    t = df[df["panel"] == "topic"]
    order = list(dict.fromkeys(t["who"]))
    topic = t.pivot(index="who", columns="step", values="value").reindex(order)
    sns.heatmap(topic, cmap="vlag", center=0, vmin=-1, vmax=1, ax=ax[1], xticklabels=5, yticklabels=True,
                cbar_kws={"label": "topic (Eq. 17)"})
    ax[1].set_facecolor("0.85")
    ax[1].set(title="(b) topic of each locale (grey: nobody there)", ylabel="", xlabel="step")
    fig.suptitle("ITCMA-S Fig. 7 analogue: resources and topics over 75 steps (LTRHA model)", fontsize=10)
    fig.tight_layout()
    return fig


@figure("itcmas_gini", "ITCMA-S: resource inequality under three rankers", paper="itcmas")
def itcmas_gini_data(*, small: bool = False, runs: int | None = None, rng=2409) -> pd.DataFrame:
    """Resource inequality per step for three rankers and two readings of Eq. 19.

    With ``floor = 0`` resources stay non-negative and the Gini coefficient measures their
    inequality; Eq. 19 as written drives resources negative, where the Gini coefficient is
    undefined (:func:`normlab.theory.itcmas.gini` returns NaN), so that rule is read by the share
    of agents in debt instead.

    Returns
    -------
    pandas.DataFrame
        The rows of :meth:`LTRHAResult.inequality` (``run``, ``step``, ``gini``, ``share_negative``,
        ...) with ``ranker`` and ``rule``.
    """
    n = runs if runs is not None else (20 if small else 100)
    rankers = {"contribution": itcmas.ContributionRanker(), "resources": itcmas.ResourceRanker(),
               "random": itcmas.RandomRanker()}
    frames = []
    for name, ranker in rankers.items():
        for floor in (None, 0.0):
            r = itcmas.simulate_ltrha(ranker=ranker, floor=floor, n_runs=n, rng=rng, progress=False)
            rule = "Eq. 19 as written" if floor is None else "floor = 0"
            frames.append(r.inequality().assign(ranker=name, rule=rule))
    df = pd.concat(frames, ignore_index=True)
    df.attrs["runs"] = n
    last = df[df["step"] == df["step"].max()]
    notes = []
    for (rule, rk), g in last.groupby(["rule", "ranker"], sort=False):
        bad = int(g["gini"].isna().sum())
        if bad == 0:
            notes.append(f"{rule}, {rk}: median Gini at the last step {g['gini'].median():.2f}")
        else:
            notes.append(f"{rule}, {rk}: Gini undefined at the last step in {bad} of {len(g)} runs (negative "
                         f"resources); agents in debt {g['share_negative'].mean():.0%} on average")
    return with_notes(df, notes)


def itcmas_gini_draw(df: pd.DataFrame):
    """Left: the Gini coefficient per step under ``floor = 0`` (median, 10-90 % band of runs);
    right: Eq. 19 as written, where resources go negative and the Gini coefficient is undefined,
    read by the share of agents in debt.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(1, 2, figsize=(10.5, 3.8))
    fl = df[df["rule"] == "floor = 0"]
    sns.lineplot(fl, x="step", y="gini", hue="ranker", estimator="median", errorbar=("pi", 80), ax=ax[0])
    ax[0].set(title="floor = 0 (resources stay >= 0)", ylabel="Gini of $S$ (band: 10-90% of runs)")
    wr = df[df["rule"] == "Eq. 19 as written"]
    sns.lineplot(wr, x="step", y="share_negative", hue="ranker", estimator="mean", errorbar=None, ax=ax[1])
    ax[1].set(title="Eq. 19 as written: resources go negative, Gini undefined",
              ylabel="share of agents in debt (mean of runs)", ylim=(0, 1))
    for a in ax:
        integer_ticks(a)
    ax[1].get_legend().remove()
    fig.suptitle(f"ITCMA-S: resource inequality under three rankers ({df.attrs.get('runs', '')} runs each)",
                 fontsize=10)
    fig.tight_layout()
    return fig
