"""The demo report's figures (PNG, normlab's results style): the strategy heat maps, the
populations against the theory, the critical mass, the committed-minority runs and the calibration.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 1A (success
curves), Fig. 2B (collective bias), Fig. 3 (committed minorities), Fig. S8 (strategy table).
"""

from __future__ import annotations

import contextlib
import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd

from normlab._display import style, error_bars
from normlab.schema import memory_state_string
from normlab.theory.criteria import PUBLISHED_FLIP_THRESHOLD

from ._report_text import _iv, order_effect, strategy_title_line


def _style():
    """normlab's results look (local to the block: the caller's matplotlib settings stay as they
    were), a little smaller type for the report's dense panels."""
    import matplotlib as mpl
    import seaborn as sns

    stack = contextlib.ExitStack()
    stack.enter_context(style("results"))
    stack.enter_context(mpl.rc_context(sns.plotting_context("notebook", font_scale=0.9)))
    return stack


def _legend_below(fig, axes, ncol: int | None = None) -> None:
    """One legend for the panels, under them, where it cannot hide data (the labels of every
    panel, each once, in order)."""
    seen = {}
    for ax in np.ravel(axes):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=ncol or min(len(seen), 4), fontsize=8,
                   frameon=False, bbox_to_anchor=(0.5, 0.0))
        fig.tight_layout(rect=(0, 0.06 * math.ceil(len(seen) / (ncol or min(len(seen), 4))) + 0.02, 1, 1))


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def _grid(ptab: pd.DataFrame, names, L: int, col: str, name: str) -> tuple[np.ndarray, list[str]]:
    """Matrix over own plays (rows) x partner plays (columns) of memories of length ``L``."""
    seqs = list(itertools.product(names, repeat=L))
    lab = ["".join(s) for s in seqs]
    t = ptab[ptab["name"] == name].set_index("memory_state")[col]
    M = np.full((len(seqs), len(seqs)), np.nan)
    for a, own in enumerate(seqs):
        for b, part in enumerate(seqs):
            st = memory_state_string(list(zip(own, part)))
            if st in t.index:
                M[a, b] = float(t.loc[st])
    return M, lab


