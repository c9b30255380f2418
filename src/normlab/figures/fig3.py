"""Fig. 3 of Flint Ashery, Aiello & Baronchelli (2025): committed minorities and critical mass.

- **3A**: production probability of the challenger among the uncommitted agents per population
  round, averaged over the runs of one committed count, for a majority on Q (weak, top row) and
  on M (strong, bottom row); the counts drawn are the model's two critical masses. Solid lines
  with filled markers: the count overturns the majority by the published rule; dashed with open
  markers: it does not.
- **3B**: the critical mass (fraction of the population) needed to overturn Q and M (Table S3).
- **fig3_prediction** (normlab's addition): the flip probability against the committed count
  predicted by the strategy table fitted on each model's *baseline* runs only, with the published
  committed runs on top.

The curves and critical masses follow the authors' ensemble rule (``plotter.ipynb`` cells 9-10,
:func:`normlab.theory.criteria.published_rule`): per count, the run-mean of the challenger's
share, runs that end above threshold padded with 1, truncated at 30 rounds (21 for Llama-3 at
N = 48), succeeds when its last three rounds sum to >= 2.849. The Methods' per-run reading
("95 % of the past 3N interactions succeed") is ``criterion="per_run"`` in Table S3
(:mod:`normlab.figures.tables`). Settings per model: Llama-3 N = 48, H = 3; the others N = 24,
H = 5. Counts with nobody committed are the unperturbed ``evolved`` runs, as the authors used
for Llama-3.1.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. 3, Table S3,
Methods "Committed Minorities"; ``plotter.ipynb`` cells 9-10 (MIT).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from normlab import calibration as cal
from normlab._display import error_bars
from normlab.calibration import empirical_critical_mass
from normlab.theory.criteria import published_rule

from ._common import CM_SETTING, COLORS, MODELS, SHORT, FigureSkipped, archives, integer_ticks, missing_note, with_notes
from .registry import figure

__all__ = ["critical_masses", "fig3a_data", "fig3a_draw", "fig3b_data", "fig3b_draw", "fig3_prediction_data",
           "fig3_prediction_draw"]

CMAPS = {"Llama-3-70B-Instruct": "Blues_r", "Llama-3.1-70B-Instruct": "Oranges_r", "Claude-3.5-Sonnet": "Greens",
         "Llama-2-70B-Chat": "RdPu_r"}
#: Shipped strategy tables fitted on each model's baseline runs, and the per-run window.
PREDICTION = {"Llama-3.1-70B-Instruct": dict(table="llama31_70b_QM_H5", window=30),
              "Llama-3-70B-Instruct": dict(table="llama3_70b_QM_H3", window=20)}


def critical_masses(data=None) -> dict:
    """Observed critical masses of every model present, by the published rule and per run.

    Returns
    -------
    dict
        model -> ``(EmpiricalCriticalMass, n_agents, memory)`` for the paper's setting of that
        model (:data:`CM_SETTING`); models without committed-minority runs are absent.
    """
    arch = archives(data)
    out = {}
    for m in MODELS:
        N, H = CM_SETTING[m]
        log = arch.runs(model=m, kind=["swap", "evolved"], names=["Q,M", "M,Q"], memory=H, n_agents=N)
        if log is None or not (log.runs["kind"] == "swap").any():
            continue
        out[m] = (empirical_critical_mass(log, n_boot=0), N, H)
    return out


@figure("fig3a", "Fig. 3A: challenger's production under committed minorities", published="FIGURE_3.pdf")
def fig3a_data(data=None, *, counts: str = "critical") -> pd.DataFrame:
    """Ensemble-mean challenger share per round for the committed counts of Fig. 3A.

    Parameters
    ----------
    data : path or Archives, optional
    counts : {"critical", "all"}
        The model's two critical masses (the paper) or every tested count.

    Returns
    -------
    pandas.DataFrame
        ``model``, ``majority``, ``challenger``, ``n_agents``, ``memory``, ``committed``,
        ``fraction`` (committed / N), ``round``, ``share`` (ensemble mean), ``n_runs``,
        ``success`` (published rule), ``last3`` (its 3-round sum), ``max_round``.
    """
    if counts not in ("critical", "all"):
        raise ValueError(f"counts must be 'critical' or 'all'; got {counts!r}")
    cms = critical_masses(data)
    if not cms:
        raise FigureSkipped("Fig. 3A: no committed-minority runs (swap files) in the data")
    frames, notes = [], []
    for m, (e, N, H) in cms.items():
        est = e.estimates.set_index("majority")
        crit = {x: est.loc[x, "published"] for x in est.index}
        show = {int(v) for v in crit.values() if np.isfinite(v)}
        traj = {r: g["share"].to_numpy() for r, g in e.shares.groupby("run")}
        for (maj, ch, c), g in e.runs.groupby(["majority", "challenger", "committed"]):
            if counts == "critical" and int(c) not in show:
                continue
            mr = int(est.loc[maj, "max_round"])
            try:
                res = published_rule([traj[r] for r in g["run"]], max_round=mr)
            except ValueError:  # runs shorter than the window: the rule cannot be read
                continue
            frames.append(pd.DataFrame({"model": m, "majority": maj, "challenger": ch, "n_agents": N, "memory": H,
                                        "committed": int(c), "fraction": c / N,
                                        "round": np.arange(1, len(res["mean"]) + 1),
                                        "share": res["mean"], "n_runs": res["n_runs"], "success": res["success"],
                                        "last3": res["last3"], "max_round": mr}))
        notes.append(f"{m} (N = {N}, H = {H}): critical mass {crit.get('M', np.nan):g} to overturn M, "
                     f"{crit.get('Q', np.nan):g} to overturn Q (published rule)")
    df = pd.concat(frames, ignore_index=True)
    return with_notes(df, notes + [missing_note("Fig. 3A", cms)])


def fig3a_draw(df: pd.DataFrame):
    """Two rows (majority Q, majority M) by one column per model (Fig. 3A).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib as mpl
    import matplotlib.pyplot as plt

    models = [m for m in MODELS if m in set(df["model"])]
    many = df.groupby("model")["committed"].nunique().max() > 3  # legends beside, not above, the panels
    fig, axes = plt.subplots(2, len(models), figsize=((6.4 if many else 4.2) * len(models) + 0.6, 7.2),
                             squeeze=False)
    for j, m in enumerate(models):
        d = df[df["model"] == m]
        cs = sorted(d["committed"].unique())
        # the authors' colour maps and order (larger count lighter), kept off the palest end
        norm = mpl.colors.Normalize(vmin=min(cs) - 3, vmax=max(cs) + 2)
        base = plt.get_cmap(CMAPS.get(m, "viridis"))
        lo, hi = (0.0, 0.62) if base.name.endswith("_r") else (0.38, 1.0)

        def cmap(v, base=base, lo=lo, hi=hi):
            return base(lo + (hi - lo) * v)

        for i, maj in enumerate(("Q", "M")):
            ax = axes[i, j]
            for c in cs:
                r = d[(d["majority"] == maj) & (d["committed"] == c)]
                if r.empty:
                    continue
                ok = bool(r["success"].iloc[0])
                col = cmap(norm(c))
                ax.plot(r["round"], r["share"], ls="-" if ok else "--", marker="o", ms=4, lw=2, color=col,
                        mfc=col if ok else "white",
                        label=f"{c} committed ({c / r['n_agents'].iloc[0]:.2f})" + ("" if ok else ": no flip"))
            ax.set(ylim=(-0.05, 1.05), xlim=(0, 31), yticks=[0, 0.5, 1])
            integer_ticks(ax)
            if many:
                ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
            else:
                ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8)
            if j == 0:
                ax.set_ylabel(f"majority {maj} ({'weak' if maj == 'Q' else 'strong'})\nProduction Probability")
            if i == 1:
                ax.set_xlabel("Population Round")
        n, h = int(d["n_agents"].iloc[0]), int(d["memory"].iloc[0])
        axes[0, j].set_title(f"{SHORT.get(m, m)} (N = {n}, H = {h})", fontsize=11, fontweight="bold",
                             pad=6 if many else 14 + 13 * len(cs))
    fig.suptitle("Fig. 3A  Challenger's production probability among uncommitted agents (mean over runs)",
                 fontsize=10)
    fig.tight_layout()
    return fig


