"""The demo's report: figures (PNG), a self-contained HTML page and ``summary.json``.

The HTML embeds every figure as base64 PNG and uses plain HTML and CSS (no JavaScript), so it
opens anywhere and can be mailed as one file. ``summary.json`` follows :data:`SUMMARY_SCHEMA`
(checked before it is written).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 1A (success
curves), Fig. 2B (collective bias), Fig. 3 (committed minorities), Fig. S8 (strategy table).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import html
import itertools
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from normlab._display import style
from normlab.llm_runs.backend import redact_url
from normlab.schema import memory_state_string
from normlab.theory.criteria import FLIP_SUM, PUBLISHED_FLIP_THRESHOLD

from ._common import cp_interval, finite, fmt_seconds

__all__ = ["write_figures", "write_report", "SUMMARY_SCHEMA", "checks_html", "summary_paragraph", "tip_facts",
           "tip_text"]

_NUM = {"type": ["number", "null"]}
_INTERVAL = {"type": "object", "required": ["estimate", "low", "high"],
             "properties": {"estimate": _NUM, "low": _NUM, "high": _NUM}}
#: JSON schema of ``summary.json`` (draft 2020-12).
SUMMARY_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "normlab demo summary",
    "type": "object",
    "required": ["schema", "normlab_version", "created", "settings", "endpoint", "cost", "estimate", "timing",
                 "strategy_table", "free_generation", "population", "critical_mass", "committed_check", "tip", "checks",
                 "files"],
    "properties": {
        "schema": {"const": "normlab.demo/1"},
        "normlab_version": {"type": "string"},
        "created": {"type": "string"},
        "command": {"type": ["string", "null"]},
        "settings": {"type": "object", "required": ["names", "n_agents", "memory", "runs", "max_rounds", "committed",
                                                    "committed_runs", "mode", "fit", "n_draws", "within_rounds",
                                                    "seed", "sampling"]},
        "endpoint": {"type": "object", "required": ["model", "embedded", "base_url"],
                     "properties": {"model": {"type": "string"}, "embedded": {"type": "boolean"}}},
        "cost": {"type": "object", "required": ["llm_calls", "llm_calls_total", "prompt_tokens", "completion_tokens",
                                                "cost_usd"],
                 "properties": {"llm_calls": {"type": "integer", "minimum": 0},
                                "llm_calls_total": {"type": "integer", "minimum": 0}}},
        "estimate": {"type": "object", "required": ["calls", "prompt_tokens", "seconds", "tokens_per_s"]},
        "timing": {"type": "object", "required": ["wall_s", "cpu_s", "steps"],
                   "properties": {"wall_s": {"type": "number"}, "cpu_s": {"type": "number"},
                                  "steps": {"type": "array", "items": {
                                      "type": "object", "required": ["step", "wall_s", "cpu_s", "llm_calls"]}}}},
        "strategy_table": {"type": "object", "required": ["states", "llm_calls", "p_empty", "covered_mass_mean", "table"]},
        "free_generation": {"type": ["object", "null"]},
        "population": {"type": "object", "required": ["runs", "observed", "predicted", "predicted_from_log"],
                       "properties": {"predicted": {"type": "object", "required": ["consensus", "consensus_rounds",
                                                                                   "rounds_to_95"],
                                                    "properties": {"consensus_rounds": _INTERVAL,
                                                                   "rounds_to_95": _INTERVAL}}}},
        "critical_mass": {"type": "object", "required": ["from_probe", "from_log"]},
        "committed_check": {"type": "array", "items": {
            "type": "object", "required": ["majority", "challenger", "committed", "runs", "flips", "predicted",
                                           "low", "high", "consistent"]}},
        "tip": {"type": ["object", "null"],
                "required": ["majority", "challenger", "why", "critical_mass", "level", "p_within_one", "target",
                             "runs_used", "run_budget", "runs_per_count", "counts", "played", "baseline_runs",
                             "stopped", "text", "figure"],
                "properties": {"critical_mass": _INTERVAL, "runs_used": {"type": "integer", "minimum": 0},
                               "run_budget": {"type": "integer", "minimum": 1},
                               "text": {"type": "array", "items": {"type": "string"}}}},
        "checks": {"type": "array", "items": {"type": "object", "required": ["quantity", "key", "source", "predicted",
                                                                             "low", "high", "observed", "consistent"]}},
        "files": {"type": "object", "required": ["report", "figures", "tables", "llm"]},
    },
}

_CSS = """
body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;max-width:1060px;margin:2em auto;
padding:0 1.2em;color:#1d232a;line-height:1.5}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;border-bottom:1px solid #d9dee3;padding-bottom:.2em;margin-top:2em}
h3{font-size:1.05em;margin-bottom:.3em}.sub{color:#5b6670;margin-top:0}
.glance{background:#f3f6f9;border-left:4px solid #2f6fad;padding:.6em 1.2em;margin:1em 0}
.glance li{margin:.25em 0}table{border-collapse:collapse;font-size:.9em;margin:.6em 0}
th,td{border-bottom:1px solid #e3e7eb;padding:.25em .7em;text-align:left;vertical-align:top}
th{background:#f3f6f9}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1e7b34;font-weight:600}.bad{color:#b3261e;font-weight:600}.na{color:#7a848d}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #e3e7eb}figcaption{font-size:.92em;color:#39424b}
.note{background:#fff8e6;border-left:4px solid #d99a00;padding:.5em 1em;margin:1em 0;font-size:.95em}
code,pre{font-family:SFMono-Regular,Consolas,Menlo,monospace;font-size:.88em;background:#f3f6f9;border-radius:3px}
code{padding:.05em .3em}pre{padding:.6em .8em;overflow-x:auto}.small{font-size:.85em;color:#5b6670}
"""


# ----------------------------------------------------------------------------- formatting
def _f(v, nd=2):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    if isinstance(v, (int, np.integer)) or (isinstance(v, float) and float(v).is_integer() and abs(v) >= 1 and nd <= 2 and abs(v) > 1):
        return f"{int(v)}"
    return f"{v:.{nd}f}"


def _iv(d: dict | None, nd=2, none="not reached") -> str:
    """``est [low, high]``; ``None`` bounds are 'not reached' (a critical mass beyond N - 1)."""
    if not d:
        return "—"
    est, lo, hi = d.get("estimate"), d.get("low"), d.get("high")
    e = _f(est, nd) if est is not None else none
    a = _f(lo, nd) if lo is not None else none
    b = _f(hi, nd) if hi is not None else none
    return f"{e} [{a}, {b}]"


def _pct(v) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{100 * v:.0f}%"


def _clean(o):
    """JSON-safe: numpy scalars to Python, NaN/inf to None, tuples to lists."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, (np.bool_, bool)):
        return bool(o)
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (float, np.floating)):
        return float(o) if math.isfinite(o) else None
    if o is pd.NA:
        return None
    if isinstance(o, Path):
        return str(o)
    return o


def checks_html(checks: pd.DataFrame) -> str:
    """The predicted-vs-observed table as HTML."""
    rows = []
    for _, r in checks.iterrows():
        ok = r["consistent"]
        flag = ('<span class="ok">inside</span>' if ok is True else '<span class="bad">outside</span>' if ok is False
                else '<span class="na">—</span>')
        obs = "—" if r["observed"] is None or (isinstance(r["observed"], float) and not math.isfinite(r["observed"])) \
            else _f(r["observed"], 2)
        if r.get("observed_low") is not None and not pd.isna(r.get("observed_low")):
            obs += f" [{_f(r['observed_low'], 2)}, {_f(r['observed_high'], 2)}]"
        src = {"probe": "probed table", "log": "fit on the population log"}.get(r["source"], r["source"])
        rows.append(f"<tr><td>{html.escape(str(r['quantity']))}</td><td>{html.escape(str(r['key']))}</td>"
                    f"<td>{src}</td><td class='num'>{_iv({'estimate': r['predicted'], 'low': r['low'], 'high': r['high']}, 2, '—')}</td>"
                    f"<td class='num'>{obs}</td><td>{flag}</td></tr>")
    return ("<table><tr><th>quantity</th><th></th><th>predicted from</th><th>predicted [95% interval for this "
            "experiment]</th><th>observed [95% CI]</th><th>observed in interval?</th></tr>" + "".join(rows) + "</table>")


# ----------------------------------------------------------------------------- figures
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
    fig.suptitle(f"The model's strategy (exact next-token probabilities; rows 1 and 3 average the two name orders)\n"
                 + strategy_title_line(first.get(""), second.get(""), emp["p"], emp["covered_mass"], y), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def strategy_title_line(p_first, p_second, p_mean, covered, y: str) -> str:
    """The empty-memory line of the strategy figure's title: ``p(y)`` averaged over the two name
    orders, what it is in each order, their difference (the order effect of the middle row) and
    the probability mass on pool names."""
    head = f"empty memory: p({y}) = {p_mean:.2f} averaged over the two name orders; mass on pool names {covered:.2f}"
    if p_first is None or p_second is None or not (math.isfinite(p_first) and math.isfinite(p_second)):
        return head
    a, b = round(float(p_first), 2), round(float(p_second), 2)  # the difference of the numbers shown
    return head + f"\np({y}) = {a:.2f} when {y} is listed first, {b:.2f} when listed second: order effect {a - b:+.2f}"


def strategy_reading(ptab: pd.DataFrame, names) -> dict:
    """What the probed table says, in numbers the report and README quote.

    Returns
    -------
    dict
        ``name`` (the second name, the one the heat map colours), over the non-empty memories:
        ``states``, ``p_min``, ``p_max`` (of ``p(name | memory)``), ``above_half`` (memories where
        the model prefers ``name``); ``after_successes``: for each name, ``p(that name)`` after a
        memory of nothing but successes on it, for every memory length (``{length: p}``);
        ``order_effect_min``/``order_effect_max`` are added by the caller where the name orders
        are known.
    """
    x, y = names
    t = ptab[(ptab["name"] == y) & (ptab["memory_state"] != "")]
    p = t["p"].astype(float)
    after = {}
    for nm in names:
        d = {}
        for L in sorted(ptab["memory_len"].unique()):
            if L == 0:
                continue
            st = ";".join([f"{nm},{nm}"] * int(L))
            r = ptab[(ptab["memory_state"] == st) & (ptab["name"] == nm)]
            if len(r) and pd.notna(r["p"].iloc[0]):
                d[str(int(L))] = float(r["p"].iloc[0])
        after[nm] = d
    return {"name": y, "states": int(len(t)), "p_min": float(p.min()) if len(p) else None,
            "p_max": float(p.max()) if len(p) else None, "above_half": int((p > 0.5).sum()),
            "after_successes": after}


def order_effect(by_order: pd.DataFrame, y: str) -> pd.Series:
    """``p(y)`` when ``y`` is listed first minus when it is listed second, per memory state."""
    x = next(o for o in by_order["order"].iloc[0].split(",") if o != y)
    b = by_order[by_order["name"] == y].set_index("memory_state")
    first = b[b["order"] == f"{y},{x}"]["p"]
    second = b[b["order"] == f"{x},{y}"]["p"]
    return (first - second).rename("order_effect")


def _colour(p: float) -> str:
    """The colour of a ``p(y)`` cell in the top row (``vlag``, centred at 0.5)."""
    return "blue" if p < 0.4 else "red" if p > 0.6 else "near white (no clear preference)"


def strategy_reading_text(r: dict, names) -> str:
    """"Reading it" under the strategy heat map, from :func:`strategy_reading`'s numbers: what a
    model that follows conventions would show, what this one shows, and whether its table is
    asymmetric (the source of collective bias)."""
    x, y = names
    ax_, ay_ = r["after_successes"][x], r["after_successes"][y]

    def seq(d):
        return " and ".join(f"{v:.2f} (memory of {L})" for L, v in d.items())

    follows = bool(ax_) and bool(ay_) and min(ax_.values()) > 0.5 and min(ay_.values()) > 0.5
    px = [1 - v for v in ax_.values()]  # p(y) in the top-left cells
    py = list(ay_.values())
    top_left = sorted({_colour(v) for v in px})
    bottom_right = sorted({_colour(v) for v in py})
    out = [f"A model that follows conventions answers {x} after memories of {x}-successes (the top-left cell of each "
           f"panel of the top row, blue) and {y} after {y}-successes (the bottom-right cell, red). "
           + ("This one does" if follows else "This one does not")
           + f": after nothing but {x}-successes it answers {x} with probability {seq(ax_)} (top-left cells "
           f"{' and '.join(top_left)}); after nothing but {y}-successes it answers {y} with {seq(ay_)} "
           f"(bottom-right cells {' and '.join(bottom_right)})."]
    if r["states"]:
        k, n = r["above_half"], r["states"]
        pref = (f": the model prefers {y} after almost every memory" if k >= 0.8 * n else
                f": the model prefers {x} after almost every memory" if k <= 0.2 * n else "")
        out.append(f"Over the {n} non-empty memories p({y} | memory) runs from {r['p_min']:.2f} to {r['p_max']:.2f} "
                   f"and is above one half in {k} of them{pref}.")
    if ax_ and ay_:
        L = max(ax_, key=int)
        hx, hy = ax_[L], ay_[L]
        if abs(hx - hy) > 0.1:
            strong, weak, hs, hw = (x, y, hx, hy) if hx > hy else (y, x, hy, hx)
            out.append(f"The table is asymmetric: after a full memory of successes the model keeps {strong} with "
                       f"probability {hs:.2f} but {weak} only with {hw:.2f}. An asymmetric table -- one convention held "
                       f"more firmly than the other -- is what makes a population prefer one name even when single "
                       f"agents have no preference: collective bias (the paper's Fig. 2B).")
        else:
            out.append(f"After a full memory of successes the model keeps {x} with probability {hx:.2f} and {y} with "
                       f"{hy:.2f}: a nearly symmetric table, from which the theory expects little collective bias.")
    return " ".join(out)


def strategy_caption(reading: dict, prompts: int, states: int, H: int, sampling: dict, y: str) -> str:
    """The strategy figure's caption: its three rows, from the numbers they show."""
    Ls = f"1-{H}" if 1 < H <= 3 else f"{H}"
    eff = ""
    if reading.get("order_effect_min") is not None:
        eff = f"; here from {reading['order_effect_min']:+.2f} to {reading['order_effect_max']:+.2f}"
    return (f"Top: the probability that the model answers {y} in every memory of {Ls} interaction"
            f"{'s' if H > 1 else ''} (rows: its own past plays, columns: its partners', oldest first; a diagonal "
            f"cell is a memory of successes), averaged over the two name orders. Middle: the order effect -- "
            f"p({y}) when {y} is listed first in the prompt minus p({y}) when it is listed second (0: the order "
            f"does not matter{eff}). Bottom: the probability that the answer starts with a pool name at all "
            f"(temperature {sampling.get('temperature', 0.5)}, top-k {sampling.get('top_k', 10)}); the rest is text "
            f"that names no pool name. Exact next-token probabilities renormalised over the two names: {prompts} "
            f"prompts, the {states} memory states in both name orders.")


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
        ax.errorbar([i - 0.12], [p["estimate"]], yerr=[[p["estimate"] - p["low"]], [p["high"] - p["estimate"]]],
                    fmt="s", color="C0", capsize=4, label="predicted (95% for this experiment)" if i == 0 else None)
        ax.errorbar([i + 0.12], [o["estimate"]], yerr=[[o["estimate"] - o["low"]], [o["high"] - o["estimate"]]],
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
                        yerr=[[r["observed"] - r["observed_low"] for r in pts], [r["observed_high"] - r["observed"] for r in pts]],
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
            ax.errorbar(g["p"], g["mean"], yerr=[g["mean"] - g["low"], g["high"] - g["mean"]], fmt="o", ms=4,
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


def _img(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


# ----------------------------------------------------------------------------- the report
def _unpack(ctx: dict):
    names = tuple(ctx["cfg"]["names"])
    pf = ctx["pfacts"]
    winner = max(names, key=lambda nm: pf["consensus"].get(nm, {}).get("estimate", 0))
    N = ctx["cfg"]["n_agents"]
    obs = dict(ctx["obs"], n_agents=N, max_round=float(np.ceil(ctx["pop"].log.runs["n_interactions"].max() / N)))
    return names, winner, obs


def write_figures(out: Path, ctx: dict) -> dict:
    """Tables (``out/tables/*.parquet``) and figures (``out/*.png``) of a demo; returns ``{name: path}``.

    ``ctx`` holds what :func:`normlab.demo.run_demo` computed (settings, probe, predictions, runs,
    calibration, checks)."""
    with _style(), warnings.catch_warnings():  # seaborn's notices about matplotlib colormap methods (not ours to fix)
        warnings.filterwarnings("ignore", category=PendingDeprecationWarning, module="seaborn")
        warnings.filterwarnings("ignore", category=DeprecationWarning, module="seaborn")
        return _write_figures(Path(out), ctx)


def _write_figures(out: Path, ctx: dict) -> dict:
    cfg, probe, pred, cal = ctx["cfg"], ctx["probe"], ctx["pred"], ctx["cal"]
    names, winner, obs = _unpack(ctx)
    ptab = probe.to_frame()
    tables = out / "tables"
    tables.mkdir(exist_ok=True)
    ptab.to_parquet(tables / "strategy_table.parquet", index=False)
    probe.by_order().to_parquet(tables / "strategy_table_by_order.parquet", index=False)
    pd.concat([pred.to_frame().assign(source="probe"), cal.prediction.to_frame().assign(source="log")],
              ignore_index=True).to_parquet(tables / "predictions.parquet", index=False)
    pd.concat([pred.flip_curve().assign(source="probe"), cal.prediction.flip_curve().assign(source="log")],
              ignore_index=True).to_parquet(tables / "flip_curves.parquet", index=False)
    ctx["checks"].to_parquet(tables / "checks.parquet", index=False)
    if ctx["cm_rows"]:
        pd.DataFrame(ctx["cm_rows"]).to_parquet(tables / "committed_check.parquet", index=False)
    figs = {
        "strategy": fig_strategy(ptab, probe.by_order(), names, cfg["memory"], out / "strategy.png"),
        "population": fig_population(ctx["traj_th"], ctx["llm_curve"], ctx["pfacts"], obs, names, winner, cfg["runs"],
                                     out / "population.png"),
        "critical_mass": fig_critical_mass(pred, cal.prediction, ctx["cm_rows"], names, max(cfg["committed_runs"], 1),
                                           out / "critical_mass.png"),
    }
    if ctx["cm_curves"]:
        figs["committed"] = fig_committed(ctx["cm_curves"], cfg["committed_runs"], cfg["within_rounds"],
                                          out / "committed.png")
    figs["calibration"] = fig_calibration(ptab, cal, names, ctx["pfacts"], ctx["lfacts"], ctx["pcrit"], ctx["lcrit"],
                                          obs, out / "calibration.png")
    tp = ctx.get("tip")
    if tp is not None:
        import matplotlib.pyplot as plt

        tp.result.runs.to_parquet(tables / "tip_runs.parquet", index=False)
        tp.result.curves.to_parquet(tables / "tip_path.parquet", index=False)
        fig = tp.result.plot(tip_figure_kind(tp.result), path=out / "tip.png")
        plt.close(fig if isinstance(fig, plt.Figure) else fig.figure)  # "path" alone returns its Axes
        figs["tip"] = out / "tip.png"
    return figs


def write_report(out: Path, ctx: dict, figs: dict) -> dict:
    """``summary.json`` (checked against :data:`SUMMARY_SCHEMA`) and ``report.html``; returns the summary."""
    out = Path(out)
    cfg, probe, pop, cal, clock = ctx["cfg"], ctx["probe"], ctx["pop"], ctx["cal"], ctx["clock"]
    bias, ledger, cm_rows, checks = ctx["bias"], ctx["ledger"], ctx["cm_rows"], ctx["checks"]
    pfacts, lfacts, pcrit, lcrit = ctx["pfacts"], ctx["lfacts"], ctx["pcrit"], ctx["lcrit"]
    names, winner, obs = _unpack(ctx)
    N, H = cfg["n_agents"], cfg["memory"]
    ptab = probe.to_frame()
    tables = out / "tables"
    ep = cfg["endpoint"]
    model = probe.model
    emp = ptab[ptab["memory_state"] == ""].set_index("name")
    steps = [{k: v for k, v in s.items() if not k.startswith("_")} for s in clock.steps]
    this_calls = int(sum(s.get("llm_calls", 0) for s in steps))
    this_ptok = int(sum(s.get("prompt_tokens", 0) for s in steps))
    this_ctok = int(sum(s.get("completion_tokens", 0) for s in steps))
    fs = cal.fit.summary()
    free = None
    if bias is not None:
        lo, hi = cp_interval(bias.invalid, bias.trials)
        dec = bias.decisions if bias.decisions is not None else pd.DataFrame()
        examples = [t for t in dec.get("raw_text", pd.Series(dtype=object)).dropna().astype(str).tolist()][:6]
        free = {"trials": bias.trials, "invalid": bias.invalid, "invalid_share": bias.invalid / bias.trials,
                "interval": [lo, hi], "predicted_invalid_share": 1 - float(emp["covered_mass"].iloc[0]),
                "counts": dict(zip(names, map(int, bias.counts))), "examples": examples}
    summary = {
        "schema": "normlab.demo/1",
        "normlab_version": ctx["version"],
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": ctx["command"],
        "settings": {"names": list(names), "n_agents": N, "memory": H, "runs": cfg["runs"],
                     "max_rounds": cfg["max_rounds"], "committed": cfg["committed"],
                     "committed_tested": [[r["majority"], r["challenger"], r["committed"]] for r in cm_rows],
                     "committed_runs": cfg["committed_runs"], "sample_check": cfg["sample_check"], "mode": cfg["mode"],
                     "fit": cfg["fit"], "n_draws": cfg["n_draws"], "within_rounds": cfg["within_rounds"], "seed": ctx["seed"],
                     "tip_runs": cfg["tip_runs"], "sampling": cfg["sampling"]},
        "endpoint": {"model": str(model), "embedded": bool(ep.embedded),
                     "base_url": None if ep.embedded else redact_url(str(ep.base_url)),
                     "threads": ep.embedded_threads},
        "cost": {"llm_calls": this_calls, "llm_calls_total": ledger["calls"], "prompt_tokens": this_ptok,
                 "completion_tokens": this_ctok, "prompt_tokens_total": ledger["prompt_tokens"],
                 "cached_prompt_tokens_total": ledger["cached_tokens"],
                 "cost_usd": (this_ptok * ep.price_input + this_ctok * ep.price_output) / 1e6,
                 "population_cache_hits": int(pop.log.runs["cache_hits"].sum())},
        "estimate": dict(ctx["estimate"], speed=ctx["speed"]),
        "timing": {**clock.total(), "steps": steps},
        "strategy_table": {"states": int(ptab["memory_state"].nunique()), "llm_calls": int(probe.llm_calls),
                           "p_empty": {nm: float(emp.loc[nm, "p"]) for nm in names},
                           "p_first_listed_empty": _first_listed(probe.by_order()),
                           "covered_mass_mean": float(ptab.drop_duplicates("memory_state")["covered_mass"].mean()),
                           "states_without_name": int(ptab.groupby("memory_state")["p"].apply(lambda v: v.isna().any()).sum()),
                           "prompts": int(len(probe.by_order()[["memory_state", "order"]].drop_duplicates())),
                           "reading": _reading(ptab, probe.by_order(), names, H),
                           "table": "tables/strategy_table.parquet"},
        "free_generation": free,
        "population": {"runs": cfg["runs"], "n_agents": N, "memory": H, "mode": cfg["mode"],
                       "observed": {k: v for k, v in obs.items() if k not in ("max_round",)},
                       "predicted": pfacts, "predicted_from_log": lfacts,
                       "log_fit": {"model": cal.fit.kind, "decisions": int(fs.get("decisions") or 0),
                                   "states_observed": fs.get("states_observed"), "states_total": fs.get("states_total")}},
        "critical_mass": {"from_probe": pcrit, "from_log": lcrit,
                          "criteria": {"per_run": f"smallest count where >= 50% of runs flip within {cfg['within_rounds']} "
                                                  f"rounds; 'pooled' over all simulated runs, interval for "
                                                  f"{max(cfg['committed_runs'], 1)}-run experiments",
                                       "published": "the ensemble rule behind Table S3 on simulated 10-run experiments"}},
        "committed_check": cm_rows,
        "tip": tip_facts(ctx.get("tip"), cfg, str(model), bool(ep.embedded), out, ctx["llm_dir"]),
        "checks": checks.to_dict(orient="records"),
        "files": {"report": "report.html", "figures": [p.name for p in figs.values()],
                  "tables": sorted(p.relative_to(out).as_posix() for p in tables.glob("*.parquet")),
                  "llm": Path(ctx["llm_dir"]).relative_to(out).as_posix()},
    }
    summary = _clean(summary)
    import jsonschema

    jsonschema.validate(summary, SUMMARY_SCHEMA)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    page = _html(summary, figs, cfg, checks, ptab, winner, pfacts, pcrit, lfacts, lcrit, obs, cm_rows, free, cal,
                 clock, ctx["estimate"], ctx["speed"], names)
    (out / "report.html").write_text(page, encoding="utf-8")
    return summary


def tip_figure_kind(result) -> str:
    """``both`` panels of :meth:`TipResult.plot`; the search path alone when no step had a
    critical mass on the grid (the estimate panel would be empty)."""
    ok = any(finite(float(st["estimate"])) is not None for st in result.steps if st.get("estimate") is not None)
    return "both" if ok else "path"


def tip_facts(tp, cfg: dict, model: str, embedded: bool, out: Path, llm_dir) -> dict | None:
    """The tip step in ``summary.json`` (None when ``--tip-runs 0`` turned it off): the critical
    mass with its interval, what the search played and the sentences the report prints."""
    if tp is None:
        return None
    r = tp.result
    runs = r.runs
    played = []
    for c, n in sorted(r.counts.items()):
        k = int(runs.loc[runs["committed"] == c, "flipped_at_end"].astype(bool).sum()) if len(runs) else 0
        played.append({"committed": int(c), "runs": int(n), "flipped": k})
    t = {"majority": tp.majority, "challenger": tp.challenger, "direction": r.direction, "why": tp.why,
         "critical_mass": {"estimate": finite(float(r.estimate)), "low": finite(float(r.low)),
                           "high": finite(float(r.high))},
         "level": float(r.settings.get("level", 0.95)), "p_within_one": float(r.p_within),
         "target": float(r.settings.get("target", 0.9)), "runs_used": int(r.runs_used),
         "run_budget": int(cfg["tip_runs"]), "runs_per_count": int(tp.runs_per_count),
         "window": int(cfg["within_rounds"]), "runs_available": int(r.runs_available),
         "baseline_runs": int(r.settings.get("baseline_runs", 0)),
         "counts": {str(c): int(n) for c, n in sorted(r.counts.items())}, "played": played,
         "tokens_used": r.tokens_used, "steps": len(r.steps) - 1, "stopped": r.stopped,
         "fit": r.fit_summary, "figure": "tip.png", "figure_kind": tip_figure_kind(r), "tables": ["tables/tip_runs.parquet", "tables/tip_path.parquet"],
         "directory": Path(tp.directory).relative_to(out).as_posix()}
    t["text"] = tip_text(t, cfg, model, embedded)
    return t


def tip_text(t: dict, cfg: dict, model: str, embedded: bool) -> list[str]:
    """Two sentences from the tip step's numbers: what the search found, and what it cannot show."""
    N, R, W = cfg["n_agents"], t["runs_per_count"], t["window"]
    cm = t["critical_mass"]
    est = "not reached" if cm["estimate"] is None else f"{cm['estimate']:.0f} of {N} agents"
    iv = f"[{_f(cm['low'], 0) if cm['low'] is not None else 'not reached'}, " \
         f"{_f(cm['high'], 0) if cm['high'] is not None else 'not reached'}]"
    met = "reaching" if t["p_within_one"] >= t["target"] else "short of"
    zero = sum(p["runs"] for p in t["played"] if p["committed"] == 0)
    what = (f"played {t['runs_used'] or 'no'} committed-minority run{'s' if t['runs_used'] != 1 else ''} of its "
            f"budget of {t['run_budget']}"
            + (f" and {zero} run{'s' if zero != 1 else ''} with nobody committed (outside the budget)" if zero else ""))
    if t["played"]:
        what += " (" + "; ".join(f"{p['flipped']} of {p['runs']} flipped at {p['committed']} committed"
                                 for p in t["played"]) + ")"
    rule = (f"the smallest count of agents committed to {t['challenger']} whose {R}-run, {W}-round experiment meets "
            f"the published rule")
    if cm["estimate"] is None:
        res = (f"finds no such count up to {N - 1} of {N} agents for the critical mass to overturn {t['majority']} "
               f"({rule}): P(none meets it) = {t['p_within_one']:.2f}"
               + ("" if cm["low"] is None else f", {t['level']:.0%} interval from {_f(cm['low'], 0)} to not reached")
               + f" ({met} the target {t['target']:.2f})")
    else:
        res = (f"puts the critical mass to overturn {t['majority']} -- {rule} -- at {est}, {t['level']:.0%} interval "
               f"{iv}, P(within one agent) = {t['p_within_one']:.2f} ({met} the target {t['target']:.2f})")
    found = (f"Starting from the {t['baseline_runs']} population runs as known data, the search {what} and {res}; "
             f"it stopped because: {t['stopped']}.")
    untested = [c for c in range(1, N) if str(c) not in t["counts"]]
    gaps = ("Counts without a run (" + ", ".join(map(str, untested)) + ") are read from the strategy table refitted "
            "on the populations' and the played runs, not observed"
            if untested else "Every count was played")
    if embedded:
        size = "a 135M-parameter model" if "135M" in model else "a small embedded model"
        how = ("in exact mode the runs draw from its next-token probabilities renormalised over the two names, so "
               "this is the critical mass of that table's dynamics" if cfg["mode"] == "exact" else
               "its runs play a model that often names no pool name")
        cannot = (f"{gaps}; and on {model}, {size}, {how}: it cannot show the critical mass of a model that follows "
                  f"the prompt, nor whether the search lands on a known answer (`normlab tip --ainorms` replays the "
                  f"published archives for that).")
    else:
        cannot = (f"{gaps}; with at most {t['run_budget']} runs the interval is as wide as the runs leave it "
                  f"(`normlab tip` with a larger --budget narrows it).")
    return [found, cannot]


def _reading(ptab, by_order, names, H) -> dict:
    """:func:`strategy_reading` plus the range of the order effect over the memories the figure shows."""
    r = strategy_reading(ptab, names)
    eff = order_effect(by_order, names[1])
    lens = ptab.drop_duplicates("memory_state").set_index("memory_state")["memory_len"]
    shown = eff[eff.index.map(lambda st: int(lens.get(st, 0)) in (range(1, H + 1) if H <= 3 else (H,)))].dropna()
    r["order_effect_min"] = float(shown.min()) if len(shown) else None
    r["order_effect_max"] = float(shown.max()) if len(shown) else None
    return r


def summary_paragraph(s: dict) -> str:
    """README's account of a demo (the paragraph after its command), written from ``summary.json``:
    what the model did, what the run can show and what it cannot.

    Parameters
    ----------
    s : dict
        A demo's ``summary.json``.

    Returns
    -------
    str
        One paragraph (no line breaks).
    """
    st, pop, cfg = s["strategy_table"], s["population"], s["settings"]
    x, y = cfg["names"]
    model = s["endpoint"]["model"].split("-")[0] if s["endpoint"]["embedded"] else s["endpoint"]["model"]
    pe, first = st["p_empty"], st.get("p_first_listed_empty")
    pred = pop["predicted"]["consensus"]
    win = max((x, y), key=lambda n: (pred.get(n) or {}).get("estimate") or 0)
    runs, won = pop["runs"], pop["observed"]["consensus"][win]["runs"]
    agree = f"all {runs} populations agree on {win}" if won == runs else f"{won} of {runs} populations agree on {win}"
    out = [f"The printed summary of this command: with an empty memory {model} picks {x} or {y} about equally often "
           f"when the two name orders are averaged ({pe[x]:.2f} / {pe[y]:.2f})"
           + (f", but it picks the name the prompt lists first with probability {first:.2f}" if first is not None else "")
           + f"; {agree}, as the theory predicts from the probed table (probability {pred[win]['estimate']:.2f})."]
    r = st.get("reading") or {}
    if r.get("states"):
        k, n, nm = r["above_half"], r["states"], r["name"]
        other = x if nm == y else y
        lean = nm if k >= n / 2 else other
        kk = k if lean == nm else n - k
        out.append(f"The table shows why: the model prefers {lean} after {kk} of its {n} non-empty memories "
                   f"(p({nm} | memory) from {r['p_min']:.2f} to {r['p_max']:.2f}).")
    inside = sum(1 for c in s["checks"] if c["consistent"] is True)
    judged = sum(1 for c in s["checks"] if c["consistent"] is not None)
    out.append(f"What the run shows is the pipeline at work: {judged} checks compare the populations with the "
               f"theory's predictions, and {inside} fall inside their predicted 95% intervals.")
    f, cm = s.get("free_generation"), pop["observed"].get("covered_mass")
    if s["endpoint"]["embedded"] and (f or cm is not None):
        why = []
        if f:
            why.append(f"names no pool name in {f['invalid']} of {f['trials']} free answers")
        if cm is not None:
            why.append(f"gives the names {cm:.2f} of its probability over the populations' decisions")
        out.append(f"What it cannot show is a convention the model would write: {model} " + " and ".join(why)
                   + ", so the populations (exact mode) play its probabilities renormalised over two names it rarely "
                     "writes, and the collective bias the paper found for Llama models needs a model that answers "
                     "the prompt (`--base-url/--model`, \"Your own LLM\").")
    return " ".join(out)


def _first_listed(by_order: pd.DataFrame) -> float | None:
    """Probability of picking the name listed first at an empty memory, averaged over the orders."""
    b = by_order[by_order["memory_state"] == ""]
    if b.empty:
        return None
    first = b[b["name"] == b["order"].str.split(",").str[0]]
    return float(first["p"].mean())


def _html(s, figs, cfg, checks, ptab, winner, pfacts, pcrit, lfacts, lcrit, obs, cm_rows, free, cal, clock,
          estimate, speed, names) -> str:
    """``report.html``: the page around the sections built below."""
    N, H, R = cfg["n_agents"], cfg["memory"], cfg["runs"]
    x, y = names
    model = html.escape(s["endpoint"]["model"])
    mode = cfg["mode"]
    e = html.escape
    where = "the embedded llama.cpp server (offline)" if s["endpoint"]["embedded"] else e(str(s["endpoint"]["base_url"]))
    first = s["strategy_table"].get("p_first_listed_empty")
    glance = _glance(s, cfg, checks, winner, pfacts, pcrit, obs, cm_rows, free, names)
    fg = _free_generation_html(free, cfg, obs)
    cm_fig = f"<figure><img src='{_img(figs['committed'])}' alt='committed-minority runs'><figcaption>Challenger's share of the uncommitted agents' answers per round in the committed-minority runs (LLM, red: single runs and their mean) and in the theory (blue: expected mean, and the band where 95% of the means of {cfg['committed_runs']}-run experiments fall). Runs stop when they flip (the challenger makes {FLIP_SUM}/3 of the answers over 3 rounds) and are then counted as 1, as the published rule does.</figcaption></figure>" if "committed" in figs else ""
    fit_obs = s["population"]["log_fit"]
    cannot = _caveats(s, cfg, first)
    nxt = _next_runs(cfg)
    cal_text = _calibration_text(cal, fit_obs, cfg, pcrit, lcrit, y)
    cost = _cost_html(s, speed, estimate)
    settings_rows = "".join(f"<tr><td>{e(k)}</td><td><code>{e(json.dumps(v))}</code></td></tr>"
                            for k, v in s["settings"].items())
    files = "".join(f"<li><code>{e(f)}</code></li>" for f in s["files"]["figures"] + s["files"]["tables"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>normlab demo: conventions in a population of {model} agents</title><style>{_CSS}</style></head><body>
<h1>Conventions in a population of {model} agents</h1>
<p class="sub">normlab {e(s['normlab_version'])} demo · {e(s['created'])} · {where} · {N} agents, memory H = {H},
names {e(x)} and {e(y)}, decisions in <b>{mode}</b> mode · seed {s['settings']['seed']}</p>
<p>The naming game of Flint Ashery, Aiello &amp; Baronchelli ("Emergent social conventions and collective bias in LLM
populations", <i>Sci. Adv.</i> 11, eadu9368, 2025): agents meet in random pairs, each picks a name, both score when
the names match, and each remembers its last H interactions. This report probes the model's strategy -- the
probability of each name given a memory --, predicts with the theory what populations of the model will do, and then
plays LLM populations to check the predictions.</p>
<div class="glance"><b>At a glance</b><ul>{''.join(f'<li>{g}</li>' for g in glance)}</ul></div>

<h2>1. The model's strategy</h2>
<figure><img src="{_img(figs['strategy'])}" alt="strategy table"><figcaption>{e(strategy_caption(
    s['strategy_table']['reading'], s['strategy_table']['prompts'], s['strategy_table']['states'], H, cfg['sampling'], y))}
</figcaption></figure>
<p><b>Reading it.</b> {e(strategy_reading_text(s['strategy_table']['reading'], names))} <b>Try next:</b> <code>tables/strategy_table.parquet</code> holds the table
(<code>pd.read_parquet</code>); <code>tables/strategy_table_by_order.parquet</code> shows how much the order of the
names in the prompt matters.</p>
{fg}
<h2>2. Populations: which convention, how fast</h2>
<figure><img src="{_img(figs['population'])}" alt="populations"><figcaption>{R} LLM populations of {N} agents from
empty memories, stopped at {3 * N} consecutive successes (the paper's rule; a run still going after
{cfg['max_rounds']} rounds counts as "no consensus"). Red: the LLM runs (a run that stopped counts as success and as
its convention afterwards, as in the paper's figures). Blue: the theory's prediction from the probed table -- the
expected curve and the band in which the mean curve of 95% of {R}-run experiments falls, so the band includes the
noise of an experiment this size. Right: share of runs ending on each name.</figcaption></figure>
<p><b>What it shows.</b> Whether the convention the model's strategy favours is the one its populations adopt, and
whether coordination builds up at the predicted speed. <b>What it cannot show</b>: in exact mode the populations
draw from the probed table itself (see "What these comparisons can and cannot show"). <b>Try next:</b>
<code>--runs 20</code> narrows the observed intervals; <code>--n-agents 24 --memory 3</code> comes closer to the paper.</p>

<h2>3. Critical mass: how many committed agents overturn a convention</h2>
<figure><img src="{_img(figs['critical_mass'])}" alt="critical mass"><figcaption>Probability that a consensus flips
to the committed agents' name within {cfg['within_rounds']} rounds (the paper's criterion: the challenger makes
{FLIP_SUM}/3 of the uncommitted answers over 3 rounds), against the number of committed agents out of {N}. Blue: the
theory with the probed table (line: probability over {cfg['n_draws']} simulated experiments; band: the flip
frequency 95% of {max(cfg['committed_runs'], 1)}-run experiments would show). Orange: the same from the fit on the
population log, whose band adds the uncertainty of memory states the populations never visited. Red: the LLM
committed-minority runs (Clopper-Pearson 95%).</figcaption></figure>
{cm_fig}
<p><b>What it shows.</b> The critical mass is the smallest committed minority that flips at least half of the runs
({'; '.join(f"overturning {e(v['majority'])}: {_cm_line(v, cfg)}" for v in pcrit.values())}). A convention the model holds
weakly can collapse with no committed agent at all; one it holds firmly may resist any minority when even a full
memory of the challenger's successes does not make the model answer it reliably. <b>Try next:</b>
<code>--committed 1,2,3</code> tests more counts; <code>normlab critical-mass --help</code> sweeps theory models.</p>
{_tip_html(s.get("tip"), figs)}

<h2>4. Calibration: what the game logs alone say</h2>
<figure><img src="{_img(figs['calibration'])}" alt="calibration"><figcaption>Left: the strategy fitted on the
populations' decisions ({e(fit_obs['model'])} model, 95% credible intervals) against the probed table; states the
populations never visited keep the prior. Right: predictions of the two calibrations with their intervals, and what
the LLM populations did.</figcaption></figure>
<p><b>What it shows.</b> {cal_text} <b>Try next:</b> <code>--fit hierarchical</code> (partial pooling across
states, PyMC); <code>normlab calibrate</code> on your own runs or the published Llama runs.</p>

<h2>5. What these comparisons can and cannot show</h2>
<ul>{''.join(f'<li>{c_}</li>' for c_ in cannot)}</ul>

<h2>6. What to try next</h2>
<table><tr><th>to see</th><th>run</th></tr>{''.join(f'<tr><td>{e(a)}</td><td><code>{b}</code></td></tr>' for a, b in nxt)}</table>
<p>The run directories under <code>{e(s['files']['llm'])}/</code> are ordinary normlab runs:
<code>normlab.schema.GameLog.read_parquet(DIR)</code> loads one, and <code>normlab llm-run --cache DIR</code> reuses
its journaled model answers.</p>

<h2>7. Every check</h2>
{checks_html(checks)}
{_outside_html(checks, cfg, free)}
<p class="small">Predicted intervals: 2.5% and 97.5% quantiles over {cfg['n_draws']} simulated experiments of the size
run ("probed table": the table is exact, so only the experiment's noise; "fit on the population log": posterior draws,
each with its own simulated experiment). Observed intervals: Clopper-Pearson 95% for counts.</p>

{cost}

<h2>Settings and files</h2>
<table>{settings_rows}</table>
<p>Command: <code>{e(s['command'] or 'normlab.demo.run_demo(...)')}</code></p>
<ul>{files}<li><code>summary.json</code></li></ul>
</body></html>
"""


def _tip_html(t: dict | None, figs: dict) -> str:
    """The tip step's sub-section ("" when it was off)."""
    if not t:
        return ""
    e = html.escape
    return (f"<h3>The tip search: the critical mass for a few runs</h3>"
            f"<p>Against the convention to overturn, {e(t['majority'])} ({e(t['why'])}), <code>normlab tip</code>'s "
            f"search refits the strategy table on every run so far, reads each count's {t['runs_per_count']}-run "
            f"experiment by the published rule (observed runs plus simulated ones) and plays the next runs where they "
            f"teach the most, with at most {t['run_budget']} committed runs (<code>--tip-runs</code>).</p>"
            f"<figure><img src='{_img(figs['tip'])}' alt='tip search'><figcaption>Left: probability that the "
            f"experiment at each committed count meets the published rule, one line per step of the search (darker: "
            f"later), with the runs played as points (their challenger share over the window's last three rounds; "
            f"circles: flipped by their end)."
            + (f" Right: the estimate and its {t['level']:.0%} interval against the committed runs used, with "
               f"P(within one agent) (green) and its target." if t.get("figure_kind") == "both" else
               " (No step put the critical mass on the grid, so the estimate panel is left out.)")
            + "</figcaption></figure>"
            f"<p><b>What it found.</b> {e(t['text'][0])} <b>What it cannot show.</b> {e(t['text'][1])}</p>")


def _cm_line(v: dict, cfg: dict) -> str:
    """One direction's critical mass in words (the pooled ``per_run`` reading, with the interval
    of an experiment of the demo's size)."""
    N = cfg["n_agents"]
    pr = v["per_run"]
    if pr.get("pooled") is None:
        return f"not reached with up to {N - 1} of {N} agents committed"
    lo = pr.get("low")
    hi = pr.get("high")
    iv = f"[{_f(lo, 0) if lo is not None else 'not reached'}, {_f(hi, 0) if hi is not None else 'not reached'}]"
    k = max(cfg["committed_runs"], 1)
    if pr["pooled"] == 0:
        return (f"0 -- the consensus on {v['majority']} collapses without any committed agent (a {k}-run "
                f"experiment would find {iv})")
    return f"{_f(pr['pooled'], 0)} of {N} agents (a {k}-run experiment would find {iv})"


def _glance(s, cfg, checks, winner, pfacts, pcrit, obs, cm_rows, free, names) -> list[str]:
    """The "At a glance" items."""
    N, R = cfg["n_agents"], cfg["runs"]
    x, y = names
    emp = s["strategy_table"]["p_empty"]
    cons_w = obs["consensus"][winner]
    pw = pfacts["consensus"][winner]
    first = s["strategy_table"].get("p_first_listed_empty")
    glance = [
        f"<b>Individual bias</b>: with an empty memory the model picks {x} with probability {emp[x]:.2f} and "
        f"{y} with {emp[y]:.2f} (exact next-token probabilities, both name orders averaged)"
        + (f" -- but it picks whichever name the prompt lists first with probability {first:.2f}: a position bias "
           f"that the random order of the names cancels only on average." if first is not None else "."),
        f"<b>Collective bias</b>: the theory, fed the probed strategy table, predicts a consensus on {winner} with "
        f"probability {_f(pw['estimate'])} (the share an {R}-run experiment would show: {_iv(pw)}); the {R} LLM "
        f"populations reached it in {cons_w['runs']} of {R} runs ({_iv(cons_w)}, Clopper-Pearson) "
        f"{_flag(_ck(checks, 'P(consensus)', winner))}",
        f"<b>Time to consensus</b> (the paper's {3 * N} consecutive successes): predicted "
        f"{_iv(pfacts['consensus_rounds'], 1)} rounds for the mean of {R} runs; observed "
        f"{_f(obs['consensus_rounds'], 1)} rounds {_flag(_ck(checks, 'rounds to consensus', ''))}",
    ] + [f"<b>Critical mass to overturn {v['majority']}</b> (committed to {v['challenger']}): {_cm_line(v, cfg)}."
         for v in pcrit.values()]
    for r in cm_rows:
        a_, b_ = round(r["low"] * r["runs"]), round(r["high"] * r["runs"])
        rng_ = f"{a_}" if a_ == b_ else f"{a_} to {b_}"
        glance.append(f"<b>Committed-minority check</b>: {_agents(r['committed'])} committed to {r['challenger']} "
                      f"against a consensus on {r['majority']} flipped {r['flips']} of {r['runs']} LLM runs; predicted "
                      f"flip probability {r['predicted']:.2f}, i.e. {rng_} of {r['runs']} runs in 95% of such "
                      f"experiments {_flag(r['consistent'])}")
    if free:
        glance.append(f"<b>Free generation</b>: asked to write its answer (sample mode, no re-ask) at an empty memory, the "
                      f"model named no pool name in {free['invalid']} of {free['trials']} answers "
                      f"({_pct(free['invalid_share'])}, 95% CI {_pct(free['interval'][0])}-{_pct(free['interval'][1])}); "
                      f"the probe predicts {_pct(free['predicted_invalid_share'])}.")
    t = s.get("tip")
    if t:
        cm = t["critical_mass"]
        glance.append(f"<b>Tip search</b> (overturning {html.escape(t['majority'])}): critical mass "
                      f"{_iv(cm, 0)} ({t['level']:.0%}), "
                      + ("P(within one agent)" if cm["estimate"] is not None else "P(not reached)")
                      + f" {t['p_within_one']:.2f}, from "
                      f"{t['runs_used']} committed runs (" + (", ".join(f"{p['runs']} at {p['committed']}"
                                                                        for p in t["played"]) or "none") + ").")
    n_in = int((checks["consistent"] == True).sum())  # noqa: E712
    n_out = int((checks["consistent"] == False).sum())  # noqa: E712
    glance.append(f"<b>All checks</b>: {n_in} observations inside their predicted interval, {n_out} outside "
                  + ("(table at the end)." if n_out == 0 else
                     "(table at the end, where each one outside is discussed: how far, and what the comparison can "
                     "show)."))
    return glance


def _outside_one(r, cfg: dict, free: dict | None) -> str:
    """One check outside its interval in words: how far, in the experiment's own units, and what
    the comparison can show."""
    q, obs, p, lo, hi = r["quantity"], float(r["observed"]), r["predicted"], float(r["low"]), float(r["high"])
    side, gap = ("above", obs - hi) if obs > hi else ("below", lo - obs)
    src = "the fit on the population log" if r["source"] == "log" else "the probed table"
    nd = 1 if "rounds" in q else 2
    label = html.escape(f"{q} {r['key']}".strip())
    head = (f"<b>{label}</b> ({src}): observed {_f(obs, nd)}, "
            f"{_f(gap, nd)} {side} the predicted [{_f(lo, nd)}, {_f(hi, nd)}]")
    n = {"P(consensus)": cfg["runs"], "P(flip)": cfg["committed_runs"],
         "invalid free answers": (free or {}).get("trials")}.get(q)
    if n and p is not None and math.isfinite(p):
        k, sd = round(obs * n), math.sqrt(max(n * p * (1 - p), 0.0))
        head += (f": {k} of {n} against {_f(n * p, 1)} +/- {_f(sd, 1)} expected"
                 + (f" ({_f(abs(k - n * p) / sd, 1)} standard deviations)" if sd > 0 else
                    " (the prediction allows no spread: a single differing run falls outside)"))
    why = {
        "P(consensus)": f"a share of {cfg['runs']} runs, so the interval is the binomial noise of {cfg['runs']} runs at "
                        "the predicted probability; outside it, the populations' winner differs from the table's "
                        "(the early, nearly empty memories decide it) or the runs are not independent draws.",
        "rounds to consensus": f"the paper's rule waits for {3 * cfg['n_agents']} consecutive successes, which "
                               f"magnifies small differences in the success rate: at a rate s the streak comes with "
                               f"probability about s^{3 * cfg['n_agents']} per try "
                               f"({_f(0.95 ** (3 * cfg['n_agents']), 2)} at 0.95, {_f(0.97 ** (3 * cfg['n_agents']), 2)} "
                               f"at 0.97), so a table slightly too sure or too noisy in the settled states shifts the "
                               "time a lot while every probability stays close.",
        "rounds to 95% success": "the mean success curve of the runs crosses 0.95 one round earlier or later: a "
                                 "difference of a few percent in the settled states' noise, or in how fast the first "
                                 "rounds sort out, moves the crossing by a round.",
        "P(flip)": f"{cfg['committed_runs']} runs at one committed count; the committed runs visit mixed memories and "
                   "the challenger's consensus far more than free populations do, and both players of an interaction "
                   "see one shared name order there (the theory draws them independently): outside, the table's "
                   "reading of those states, or that correlation, is off.",
        "invalid free answers": "the probe counts the pool names' probability at the first answer token; free "
                                "generation can still name one later (after a preamble), or the sampler settings differ.",
    }.get(q, "the comparison shows that the prediction and the runs differ here; the table above has the numbers.")
    if r["source"] == "log":
        why += " (The log fit is in-sample for the convergence runs.)"
    return f"<li>{head}. What it can show: {why}</li>"


def _outside_html(checks: pd.DataFrame, cfg: dict, free: dict | None) -> str:
    """The checks outside their intervals, each discussed ("" when there is none)."""
    out = checks[checks["consistent"] == False]  # noqa: E712
    if out.empty:
        return ""
    items = "".join(_outside_one(r, cfg, free) for _, r in out.iterrows())
    head = "The check outside its interval" if len(out) == 1 else f"The {len(out)} checks outside their intervals"
    return f"<h3>{head}</h3><ul>{items}</ul>"


def _free_generation_html(free, cfg, obs) -> str:
    """The free-generation section ("" when the check was skipped)."""
    e = html.escape
    fg = ""
    if free:
        ex = ", ".join(f"<code>{e(t_[:40])}</code>" for t_ in free["examples"][:4])
        fg = (f"<h2>Free generation: how often is there no answer at all?</h2>"
              f"<p>Asked {free['trials']} times at an empty memory to write its answer (the paper's sample protocol, "
              f"temperature {cfg['sampling'].get('temperature', 0.5)}, no re-ask), the model named no pool name in "
              f"<b>{free['invalid']} of {free['trials']}</b> answers (95% CI {_pct(free['interval'][0])}-"
              f"{_pct(free['interval'][1])}). The probe predicts {_pct(free['predicted_invalid_share'])}: one minus the "
              f"probability that the first answer token is a pool name. First answers: {ex}.</p>"
              f"<p>Across the populations' decisions the mean mass on pool names was "
              f"{_f(obs.get('covered_mass'), 2)}: played by free generation, about "
              f"{_pct(1 - obs['covered_mass']) if obs.get('covered_mass') is not None else '—'} of these decisions "
              f"would have named no pool name. Exact mode renormalises over the pool names, i.e. it plays what a "
              f"free answer says <i>given</i> that it names a pool name -- for single-token names the same "
              f"distribution as the paper's protocol of re-asking until a name appears, without the cost of the "
              f"re-asks; normlab's default of at most 2 re-asks would instead leave invalid decisions (failed "
              f"interactions that no memory records).</p>")
    return fg


def _caveats(s, cfg, first) -> list[str]:
    """What these comparisons can and cannot show."""
    N, R, mode = cfg["n_agents"], cfg["runs"], cfg["mode"]
    fit_obs = s["population"]["log_fit"]
    cannot = [
        f"<b>Exact-mode populations replay the probed table</b>{' (this run)' if mode == 'exact' else ''}: every decision is "
        f"drawn from the very probabilities the probe measured, so agreement between the populations and the "
        f"theory checks the pipeline (the runner, the memory encoding, the theory engine and the intervals), not "
        f"whether the strategy table describes the model's behaviour in free generation. For that, rerun with "
        f"<code>--mode sample</code> on an endpoint that answers reliably.",
        "<b>Sample and exact mode differ by the invalid answers</b>: exact mode conditions on a pool name being "
        "named. Where the model often writes something else (see the free-generation check), sample-mode runs with "
        "capped re-asks have failed interactions that the table does not model.",
        "<b>Name order</b>: the table averages the two orders in which the names are shown"
        + (f" (with an empty memory the first-listed name gets {first:.2f})" if first is not None else "")
        + ". From empty memories each player sees its own order, so the average is exact; in committed-minority "
        "runs both players of an interaction see one shared order (the authors' simulate_CM), which correlates "
        "their choices, and the theory does not model that correlation.",
        f"<b>Small experiments</b>: {R} populations of {N} agents and {cfg['committed_runs']} runs per committed "
        f"count. Every predicted interval is the range of what an experiment of exactly this size would show "
        f"(not the uncertainty of an average), so an observation inside it is consistent, not a confirmation; "
        f"several checks sit at 0 or 1 where they are weak tests.",
        f"<b>The fit on the log is in-sample</b>: the {fit_obs['model']} fit uses the populations' own decisions "
        f"({fit_obs['decisions']} decisions, {fit_obs['states_observed']} of {fit_obs['states_total']} memory "
        f"states visited), so its agreement with the same populations is expected; its critical-mass intervals "
        f"show what a convergence experiment alone can say about states it never visited.",
        *([f"<b>{s['strategy_table']['states_without_name']} memory states had no pool name</b> among the top "
           f"logprobs in either order: the theory plays them uniformly, the LLM runs record an invalid answer "
           f"(a failed interaction) there."] if s["strategy_table"]["states_without_name"] else []),
        _embedded_caveat(s) if s["endpoint"]["embedded"] else
        "<b>One model, one prompt</b>: the conventions and critical masses describe this model with this prompt.",
    ]
    return cannot


#: N and H of the "larger population" suggestion (README, ``demo --help`` and the report).
_LARGER = (24, 3)


def probe_prompts(memory: int, n_names: int = 2) -> int:
    """Prompts of an exact strategy table for two names: every memory state up to ``memory``
    interactions, in each name order."""
    return n_names * sum((n_names * n_names) ** L for L in range(memory + 1))


def _embedded_caveat(s) -> str:
    """What the embedded model can and cannot show, from its own numbers."""
    st, f = s["strategy_table"], s.get("free_generation")
    bits = [f"puts {st['covered_mass_mean']:.2f} of its next-token probability on the pool names (mean over the "
            f"table's memory states)"]
    if f:
        bits.append(f"names no pool name in {f['invalid']} of {f['trials']} free answers")
    return (f"<b>A 135 M-parameter model</b> {' and '.join(bits)}: the conventions and critical masses here describe "
            f"what SmolLM2 says in this prompt once its answer is renormalised over the two names, not a convention it "
            f"would write, nor LLMs in general.")


def _next_runs(cfg) -> list[tuple[str, str]]:
    """What to try next: (what it shows, the command)."""
    e = html.escape
    od = e(str(cfg["out"]))
    nxt = [
        ("more committed counts and runs (reuses every answer already cached here)",
         f"normlab demo --out {od} --committed 1,2,3,4 --committed-runs 8"),
        ("more populations: narrower observed intervals (cached: seconds in exact mode)",
         f"normlab demo --out {od} --runs 40"),
        (f"a larger population and memory: N = {_LARGER[0]}, H = {_LARGER[1]} ({probe_prompts(_LARGER[1]):,} "
         f"prompts), closer to the paper's N = 24, H = 5 (which would take {probe_prompts(5):,})",
         f"normlab demo --out {od} --n-agents {_LARGER[0]} --memory {_LARGER[1]}"),
        ("the paper's generate-and-parse protocol instead of exact mode",
         f"normlab demo --out {od} --mode sample --runs 4 --reask unbounded"),
        ("a Bayesian fit with partial pooling on the population log (PyMC)", f"normlab demo --out {od} --fit hierarchical"),
        ("a larger budget for the tip search (it stops earlier at its target; the runs already played are replayed "
         "from their journals)",
         f"normlab demo --out {od} --tip-runs 16"),
        ("your own model on an OpenAI-compatible server that returns logprobs (llama.cpp, vLLM)",
         "normlab demo --out report-mine --base-url http://127.0.0.1:8000/v1 --model MODEL"),
        ("the same analyses on your own runs or the published Llama runs", "normlab calibrate --help"),
    ]
    return nxt


def _calibration_text(cal, fit_obs, cfg, pcrit, lcrit, y) -> str:
    """What the fit on the population log says, against the probe."""
    e = html.escape
    ff = cal.fit.to_frame(n_draws=400, rng=0)
    ff = ff[ff["name"] == y]
    rare = ff[ff["n"] < 10]
    width = (ff["high"] - ff["low"])
    cmp_cm = "; ".join(f"overturning {e(v['majority'])}: {_iv(lcrit[k_]['per_run'] | {'estimate': lcrit[k_]['per_run'].get('pooled')}, 0)} "
                       f"from the log against {_iv(v['per_run'] | {'estimate': v['per_run'].get('pooled')}, 0)} from the probe"
                       for k_, v in pcrit.items())
    cal_text = (f"The populations made {fit_obs['decisions']} decisions in {fit_obs['states_observed']} of the "
                f"{fit_obs['states_total']} memory states; {len(rare)} states saw fewer than 10 decisions, and the fit's "
                f"95% intervals there are {width[ff['n'] < 10].mean() if len(rare) else float('nan'):.2f} wide on average "
                f"(against {width[ff['n'] >= 10].mean() if (ff['n'] >= 10).any() else float('nan'):.2f} where it saw 10 "
                f"or more). Convergence runs spend most of their time in memories of the winning convention, so a "
                f"fit on their logs pins those states down and leaves the mixed and losing-convention states -- the "
                f"ones a committed minority creates -- uncertain. Critical mass (50% of runs flip; pooled value "
                f"[interval of a {max(cfg['committed_runs'], 1)}-run experiment]): {cmp_cm}.")
    return cal_text


def _cost_html(s, speed, estimate) -> str:
    """Section 8: requests, tokens and time per step."""
    e = html.escape
    t = s["timing"]
    c = s["cost"]
    step_rows = "".join(
        f"<tr><td>{e(st['step'])}</td><td class='num'>{st['wall_s']:.1f}</td><td class='num'>{st['cpu_s']:.1f}</td>"
        f"<td class='num'>{st['llm_calls']}</td><td class='num'>{st.get('prompt_tokens', 0):,}</td></tr>" for st in t["steps"])
    sp = ""
    if speed:
        sp = (f"Speed measured on {speed['calls']} requests ({speed['measured']}): {speed['prompt_tokens']:,} prompt tokens in "
              f"{speed['wall_s']:.1f} s = <b>{speed['tokens_per_s']:.0f} prompt tokens/s</b> (server start included). "
              f"Estimate before the rest of the probe: {estimate['calls']} requests, "
              f"{(estimate['prompt_tokens'] or 0):,} prompt tokens, {fmt_seconds(estimate['seconds'])} of model time.")
    return f"""<h2>8. Cost and time</h2>
<p>{c['llm_calls']} LLM requests in this run ({c['llm_calls_total']} journaled in this directory, reused by a rerun),
{c['prompt_tokens']:,} prompt and {c['completion_tokens']:,} completion tokens{f", ${c['cost_usd']:.4f}" if c['cost_usd'] else ""};
the populations took {s['cost']['population_cache_hits']} decisions from the cache. {sp}</p>
<table><tr><th>step</th><th>wall s</th><th>CPU s</th><th>requests</th><th>prompt tokens</th></tr>{step_rows}
<tr><th>total</th><th class="num">{t['wall_s']:.1f}</th><th class="num">{t['cpu_s']:.1f}</th><th class="num">{c['llm_calls']}</th>
<th class="num">{c['prompt_tokens']:,}</th></tr></table>
<p class="small">CPU time counts every thread of the process, the embedded llama.cpp server included; wall time
depends on what else the machine runs.</p>"""


def _agents(k: int) -> str:
    return f"{k} agent{'s' if k != 1 else ''}"


def _flag(ok) -> str:
    if ok is None:
        return ""
    return '<span class="ok">(inside the interval)</span>' if ok else '<span class="bad">(outside the interval)</span>'


def _ck(checks: pd.DataFrame, quantity: str, key: str, source: str = "probe"):
    r = checks[(checks["quantity"] == quantity) & (checks["key"] == key) & (checks["source"] == source)]
    if r.empty:
        return None
    v = r["consistent"].iloc[0]
    return None if v is None or pd.isna(v) else bool(v)