def fig_strategy(ptab: pd.DataFrame, by_order: pd.DataFrame, names, H: int, path: Path) -> Path:
    import matplotlib.pyplot as plt
    import seaborn as sns

    x, y = names
    first = by_order[(by_order["name"] == y) & (by_order["order"] == f"{y},{x}")].set_index("memory_state")["p"]
    second = by_order[(by_order["name"] == y) & (by_order["order"] == f"{x},{y}")].set_index("memory_state")["p"]
    eff = order_effect(by_order, y).reset_index().assign(name=y)
    tab = ptab.merge(eff, on=["memory_state", "name"], how="left")
    Ls = list(range(1, H + 1)) if H <= 3 else [H]
    rows = (("p", "vlag", (0, 1), 0.5, f"p({y} | memory)", f"p({y})"),
            ("order_effect", "PuOr", (-1, 1), 0.0, f"p({y}): listed first - second", f"order effect on p({y})"),
            ("covered_mass", "mako", (0, 1), None, "mass on pool names", "mass on pool names"))
    fig, axes = plt.subplots(3, len(Ls), figsize=(4.6 * len(Ls) + 0.8, 11.2), squeeze=False)
    for j, L in enumerate(Ls):
        for i, (col, cmap, (lo, hi), center, clab, what) in enumerate(rows):
            M, tick = _grid(tab, names, L, col, y)
            ax = axes[i, j]
            sns.heatmap(pd.DataFrame(M, index=tick, columns=tick), vmin=lo, vmax=hi, cmap=cmap, center=center,
                        annot=L <= 3, fmt=".2f", annot_kws={"fontsize": 8 if L <= 2 else 6}, ax=ax, square=True,
                        cbar_kws={"label": clab, "shrink": 0.75})
            ax.set_xlabel("partner's plays (oldest first)")
            ax.set_ylabel("own plays (oldest first)")
            ax.tick_params(axis="y", rotation=0)
            ax.set_title(f"{what}, memory of {L}", fontsize=9.5)
    emp = tab[(tab["memory_state"] == "") & (tab["name"] == y)].iloc[0]
    how = ("exact next-token probabilities; rows 1 and 3 average the two name orders" if not by_order.empty else
           "estimated from sampled answers: rows 2 and 3 need next-token probabilities (exact mode) and stay empty")
    fig.suptitle(f"The model's strategy ({how})\n"
                 + strategy_title_line(first.get(""), second.get(""), emp["p"], emp["covered_mass"], y), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def fig_population(traj_th, llm_curve, pfacts, obs, names, winner, runs, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.1), gridspec_kw={"width_ratios": [1.15, 1.15, 0.8]})
    th = traj_th
    last = []
    for ax, (q, nm, lab) in zip(axes[:2], (("success_rate", "", "success rate"),
                                          ("production", winner, f"share of {winner} in uncommitted answers"))):
        t = th[(th["quantity"] == q) & (th["name"] == nm)].sort_values("round")
        ll = llm_curve[(llm_curve["quantity"] == q) & (llm_curve["name"] == nm)].sort_values("round")
        ax.fill_between(t["round"], t["low"], t["high"], color="C0", alpha=0.22,
                        label=f"theory: 95% of {runs}-run experiments")
        ax.plot(t["round"], t["mean"], color="C0", lw=1.6, label="theory: expected mean")
        ax.plot(ll["round"], ll["mean"], "o-", color="C3", ms=2.5, lw=1.1, label=f"LLM: mean of {runs} runs")
        ax.set_xlabel("population round (N interactions)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_ylabel(lab)
        reach = t.loc[t["mean"] >= 0.99, "round"]
        last.append(float(reach.iloc[0]) if len(reach) else float(t["round"].max()))
        last.append(float(ll.loc[ll["mean"] < 0.999, "round"].max()) if (ll["mean"] < 0.999).any() else 1.0)
        low = float(np.nanmin(np.r_[t["low"].to_numpy(float), ll["mean"].to_numpy(float)]))
        ax.set_ylim(max(0.0, np.floor(low * 10) / 10 - 0.05), 1.02)
    xmax = min(float(th["round"].max()), max(last) * 1.25 + 2)
    for ax in axes[:2]:
        ax.set_xlim(0.5, xmax)
    axes[0].axhline(0.95, color="0.55", lw=0.8, ls=":")
    axes[0].set_title("coordination: success rate per round", fontsize=10)
    axes[1].set_title(f"collective bias: share of {winner}", fontsize=10)
    ax = axes[2]
    cats = list(names) + ["none"]
    for i, c in enumerate(cats):
        p = pfacts["consensus"].get(c, {"estimate": 0, "low": 0, "high": 0})
        o = obs["consensus"][c]
        ax.errorbar([i - 0.12], [p["estimate"]], yerr=error_bars(p["estimate"], p["low"], p["high"]),
                    fmt="s", color="C0", capsize=4, label="predicted (95% for this experiment)" if i == 0 else None)
        ax.errorbar([i + 0.12], [o["estimate"]], yerr=error_bars(o["estimate"], o["low"], o["high"]),
                    fmt="o", color="C3", capsize=4, label="LLM runs (Clopper-Pearson 95%)" if i == 0 else None)
    ax.set_xticks(range(len(cats)), [f"consensus\non {c}" if c != "none" else "no consensus\nwithin cap" for c in cats])
    ax.set_ylim(-0.04, 1.04)
    ax.set_xlim(-0.5, len(cats) - 0.5)
    ax.set_ylabel(f"share of the {runs} runs")
    ax.set_title("which convention wins", fontsize=10)
    _legend_below(fig, axes, ncol=5)
    return _save(fig, path)


def fig_critical_mass(pred, lpred, cm_rows, names, n_runs, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fc, lfc = pred.flip_curve(), lpred.flip_curve()
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 4.1), sharey=True)
    for ax, x in zip(axes, names):
        y = names[1 - names.index(x)]
        for f, col, lab, ls in ((fc, "C0", "theory, probed table", "-"), (lfc, "C1", "theory, fit on the population log", "--")):
            g = f[f["majority"] == x].sort_values("committed")
            ax.fill_between(g["committed"], g["low"], g["high"], color=col, alpha=0.15 if col == "C0" else 0.1,
                            step="mid")
            ax.plot(g["committed"], g["p_flip"], ls, color=col, marker=".", label=f"{lab}: P(flip)")
        pts = [r for r in cm_rows if r["majority"] == x]
        if pts:
            ax.errorbar([r["committed"] for r in pts], [r["observed"] for r in pts],
                        yerr=error_bars([r["observed"] for r in pts], [r["observed_low"] for r in pts],
                                        [r["observed_high"] for r in pts]),
                        fmt="o", color="C3", ms=7, capsize=5, label="LLM runs (Clopper-Pearson 95%)", zorder=5)
        ax.axhline(0.5, color="0.55", lw=0.8, ls=":")
        ax.set_xlabel(f"agents committed to {y}")
        ax.set_title(f"overturning a consensus on {x}", fontsize=10)
        ax.set_ylim(-0.04, 1.04)
        ax.xaxis.get_major_locator().set_params(integer=True)
    axes[0].set_ylabel("P(flip within the window)")
    fig.suptitle(f"Critical mass: bands are the 95% range of the flip frequency in {n_runs}-run experiments", fontsize=10)
    _legend_below(fig, axes, ncol=3)
    return _save(fig, path)


