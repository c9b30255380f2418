"""Figs. S2, S6 and S7 of Flint Ashery, Aiello & Baronchelli (2025): robustness and stability.

- **S2** (robust emergence): mean success rate per population round of Llama-3 populations for
  other pool sizes W, memories H and population sizes N.
- **S6** (W = 2): success rate (runs and mean) and the production probability of the strong
  convention in every run, for four two-name pools of Llama-3.
- **S7** (stability): production probability of the initial convention in runs started from a
  consensus, with nobody committed.

As in the authors' ``plotter.ipynb`` (cells 20-24, 32-33): bins of N interactions from the start;
S2 pads every run with 1 to the longest run of all settings; S6 pads with 1 and stops at 30
rounds; S7 pads the mean with 1 to 42 rounds except for Llama-3.1 (whose runs drift) --
``pad=False`` averages only the observed rounds.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Figs. S2, S6, S7;
``plotter.ipynb`` cells 20-24 and 32-33 (MIT).
"""

from __future__ import annotations

import pandas as pd

from ._common import (CB_COLORS, COLORS, MODELS, SHORT, FigureSkipped, archives, check_model, integer_ticks,
                      missing_note, pad_mean, production_by_run, success_by_run, with_notes)
from .registry import figure

__all__ = ["figS2_data", "figS2_draw", "figS6_data", "figS6_draw", "figS7_data", "figS7_draw"]

#: Fig. S2 settings (names, H, N), in the authors' order.
S2_SETTINGS = (("Q,M", 5, 200), (",".join(chr(c) for c in range(ord("A"), ord("Z") + 1)), 5, 24),
               ("Q,M,F,J,X,Y", 5, 24), ("Q,M", 3, 24), ("Q,M", 4, 24), ("Q,M", 5, 24))
S6_POOLS = ("Q,M", "F,J", "X,Y", "Alice,Bob")
#: Fig. S7 pools (initial consensus first) and population size per model.
S7_POOLS = {"Llama-3-70B-Instruct": (("F,J", "J,F"), 48)}
S7_DEFAULT = (("Q,M", "M,Q"), 24)


@figure("figS2", "Fig. S2: robust emergence (W, H, N)", published="SI_FIGURE_robust_emergence.pdf")
def figS2_data(data=None, *, model: str = "Llama-3-70B-Instruct") -> pd.DataFrame:
    """Mean success rate per round for the settings of Fig. S2.

    Returns
    -------
    pandas.DataFrame
        ``setting`` (``"W = 2, H = 5, N = 200"``), ``W``, ``memory``, ``n_agents``, ``n_runs``,
        ``round``, ``success_rate``.
    """
    check_model(model)
    arch = archives(data)
    curves, notes = {}, []
    for names, H, N in S2_SETTINGS:
        log = arch.runs(model=model, kind="baseline", names=names, memory=H, n_agents=N)
        W = len(names.split(","))
        if log is None:
            notes.append(f"Fig. S2: no {model} runs with W = {W}, H = {H}, N = {N}")
            continue
        curves[(W, H, N)] = (success_by_run(log), len(log.runs))
    if not curves:
        raise FigureSkipped(f"Fig. S2: no {model} baseline runs of its settings in the data")
    longest = max(int(c["round"].max()) for c, _ in curves.values())
    frames = []
    for (W, H, N), (c, n) in curves.items():
        m = pad_mean(c, "success_rate", pad=1.0, length=longest)
        frames.append(m.drop(columns="n_runs").assign(setting=f"W = {W}, H = {H}, N = {N}", W=W, memory=H,
                                                      n_agents=N, n_runs=n))
        notes.append(f"W = {W}, H = {H}, N = {N}: {n} runs, success at round 10 {m['success_rate'].iloc[9]:.2f}")
    df = pd.concat(frames, ignore_index=True)[["setting", "W", "memory", "n_agents", "n_runs", "round", "success_rate"]]
    df.attrs["model"] = model
    return with_notes(df, notes)


