"""The study's report: figures (``OUT/figures/*.png``), a self-contained ``OUT/report.html`` (figures as
base64 PNG, plain HTML and CSS) and ``OUT/summary.json`` (checked against :data:`SUMMARY_SCHEMA`).

It shows what was registered and when, every prediction beside what happened (sample runs and their
exact twins), what missed and the likely reason, normlab's scores beside its rivals', the adequacy
check, the tip search against the full grid, and how long each stage took.
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from normlab import __version__
from normlab._display import style
from normlab.calibration import Adequacy, TipResult, llm_trajectories
from normlab.calibration.prediction import Prediction
from normlab.demo.report import fig_strategy
from normlab.llm_runs.journal import write_json_atomic

from ._play import committed_tests, read_logs
from ._register import PREDICTION_DIR, PREDICTIONS, PREDICTIONS_SHA
from ._settings import STAGE_MODES
from ._stages import ledger, now_iso

__all__ = ["write_report", "SUMMARY_SCHEMA", "rows_html", "summary_markdown"]

_NUM = {"type": ["number", "null"]}
#: JSON schema of ``summary.json`` (draft 2020-12).
SUMMARY_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "normlab study summary",
    "type": "object",
    "required": ["schema", "normlab_version", "created", "model", "settings", "registration", "glance", "predictions",
                 "scores", "adequacy", "tip_vs_grid", "timing", "cost", "speed", "files"],
    "properties": {
        "schema": {"const": "normlab.study.summary/1"},
        "model": {"type": "object", "required": ["label", "kind"]},
        "registration": {"type": "object", "required": ["sha256", "registered", "first_population_started", "file"]},
        "glance": {"type": "object", "required": ["inside", "outside", "checked", "exact_inside", "exact_checked"],
                   "properties": {"inside": {"type": "integer"}, "outside": {"type": "integer"},
                                  "checked": {"type": "integer"}}},
        "predictions": {"type": "array", "items": {"type": "object", "required": [
            "id", "quantity", "key", "predicted", "low", "high", "observed", "inside", "exact_observed", "exact_inside",
            "why"], "properties": {"predicted": _NUM, "low": _NUM, "high": _NUM}}},
        "timing": {"type": "object", "required": ["stages", "wall_s"],
                   "properties": {"stages": {"type": "array", "items": {"type": "object", "required": [
                       "stage", "mode", "wall_s", "cpu_s", "llm_calls", "sessions"]}}}},
        "files": {"type": "object", "required": ["report", "figures", "tables", "predictions"]},
    },
}

_CSS = """
body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1.2em;color:#1d232a;line-height:1.5}h1{font-size:1.6em;margin-bottom:.2em}
h2{font-size:1.25em;border-bottom:1px solid #d9dee3;padding-bottom:.2em;margin-top:2em}.sub{color:#5b6670;margin-top:0}
.glance{background:#f3f6f9;border-left:4px solid #2f6fad;padding:.6em 1.2em;margin:1em 0}.glance li{margin:.25em 0}
table{border-collapse:collapse;font-size:.88em;margin:.6em 0}th,td{border-bottom:1px solid #e3e7eb;padding:.25em .6em;
text-align:left;vertical-align:top}th{background:#f3f6f9}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1e7b34;font-weight:600}.bad{color:#b3261e;font-weight:600}.na{color:#7a848d}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #e3e7eb}figcaption{font-size:.92em;color:#39424b}
.note{background:#fff8e6;border-left:4px solid #d99a00;padding:.5em 1em;margin:1em 0;font-size:.95em}
code{font-family:SFMono-Regular,Consolas,Menlo,monospace;font-size:.88em;background:#f3f6f9;border-radius:3px;padding:.05em .3em}
.small{font-size:.85em;color:#5b6670}
"""


# ----------------------------------------------------------------------------- formatting
def _f(v, nd=2, none="—"):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return none
    v = float(v)
    return f"{v:.0f}" if v.is_integer() and abs(v) >= 1 else f"{v:.{nd}f}"


def _none_word(pid: str) -> str:
    return "not reached" if pid.split(":")[0] in ("cm_per_run", "cm_published", "rounds_to_95") else "—"


def _iv(est, lo, hi, pid: str) -> str:
    w = _none_word(pid)
    return f"{_f(est, 2, w)} [{_f(lo, 2, w)}, {_f(hi, 2, w)}]"


def _flag(ok) -> str:
    return ('<span class="ok">inside</span>' if ok is True else '<span class="bad">outside</span>' if ok is False
            else '<span class="na">—</span>')


def _sec(v) -> str:
    if v is None:
        return "—"
    return f"{v:.0f} s" if v < 90 else (f"{v / 60:.1f} min" if v < 5400 else f"{v / 3600:.2f} h")


def _clean(o):
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, (np.bool_, bool)):
        return bool(o)
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, (float, np.floating)):
        return float(o) if math.isfinite(o) else None
    if isinstance(o, Path):
        return str(o)
    if o is None or isinstance(o, (str, int)):
        return o
    with contextlib.suppress(TypeError, ValueError):
        if pd.isna(o):
            return None
    return o


def rows_html(rows: list[dict]) -> str:
    """The predicted-vs-happened table, number by number."""
    out = []
    for r in rows:
        pid = r["id"]
        obs = _f(r["observed"], 2, _none_word(pid))
        if r.get("observed_low") is not None:
            obs += f" [{_f(r['observed_low'])}, {_f(r['observed_high'])}]"
        if r.get("n"):
            obs += f" <span class='small'>(n = {r['n']})</span>"
        out.append(f"<tr><td>{html.escape(r['quantity'])}</td><td>{html.escape(str(r['key']))}</td>"
                   f"<td class='num'>{_iv(r['predicted'], r['low'], r['high'], pid)}</td><td class='num'>{obs}</td>"
                   f"<td>{_flag(r['inside'])}</td><td class='num'>{_f(r['exact_observed'], 2, _none_word(pid))}</td>"
                   f"<td>{_flag(r['exact_inside'])}</td></tr>")
    return ("<table><tr><th>quantity</th><th></th><th>registered prediction [95% interval for this design]</th>"
            "<th>what happened, sample mode [95% CI]</th><th></th><th>exact twin</th><th></th></tr>"
            + "".join(out) + "</table>")


def _table(df: pd.DataFrame, cols: list, nd: int = 3) -> str:
    if df is None or len(df) == 0:
        return "<p class='small'>none</p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = []
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            v = r.get(c)
            num = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            cells.append(f"<td class='num'>{_f(v, nd)}</td>" if num else f"<td>{html.escape(str(_clean(v) if v is not None else '—'))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


# ----------------------------------------------------------------------------- figures
def _style():
    import matplotlib as mpl
    import seaborn as sns

    stack = contextlib.ExitStack()
    stack.enter_context(style("results"))
    stack.enter_context(mpl.rc_context(sns.plotting_context("notebook", font_scale=0.85)))
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore", PendingDeprecationWarning)
    warnings.simplefilter("ignore", DeprecationWarning)
    return stack


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


_GROUPS = (("share", ("p_consensus", "p_flip"), "probability / share of runs"),
           ("rounds", ("consensus_rounds", "rounds_to_95"), "population rounds"),
           ("agents", ("cm_per_run", "cm_published"), "committed agents"))


def fig_predicted_vs_observed(rows: list[dict], n_agents: int, max_rounds: int, path: Path) -> Path:
    """Every registered interval (bar), its estimate (tick), the sample runs (dot: green inside, red
    outside) and the exact twins (open diamond), one panel per unit."""
    import matplotlib.pyplot as plt

    groups = [(name, [r for r in rows if r["id"].split(":")[0] in kinds], lab) for name, kinds, lab in _GROUPS]
    groups = [g for g in groups if g[1]]
    heights = [max(len(g[1]), 1) for g in groups]
    fig, axes = plt.subplots(len(groups), 1, figsize=(9.5, 0.42 * sum(heights) + 1.6 * len(groups)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (name, rs, lab) in zip(axes[:, 0], groups):
        # "not reached" sits one step past the largest possible value: N agents, the cap + 10 % of rounds
        top = n_agents if name == "agents" else (round(max_rounds * 1.1) if name == "rounds" else 1.0)
        for i, r in enumerate(rs):
            y = len(rs) - 1 - i
            nr = r["id"].split(":")[0] in ("cm_per_run", "cm_published", "rounds_to_95")
            lo = _fin(r["low"]) if r["low"] is not None else (top if nr else None)
            hi = _fin(r["high"]) if r["high"] is not None else (top if nr else None)
            if lo is not None and hi is not None:
                ax.plot([lo, hi], [y, y], color="#2f6fad", lw=5, alpha=0.35, solid_capstyle="butt",
                        label="registered 95% interval")
            est = r["predicted"] if r["predicted"] is not None else (top if nr else None)
            if est is not None:
                ax.plot([est], [y], "|", color="#2f6fad", ms=14, mew=2, label="registered estimate")
            ov = r["observed"] if r["observed"] is not None else (top if nr else None)
            if ov is not None:
                ax.plot([ov], [y], "o", color={True: "#1e7b34", False: "#b3261e"}.get(r["inside"], "0.5"), ms=7,
                        label="sample runs (green inside, red outside)")
            ev = r["exact_observed"] if r["exact_observed"] is not None else (top if nr else None)
            if ev is not None:
                ax.plot([ev], [y + 0.22], "D", mfc="none", color="0.25", ms=5, label="exact twin")
        ax.set_yticks(range(len(rs))[::-1], [f"{r['quantity']} {r['key']}".strip() for r in rs], fontsize=8)
        ax.set_ylim(-0.7, len(rs) - 0.3)
        if name == "agents":
            ax.set_xlim(0.5, n_agents + 0.5)
            ax.set_xticks(range(1, n_agents + 1), [*map(str, range(1, n_agents)), "not\nreached"])
        elif name == "share":
            ax.set_xlim(-0.03, 1.03)
        else:
            ax.set_xlim(0, top * 1.04)
            ticks = [t for t in ax.get_xticks() if 0 <= t <= max_rounds]
            ax.set_xticks([*ticks, top], [f"{t:.0f}" for t in ticks] + ["not\nreached"])
        ax.set_xlabel(lab)
    seen = {}
    for ax in axes[:, 0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle("What was predicted (before any population was played) and what happened", fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    return _save(fig, path)


def _fin(v):
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else float(v)


def fig_populations(pred, pop_s, pop_e, rows: list[dict], names, max_rounds: int, path: Path) -> Path:
    """Success per round (predicted band vs the sample and exact populations) and the winners."""
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [1.5, 1]})
    sc = pred.success_curve()
    a.fill_between(sc["round"], sc["low"], sc["high"], color="#2f6fad", alpha=0.2, label="predicted (95% interval)")
    a.plot(sc["round"], sc["mean"], color="#2f6fad", lw=1.2, label="predicted mean")
    for lg, lab, st in ((pop_s, "sample-mode populations", dict(color="#b3261e", lw=1.8)),
                        (pop_e, "exact twins", dict(color="0.3", lw=1.2, ls="--"))):
        tr = llm_trajectories(lg, n_rounds=max_rounds, n_boot=0)
        s = tr[tr["quantity"] == "success_rate"].sort_values("round")
        a.plot(s["round"], s["mean"], label=lab, **st)
    a.axhline(0.95, color="0.6", lw=0.8)
    a.set(xlabel="population round", ylabel="success rate (mean over populations)", ylim=(-0.02, 1.02),
          xlim=(1, max_rounds), title="Convergence")
    a.legend(fontsize=8, frameon=False, loc="lower right")
    cats = list(names) + ["none"]
    x = np.arange(len(cats))
    byid = {r["id"]: r for r in rows}
    pr = [byid.get(f"p_consensus:{c}") for c in cats]
    est = [r["predicted"] or 0 for r in pr]
    lo = [r["low"] or 0 for r in pr]
    hi = [r["high"] or 0 for r in pr]
    b.bar(x - 0.25, est, 0.25, color="#2f6fad", alpha=0.6, label="predicted")
    b.errorbar(x - 0.25, est, yerr=[np.maximum(0, np.subtract(est, lo)), np.maximum(0, np.subtract(hi, est))],
               fmt="none", color="#2f6fad", lw=1.2)
    b.bar(x, [r["observed"] or 0 for r in pr], 0.25, color="#b3261e", alpha=0.8, label="sample mode")
    b.bar(x + 0.25, [r["exact_observed"] or 0 for r in pr], 0.25, color="0.45", alpha=0.7, label="exact twins")
    b.set_xticks(x, [f"consensus on {c}" if c != "none" else "no consensus" for c in cats], fontsize=8)
    b.set(ylim=(0, 1.05), ylabel="share of populations", title="Which convention")
    b.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return _save(fig, path)


def fig_flips(pred, rows: list[dict], names, n_agents: int, path: Path) -> Path:
    """Per direction: the predicted flip curve (every count) with the registered intervals at the
    tested counts, what the sample runs and the exact twins did, and the predicted critical masses."""
    import matplotlib.pyplot as plt

    fc = pred.flip_curve()
    dirs = [x for x in names if any(r["id"].startswith(f"p_flip:{x}:") for r in rows)]
    fig, axes = plt.subplots(1, max(len(dirs), 1), figsize=(5.4 * max(len(dirs), 1), 4), squeeze=False)
    for ax, x in zip(axes[0], dirs):
        y = names[1 - names.index(x)]
        g = fc[(fc["majority"] == x) & (fc["committed"] >= 1)].sort_values("committed")
        ax.plot(g["committed"], g["p_flip"], color="#2f6fad", lw=1, alpha=0.7, label="predicted P(flip), every count")
        rs = [r for r in rows if r["id"].startswith(f"p_flip:{x}:")]
        cs = [int(r["id"].split(":")[2]) for r in rs]
        est = np.array([r["predicted"] for r in rs], float)
        lo = np.array([r["low"] for r in rs], float)
        hi = np.array([r["high"] for r in rs], float)
        ax.errorbar(np.array(cs) - 0.08, est, yerr=[np.maximum(0, est - lo), np.maximum(0, hi - est)], fmt="s",
                    color="#2f6fad", ms=5, capsize=3, label="registered (95% interval, this many runs)")
        ob = np.array([np.nan if r["observed"] is None else r["observed"] for r in rs], float)
        olo = np.array([np.nan if r.get("observed_low") is None else r["observed_low"] for r in rs], float)
        ohi = np.array([np.nan if r.get("observed_high") is None else r["observed_high"] for r in rs], float)
        col = ["#1e7b34" if r["inside"] else "#b3261e" for r in rs]
        ax.errorbar(np.array(cs) + 0.08, ob, yerr=[np.maximum(0, ob - olo), np.maximum(0, ohi - ob)], fmt="none",
                    ecolor="0.5", lw=0.8)
        ax.scatter(np.array(cs) + 0.08, ob, c=col, s=40, zorder=3, label="sample runs (green inside, red outside)")
        ex = np.array([np.nan if r["exact_observed"] is None else r["exact_observed"] for r in rs], float)
        ax.plot(np.array(cs) + 0.2, ex, "D", mfc="none", color="0.25", ms=5, label="exact twins")
        for r in rows:
            if r["id"] == f"cm_per_run:{x}" and r["predicted"] is not None:
                ax.axvline(r["predicted"], color="#2f6fad", ls=":", lw=1, label="predicted critical mass (per run)")
        ax.axhline(0.5, color="0.7", lw=0.6)
        ax.set(xlabel=f"committed agents (of {n_agents}) to {y}", ylabel="share of runs that flip",
               title=f"Overturning a consensus on {x}", ylim=(-0.04, 1.04), xlim=(0.5, n_agents - 0.5))
        ax.set_xticks(range(1, n_agents))
    seen = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return _save(fig, path)


def fig_scores(scores: dict, path: Path) -> Path | None:
    """Mean Brier score of normlab and each rival on the same runs (lower is better)."""
    import matplotlib.pyplot as plt

    parts = []
    fl = (scores.get("committed_beside_direction_rule") or {}).get("comparison") or []
    parts += [("flips " + ("(all)" if r["majority"] == "all" else f"vs {r['majority']}"), r) for r in fl
              if r["target"] == "flip"]
    co = (scores.get("all_runs") or {}).get("comparison") or []
    parts += [("consensus winners", r) for r in co if r["target"] == "consensus"]
    if not parts:
        return None
    groups = list(dict.fromkeys(g for g, _ in parts))
    fcs = list(dict.fromkeys(r["forecaster"] for _, r in parts))
    colours = {"normlab": "#2f6fad", "direction_rule": "#d99a00", "logistic": "#7b3fa0", "base_rate": "#3a9a8a",
               "coin": "0.6"}
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, metric, lab in ((axes[0], "brier", "mean Brier score"), (axes[1], "log_score", "mean log score")):
        w = 0.8 / max(len(fcs), 1)
        for j, fcn in enumerate(fcs):
            xs, vs = [], []
            for i, g in enumerate(groups):
                r = next((r for gg, r in parts if gg == g and r["forecaster"] == fcn), None)
                if r is not None and r.get(metric) is not None:
                    xs.append(i + (j - (len(fcs) - 1) / 2) * w)
                    vs.append(r[metric])
            ax.bar(xs, vs, w, color=colours.get(fcn, "0.3"), label=fcn.replace("_", " "))
        ax.set_xticks(range(len(groups)), groups, fontsize=8)
        ax.set(ylabel=f"{lab} (lower is better)")
    axes[0].legend(fontsize=8, frameon=False)
    fig.suptitle("normlab's registered prediction beside the rivals, scored on the same runs", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def fig_tip(tip_dir: Path, tg: dict, n_agents: int, path: Path) -> Path | None:
    import matplotlib.pyplot as plt

    if tg is None or not tip_dir.exists():
        return None
    res = TipResult.load(tip_dir)
    kind = "both" if any(s.get("estimate") is not None and math.isfinite(float(s["estimate"])) for s in res.steps) \
        else "path"
    fig, axes = plt.subplots(1, 2 if kind == "both" else 1, figsize=(11 if kind == "both" else 6, 4), squeeze=False)
    res.plot(kind, axes=list(axes[0]) if kind == "both" else axes[0][0])
    if kind == "both":
        ax = axes[0][1]
        if tg.get("grid_critical_mass") is not None:
            ax.axhline(tg["grid_critical_mass"], color="#b3261e", lw=1.2, ls="--",
                       label=f"the full grid ({tg['grid_runs']} runs): {tg['grid_critical_mass']:.0f}")
        reg = tg.get("registered") or {}
        if reg.get("low") is not None and reg.get("high") is not None:
            ax.axhspan(reg["low"] - 0.1, reg["high"] + 0.1, color="#2f6fad", alpha=0.12, label="registered interval")
        ax.legend(fontsize=8, frameon=False)
    fig.suptitle(f"tip (sample mode) against the full grid: critical mass to overturn {tg['majority']}", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


# ----------------------------------------------------------------------------- the report
def _img(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def _figure(figs: dict, key: str, caption: str) -> str:
    if figs.get(key) is None:
        return ""
    return f"<figure><img src='{_img(figs[key])}' alt='{key}'><figcaption>{caption}</figcaption></figure>"


def write_report(run, reg: dict, results: dict) -> dict:
    """Figures, ``report.html`` and ``summary.json`` of a scored study; returns a short result."""
    out, st = run.out, run.st
    sc = json.loads((run.stages / "score.json").read_text(encoding="utf-8"))
    rows = sc["rows"]
    tests = committed_tests(reg)
    pop_s, _ = read_logs(run.llm, "sample", tests)
    pop_e, _ = read_logs(run.llm, "exact", tests)
    pred = Prediction.load(out / PREDICTION_DIR)
    figdir = out / "figures"
    figdir.mkdir(parents=True, exist_ok=True)
    figs = {}
    with _style():
        ptab = pd.read_parquet(run.stages / "probe_table.parquet")
        bo = pd.read_parquet(run.stages / "probe_by_order.parquet")
        figs["strategy"] = fig_strategy(ptab, bo, st.names, st.memory, figdir / "strategy.png")
        figs["predicted_vs_observed"] = fig_predicted_vs_observed(rows, st.n_agents, st.max_rounds, figdir / "predicted_vs_observed.png")
        figs["populations"] = fig_populations(pred, pop_s, pop_e, rows, st.names, st.max_rounds,
                                              figdir / "populations.png")
        figs["flips"] = fig_flips(pred, rows, st.names, st.n_agents, figdir / "flips.png")
        figs["scores"] = fig_scores(sc["scores"], figdir / "scores.png")
        figs["tip"] = fig_tip(run.stages / "tip", sc["tip_vs_grid"], st.n_agents, figdir / "tip.png")
        ad = run.stages / "adequacy_sample"
        if ad.exists():
            import matplotlib.pyplot as plt

            r = Adequacy.load(ad).plot()
            fig = r if isinstance(r, plt.Figure) else np.ravel(r)[0].figure
            figs["adequacy"] = _save(fig, figdir / "adequacy.png")
    figs = {k: v for k, v in figs.items() if v is not None}
    timing = _timing(run)
    led = ledger([run.llm])
    book_recs = run.book.records()
    pop_start = next((r["time"] for r in book_recs if r["stage"] == "populations" and r.get("event") == "start"), None)
    reg_done = run.book.done("register")
    summary = {
        "schema": "normlab.study.summary/1", "normlab_version": __version__, "created": now_iso(),
        "model": {"label": _label(run, reg), **reg["model"]},
        "settings": st.to_dict(),
        "registration": {"file": PREDICTIONS, "sha256": reg_done["result"]["sha256"], "registered": reg_done["time"],
                         "first_population_started": pop_start, "git": reg.get("git"),
                         "normlab_version": reg.get("normlab_version"), "probe_table_sha256": reg["probe"]["table_sha256"],
                         "design": reg["design"]},
        "glance": {k: sc[k] for k in ("inside", "outside", "checked", "exact_inside", "exact_checked", "p_chance_outside")},
        "predictions": [{k: r.get(k) for k in ("id", "quantity", "key", "predicted", "low", "high", "observed",
                                               "observed_low", "observed_high", "n", "inside", "exact_observed",
                                               "exact_inside", "why", "note")} for r in rows],
        "scores": {k: {kk: v.get(kk) for kk in ("comparison", "coverage", "rival_wins", "summary", "error")}
                   for k, v in sc["scores"].items()},
        "adequacy": sc["adequacy"], "probe_check": sc["probe_check"], "tip_vs_grid": sc["tip_vs_grid"],
        "timing": timing,
        "cost": {"llm_calls": led["calls"], "prompt_tokens": led["prompt_tokens"],
                 "completion_tokens": led["completion_tokens"], "cached_tokens": led["cached_tokens"]},
        "speed": (run.book.done("measure") or {}).get("result"),
        "files": {"report": "report.html", "predictions": PREDICTIONS, "predictions_sha256": PREDICTIONS_SHA,
                  "figures": {k: str(Path(v).relative_to(out)) for k, v in figs.items()},
                  "tables": sorted(str(p.relative_to(out)) for p in (out / "tables").glob("*.parquet")),
                  "llm": "llm/", "stages": "stages.jsonl", "manifest": "manifest.json"},
    }
    summary = _clean(summary)
    import jsonschema

    jsonschema.validate(summary, SUMMARY_SCHEMA)
    write_json_atomic(out / "summary.json", summary)
    page = _html(summary, figs, st)
    tmp = out / "report.html.tmp"
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out / "report.html")
    run.echo(f"  report: {out / 'report.html'}")
    return {"report": "report.html", "figures": len(figs)}


def _label(run, reg) -> str:
    """The model as a person names it: the embedded model's, else the name the endpoint reported."""
    if run.model.embedded:
        return run.model.choice.label
    return str(reg["model"].get("model") or run.model.choice.label)


def _all_sessions(r: dict, key: str):
    v = r.get(f"{key}_all_sessions")
    return r[key] if v is None else v


def _timing(run) -> dict:
    stages = []
    for r in run.book.timings():
        stages.append({"stage": r["stage"], "mode": STAGE_MODES[r["stage"]], "wall_s": r["wall_s"], "cpu_s": r["cpu_s"],
                       # every session's requests and tokens (a stage recorded before that count: this session's)
                       "llm_calls": _all_sessions(r, "llm_calls"), "prompt_tokens": _all_sessions(r, "prompt_tokens"),
                       "sessions": r["sessions"],
                       "all_sessions_counted": r["sessions"] == 1 or r.get("llm_calls_all_sessions") is not None,
                       "interrupted_wall_s": r.get("interrupted_wall_s", 0.0), "finished": r["time"]})
    return {"stages": stages, "wall_s": float(sum(s["wall_s"] for s in stages)),
            "note": "the report stage's own time is in stages.jsonl (it is written after this file)"}


def _glance(s: dict, st) -> list[str]:
    g = s["glance"]
    out = [f"<b>{g['inside']} of {g['checked']}</b> registered predictions fell inside their 95% interval for this "
           f"design (sample mode, the paper's protocol); {g['outside']} outside"
           + (f" (with every prediction right and the {g['checked']} independent, {g['outside']} or more outside has "
              f"probability {g['p_chance_outside']:.2f}; they are not independent -- the consensus rows share one set "
              "of populations, a critical mass rests on the flips' runs -- so misses come together and the chance is larger)"
              if g.get("p_chance_outside") is not None and g["outside"] else "") + "."]
    out.append(f"Exact twins (the same runs answered from the probed table): {g['exact_inside']} of {g['exact_checked']} "
               "inside -- the consistency check of the theory and the runner, not a test of the model.")
    for k in ("committed_beside_direction_rule", "all_runs"):
        w = (s["scores"].get(k) or {}).get("rival_wins") or []
        for sentence in w[:3]:
            out.append(html.escape(sentence) + ".")
    t = s["tip_vs_grid"]
    if t:
        cm = t["tip"]
        out.append(f"tip (sample mode) put the critical mass to overturn {t['majority']} at {_f(cm.get('estimate'), 0, 'not reached')} "
                   f"[{_f(cm.get('low'), 0, 'not reached')}, {_f(cm.get('high'), 0, 'not reached')}] after "
                   f"{t['tip_runs']} committed runs; the full grid ({t['grid_runs']} runs) read "
                   f"{_f(t['grid_critical_mass'], 0, 'not reached')}"
                   + (" -- inside tip's interval." if t["grid_inside_tip_interval"] else
                      " -- outside tip's interval." if t["grid_inside_tip_interval"] is False else "."))
    if st.populations < 20:
        out.append(f"Only {st.populations} populations: the issue asks for at least 20 (this is a small or test run).")
    out.append(f"Time: {_sec(s['timing']['wall_s'])} over {len(s['timing']['stages'])} stages; "
               f"{s['cost']['llm_calls']:,} requests, {s['cost']['prompt_tokens']:,} prompt tokens "
               f"({s['cost']['cached_tokens']:,} from the prompt cache).")
    return out


def _html(s: dict, figs: dict, st) -> str:
    esc = html.escape
    reg = s["registration"]
    m = s["model"]
    g = s["glance"]
    design = reg["design"]
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>normlab study: {esc(m['label'])}</title>"
             f"<style>{_CSS}</style></head><body>",
             f"<h1>A blind test of normlab's predictions on {esc(m['label'])}</h1>",
             f"<p class='sub'>N = {st.n_agents} agents, memory H = {st.memory}, names {esc(','.join(st.names))}; "
             f"{st.populations} populations, {st.runs_per_count} committed runs per count; normlab {esc(__version__)}; "
             f"report written {esc(s['created'])}</p>",
             "<div class='glance'><b>At a glance</b><ul>" + "".join(f"<li>{x}</li>" for x in _glance(s, st))
             + "</ul></div>"]
    gitv = reg.get("git") or {}
    parts.append("<h2>What was registered, and when</h2>"
                 f"<p>The predictions were written to <code>{PREDICTIONS}</code> at <b>{esc(str(reg['registered']))}</b>, "
                 f"before the first population started (<b>{esc(str(reg['first_population_started']))}</b>). Its SHA-256, "
                 f"<code>{esc(reg['sha256'])}</code>, is in <code>{PREDICTIONS_SHA}</code>, in the stage journal and "
                 "in the manifest; every later stage checked it and would have refused to run had the file changed.</p>"
                 "<table>"
                 f"<tr><th>normlab</th><td>{esc(str(reg.get('normlab_version')))}, commit "
                 f"<code>{esc(str(gitv.get('commit')))}</code>{' (uncommitted changes)' if gitv.get('dirty') else ''}</td></tr>"
                 f"<tr><th>model</th><td>{esc(m['label'])}; "
                 + (f"GGUF <code>{esc(str(m.get('file')))}</code>, {m.get('bytes', 0):,} bytes, SHA-256 "
                    f"<code>{esc(str(m.get('sha256')))}</code>" if m.get("sha256") else "no model file hashed")
                 + "</td></tr>"
                 f"<tr><th>probed table</th><td>SHA-256 <code>{esc(reg['probe_table_sha256'])}</code></td></tr>"
                 f"<tr><th>populations</th><td>{design['populations']['runs']} in sample mode, from empty memories, "
                 f"stop at {esc(design['populations']['stop'])}, cap {design['populations']['cap_rounds']} rounds; "
                 f"{esc(design['populations']['name_order'])}</td></tr>")
    for d in design["committed"]:
        parts.append(f"<tr><th>against {esc(d['majority'])}</th><td>{len(d['counts'])} count(s) "
                     f"{esc(', '.join(map(str, d['counts'])))} committed to {esc(d['challenger'])}, "
                     f"{d['runs_per_count']} runs each, {d['window_rounds']} rounds at most, stop at a {3 * st.n_agents}-"
                     f"success streak; {esc(d['role'])}: {esc(d['why'])}</td></tr>")
    t = design["tip"]
    parts.append(f"<tr><th>tip</th><td>against {esc(t['majority'])}, at most {t['max_runs']} committed runs, "
                 f"target P(within one agent) {t['target']}, batches of {t['batch']}, known data: "
                 f"{esc(t['known_data'])}</td></tr></table>")
    parts.append("<h2>Predicted vs what happened</h2><p>Every prediction registered, with the interval of an "
                 "experiment of the size that was run, beside what the sample-mode runs did and what their exact twins "
                 "did.</p>" + rows_html(s["predictions"])
                 + _figure(figs, "predicted_vs_observed", "Bars: registered 95% intervals; ticks: the registered "
                           "estimates; dots: the sample-mode runs; open diamonds: the exact twins."))
    parts.append("<h2>What missed, and why</h2>" + _misses(s))
    parts.append(_figure(figs, "populations", "Left: mean success per round, predicted (band) vs the populations. "
                         "Right: the share of populations reaching each convention.")
                 + _figure(figs, "flips", "Committed minorities: the share of runs that flip at each tested count, "
                           "predicted (registered interval) vs observed."))
    parts.append("<h2>Scores beside the rivals</h2>" + _scores_html(s) + _figure(figs, "scores", "Lower is better."))
    parts.append("<h2>The adequacy check</h2>" + _adequacy_html(s) + _figure(
        figs, "adequacy", "The probed table played under the exact design of the committed runs (bands) against the "
                          "sample-mode runs (lines), per direction and count."))
    if s["tip_vs_grid"]:
        parts.append("<h2>tip against the full grid</h2>" + _tip_html(s["tip_vs_grid"])
                     + _figure(figs, "tip", "The search path (left) and its estimate after each step (right) against "
                                            "the grid's reading and the registered interval."))
    parts.append("<h2>The model's strategy</h2>" + _figure(figs, "strategy", "The exact probe: p(name | memory) averaged "
                                                           "over the two name orders, the order effect and the mass "
                                                           "on pool names."))
    parts.append("<h2>Stage timings and cost</h2>" + _timing_html(s))
    parts.append("<p class='small'>Files: <code>predictions.json</code>, <code>predictions.sha256</code>, "
                 "<code>stages.jsonl</code>, <code>manifest.json</code>, <code>summary.json</code>, "
                 "<code>figures/</code>, <code>tables/</code>, <code>llm/</code> (every request).</p></body></html>")
    return "\n".join(parts)


def _misses(s: dict) -> str:
    bad = [r for r in s["predictions"] if r["inside"] is False]
    exact_bad = [r for r in s["predictions"] if r["exact_inside"] is False]
    if not bad:
        txt = "<p>Nothing registered fell outside its interval.</p>"
    else:
        txt = "<ul>" + "".join(
            f"<li><b>{html.escape(r['quantity'])} {html.escape(str(r['key']))}</b>: predicted "
            f"{_iv(r['predicted'], r['low'], r['high'], r['id'])}, observed {_f(r['observed'], 2, _none_word(r['id']))}. "
            f"Likely reason: {html.escape(r['why'])}.</li>" for r in bad) + "</ul>"
    if exact_bad:
        txt += ("<p class='note'>Exact twins outside their interval: " + ", ".join(
            html.escape(f"{r['quantity']} {r['key']}".strip()) for r in exact_bad)
            + ". An exact twin plays the probed table itself, so a miss there is the theory's reading of the design or "
              "chance, never the model.</p>")
    notes = [r for r in s["predictions"] if r.get("note")]
    if notes:
        txt += "<p class='small'>" + " ".join(html.escape(f"{r['quantity']} {r['key']}: {r['note']}.") for r in notes) + "</p>"
    return txt


def _scores_html(s: dict) -> str:
    out = ["<p>Brier and log scores (lower is better) of the registered prediction and of the rivals that need no "
           "strategy table, on the same runs. The direction rule and the base rate are made from the study's own "
           "sample-mode populations (they see those outcomes; the registered prediction did not); the logistic is "
           "fitted leaving out one run at a time among the scored committed runs.</p>"]
    for key, title in (("committed_beside_direction_rule", "committed runs (the populations' winners make the "
                                                            "direction rule)"), ("all_runs", "all runs")):
        v = s["scores"].get(key) or {}
        if v.get("error"):
            out.append(f"<p class='small'>{html.escape(title)}: not scored ({html.escape(v['error'])})</p>")
            continue
        comp = pd.DataFrame(v.get("comparison") or [])
        out.append(f"<h3>{html.escape(title)}</h3>" + _table(comp, ["target", "majority", "convention", "forecaster", "n",
                                                                      "brier", "log_score", "brier_diff", "log_diff"]))
        cov = pd.DataFrame(v.get("coverage") or [])
        if len(cov):
            out.append("<p class='small'>Coverage of normlab's intervals (scoring module):</p>"
                       + _table(cov, list(cov.columns)))
        for w in v.get("rival_wins") or []:
            out.append(f"<p>{html.escape(w)}.</p>")
    return "".join(out)


def _adequacy_html(s: dict) -> str:
    a = s["adequacy"]
    out = ["<p>The probed table is played under the exact design of the committed runs, draw after draw, and the "
           "challenger-share trajectories of the sample runs are compared with the simulated ones count by count "
           "(predictive p-values). Failures (p &lt; 0.05) say where the table and the model's sampled behaviour "
           "part; the same check on the exact twins is the control (it should pass).</p>"]
    if a.get("error"):
        out.append(f"<p class='small'>{html.escape(a['error'])}</p>")
    f = pd.DataFrame(a.get("sample_failures") or [])
    out.append("<p><b>Sample runs, failures:</b></p>" + _table(f, ["direction", "committed", "runs", "statistic",
                                                                   "observed", "sim_low", "sim_high", "p_value"]))
    fe = a.get("exact_failures")
    out.append(f"<p><b>Exact twins, failures:</b> {len(fe) if fe is not None else '—'}</p>")
    pc = s.get("probe_check") or {}
    d = pd.DataFrame(pc.get("divergences") or [])
    if len(d):
        out.append("<p><b>Sampled answers against the exact probe</b> (every sampled request of the populations, "
                   "state by state):</p>" + _table(d, [c for c in ("aspect", "source", "measure", "observed", "low",
                                                                   "high", "predicted", "n") if c in d.columns]))
    return "".join(out)


def _tip_html(t: dict) -> str:
    cm = t["tip"]
    reg = t.get("registered") or {}
    return (f"<p>tip searched the critical mass that overturns {html.escape(t['majority'])} in sample mode: "
            f"{_f(cm.get('estimate'), 0, 'not reached')} [{_f(cm.get('low'), 0, 'not reached')}, "
            f"{_f(cm.get('high'), 0, 'not reached')}] after {t['tip_runs']} committed runs (counts played: "
            f"{html.escape(', '.join(f'{k}: {v}' for k, v in (t.get('tip_counts') or {}).items()) or 'none')}; "
            f"{html.escape(str(t['stopped']))}). The full grid, every count played once with "
            f"{t['grid_runs']} runs in all, reads {_f(t['grid_critical_mass'], 0, 'not reached')} by the published rule"
            + (f"; the registered prediction was {_iv(reg.get('estimate'), reg.get('low'), reg.get('high'), 'cm_published')}"
               if reg else "") + ".</p>")


def _timing_html(s: dict) -> str:
    rows = "".join(f"<tr><td>{html.escape(r['stage'])}</td><td>{html.escape(r['mode'])}</td>"
                   f"<td class='num'>{_sec(r['wall_s'])}</td><td class='num'>{r['cpu_s']:.0f} s</td>"
                   f"<td class='num'>{r['llm_calls']:,}</td><td class='num'>{r['prompt_tokens']:,}</td>"
                   f"<td class='num'>{r['sessions']}</td></tr>" for r in s["timing"]["stages"])
    sp = s.get("speed") or {}
    e, smp, mach = sp.get("exact") or {}, sp.get("sample") or {}, sp.get("machine") or {}
    txt = (f"<p>Cost measured in the first stage: exact {_f(e.get('s_per_request'))} s a request, sample "
           f"{_f(smp.get('s_per_decision'))} s a decision ({_f(smp.get('calls_per_decision'))} calls a decision, "
           f"{_f(smp.get('cached_share'))} of prompt tokens from the cache); load average "
           f"{(mach.get('load_average') or ['?'])[0]} on {mach.get('cpus')} cores, {mach.get('threads') or '?'} server "
           "thread(s).</p>") if sp else ""
    return (txt + "<table><tr><th>stage</th><th>mode</th><th>wall</th><th>CPU (this process)</th><th>requests</th>"
            "<th>prompt tokens</th><th>sessions</th></tr>" + rows + "</table>"
            "<p class='small'>A stage run over several sessions (killed and resumed) counts the wall time of each "
            "session up to the last file it wrote and the requests and tokens of every session; its CPU time is the "
            "last session's.</p>")


def summary_markdown(s: dict) -> str:
    """The study's results as Markdown, from its ``summary.json`` (a dict): every registered
    prediction beside the sample-mode runs and their exact twins, and the scores beside the rivals
    on the same runs. What ``studies/*/README.md`` and the docs show (a test keeps them equal)."""
    g = s["glance"]
    out = [f"{g['inside']} of {g['checked']} registered predictions inside their 95 % interval for this design "
           f"(sample mode); exact twins {g['exact_inside']} of {g['exact_checked']}.", "",
           "| quantity | registered [95 % interval] | sample mode [95 % CI] (n) | | exact twin | |",
           "|---|---|---|---|---|---|"]
    for r in s["predictions"]:
        pid, w = r["id"], _none_word(r["id"])
        q = f"{r['quantity']} {r['key']}".strip()
        obs = _f(r.get("observed"), 2, w)
        if r.get("observed_low") is not None:
            obs += f" [{_f(r['observed_low'], 2, w)}, {_f(r['observed_high'], 2, w)}]"
        obs += f" ({r['n']})" if r.get("n") is not None else ""
        word = {True: "inside", False: "**outside**"}
        out.append(f"| {q} | {_iv(r.get('predicted'), r.get('low'), r.get('high'), pid)} | {obs} | "
                   f"{word.get(r.get('inside'), '—')} | {_f(r.get('exact_observed'), 2, w)} | "
                   f"{word.get(r.get('exact_inside'), '—')} |")
    out += ["", "| runs | forecaster | n | Brier | log score | Brier − normlab's (se) | log − normlab's (se) |",
            "|---|---|---|---|---|---|---|"]
    seen = set()
    for key in ("committed_beside_direction_rule", "all_runs"):
        for r in (s["scores"].get(key) or {}).get("comparison") or []:
            tag = (r["target"], r["forecaster"])
            if r["majority"] != "all" or tag in seen:
                continue
            seen.add(tag)
            what = "committed" if r["target"] == "flip" else "populations"
            d = ("—" if r["brier_diff"] is None else f"{r['brier_diff']:+.3f} ({r['brier_diff_se']:.3f})")
            ld = ("—" if r["log_diff"] is None else f"{r['log_diff']:+.3f} ({r['log_diff_se']:.3f})")
            out.append(f"| {what} | {r['forecaster']} | {r['n']} | {r['brier']:.3f} | {r['log_score']:.3f} | {d} | {ld} |")
    out += ["", "| stage | wall | requests | sessions |", "|---|---|---|---|"]
    partial = False
    for r in s["timing"]["stages"]:
        # a stage killed and resumed before every session was counted: the last session's only
        star = "" if r.get("all_sessions_counted", r["sessions"] == 1) else "*"
        partial = partial or bool(star)
        out.append(f"| {r['stage']} | {_sec(r['wall_s'])}{star} | {r['llm_calls']:,}{star} | {r['sessions']} |")
    c = s["cost"]
    out += ["", f"{c['llm_calls']:,} requests in all, {c['prompt_tokens']:,} prompt tokens "
                f"({c['cached_tokens']:,} from the prompt cache)."
            + (" \\* The last session of a stage killed and resumed (recorded before normlab counted every "
               "session): its earlier sessions' time and requests are not in the row." if partial else "")]
    return "\n".join(out) + "\n"

