"""The demo report's numbers and sentences: the strategy table's reading and captions, the tip
step's facts and text, the checks outside their intervals in words, what to try next and
README's summary paragraph (written from ``summary.json``)."""

from __future__ import annotations

import html
import math
from pathlib import Path

import numpy as np
import pandas as pd

from normlab.llm_runs.runner.mode import EXACT, mode_of

from ._common import finite


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


def strategy_title_line(p_first, p_second, p_mean, covered, y: str) -> str:
    """The empty-memory line of the strategy figure's title: ``p(y)`` averaged over the two name
    orders, what it is in each order, their difference (the order effect of the middle row) and
    the probability mass on pool names."""
    if covered is None or not math.isfinite(float(covered)):  # a table from sampled answers
        return f"empty memory: p({y}) = {p_mean:.2f} (share of the sampled answers naming a pool name)"
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
    """``p(y)`` when ``y`` is listed first minus when it is listed second, per memory state (empty
    for a table estimated from sampled answers, which records no name order)."""
    if by_order.empty:
        return pd.Series(dtype=float, name="order_effect", index=pd.Index([], name="memory_state"))
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
    if embedded and "135M" in model:  # SmolLM2: it cannot play the game
        size = "a 135M-parameter model"
        how = ("in exact mode the runs draw from its next-token probabilities renormalised over the two names, so "
               "this is the critical mass of that table's dynamics" if mode_of(cfg["mode"]) is EXACT else
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
    even = abs(pe[x] - 0.5) < 0.1
    out = [f"The printed summary of this command: with an empty memory {model} picks "
           + (f"{x} or {y} about equally often" if even else f"{x} with probability {pe[x]:.2f} and {y} with {pe[y]:.2f}")
           + (" when the two name orders are averaged" if first is not None else "")
           + (f" ({pe[x]:.2f} / {pe[y]:.2f})" if even else "")
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
    f, cm = s.get("free_generation"), pop["observed"].get("covered_mass")
    if plays_the_game(s):
        ff = f" and names a pool name in {f['trials'] - f['invalid']} of {f['trials']} free answers" if f else ""
        out.append(f"{model} answers the prompt{ff}, so the table is its own: {judged} checks compare the populations "
                   f"with the theory's predictions, and {inside} fall inside their predicted 95% intervals"
                   + (" (in exact mode the populations replay the probed table: a check of the pipeline; "
                      "--mode sample lets the model's free answers disagree)." if cfg["mode"] == "exact" else "."))
        return " ".join(out)
    out.append(f"What the run shows is the pipeline at work: {judged} checks compare the populations with the "
               f"theory's predictions, and {inside} fall inside their predicted 95% intervals.")
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
    why = what_it_shows(q, cfg)
    if r["source"] == "log":
        why += " (The log fit is in-sample for the convergence runs.)"
    return f"<li>{head}. What it can show: {why}</li>"


def _inside_one(r, cfg: dict) -> str:
    """One check inside its interval (or not judged) in words: what was compared, and what agreement can and
    cannot show here -- a zero-width interval at 0 or 1 is a weak test."""
    q, key = r["quantity"], r["key"]
    src = "the fit on the population log" if r["source"] == "log" else "the probed table"
    nd = 1 if "rounds" in q else 2
    label = html.escape(f"{q} {key}".strip())
    obs, p, lo, hi = r["observed"], r["predicted"], r["low"], r["high"]
    if r["consistent"] is None:
        why = (html.escape(str(r.get("note") or "")) or "no observation or no interval to compare with")
        return (f"<li><b>{label}</b> ({src}): not judged -- observed {_f(obs, nd)}, predicted {_f(p, nd)}: "
                f"{why}.</li>")
    head = f"<b>{label}</b> ({src}): observed {_f(obs, nd)} inside the predicted [{_f(lo, nd)}, {_f(hi, nd)}]"
    if lo is not None and hi is not None and abs(float(hi) - float(lo)) < 1e-9:
        head += (f" -- an interval of zero width: the prediction is certain ({_f(p, nd)}), so only an exact match "
                 "passes; a strong test of the direction, none of the spread")
    elif q in ("P(consensus)", "P(flip)") and p is not None and (float(p) <= 0.02 or float(p) >= 0.98):
        head += " -- at the edge of [0, 1], where any experiment of this size agrees: a weak test"
    return f"<li>{head}. What it compares: {what_it_shows(q, cfg, inside=True)}</li>"


def what_it_shows(q: str, cfg: dict, inside: bool = False) -> str:
    """What a check of quantity ``q`` compares (``inside``) or, outside its interval, what the
    difference can show."""
    if inside:
        return {
            "P(consensus)": f"the share of {cfg['runs']} runs reaching each convention against the binomial noise of "
                            f"{cfg['runs']} runs at the predicted probability.",
            "rounds to consensus": f"the mean time to the paper's {3 * cfg['n_agents']}-success streak against what "
                                   "experiments of this size show.",
            "rounds to 95% success": "the round at which the mean success curve crosses 0.95 against the simulated "
                                     "experiments' crossings.",
            "P(flip)": f"the flips of {cfg['committed_runs']} committed-minority runs at one count against the flip "
                       "frequency such experiments show.",
            "invalid free answers": "free answers naming no pool name against one minus the pool names' probability "
                                    "at the first answer token.",
        }.get(q, "the observation against the interval of an experiment of this size.")
    return {
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


#: N and H of the "larger population" suggestion (README, ``demo --help`` and the report).
_LARGER = (24, 3)


def probe_prompts(memory: int, n_names: int = 2) -> int:
    """Prompts of an exact strategy table for two names: every memory state up to ``memory``
    interactions, in each name order."""
    return n_names * sum((n_names * n_names) ** L for L in range(memory + 1))


def plays_the_game(s) -> bool:
    """Whether the model answers the prompt with a pool name, from the run's own numbers: at least half
    its next-token probability on the pool names (exact mode) and at most a third of its free answers
    without one (both where measured)."""
    cov, f = s["strategy_table"].get("covered_mass_mean"), s.get("free_generation")
    return (cov is None or cov >= 0.5) and (not f or f["invalid"] <= f["trials"] / 3)


def _embedded_caveat(s) -> str:
    """What the embedded model can and cannot show, from its own numbers."""
    st, f = s["strategy_table"], s.get("free_generation")
    model = html.escape(s["endpoint"]["model"])
    bits = ([f"puts {st['covered_mass_mean']:.2f} of its next-token probability on the pool names (mean over the "
             f"table's memory states)"] if st.get("covered_mass_mean") is not None else [])
    if f:
        bits.append(f"names no pool name in {f['invalid']} of {f['trials']} free answers")
    said = " and ".join(bits) or "runs offline"
    if plays_the_game(s):
        return (f"<b>{model}</b> (embedded, offline) {said}: it answers the prompt with a pool name, so the table is "
                f"what its own answers say, not a renormalisation of text it rarely writes. It is still one small "
                f"quantised model with one prompt: the conventions and critical masses describe it, not LLMs in "
                f"general, and in exact mode its populations replay the probed table (the model's own behaviour in "
                f"free generation is tested by <code>--mode sample</code>).")
    return (f"<b>{model}</b>, a small embedded model, {said}: the conventions and critical masses here describe "
            f"what it says in this prompt once its answer is renormalised over the two names, not a convention it "
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


def _agents(k: int) -> str:
    return f"{k} agent{'s' if k != 1 else ''}"