def figS2_draw(df: pd.DataFrame, *, ax=None):
    """Mean success per round, one line per setting (Fig. S2).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 4.6))
    else:
        fig = ax.figure
    markers = ["o", "D", ".", "s", "^", "<"]
    for i, (s, r) in enumerate(df.groupby("setting", sort=False)):
        ax.plot(r["round"], r["success_rate"], marker=markers[i % 6], mfc="none", ms=6, lw=2,
                color=CB_COLORS[-6:][i % 6], label=f"{s} ({int(r['n_runs'].iloc[0])} runs)")
    ax.set(xlabel="Population Round", ylabel="Success Rate", ylim=(0, 1.04))
    integer_ticks(ax)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, fontsize=8)
    fig.suptitle(f"Fig. S2  Robust emergence: {SHORT.get(df.attrs.get('model'), '')} populations", fontsize=10)
    fig.tight_layout()
    return fig


@figure("figS6", "Fig. S6: emergence with four two-name pools", published="SI_FIGURE_all_binary.pdf")
def figS6_data(data=None, *, model: str = "Llama-3-70B-Instruct", max_round: int = 30) -> pd.DataFrame:
    """Success rate and strong-convention production per run for four two-name pools (Fig. S6).

    The strong convention of a pool is the name most runs reach consensus on.

    Returns
    -------
    pandas.DataFrame
        ``pool``, ``strong``, ``panel`` (``success``/``production``), ``curve`` (``run``/``mean``),
        ``run``, ``round``, ``value``; ``attrs["consensus"]``: consensus counts per pool.
    """
    check_model(model)
    arch = archives(data)
    frames, notes, cons = [], [], {}
    for pool in S6_POOLS:
        log = arch.runs(model=model, kind="baseline", names=pool, memory=5, n_agents=24)
        if log is None:
            notes.append(f"Fig. S6: no {model} runs for the pool {{{pool}}}")
            continue
        vc = log.runs["consensus"].value_counts()
        strong = str(vc.index[0])
        cons[pool] = {str(k): int(v) for k, v in vc.items()}
        sr = success_by_run(log)
        frames.append(sr.rename(columns={"success_rate": "value"}).assign(pool=pool, strong=strong, panel="success",
                                                                         curve="run"))
        m = pad_mean(sr, "success_rate", pad=1.0, length=max(max_round, int(sr["round"].max())))
        m = m[m["round"] <= max_round]
        frames.append(pd.DataFrame({"pool": pool, "strong": strong, "panel": "success", "curve": "mean", "run": -1,
                                    "round": m["round"], "value": m["success_rate"]}))
        pr = production_by_run(log, lambda run, s=strong: s)
        frames.append(pr.drop(columns="name").rename(columns={"share": "value"}).assign(
            pool=pool, strong=strong, panel="production", curve="run"))
        notes.append(f"{{{pool}}}: consensus on {strong} in {vc.iloc[0]} of {len(log.runs)} runs")
    if not frames:
        raise FigureSkipped(f"Fig. S6: no {model} two-name baseline runs in the data")
    df = pd.concat(frames, ignore_index=True)[["pool", "strong", "panel", "curve", "run", "round", "value"]]
    df.attrs["consensus"] = cons
    df.attrs["model"] = model
    return with_notes(df, notes)


def figS6_draw(df: pd.DataFrame):
    """Two rows (success rate, production of the strong name) by one column per pool.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    pools = list(dict.fromkeys(df["pool"]))
    fig, axes = plt.subplots(2, len(pools), figsize=(3.4 * len(pools) + 0.4, 6.2), squeeze=False)
    colors = CB_COLORS[-4:]
    for j, pool in enumerate(pools):
        d = df[df["pool"] == pool]
        col = colors[j % 4]
        ax = axes[0, j]
        for _, r in d[(d["panel"] == "success") & (d["curve"] == "run")].groupby("run"):
            ax.plot(r["round"], r["value"], lw=0.5, color=col, alpha=0.4)
        r = d[(d["panel"] == "success") & (d["curve"] == "mean")]
        ax.plot(r["round"], r["value"], marker=".", ms=7, lw=2.2, color=col, label="mean")
        ax.set(ylim=(0.15, 1.02), title="{" + pool.replace(",", ", ") + "}")
        ax = axes[1, j]
        for _, r in d[d["panel"] == "production"].groupby("run"):
            ax.plot(r["round"], r["value"], lw=0.6, color=col, alpha=0.8)
        ax.set(ylim=(-0.05, 1.02), title=f"production of {d['strong'].iloc[0]} (strong)")
        for a in axes[:, j]:
            integer_ticks(a)
            a.set_xlabel("Population Round")
    axes[0, 0].set_ylabel("Success Rate")
    axes[1, 0].set_ylabel("Production Probability\n(strong convention)")
    fig.suptitle(f"Fig. S6  Emergence with W = 2, {SHORT.get(df.attrs.get('model'), '')} (N = 24, H = 5): "
                 "runs (thin) and mean (thick)", fontsize=10)
    fig.tight_layout()
    return fig