def fig_committed(cm_curves, n_runs, within, path: Path) -> Path:
    import matplotlib.pyplot as plt

    k = len(cm_curves)
    fig, axes = plt.subplots(1, k, figsize=(5.4 * k, 3.9), sharey=True, squeeze=False)
    for ax, c in zip(axes[0], cm_curves):
        t = c["theory"]
        ax.fill_between(t["round"], t["low"], t["high"], color="C0", alpha=0.22, label=f"theory: 95% of {n_runs}-run means")
        ax.plot(t["round"], t["mean"], color="C0", lw=1.6, label="theory: expected mean")
        sh = c["llm"]
        for j, (_, g) in enumerate(sh.groupby("run")):
            ax.plot(g["round"], g["share"], color="C3", alpha=0.35, lw=0.8, label="LLM: single runs" if j == 0 else None)
        if len(sh):
            m = sh.groupby("round")["share"].mean()
            ax.plot(m.index, m.to_numpy(), "o-", color="C3", ms=2.5, lw=1.4, label="LLM: mean")
        ax.axhline(PUBLISHED_FLIP_THRESHOLD, color="0.45", lw=0.8, ls=":")
        ax.text(1, PUBLISHED_FLIP_THRESHOLD + 0.015, "flip threshold", ha="left", fontsize=7, color="0.35")  # early rounds: low
        ax.set_title(f"{c['committed']} committed to {c['challenger']} vs a consensus on {c['majority']}", fontsize=10)
        ax.set_xlabel("population round")
        ax.set_ylim(-0.03, 1.05)
        ax.set_xlim(0.5, within + 0.5)
        ax.xaxis.get_major_locator().set_params(integer=True)
    axes[0, 0].set_ylabel("challenger's share of uncommitted answers")
    _legend_below(fig, axes, ncol=4)
    return _save(fig, path)


def fig_calibration(ptab, cal, names, pfacts, lfacts, pcrit, lcrit, obs, path: Path) -> Path:
    import matplotlib.pyplot as plt

    y = names[1]
    ff = cal.fit.to_frame(n_draws=400, rng=0)
    ff = ff[ff["name"] == y]
    m = ff.merge(ptab[ptab["name"] == y][["memory_state", "p"]], on="memory_state", how="left")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [1, 1.25]})
    ax = axes[0]
    for seen, col, lab in ((True, "C3", "visited by the populations"), (False, "0.55", "never visited (prior only)")):
        g = m[m["observed"] == seen]
        if len(g):
            ax.errorbar(g["p"], g["mean"], yerr=error_bars(g["mean"], g["low"], g["high"]), fmt="o", ms=4,
                        color=col, alpha=0.85, capsize=2, label=f"{lab} ({len(g)} state{'s' if len(g) != 1 else ''})")
    ax.plot([0, 1], [0, 1], color="0.3", lw=0.8)
    ax.set_xlabel(f"probed p({y} | memory) (exact)")
    ax.set_ylabel(f"fitted on the log: p({y} | memory), 95% CrI")
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(f"{cal.fit.kind} fit on {obs['decisions']} population decisions vs the probe", fontsize=10)
    ax = axes[1]
    N = obs.get("n_agents", 1)
    yk = 0
    labels = []
    for key in pcrit:
        for crit in ("per_run", "published"):
            for (src, d, col, dy) in (("probed table", pcrit, "C0", -0.14), ("fit on the log", lcrit, "C1", 0.14)):
                v = d[key][crit]
                est = v.get("pooled") if crit == "per_run" else v.get("estimate")
                lo, hi = v.get("low"), v.get("high")
                lo_p = N if lo is None else lo
                hi_p = N if hi is None else hi
                est_p = N if est is None else est
                ax.plot([lo_p, hi_p], [yk + dy] * 2, color=col, lw=2.2, solid_capstyle="butt",
                        label=src if yk == 0 else None)
                ax.plot([est_p], [yk + dy], "s", color=col, ms=6)
                if hi is None:
                    ax.annotate("", xy=(N + 0.45, yk + dy), xytext=(hi_p, yk + dy),
                                arrowprops={"arrowstyle": "->", "color": col, "lw": 1.4})
                txt = _iv({"estimate": est, "low": lo, "high": hi}, 0)
                ax.text(N + 0.6, yk + dy, txt, va="center", fontsize=7.5, color=col)
            rule = ("50% of runs flip" if crit == "per_run" else "published ensemble rule")
            labels.append(f"overturn {pcrit[key]['majority']}\n({rule})")
            yk += 1
    ax.axvline(N - 0.5, color="0.6", lw=0.8, ls=":")
    ax.set_yticks(range(len(labels)), labels, fontsize=8.5)
    ax.invert_yaxis()
    ax.set_xlim(-0.5, N + 4.2)
    ticks = list(range(0, N, max(1, N // 8)))
    ax.set_xticks(ticks + [N], [str(t_) for t_ in ticks] + ["none"])
    ax.set_xlabel(f"committed agents (of N = {N}; 'none': not reached with N - 1)")
    ax.set_title("critical mass from the two calibrations (95% interval for experiments of this size)", fontsize=9.5)
    _legend_below(fig, axes, ncol=4)
    return _save(fig, path)