@figure("fig3b", "Fig. 3B: critical mass per model", published="FIGURE_3.pdf")
def fig3b_data(data=None) -> pd.DataFrame:
    """Critical mass per model and majority by the published rule (Fig. 3B; Table S3).

    Returns
    -------
    pandas.DataFrame
        ``model``, ``majority``, ``n_agents``, ``memory``, ``critical_mass`` (committed agents;
        ``inf`` when no tested count flips the majority), ``fraction``, ``counts`` (tested).
    """
    cms = critical_masses(data)
    if not cms:
        raise FigureSkipped("Fig. 3B: no committed-minority runs (swap files) in the data")
    rows = []
    for m, (e, N, H) in cms.items():
        for _, r in e.estimates.iterrows():
            rows.append({"model": m, "majority": r["majority"], "n_agents": N, "memory": H,
                         "critical_mass": r["published"], "fraction": r["published"] / N,
                         "counts": ",".join(str(c) for c in r["counts"])})
    df = pd.DataFrame(rows)
    notes = [f"{r.model}: overturning {r.majority} takes {r.critical_mass:g} of {r.n_agents} ({r.fraction:.2f})"
             for r in df.itertuples()]
    return with_notes(df, notes + [missing_note("Fig. 3B", cms)])


def fig3b_draw(df: pd.DataFrame):
    """Bars Q (light) and M (dark) per model (Fig. 3B).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    models = [m for m in MODELS if m in set(df["model"])]
    fig, axes = plt.subplots(1, len(models), figsize=(3.0 * len(models) + 0.6, 3.4), sharey=True, squeeze=False)
    for ax, m in zip(axes[0], models):
        d = df[df["model"] == m].set_index("majority")
        for x, maj, alpha in ((0, "Q", 0.45), (1, "M", 1.0)):
            v = float(d.loc[maj, "fraction"]) if maj in d.index else np.nan
            ax.bar(x, v if np.isfinite(v) else 0.0, 0.8, color=COLORS[m], alpha=alpha)
            lab = f"{d.loc[maj, 'critical_mass']:g}/{int(d.loc[maj, 'n_agents'])}" if maj in d.index else "n/a"
            ax.text(x, (v if np.isfinite(v) else 0) + 0.01, lab, ha="center", va="bottom", fontsize=9)
        ax.set_xticks([0, 1], ["Q", "M"])
        ax.set_title(SHORT.get(m, m), fontsize=10)
        ax.set_xlabel("Majority Convention")
        ax.set_ylim(0, 17 / 24)
    axes[0, 0].set_ylabel("Critical Mass (fraction of N)")
    fig.suptitle("Fig. 3B  Critical mass to overturn a consensus (published rule)", fontsize=10)
    fig.tight_layout()
    return fig


@figure("fig3_prediction", "Critical mass predicted from baseline runs vs the committed runs (normlab)")
def fig3_prediction_data(data=None, *, small: bool = False, draws: int | None = None, rng=2025) -> pd.DataFrame:
    """Predicted (from baseline runs only) and observed flip probability per committed count.

    Parameters
    ----------
    data : path or Archives, optional
        Observed points are added when the published committed runs are present.
    small : bool
        20 posterior draws instead of 200.
    draws : int, optional
    rng : seed

    Returns
    -------
    pandas.DataFrame
        ``model``, ``majority``, ``source`` (``predicted``/``observed``), ``committed``,
        ``p_flip``, ``low``, ``high``; ``attrs["critical_mass"]``: the predicted critical masses.
    """
    n_draws = draws if draws is not None else (20 if small else 200)
    arch = archives(data, required=False)
    frames, notes = [], []
    for m, p in PREDICTION.items():
        N, H = CM_SETTING[m]
        pred = cal.predict(cal.load_fit(p["table"]), n_agents=N, n_draws=n_draws, within_rounds=p["window"],
                           consensus=False, strength=False, rng=rng)
        fc = pred.flip_curve()
        frames.append(pd.DataFrame({"model": m, "majority": fc["majority"], "source": "predicted",
                                    "committed": fc["committed"], "p_flip": fc["p_flip"], "low": fc["low"],
                                    "high": fc["high"]}))
        cm = pred.summary()["critical_mass"]
        for maj in ("M", "Q"):
            c = cm[f"overturn_{maj}"]["published"]
            notes.append(f"{m}: predicted critical mass to overturn {maj} {c['estimate']:g} [{c['low']:g}, "
                         f"{c['high']:g}] (published rule, {n_draws} draws)")
        log = arch.runs(model=m, kind=["swap", "evolved"], names=["Q,M", "M,Q"], memory=H, n_agents=N) if arch else None
        if log is not None:
            cv = cal.empirical_critical_mass(log, within_rounds=p["window"], n_boot=0).curves
            frames.append(pd.DataFrame({"model": m, "majority": cv["majority"], "source": "observed",
                                        "committed": cv["committed"], "p_flip": cv["p_flip"], "low": cv["ci_low"],
                                        "high": cv["ci_high"]}))
        else:
            notes.append(f"{m}: no published committed runs at hand; prediction only")
    df = pd.concat(frames, ignore_index=True)
    df.attrs["draws"] = n_draws
    return with_notes(df, notes)


def fig3_prediction_draw(df: pd.DataFrame):
    """2 x 2 panels: predicted band and observed points per model and majority.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    models = [m for m in PREDICTION if m in set(df["model"])]
    fig, axes = plt.subplots(len(models), 2, figsize=(10.5, 3.6 * len(models)), squeeze=False)
    for row, m in zip(axes, models):
        N, H = CM_SETTING[m]
        for ax, maj in zip(row, ("M", "Q")):
            d = df[(df["model"] == m) & (df["majority"] == maj)]
            pr = d[d["source"] == "predicted"].sort_values("committed")
            ax.fill_between(pr["committed"], pr["low"], pr["high"], color=COLORS[m], alpha=0.25, lw=0)
            ax.plot(pr["committed"], pr["p_flip"], "-", color=COLORS[m], label="predicted from baseline runs")
            ob = d[d["source"] == "observed"].sort_values("committed")
            if len(ob):
                ax.errorbar(ob["committed"], ob["p_flip"], yerr=error_bars(ob["p_flip"], ob["low"], ob["high"]),
                            fmt="o", color="k", ms=4, capsize=2, label="published runs (95% CI)")
            ax.axhline(0.5, color="0.6", lw=0.8)
            full = pr.loc[pr["low"] >= 0.99, "committed"]
            right = max(ob["committed"].max() if len(ob) else 0, full.min() if len(full) else N) + 2
            ax.set(ylim=(-0.03, 1.03), xlim=(-0.5, min(right, N) + 0.5), xlabel="committed agents",
                   ylabel="P(flip within window)")
            integer_ticks(ax)
            ax.set_title(f"{SHORT[m]} (N = {N}, H = {H}): overturning {maj}", fontsize=10)
    handles = {}  # one legend for all panels, above them
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.suptitle(f"Critical mass predicted from the baseline runs ({df.attrs.get('draws', '')} posterior draws) "
                 "vs the committed-minority runs", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.legend(list(handles.values()), list(handles), loc="upper center",
               bbox_to_anchor=(0.5, 0.965), ncols=2, fontsize=9)
    return fig
