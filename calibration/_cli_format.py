"""The readable summaries ``normlab calibrate`` and ``normlab predict --probe`` print without
``--json`` (plain Python on the summary dicts; no NumPy)."""

from __future__ import annotations

__all__ = ["format_summary", "format_probe_summary"]

#: Short names of the published archives' LLMs (``--llm``) -> their ``model`` run column.
_LLM_ALIASES = {
    "llama3": "Llama-3-70B-Instruct", "llama3_70b": "Llama-3-70B-Instruct",
    "llama31": "Llama-3.1-70B-Instruct", "llama31_70b": "Llama-3.1-70B-Instruct",
}



def _num(v, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, (int, float)) and float(v) == int(v) and abs(v) < 1e9:
        return str(int(v))
    return f"{v:.{digits}g}"


def _p(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def _interval(d: dict, none_text: str) -> str:
    """``est [low, high]`` of a summary entry; ``None`` ends become ``none_text``."""
    est, lo, hi = d.get("estimate"), d.get("low"), d.get("high")
    if est is None:
        return none_text
    return f"{_num(est)} [{_num(lo) if lo is not None else none_text}, {_num(hi) if hi is not None else none_text}]"


def _scores_text(sc: dict) -> str:
    """The ``scores`` block as readable lines (lower Brier and log scores are better)."""
    ref = sc.get("reference") or {}
    out = ["scores on the runs the fit did not use (lower is better; a forecast giving every outcome the same "
           "probability in brackets):"]
    if sc.get("n_flip_runs"):
        out.append(f"  flips, {sc['n_flip_runs']} committed-minority runs (within {sc.get('within_rounds')} rounds): "
                   f"Brier {sc['brier_flip']:.3f} ({ref.get('brier_flip', 0.25):.3f}), "
                   f"log {sc['log_score_flip']:.3f} ({ref.get('log_score_flip', 0.693):.3f})")
    if sc.get("n_consensus_runs"):
        out.append(f"  consensus winners, {sc['n_consensus_runs']} runs: Brier {sc['brier_consensus']:.3f} "
                   f"({ref.get('brier_consensus', 0.0):.3f}), log {sc['log_score_consensus']:.3f} "
                   f"({ref.get('log_score_consensus', 0.0):.3f})")
    cov = sc.get("coverage") or {}
    pct = int(round(100 * float(sc.get("level") or 0.95)))
    bits = [f"{kind} {cov[kind]:.0%} of {cov[f'n_{kind}']}" for kind in ("experiment", "underlying")
            if cov.get(kind) is not None]
    if bits:
        out.append(f"  observed values inside the {pct}% intervals: " + ", ".join(bits)
                   + " (experiment: what an experiment of the observed size would report)")
    ex = sc.get("excluded") or {}
    if ex:
        out.append("  not scored: " + ", ".join(f"{v} {k}" for k, v in ex.items()))
    return "\n".join(out)


def format_summary(s: dict) -> str:
    """The readable multi-line summary ``normlab calibrate`` prints without ``--json``.

    Every ``null`` of the JSON is spelled out: a critical mass that is ``null`` was not reached
    with up to N - 1 committed agents; rounds to 95% success that are ``null`` were not reached
    within the simulated rounds.
    """
    names = s.get("names") or []
    N = s.get("n_agents")
    lines = []
    head = f"{s.get('llm') or 'strategy table'}: names {','.join(map(str, names))}, memory H = {s.get('memory')}, N = {N}"
    lines.append(head)
    fit = s.get("fit") or {}
    if s.get("source"):
        lines.append(f"data: {s['source']}")
    bits = [f"{s.get('model')}" + (f" on {s['fit_on']} runs" if s.get("fit_on") else "")]
    if fit.get("runs") is not None:
        bits.append(f"{fit['runs']} runs")
    if fit.get("decisions") is not None:
        bits.append(f"{int(fit['decisions']):,} decisions")
    if fit.get("states_observed") is not None:
        bits.append(f"{fit['states_observed']} of {fit['states_total']} memory states observed")
    lines.append("fit: " + ", ".join(bits))
    dg = fit.get("diagnostics") or {}
    if dg:
        div = int(dg.get("divergences") or 0)
        ess = dg.get("ess_bulk_min")
        lines.append(f"sampler: R-hat max {_num(dg.get('r_hat_max'), 4)}, bulk ESS min {_num(None if ess is None else round(ess))}, "
                     f"{div} divergent transition{'s' if div != 1 else ''}"
                     + (" (see the warning above)" if div else ""))
    re_ = s.get("run_effects") or (s.get("settings") or {}).get("run_effects_summary")
    if re_ and re_.get("active"):
        sb, sk = re_.get("sd_b") or {}, re_.get("sd_k") or {}
        lines.append(f"runs differ: sd of a run's shift {_num(sb.get('estimate'))} [{_num(sb.get('low'))}, "
                     f"{_num(sb.get('high'))}] and of its log-sharpness {_num(sk.get('estimate'))} "
                     f"[{_num(sk.get('low'))}, {_num(sk.get('high'))}] on the logit of the table (likelihood ratio "
                     f"{_num(re_.get('lr_statistic'))} against identical runs, p {_num(re_.get('p_value'))}); every "
                     "simulated run plays its own")
    elif re_ and re_.get("note"):
        lines.append(f"runs differ: not estimated ({re_['note']}); every simulated run plays the same table")
    settings = s.get("settings") or {}
    max_rounds = settings.get("max_rounds")
    obs = s.get("observed") or {}
    base = obs.get("baseline") or {}
    if base and base.get("n_agents") != N:
        base = {}
    pct = int(round(100 * float(s.get("level") or 0.95)))
    lines.append("")
    lines.append(f"predicted (median and {pct}% interval over {s.get('draws')} posterior draws)"
                 + ("; observed in the data" if base else "") + ":")
    rows = []
    pci = s.get("p_consensus_interval") or {}
    for nm in names:
        p = (s.get("p_consensus") or {}).get(nm)
        iv = pci.get(nm) or [None, None]
        o = (base.get("p_consensus") or {}).get(nm) if base else None
        rows.append((f"P(consensus on {nm})", f"{_p(p)} [{_p(iv[0])}, {_p(iv[1])}]",
                     "" if o is None else f"observed {_p(o)}"))
    rows.append(("P(no consensus)", _p(s.get("p_no_consensus")), ""))
    not_reached = "not reached" + (f" within {max_rounds} rounds" if max_rounds else "")
    r95 = s.get("rounds_to_95") or {}
    extra = ""
    if r95.get("p_not_reached"):
        extra = f" ({_num(100 * r95['p_not_reached'])}% of draws: {not_reached})"
    rows.append(("rounds to 95% success", _interval(r95, not_reached) + extra,
                 f"observed {_num(base.get('rounds_to_95'))}" if base else ""))
    cr = s.get("consensus_rounds") or {}
    rows.append(("rounds to consensus", _interval(cr, not_reached),
                 f"observed {_num(base.get('streak_rounds'))}" if base else ""))
    w = max(len(r[0]) for r in rows)
    w2 = max(len(r[1]) for r in rows)
    lines += [f"  {a:<{w}}  {b:<{w2}}  {c}".rstrip() for a, b, c in rows]

    cm = s.get("critical_mass") or {}
    if cm:
        lines.append("")
        lines.append(f"critical mass: committed agents that overturn a consensus (N = {N}) -- published: the authors'")
        lines.append(f"ensemble rule; per-run: half the runs flip within {s.get('within_rounds')} rounds "
                     "(median [interval] over draws):")
        none_cm = f"not reached with up to {N - 1} committed" if N else "not reached"
        ocm = obs.get("critical_mass") or {}
        for key, e in cm.items():
            maj, ch = e.get("majority"), e.get("challenger")
            pub, per = e.get("published") or {}, e.get("per_run") or {}
            ex = e.get("experiment")
            if ex:
                des = ex.get("design") or {}
                dist = ex.get("distribution") or {}
                top = sorted(dist.items(), key=lambda kv: -kv[1])[:4]
                lines.append(f"  {key} ({ch} committed against a consensus on {maj}), on the design of the data's "
                             f"committed runs: published {_interval(ex, none_cm)}")
                lines.append(f"      design: counts {', '.join(map(str, des.get('counts', [])))}, runs per count "
                             f"{'/'.join(str(len(x)) for x in des.get('lengths', []))}, window {des.get('window')} "
                             f"rounds; most likely readings " + ", ".join(f"{k} ({_p(v)})" for k, v in top)
                             + (f"; {_p(ex.get('p_beyond_tested'))} of draws past the last tested count"
                                if ex.get("p_beyond_tested") else ""))
                txt = f"      paper's design (10 runs at every count): published {_interval(pub, none_cm)}; " \
                      f"per-run {_interval(per, none_cm)}"
            else:
                txt = f"  {key} ({ch} committed against a consensus on {maj}): published {_interval(pub, none_cm)}; " \
                      f"per-run {_interval(per, none_cm)}"
            lines.append(txt)
            o = ocm.get(key)
            if o:
                op, orr = o.get("published") or {}, o.get("per_run") or {}
                ot = f"observed at counts {o.get('counts')}: " if o.get("counts") else "observed: "
                ot += "published " + (_num(op.get("estimate")) if op.get("estimate") is not None
                                      else "not reached at the observed counts")
                ot += "; first count where half the runs flip " + (
                    _num(orr.get("first_count")) if orr.get("first_count") is not None else "none observed")
                lines.append("      " + ot)
            for crit, d in (("published", pub), ("per-run", per)):
                p_nr = d.get("p_not_reached")
                if p_nr:
                    lines.append(f"      {crit}: {_num(100 * p_nr)}% of draws did not flip with up to {N - 1} "
                                 "committed agents")
    ds = s.get("decisive_states") or {}
    if ds:
        lines.append("")
        lines.append("the memory states that decide each prediction (share of its spread from each state's posterior "
                     "uncertainty; [decisions in the data]):")
        for key, d in ds.items():
            tops = ", ".join(f"{st['state'] or '(empty)'} [{st['decisions']}] {_p(st['share'])}"
                             for st in (d.get("states") or [])[:3])
            lines.append(f"  {key}: {tops}; {_p(d.get('thin_share'))} rests on states with fewer than "
                         f"{d.get('thin_decisions')} decisions")
    rs = s.get("relative_strength") or {}
    if rs:
        lines.append("")
        lines.append("relative strength of each name's consensus (median [interval]):")
        for nm, q in rs.items():
            lines.append(f"  {nm}: " + ", ".join(f"{k} {_interval(v, '-')}" for k, v in q.items()))
    sc = s.get("scores")
    if sc:
        lines.append("")
        lines.append(_scores_text(sc))
    a = s.get("asymmetry")
    if a:
        lines.append("")
        lines.append(f"asymmetry: the fitted strategy favours {a.get('a')} over {a.get('b')} by "
                     f"{_num(a.get('post_bias_visits'))} [{_num(a.get('post_bias_low'))}, {_num(a.get('post_bias_high'))}] "
                     "(probability, weighted by state visits);")
        lines.append(f"  {a.get('n_significant')} of {a.get('n_pairs_tested')} tested state pairs differ significantly")
    if s.get("out"):
        lines.append("")
        lines.append(f"saved in {s['out']}: summary.json, predictions.parquet, the fit and the simulations "
                     "(normlab.load reads it back)")
    if s.get("seconds") is not None:
        lines.append("")
        lines.append(f"done in {_num(s['seconds'])} s; --json prints every number (flip curves, settings)")
    else:
        lines.append("")
        lines.append("--json prints every number (flip curves, settings)")
    return "\n".join(lines)


def _iv(d) -> str:
    return _interval(d or {}, "not reached")


def format_probe_summary(s: dict) -> str:
    """The readable summary: ``normlab calibrate``'s, then the probe's cost, the table's uncertainty
    and the underlying intervals."""
    text = format_summary(s).rsplit("\n\n", 1)[0].replace("posterior draws", "table draws")
    lines = [text.replace("fit: probe, ", "table: exact probe of ")]
    pr = s.get("probe") or {}
    c, t = pr.get("cost") or {}, pr.get("table") or {}
    lines.append("")
    lines.append(f"probe: {c.get('decisions')} (state, order) prompts; {c.get('requests_now')} requests now "
                 f"({c.get('prompt_tokens_now'):,} prompt tokens), {c.get('cache_hits')} prompts answered from")
    lines.append(f"  the journal or a cache; {c.get('probe_seconds')} s; prediction {c.get('predict_seconds')} s")
    j = c.get("jitter") or {}
    lines.append(f"uncertainty: covered mass mean {t.get('covered_mass_mean', 0):.2f} (min {t.get('covered_mass_min', 0):.3f}); "
                 f"name-order spread up to {t.get('order_spread_max', 0):.2f} (mean {t.get('order_spread_mean', 0):.2f});")
    lines.append(f"  endpoint jitter sd {j.get('jitter_sd', 0):.2g} (logprob; {j.get('prompts', 0)} prompts re-asked without "
                 "the cache)")
    u = s.get("underlying")
    if u:
        lines.append("")
        lines.append(f"underlying values ({u.get('runs_per_draw')} runs per draw, {u.get('draws')} draws: the table's "
                     "own uncertainty):")
        pci = u.get("p_consensus_interval") or {}
        for nm, p in (u.get("p_consensus") or {}).items():
            iv = pci.get(nm) or [None, None]
            lines.append(f"  P(consensus on {nm}) {p:.3f} [{_num3(iv[0])}, {_num3(iv[1])}]")
        lines.append(f"  rounds to 95% success {_iv(u.get('rounds_to_95'))}; rounds to consensus "
                     f"{_iv(u.get('consensus_rounds'))}")
        for k, v in (u.get("critical_mass_per_run") or {}).items():
            lines.append(f"  {k} per-run {_iv(v)}")
    lines.append("")
    lines.append("--json prints every number")
    return "\n".join(lines)


def _num3(v) -> str:
    return "-" if v is None else f"{v:.3f}"