@figure("figS7", "Fig. S7: stability of a consensus", published="SI_FIGURE_stability.pdf")
def figS7_data(data=None, *, pad: bool = True, max_round: int = 42) -> pd.DataFrame:
    """Production probability of the initial convention in unperturbed consensus runs (Fig. S7).

    Parameters
    ----------
    data : path or Archives, optional
    pad : bool
        The authors' mean: each run padded with 1 for 42 rounds, except Llama-3.1 (default);
        ``False``: the mean of the rounds observed.
    max_round : int
        Rounds of the mean (42).

    Returns
    -------
    pandas.DataFrame
        ``model``, ``initial`` (the consensus name at the start), ``curve`` (``run``/``mean``),
        ``run``, ``round``, ``share``, ``n_agents``.
    """
    arch = archives(data)
    frames, notes, have = [], [], []
    for m in MODELS:
        pools, N = S7_POOLS.get(m, S7_DEFAULT)
        got = False
        for pool in pools:
            log = arch.runs(model=m, kind="evolved", names=pool, memory=5, n_agents=N)
            if log is None:
                continue
            got = True
            x = pool.split(",")[0]
            pr = production_by_run(log, lambda run, x=x: x)
            frames.append(pr.drop(columns="name").assign(model=m, initial=x, curve="run", n_agents=N))
            authors_pad = pad and m != "Llama-3.1-70B-Instruct"
            L = max(max_round, int(pr["round"].max()))
            mean = pad_mean(pr, "share", pad=1.0 if authors_pad else None, length=L)
            mean = mean[mean["round"] <= max_round]
            frames.append(pd.DataFrame({"model": m, "initial": x, "curve": "mean", "run": -1, "round": mean["round"],
                                        "share": mean["share"], "n_agents": N}))
            last = pr[pr["round"] == pr.groupby("run")["round"].transform("max")]
            notes.append(f"{m}, start on {x}: {log.runs.shape[0]} runs, share of {x} in the last round "
                         f"{last['share'].mean():.2f} on average")
        if got:
            have.append(m)
    if not frames:
        raise FigureSkipped("Fig. S7: no evolved (stability) runs in the data")
    df = pd.concat(frames, ignore_index=True)[["model", "initial", "curve", "run", "round", "share", "n_agents"]]
    return with_notes(df, notes + [missing_note("Fig. S7", have)])


def figS7_draw(df: pd.DataFrame):
    """One panel per model: runs (thin) and mean (thick) per initial convention.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    models = [m for m in MODELS if m in set(df["model"])]
    ncol = min(2, len(models))
    nrow = -(-len(models) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(6.6 * ncol, 3.8 * nrow), squeeze=False)
    for ax, m in zip(axes.flat, models):
        d = df[df["model"] == m]
        for k, (x, g) in enumerate(d.groupby("initial", sort=False)):
            ls = "-" if k == 0 else "--"
            for _, r in g[g["curve"] == "run"].groupby("run"):
                ax.plot(r["round"], r["share"], lw=0.5, ls=ls, color=COLORS[m], alpha=0.4)
            r = g[g["curve"] == "mean"]
            ax.plot(r["round"], r["share"], lw=2.4, ls=ls, color=COLORS[m], alpha=0.55 if k == 0 else 1.0,
                    label=f"start on {x} ({g[g['curve'] == 'run']['run'].nunique()} runs)")
        ax.set(ylim=(-0.05, 1.05), xlabel="Population Round", ylabel="Production Probability\nof the initial name",
               title=f"{SHORT.get(m, m)} (N = {int(d['n_agents'].iloc[0])})")
        integer_ticks(ax)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    for ax in list(axes.flat)[len(models):]:
        ax.set_visible(False)
    fig.suptitle("Fig. S7  Stability of a consensus (nobody committed)", fontsize=10)
    fig.tight_layout()
    return fig
