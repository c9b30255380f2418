"""The demo report's page: ``report.html`` (self-contained: every figure a base64 PNG, plain HTML
and CSS, no JavaScript; one function per section) and the predicted-vs-observed table."""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path

import pandas as pd

from normlab.theory.criteria import FLIP_SUM

from ._common import fmt_seconds
from ._report_text import (_agents, _calibration_text, _cm_line, _embedded_caveat, _f, _inside_one, _iv, _next_runs,
                           _outside_one,
                           _pct, strategy_caption, strategy_reading_text)


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


def _img(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def _html(s: dict, figs: dict, ctx, free: dict | None) -> str:
    """``report.html``: the page around the sections built below, from ``summary.json``'s content
    ``s``, the figure files, the demo's :class:`~normlab.demo.report.ReportContext` and the
    free-generation facts."""
    cfg, checks, names, winner, obs = ctx.cfg, ctx.checks, ctx.names, ctx.winner, ctx.observed
    pfacts, pcrit, lcrit, cm_rows, cal = ctx.pfacts, ctx.pcrit, ctx.lcrit, ctx.cm_rows, ctx.cal
    estimate, speed = ctx.estimate, ctx.speed
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
{_inside_html(checks, cfg)}
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
                  "(table at the end, where every check is discussed: "
                  + ("" if n_out == 0 else "how far each one outside falls and what the comparison can show; ")
                  + "what each one inside compares, and where a zero-width interval makes it a weak or a strict test).")
    return glance


def _inside_html(checks: pd.DataFrame, cfg: dict) -> str:
    """The checks inside their intervals and those not judged, each discussed ("" when there is none)."""
    ins = checks[checks["consistent"] != False]  # noqa: E712
    if ins.empty:
        return ""
    items = "".join(_inside_one(r, cfg) for _, r in ins.iterrows())
    n_in = int((ins["consistent"] == True).sum())  # noqa: E712
    head = (f"The {n_in} check{'s' if n_in != 1 else ''} inside {'their' if n_in != 1 else 'its'} interval"
            + (f" and the {len(ins) - n_in} not judged" if len(ins) > n_in else ""))
    return f"<h3>{head}</h3><ul>{items}</ul>"


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
